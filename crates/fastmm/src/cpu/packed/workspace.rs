//! Packing buffers, reused across calls: each thread keeps its largest
//! buffer and hands it to its next product, so a steady stream of products
//! allocates nothing and no product allocates per block.

use std::alloc::{alloc, alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::cell::Cell;
use std::ptr::NonNull;

use crate::element::Element;
use crate::matrix::{advise_huge_pages, HUGE_PAGE};

/// One cache line. Buffers are made of these so every panel starts on a
/// 64-byte boundary.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

const LINE: usize = std::mem::size_of::<Line>();

/// Buffers of at least this many bytes start on a 2 MiB boundary and ask
/// Linux for transparent huge pages (where THP is `madvise`, the common
/// default, it gives them only when asked). A packed block walked with 4 KiB
/// pages misses the TLB every page: 8×24 f64 tiles over a 2048×2048×512
/// block pass ran 2–4% faster on huge pages (Emerald Rapids, paired runs).
const HUGE_BUFFER_BYTES: usize = HUGE_PAGE;

/// Zeroed cache lines in one allocation: a `Vec<Line>` that can start on a
/// huge-page boundary.
struct Lines {
    ptr: NonNull<Line>,
    len: usize,
}

// SAFETY: `Lines` owns its allocation alone, as a `Vec<Line>` would; the
// lines are plain bytes.
unsafe impl Send for Lines {}

impl Default for Lines {
    fn default() -> Lines {
        Lines {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }
}

impl Lines {
    fn layout(len: usize) -> Layout {
        let bytes = len * LINE;
        let result = if bytes >= HUGE_BUFFER_BYTES {
            Layout::from_size_align(bytes.next_multiple_of(HUGE_PAGE), HUGE_PAGE)
        } else {
            Layout::from_size_align(bytes, LINE)
        };
        // A size past isize::MAX is a capacity overflow, as for a Vec.
        result.unwrap_or_else(|_| panic!("a workspace of {len} cache lines overflows"))
    }

    /// `len` zeroed lines.
    fn zeroed(len: usize) -> Lines {
        if len == 0 {
            return Lines::default();
        }
        let layout = Self::layout(len);
        let raw = if layout.align() == HUGE_PAGE {
            // SAFETY: the layout's size is nonzero (len > 0).
            let raw = unsafe { alloc(layout) };
            if !raw.is_null() {
                // Advice before the first touch, so that the zeroing below
                // faults the range in as huge pages; where the kernel
                // declines (THP off), the pages are ordinary ones.
                advise_huge_pages(raw, layout.size());
                // SAFETY: the allocation holds layout.size() bytes.
                unsafe { raw.write_bytes(0, layout.size()) };
            }
            raw
        } else {
            // SAFETY: the layout's size is nonzero (len > 0).
            unsafe { alloc_zeroed(layout) }
        };
        let Some(ptr) = NonNull::new(raw.cast::<Line>()) else {
            handle_alloc_error(layout)
        };
        Lines { ptr, len }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_mut_slice(&mut self) -> &mut [Line] {
        // SAFETY: `ptr` holds `len` initialised lines (or is dangling with
        // len 0), owned by `self` and borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with this same layout.
            unsafe { dealloc(self.ptr.as_ptr().cast(), Self::layout(self.len)) };
        }
    }
}

thread_local! {
    static SPARE: Cell<Lines> = const { Cell::new(Lines { ptr: NonNull::dangling(), len: 0 }) };
    /// A separate spare for the B̃ blocks a product shares between its
    /// threads: the thread that holds them also runs row tasks, each of
    /// which packs its Ã into `SPARE`.
    static SHARED_SPARE: Cell<Lines> = const { Cell::new(Lines { ptr: NonNull::dangling(), len: 0 }) };
    /// A separate spare for the fast algorithms' temporaries, so that the
    /// packed products they call keep finding their own.
    static FAST_SPARE: Cell<Lines> = const { Cell::new(Lines { ptr: NonNull::dangling(), len: 0 }) };
    /// A separate spare for a complex product's planes, held while its
    /// real products take the others.
    static COMPLEX_SPARE: Cell<Lines> = const { Cell::new(Lines { ptr: NonNull::dangling(), len: 0 }) };
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
    /// The split planes and 3M's sums of a complex product
    /// ([`crate::complex::multiply`]), held around its real products.
    Complex,
}

impl Pool {
    fn with<R>(self, f: impl FnOnce(&Cell<Lines>) -> R) -> R {
        match self {
            Pool::Packing => SPARE.with(f),
            Pool::SharedPacking => SHARED_SPARE.with(f),
            Pool::Fast => FAST_SPARE.with(f),
            Pool::Complex => COMPLEX_SPARE.with(f),
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
    lines: Lines,
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
            lines = Lines::zeroed(needed);
        }
        Workspace { lines, pool }
    }

    /// Buffers of the given lengths, each 64-byte aligned, in order.
    pub(crate) fn split<T: Element>(&mut self, lens: &[usize]) -> Vec<&mut [T]> {
        let mut rest: &mut [Line] = self.lines.as_mut_slice();
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
        let (a_lines, rest) = self
            .lines
            .as_mut_slice()
            .split_at_mut(Self::lines_for::<T>(a_len));
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

    /// Buffers of a huge page or more start on a huge-page boundary (so
    /// the kernel can back them with 2 MiB pages) and come zeroed, as the
    /// small ones do; both give back the lines they were asked for.
    #[test]
    fn large_workspaces_are_huge_page_aligned_and_zeroed() {
        for (lines, huge) in [
            (1, false),
            (100, false),
            (HUGE_PAGE / LINE, true),
            (40_000, true),
        ] {
            let mut buffer = Lines::zeroed(lines);
            assert_eq!(buffer.len(), lines);
            let slice = buffer.as_mut_slice();
            let start = slice.as_ptr() as usize;
            assert_eq!(start % LINE, 0);
            if huge {
                assert_eq!(start % HUGE_PAGE, 0, "{lines} lines");
            }
            assert!(slice.iter().all(|line| line.0.iter().all(|&b| b == 0)));
        }
        assert_eq!(Lines::zeroed(0).len(), 0);
    }
}
