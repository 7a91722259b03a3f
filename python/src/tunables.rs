//! The bindings' tunables, named in one place.

use std::time::Duration;

/// How often a long product's caller looks for Ctrl-C: a user waits at
/// most this long for `KeyboardInterrupt`, plus the product's time to its
/// next block.
pub(crate) const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Products of more multiply-adds than this (all of a batch together) run
/// on a helper thread, interruptible, and never write `out` until they
/// are complete. About 5 ms at desktop speeds: the thread's tens of
/// microseconds are lost in it, and smaller products end before Ctrl-C
/// could matter.
pub(crate) const LONG_PRODUCT_MNK: u128 = 1 << 30;

/// Results or temporaries above this many bytes are checked against the
/// memory available before they are allocated, so that a product too
/// large raises `MemoryError` instead of being killed at first touch.
pub(crate) const MEMORY_CHECK_BYTES: u128 = 64 << 20;

/// CPU products of at most this many multiply-adds (all of a batch
/// together) run with the GIL held: about a microsecond, the cost of
/// releasing and taking back the GIL around them.
pub(crate) const GIL_HELD_MNK: u128 = 32 * 32 * 32;
