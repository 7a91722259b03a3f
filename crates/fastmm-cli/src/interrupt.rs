//! SIGINT and SIGTERM (Ctrl-C, `kill`): by default the process removes
//! every temporary file it is writing (`fastmm::partial::remove_all`) and
//! ends at once with 130 (no atexit handlers or destructors under the
//! threads still working), leaving earlier outputs as they were. A command that
//! can stop cleanly (`bench`) asks for a flag instead: the first signal
//! raises it, and a second ends the process as above.

use std::sync::atomic::{AtomicBool, Ordering};

/// Exit status after an interrupt (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

/// Whether the running command stops by itself when [`RAISED`] is set.
static GRACEFUL: AtomicBool = AtomicBool::new(false);
/// Raised by the first signal while [`GRACEFUL`].
static RAISED: AtomicBool = AtomicBool::new(false);

/// Installs the handler, once, before any command runs. Without one (a
/// handler already set, an unsupported platform) signals keep their
/// default meaning.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if GRACEFUL.load(Ordering::SeqCst) && !RAISED.swap(true, Ordering::SeqCst) {
            eprintln!(
                "\ninterrupted: finishing this point, then writing the results (again to quit)"
            );
            return;
        }
        let removed = fastmm::partial::remove_all();
        eprintln!(
            "\ninterrupted{}",
            match removed {
                0 => String::new(),
                n => format!(": removed {n} unfinished file(s); earlier outputs are as they were"),
            }
        );
        // The handler runs on its own thread while the command's threads
        // go on inside the CUDA, cuBLAS and NVRTC libraries: `exit` would
        // run the process's atexit handlers and static destructors under
        // them (a GPU self-test stopped by SIGTERM once died in glibc's
        // "corrupted double-linked list" that way). So the process ends
        // at once, its unfinished files removed and standard output
        // flushed first.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // SAFETY: `_exit` takes a status and returns never; it runs no
        // handler or destructor, so nothing else in the process is
        // touched.
        unsafe { libc::_exit(EXIT_INTERRUPTED) }
    });
}

/// From now on the first signal only raises the flag returned, which the
/// command polls to stop early and write what it has.
pub fn stop_gracefully() -> &'static AtomicBool {
    GRACEFUL.store(true, Ordering::SeqCst);
    &RAISED
}
