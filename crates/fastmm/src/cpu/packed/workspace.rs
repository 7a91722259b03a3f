//! Packing buffers, reused across calls: each thread keeps its largest
//! buffer and hands it to its next product, so a steady stream of products
//! allocates nothing and no product allocates per block.

use std::cell::Cell;

use crate::element::Element;

/// One cache line. Buffers are made of these so every panel starts on a
/// 64-byte boundary.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

const LINE: usize = std::mem::size_of::<Line>();

thread_local! {
    static SPARE: Cell<Vec<Line>> = const { Cell::new(Vec::new()) };
    /// A separate spare for the B̃ blocks a product shares between its
    /// threads: the thread that holds them also runs row tasks, each of
    /// which packs its Ã into `SPARE`.
    static SHARED_SPARE: Cell<Vec<Line>> = const { Cell::new(Vec::new()) };
    /// A separate spare for the fast algorithms' temporaries, so that the
    /// packed products they call keep finding their own.
    static FAST_SPARE: Cell<Vec<Line>> = const { Cell::new(Vec::new()) };
}

#[cfg(test)]
thread_local! {
    /// Workspaces this thread had to allocate rather than reuse.
    static FRESH_ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// Which per-thread spare a workspace comes from and returns to.
#[derive(Clone, Copy)]
pub(crate) enum Pool {
    /// Packing buffers of `packed` that one thread uses (Ã).
    Packing,
    /// Packing buffers of `packed` shared by its threads (B̃).
    SharedPacking,
    /// Temporaries of `strassen`/`winograd`.
    Fast,
}

impl Pool {
    fn with<R>(self, f: impl FnOnce(&Cell<Vec<Line>>) -> R) -> R {
        match self {
            Pool::Packing => SPARE.with(f),
            Pool::SharedPacking => SHARED_SPARE.with(f),
            Pool::Fast => FAST_SPARE.with(f),
        }
    }
}

/// Packing buffers carved from one aligned allocation. A workspace that
/// is taken while another from the same pool is held on the same thread
/// finds the spare gone and allocates its own, so each pool serves one
/// level of nesting: a product's shared B̃ blocks and the Ã blocks its
/// row tasks pack on the same thread come from different pools (one pool
/// for both had allocated, and the kernel zeroed, a fresh 1 MiB Ã buffer
/// for most row tasks of a two-thread product: 10% of Winograd's time at
/// 4096³ f64 on Zen 5).
pub(crate) struct Workspace {
    lines: Vec<Line>,
    pool: Pool,
}

impl Workspace {
    /// A workspace with room for `a_len` and `b_len` elements of T.
    pub(crate) fn take<T: Element>(a_len: usize, b_len: usize) -> Workspace {
        Self::take_from::<T>(Pool::Packing, &[a_len, b_len])
    }

    /// A workspace from `pool` with room for buffers of these lengths.
    pub(crate) fn take_from<T: Element>(pool: Pool, lens: &[usize]) -> Workspace {
        let needed = lens.iter().map(|&len| Self::lines_for::<T>(len)).sum();
        let mut lines = pool.with(Cell::take);
        if lines.len() < needed {
            #[cfg(test)]
            FRESH_ALLOCATIONS.with(|count| count.set(count.get() + 1));
            lines = vec![Line([0; LINE]); needed];
        }
        Workspace { lines, pool }
    }

    /// Buffers of the given lengths, each 64-byte aligned, in order.
    pub(crate) fn split<T: Element>(&mut self, lens: &[usize]) -> Vec<&mut [T]> {
        let mut rest: &mut [Line] = &mut self.lines;
        let mut out = Vec::with_capacity(lens.len());
        for &len in lens {
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(Self::lines_for::<T>(len));
            rest = tail;
            // SAFETY: as in `buffers`: plain-data T with alignment ≤ 64, and
            // each slice covers part of its own disjoint run of lines.
            out.push(unsafe { std::slice::from_raw_parts_mut(mine.as_mut_ptr().cast::<T>(), len) });
        }
        out
    }

    fn lines_for<T: Element>(len: usize) -> usize {
        (len * std::mem::size_of::<T>()).div_ceil(LINE)
    }

    /// The two buffers, each 64-byte aligned.
    pub(crate) fn buffers<T: Element>(
        &mut self,
        a_len: usize,
        b_len: usize,
    ) -> (&mut [T], &mut [T]) {
        let (a_lines, rest) = self.lines.split_at_mut(Self::lines_for::<T>(a_len));
        let b_lines = &mut rest[..Self::lines_for::<T>(b_len)];
        // SAFETY: T is one of f32/f64/i32/i64 (Element is sealed): plain data
        // for which every bit pattern is a value, with alignment at most 8,
        // which the 64-byte-aligned lines satisfy. Each slice covers at most
        // the bytes of its own disjoint run of lines, borrowed mutably from
        // `self` for the returned lifetime.
        unsafe {
            (
                std::slice::from_raw_parts_mut(a_lines.as_mut_ptr().cast::<T>(), a_len),
                std::slice::from_raw_parts_mut(b_lines.as_mut_ptr().cast::<T>(), b_len),
            )
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let mine = std::mem::take(&mut self.lines);
        self.pool.with(|spare| {
            let other = spare.take();
            spare.set(if mine.len() >= other.len() {
                mine
            } else {
                other
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> usize {
        FRESH_ALLOCATIONS.with(Cell::get)
    }

    /// The shape of a multi-threaded product on the thread that holds its
    /// shared B̃ blocks: Ã workspaces taken and dropped while the shared
    /// one is held. After the first product, none allocates.
    #[test]
    fn nested_packing_workspaces_are_reused() {
        let product = || {
            let mut shared = Workspace::take_from::<f64>(Pool::SharedPacking, &[4096, 4096]);
            let _ = shared.split::<f64>(&[4096, 4096]);
            for _ in 0..4 {
                let mut own = Workspace::take::<f64>(2048, 64);
                let (a, b) = own.buffers::<f64>(2048, 64);
                assert_eq!((a.len(), b.len()), (2048, 64));
                assert_eq!(a.as_ptr() as usize % LINE, 0);
            }
        };
        product();
        let before = fresh();
        product();
        product();
        assert_eq!(fresh(), before, "a second product allocated a workspace");
        // A third level on one pool still works (it allocates).
        let _outer = Workspace::take::<f32>(16, 16);
        let _inner = Workspace::take::<f32>(16, 16);
        assert!(fresh() > before);
    }
}
