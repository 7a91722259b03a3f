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
    /// A separate spare for the fast algorithms' temporaries, so that the
    /// packed products they call keep finding their own.
    static FAST_SPARE: Cell<Vec<Line>> = const { Cell::new(Vec::new()) };
}

/// Which per-thread spare a workspace comes from and returns to.
#[derive(Clone, Copy)]
pub(crate) enum Pool {
    /// Packing buffers of `packed`.
    Packing,
    /// Temporaries of `strassen`/`winograd`.
    Fast,
}

impl Pool {
    fn with<R>(self, f: impl FnOnce(&Cell<Vec<Line>>) -> R) -> R {
        match self {
            Pool::Packing => SPARE.with(f),
            Pool::Fast => FAST_SPARE.with(f),
        }
    }
}

/// Two packing buffers (for Ã and B̃) carved from one aligned allocation.
/// A product that runs inside another on the same thread (as Strassen's
/// base cases do) finds the spare taken and allocates its own.
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
