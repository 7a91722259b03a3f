//! The CPU backend of the recursion: `packed` for the classical products, row-parallel loops
//! for the linear combinations, and one heap buffer per temporary.

use std::marker::PhantomData;

use rayon::prelude::*;

use crate::cpu::packed;
use crate::cpu::packed::workspace::{Pool, Workspace};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{Algorithm, GemmOptions, SumStores};
use crate::strassen::backend::{Backend, Block, Combination, Store};
use crate::system::cache_sizes;
use crate::tunables::{
    STRASSEN_PARALLEL_MIN_ELEMENTS, STRASSEN_STREAM_MIN_L3_FRACTION, STRASSEN_SUM_PREFETCH_LINES,
};

/// Raw address and strides of a block, shareable across the pool's
/// threads (the recursion keeps destinations and sources disjoint).
#[derive(Clone, Copy)]
struct Raw<T> {
    ptr: *mut T,
    row_stride: usize,
    col_stride: usize,
}

// SAFETY: a Raw is only dereferenced inside `combine`, where each thread
// writes its own rows of a destination no source overlaps.
unsafe impl<T: Send> Send for Raw<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Raw<T> {}

/// Passes writing at least this many bytes of fresh sums stream them
/// under `policy` ([`SumStores`]): `auto` from
/// [`STRASSEN_STREAM_MIN_L3_FRACTION`] of the last-level cache.
pub(crate) fn stream_min_bytes(policy: SumStores) -> usize {
    match policy {
        SumStores::Auto => {
            let (numerator, denominator) = STRASSEN_STREAM_MIN_L3_FRACTION;
            cache_sizes().l3 * numerator / denominator
        }
        SumStores::Stream => 0,
        SumStores::Cached => usize::MAX,
    }
}

/// A, B and C of one product, the temporaries, and how to run the classical
/// products.
pub(crate) struct CpuBackend<'a, T: Element> {
    a: Raw<T>,
    b: Raw<T>,
    c: Raw<T>,
    /// One per-thread reusable allocation holding every temporary.
    workspace: Option<Workspace>,
    temps: Vec<Raw<T>>,
    base: GemmOptions,
    /// Passes writing at least this many bytes of fresh sums stream them.
    stream_min_bytes: usize,
    _borrows: PhantomData<(MatRef<'a, T>, MatMut<'a, T>)>,
}

impl<'a, T: Element> CpuBackend<'a, T> {
    pub(crate) fn new(
        a: MatRef<'a, T>,
        b: MatRef<'a, T>,
        mut c: MatMut<'a, T>,
        base: GemmOptions,
        stores: SumStores,
    ) -> Self {
        CpuBackend {
            a: Raw {
                ptr: a.as_ptr().cast_mut(),
                row_stride: a.row_stride(),
                col_stride: a.col_stride(),
            },
            b: Raw {
                ptr: b.as_ptr().cast_mut(),
                row_stride: b.row_stride(),
                col_stride: b.col_stride(),
            },
            c: Raw {
                ptr: c.as_mut_ptr(),
                row_stride: c.row_stride(),
                col_stride: c.col_stride(),
            },
            workspace: None,
            temps: Vec::new(),
            base,
            stream_min_bytes: stream_min_bytes(stores),
            _borrows: PhantomData,
        }
    }

    /// Whether a pass writing `bytes` of fresh sums streams them.
    fn streams(&self, bytes: usize) -> bool {
        bytes >= self.stream_min_bytes
    }

    /// Address and strides of a block.
    fn raw(&mut self, block: Block) -> Raw<T> {
        let store = match block.store {
            Store::A => self.a,
            Store::B => self.b,
            Store::C => self.c,
            Store::Temp { id, ld } => Raw {
                row_stride: ld,
                ..self.temps[id]
            },
        };
        Raw {
            // wrapping_add: only an address; it is inside the store by the
            // engine's construction and dereferenced only within the block.
            ptr: store
                .ptr
                .wrapping_add(block.row * store.row_stride + block.col * store.col_stride),
            ..store
        }
    }

    /// A read view of a block.
    ///
    /// # Safety
    /// Nothing writes the block while the view lives.
    pub(crate) unsafe fn read(&mut self, block: Block) -> MatRef<'a, T> {
        let raw = self.raw(block);
        // SAFETY: the block lies inside A, B, C or a temporary (the engine
        // builds every block from the operands' shapes and the dry run's
        // capacities), all of which outlive 'a; the caller rules out writes.
        unsafe {
            MatRef::from_raw_parts(
                raw.ptr,
                block.rows,
                block.cols,
                raw.row_stride,
                raw.col_stride,
            )
        }
    }

    /// A write view of a block.
    ///
    /// # Safety
    /// Nothing else reads or writes the block while the view lives, and the
    /// block is of C or of a temporary.
    pub(crate) unsafe fn write(&mut self, block: Block) -> MatMut<'a, T> {
        debug_assert!(!matches!(block.store, Store::A | Store::B));
        let raw = self.raw(block);
        // SAFETY: as in `read`; C's view was checked injective when it was
        // made, temporaries are contiguous, and the caller rules out other
        // access.
        unsafe {
            MatMut::from_raw_parts(
                raw.ptr,
                block.rows,
                block.cols,
                raw.row_stride,
                raw.col_stride,
            )
        }
    }
}

impl<T: Element> Backend<T> for CpuBackend<'_, T> {
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        // Reused across products: no allocation, and no page faults, once a
        // thread has run a product this large. Every schedule writes a
        // temporary before reading it, so old contents never matter.
        let mut workspace = Workspace::take_from::<T>(Pool::Fast, capacities);
        self.temps = workspace
            .split::<T>(capacities)
            .into_iter()
            .map(|buffer| Raw {
                ptr: buffer.as_mut_ptr(),
                row_stride: 0,
                col_stride: 1,
            })
            .collect();
        self.workspace = Some(workspace);
        Ok(())
    }

    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
        // SAFETY: the engine never lets a product's destination overlap its
        // operands, and runs one step at a time.
        let (a, b, mut c) = unsafe { (self.read(a), self.read(b), self.write(c)) };
        if a.cols() == 0 {
            c.scale_by(beta);
            return Ok(());
        }
        crate::cpu::multiply(alpha, a, b, beta, c, &self.base)
    }

    const FUSES_PRIMITIVE: bool = true;

    /// Fused: the sums are formed while `packed` packs its panels, and each
    /// microkernel tile is added into every destination (Huang et al.,
    /// "Strassen's Algorithm Reloaded", SC16), so no sum or product is
    /// stored.
    fn primitive(
        &mut self,
        alpha: T,
        a: &[(T, Block)],
        b: &[(T, Block)],
        beta: T,
        c: &[(T, Block)],
        _scratch: [Block; 3],
    ) -> Result<(), Error> {
        debug_assert_eq!(self.base.algorithm, Algorithm::Packed, "validated");
        // SAFETY: the engine's destinations are disjoint blocks of C that
        // overlap no A or B term (those are blocks of A and B), and nothing
        // else runs during the call.
        unsafe {
            let a: Vec<(T, MatRef<'_, T>)> = a.iter().map(|&(w, x)| (w, self.read(x))).collect();
            let b: Vec<(T, MatRef<'_, T>)> = b.iter().map(|&(w, x)| (w, self.read(x))).collect();
            let mut c: Vec<(T, MatMut<'_, T>)> =
                c.iter().map(|&(w, x)| (w, self.write(x))).collect();
            packed::multiply_fused(alpha, &a, &b, beta, &mut c, &self.base)
        }
    }

    /// One pass over the rows, every sum of the group formed on a row
    /// before the next ([`combine_rows`]), so each source line comes from
    /// memory once and from L1 for the other sums that read it.
    fn combine_group(&mut self, sums: &[Combination<T>]) -> Result<(), Error> {
        let Some(first) = sums.first() else {
            return Ok(());
        };
        let (rows, cols) = (first.dst.rows, first.dst.cols);
        let one_shape = sums.iter().all(|sum| {
            (sum.dst.rows, sum.dst.cols) == (rows, cols)
                && sum
                    .terms
                    .iter()
                    .all(|(_, t)| (t.rows, t.cols) == (rows, cols))
        });
        if !one_shape {
            for sum in sums {
                self.combine(sum.keep, sum.dst, &sum.terms)?;
            }
            return Ok(());
        }
        let raw: Vec<RawCombination<T>> = sums
            .iter()
            .map(|sum| {
                let terms = sum.terms.iter().map(|&(w, t)| (w, self.raw(t))).collect();
                (sum.keep, self.raw(sum.dst), terms)
            })
            .collect();
        let fresh = sums.iter().filter(|sum| sum.keep == T::ZERO).count();
        let stream = self.streams(rows * cols * fresh * std::mem::size_of::<T>());
        // SAFETY: every block is rows×cols; no destination overlaps a
        // source of the group (the engine's contract) or another
        // destination.
        unsafe { combine_rows(&raw, rows, cols, stream) };
        Ok(())
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let (rows, cols) = (dst.rows, dst.cols);
        let sum = (
            keep,
            self.raw(dst),
            terms.iter().map(|&(w, t)| (w, self.raw(t))).collect(),
        );
        let stream = keep == T::ZERO && self.streams(rows * cols * std::mem::size_of::<T>());
        // SAFETY: the destination and every source are rows×cols, and the
        // destination overlaps no source (the engine's contract).
        unsafe { combine_rows(&[sum], rows, cols, stream) };
        Ok(())
    }
}

/// A [`Combination`] resolved to memory: (keep, destination, weighted sources).
type RawCombination<T> = (T, Raw<T>, Vec<(T, Raw<T>)>);

/// dst ← keep·dst + Σ w·src for every sum, row by row (on all threads for
/// large passes), each row of every sum before the next row: lines at a
/// time where every block's rows are contiguous ([`line_row_kernel`]),
/// element by element otherwise. With `stream`, fresh sums (keep = 0) are
/// written with non-temporal stores, fenced at the end of each row: a
/// destination too large to stay cached is then written without first
/// being read for ownership, 3 quarter-block transfers instead of 4 for a
/// two-term sum.
///
/// # Safety
/// Every block is rows×cols and valid (destinations for writes, sources
/// for reads); no destination overlaps a source or another destination.
unsafe fn combine_rows<T: Element>(
    sums: &[RawCombination<T>],
    rows: usize,
    cols: usize,
    stream: bool,
) {
    let contiguous = sums
        .iter()
        .all(|(_, out, terms)| out.col_stride == 1 && terms.iter().all(|(_, t)| t.col_stride == 1));
    // Every block the sums read, once (a quadrant feeds several sums).
    let mut sources: Vec<Raw<T>> = Vec::new();
    for (_, _, terms) in sums {
        for &(_, source) in terms {
            if !sources.iter().any(|s| s.ptr == source.ptr) {
                sources.push(source);
            }
        }
    }
    let by_lines = line_row_kernel::<T>();
    let row = |i: usize| {
        // SAFETY: row i < rows of every block; each call writes only row i
        // of the destinations, which no source overlaps (the contract);
        // `by_lines` runs on the CPU it was chosen for.
        unsafe {
            if contiguous {
                by_lines(sums, &sources, i, cols, stream);
            } else {
                combine_row_strided(sums, i, cols);
            }
        }
        if stream {
            store_fence();
        }
    };
    if rows * cols * sums.len() >= STRASSEN_PARALLEL_MIN_ELEMENTS {
        (0..rows).into_par_iter().for_each(row);
    } else {
        (0..rows).for_each(row);
    }
}

/// Row i of every sum, element by element, for blocks with strided rows
/// (a transposed C); the order of [`combine_row_lines`].
///
/// # Safety
/// As [`combine_row_lines`], for any strides.
unsafe fn combine_row_strided<T: Element>(sums: &[RawCombination<T>], i: usize, cols: usize) {
    let at = |raw: Raw<T>, j: usize| {
        raw.ptr
            .wrapping_add(i * raw.row_stride + j * raw.col_stride)
    };
    for (keep, out, terms) in sums {
        for j in 0..cols {
            // SAFETY: (i, j) is inside every block, per the contract.
            unsafe { *at(*out, j) = sum_element(*keep, *at(*out, j), terms, |s| *at(s, j)) };
        }
    }
}

/// keep·old + Σ w·source(s) in the sums' order: the first term alone when
/// keep = 0 (old is then never used), then each term in turn.
#[inline(always)]
fn sum_element<T: Element>(
    keep: T,
    old: T,
    terms: &[(T, Raw<T>)],
    mut source: impl FnMut(Raw<T>) -> T,
) -> T {
    let mut rest = terms;
    let mut value = if keep == T::ZERO {
        match terms.split_first() {
            Some((&(w, s), tail)) => {
                rest = tail;
                w.mul(source(s))
            }
            None => T::ZERO,
        }
    } else if keep == T::ONE {
        old
    } else {
        keep.mul(old)
    };
    for &(w, s) in rest {
        value = value.add(w.mul(source(s)));
    }
    value
}

/// The function that forms row i of every sum of a group whose blocks all
/// have contiguous rows, one cache line of columns at a time: each line
/// of every source is loaded once from memory and used by every sum that
/// reads it while it is in L1, and each destination line is written
/// whole, with a non-temporal store when `stream` holds and the sum is
/// fresh (keep = 0; the caller fences). Per element the arithmetic is
/// [`sum_element`]'s.
///
/// All sources advance together, as in a streaming kernel, each
/// prefetched [`STRASSEN_SUM_PREFETCH_LINES`] ahead. The earlier scheme,
/// forming one sum after another over 1 KiB spans of a row, read the
/// sources one at a time and waited on each one's lines: the level-1 A
/// group of 4096² f64 on two threads took 8–9 ms there, 4.6–5.0 ms here,
/// against 4.2 ms for a hand-written C loop (Zen 5).
///
/// Chosen once per pass by the element size and the CPU's features
/// (AVX-512F; std caches the CPUID answer).
///
/// Calling it is unsafe: columns 0..cols of row i of every destination
/// must be writable and touched by no one else, those of every source
/// readable, and no source may overlap a destination.
fn line_row_kernel<T: Element>() -> LineRow<T> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return match std::mem::size_of::<T>() {
                4 => combine_row_avx512::<T, 16>,
                _ => combine_row_avx512::<T, 8>,
            };
        }
    }
    match std::mem::size_of::<T>() {
        4 => combine_row_lines::<T, 16, false>,
        _ => combine_row_lines::<T, 8, false>,
    }
}

/// A row function of [`line_row_kernel`]: (sums, their distinct sources,
/// row, columns, stream).
type LineRow<T> = unsafe fn(&[RawCombination<T>], &[Raw<T>], usize, usize, bool);

/// [`combine_row_lines`] compiled for AVX-512F: a line is one vector, and
/// a streamed line one `vmovntdq zmm`.
///
/// # Safety
/// As [`combine_row_lines`], on a CPU with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn combine_row_avx512<T: Element, const N: usize>(
    sums: &[RawCombination<T>],
    sources: &[Raw<T>],
    i: usize,
    cols: usize,
    stream: bool,
) {
    // SAFETY: the caller's contract; AVX-512F is present.
    unsafe { combine_row_lines::<T, N, true>(sums, sources, i, cols, stream) }
}

/// Row i of every sum of the group, for lines of N elements (see
/// [`line_row_kernel`]); `WIDE`: stream a line with one 64-byte store.
///
/// # Safety
/// Columns 0..cols of row i of every destination are writable and touched
/// by no one else, those of every source readable, and no source overlaps
/// a destination; N elements of T are 64 bytes; `WIDE` only on a CPU with
/// AVX-512F.
#[inline(always)]
unsafe fn combine_row_lines<T: Element, const N: usize, const WIDE: bool>(
    sums: &[RawCombination<T>],
    sources: &[Raw<T>],
    i: usize,
    cols: usize,
    stream: bool,
) {
    let row = |raw: Raw<T>| raw.ptr.wrapping_add(i * raw.row_stride);
    // Lines are counted from the first destination's first aligned
    // element (the other blocks of a group share its alignment in
    // practice; a streamed line of another needs its own).
    let head = row(sums[0].1).align_offset(64).min(cols);
    // SAFETY (whole body): every access is to columns 0..cols of row i of
    // a block, per the contract.
    unsafe {
        // Columns [first, end), element by element (head and tail).
        let scalar = |first: usize, end: usize| {
            for (keep, out, terms) in sums {
                let dst = row(*out);
                for j in first..end {
                    let old = if *keep == T::ZERO {
                        T::ZERO
                    } else {
                        *dst.add(j)
                    };
                    *dst.add(j) = sum_element(*keep, old, terms, |s| *row(s).add(j));
                }
            }
        };
        scalar(0, head);
        let mut j = head;
        let ahead = STRASSEN_SUM_PREFETCH_LINES * N;
        while j + N <= cols {
            for &source in sources {
                prefetch_line(row(source).wrapping_add(j + ahead));
            }
            for (keep, out, terms) in sums {
                let dst = row(*out).add(j);
                let mut acc = [T::ZERO; N];
                let mut rest = &terms[..];
                if *keep == T::ZERO {
                    if let Some((&(w, source), tail)) = terms.split_first() {
                        let src = row(source).add(j);
                        for (e, a) in acc.iter_mut().enumerate() {
                            *a = w.mul(*src.add(e));
                        }
                        rest = tail;
                    }
                } else {
                    for (e, a) in acc.iter_mut().enumerate() {
                        *a = if *keep == T::ONE {
                            *dst.add(e)
                        } else {
                            keep.mul(*dst.add(e))
                        };
                    }
                }
                for &(w, source) in rest {
                    let src = row(source).add(j);
                    for (e, a) in acc.iter_mut().enumerate() {
                        *a = a.add(w.mul(*src.add(e)));
                    }
                }
                if stream && *keep == T::ZERO && (dst as usize).is_multiple_of(64) {
                    stream_line::<T, N, WIDE>(dst, &acc);
                } else {
                    std::ptr::copy_nonoverlapping(acc.as_ptr(), dst, N);
                }
            }
            j += N;
        }
        scalar(j, cols);
    }
}

/// Asks for the line holding `at` (x86-64: `prefetcht0`; nothing
/// elsewhere). A hint: it never faults, so `at` need not be valid.
#[inline(always)]
fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; SSE is part
    // of every x86-64.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Writes one 64-byte-aligned line with non-temporal stores: one 64-byte
/// store where `WIDE` (AVX-512F), else four of SSE2's 16 bytes.
///
/// # Safety
/// `dst` is 64-byte aligned and valid for N elements (64 bytes); `WIDE`
/// only on a CPU with AVX-512F.
#[inline(always)]
unsafe fn stream_line<T: Element, const N: usize, const WIDE: bool>(dst: *mut T, line: &[T; N]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract: 64 writable, aligned bytes at dst.
    unsafe {
        use std::arch::x86_64::{
            __m128i, __m512i, _mm512_loadu_si512, _mm512_stream_si512, _mm_loadu_si128,
            _mm_stream_si128,
        };
        let (to, from) = (dst.cast::<u8>(), line.as_ptr().cast::<u8>());
        if WIDE {
            _mm512_stream_si512(
                to.cast::<__m512i>(),
                _mm512_loadu_si512(from.cast::<__m512i>()),
            );
        } else {
            for offset in (0..64).step_by(16) {
                _mm_stream_si128(
                    to.add(offset).cast::<__m128i>(),
                    _mm_loadu_si128(from.add(offset).cast::<__m128i>()),
                );
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(line.as_ptr(), dst, N);
    }
}

/// Orders this thread's non-temporal stores before whatever it does next
/// (they are weakly ordered, so another thread could read stale lines).
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and is part of SSE (every x86-64).
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::{random_matrix_full_range, seeded_rng};
    use crate::strassen::engine::{self, Plan};
    use crate::strassen::schedule;
    use crate::Matrix;

    /// The CPU backend with its fusion hidden, so the engine sizes scratch
    /// and `Backend::primitive`'s default (sums in workspace) runs: the path
    /// a backend without a fused kernel takes.
    struct Unfused<'a>(CpuBackend<'a, i64>);

    impl Backend<i64> for Unfused<'_> {
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            self.0.allocate(capacities)
        }
        fn gemm(
            &mut self,
            alpha: i64,
            a: Block,
            b: Block,
            beta: i64,
            c: Block,
        ) -> Result<(), Error> {
            self.0.gemm(alpha, a, b, beta, c)
        }
        fn combine(&mut self, keep: i64, dst: Block, terms: &[(i64, Block)]) -> Result<(), Error> {
            self.0.combine(keep, dst, terms)
        }
    }

    #[test]
    fn the_default_primitive_forms_sums_in_workspace_exactly() {
        let mut rng = seeded_rng(41);
        for (m, k, n) in [(37, 41, 29), (64, 64, 64), (20, 90, 23)] {
            let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
            let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
            let mut want = c0.clone();
            crate::gemm(
                3,
                a.as_ref(),
                b.as_ref(),
                -2,
                want.as_mut(),
                &GemmOptions::new(Algorithm::Naive),
            )
            .unwrap();
            for products in [&schedule::STRASSEN_PRODUCTS, &schedule::WINOGRAD_PRODUCTS] {
                let plan = Plan {
                    schedule: &schedule::STRASSEN_FRUGAL,
                    beta_schedule: &schedule::STRASSEN_TEMPORARIES,
                    threshold: 4,
                    start: 0,
                    max_depth: 3,
                    fused: Some(products),
                    lazy_sum_terms: 0,
                };
                let mut got = c0.clone();
                let base = GemmOptions::new(Algorithm::Packed);
                let mut backend = Unfused(CpuBackend::new(
                    a.as_ref(),
                    b.as_ref(),
                    got.as_mut(),
                    base,
                    SumStores::Auto,
                ));
                let report = engine::run(&mut backend, plan, 3, -2, (m, k, n)).unwrap();
                assert!(
                    report.levels >= 2 && report.workspace_elements > 0,
                    "{report:?}"
                );
                drop(backend);
                assert_eq!(got, want, "{m}×{k}×{n}");
            }
        }
    }

    /// Streamed and cached sums run the same arithmetic in the same order,
    /// so every schedule gives bit-identical results either way, also where
    /// C's rows start off a 16-byte boundary (the streamed copy's head) and
    /// where its rows are strided (the scalar path).
    fn streamed_sums_match_cached<T: Element>(seed: u64) {
        let mut rng = seeded_rng(seed);
        let schedules = [
            &schedule::STRASSEN_TEMPORARIES,
            &schedule::STRASSEN_FRUGAL,
            &schedule::STRASSEN_BATCHED,
            &schedule::WINOGRAD_TEMPORARIES,
            &schedule::WINOGRAD_FRUGAL,
            &schedule::WINOGRAD_BATCHED,
        ];
        for (m, k, n) in [(64, 64, 64), (37, 41, 29), (20, 90, 23), (66, 34, 131)] {
            let a: Matrix<T> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<T> = random_matrix_full_range(k, n, &mut rng);
            for schedule in schedules {
                let plan = Plan {
                    schedule,
                    beta_schedule: &schedule::STRASSEN_TEMPORARIES,
                    threshold: 4,
                    start: 0,
                    max_depth: 3,
                    fused: None,
                    lazy_sum_terms: 0,
                };
                // C inside a wider buffer, one element in: rows start
                // unaligned; then C transposed: strided rows.
                for transposed in [false, true] {
                    let results: Vec<Matrix<T>> = [SumStores::Cached, SumStores::Stream]
                        .into_iter()
                        .map(|stores| {
                            let (rows, cols) = if transposed { (n, m) } else { (m, n) };
                            let mut buffer = Matrix::<T>::zeros(rows, cols + 3);
                            let view = buffer.as_mut().submatrix(0, 1, rows, cols);
                            let c = if transposed { view.t() } else { view };
                            let base = GemmOptions::new(Algorithm::Packed);
                            let mut backend =
                                CpuBackend::new(a.as_ref(), b.as_ref(), c, base, stores);
                            let report =
                                engine::run(&mut backend, plan, T::ONE, T::ZERO, (m, k, n))
                                    .unwrap();
                            assert!(report.levels >= 2, "{report:?}");
                            drop(backend);
                            buffer
                        })
                        .collect();
                    assert_eq!(
                        results[0], results[1],
                        "{m}×{k}×{n}, transposed C {transposed}"
                    );
                }
            }
        }
    }

    #[test]
    fn streamed_sums_match_cached_bit_for_bit() {
        streamed_sums_match_cached::<f64>(51);
        streamed_sums_match_cached::<f32>(52);
        streamed_sums_match_cached::<i32>(53);
        streamed_sums_match_cached::<i64>(54);
    }

    /// The CPU backend taking the fused variant's primitives in groups, as
    /// the GPU's does: checks each group's contract and records its size.
    struct Grouped<'a> {
        inner: CpuBackend<'a, i64>,
        sizes: Vec<usize>,
    }

    impl Backend<i64> for Grouped<'_> {
        const FUSES_PRIMITIVE: bool = true;
        const GROUPS_PRIMITIVES: bool = true;
        fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
            self.inner.allocate(capacities)
        }
        fn gemm(
            &mut self,
            alpha: i64,
            a: Block,
            b: Block,
            beta: i64,
            c: Block,
        ) -> Result<(), Error> {
            self.inner.gemm(alpha, a, b, beta, c)
        }
        fn combine(&mut self, keep: i64, dst: Block, terms: &[(i64, Block)]) -> Result<(), Error> {
            self.inner.combine(keep, dst, terms)
        }
        fn primitive(
            &mut self,
            alpha: i64,
            a: &[(i64, Block)],
            b: &[(i64, Block)],
            beta: i64,
            c: &[(i64, Block)],
            scratch: [Block; 3],
        ) -> Result<(), Error> {
            self.inner.primitive(alpha, a, b, beta, c, scratch)
        }
        fn primitives(
            &mut self,
            alpha: i64,
            beta: i64,
            group: &[crate::strassen::backend::Primitive<i64>],
        ) -> Result<(), Error> {
            for (i, p) in group.iter().enumerate() {
                assert_eq!(p.shape(), group[0].shape(), "one shape per group");
                for q in &group[..i] {
                    assert!(!p.writes_overlap(q), "destinations overlap: {p:?} {q:?}");
                }
                self.primitive(alpha, &p.a, &p.b, beta, &p.c, p.scratch)?;
            }
            self.sizes.push(group.len());
            Ok(())
        }
    }

    #[test]
    fn grouped_primitives_have_disjoint_destinations_and_give_the_exact_product() {
        let mut rng = seeded_rng(43);
        for (m, k, n) in [(64, 64, 64), (37, 41, 29), (20, 90, 23), (33, 32, 65)] {
            let a: Matrix<i64> = random_matrix_full_range(m, k, &mut rng);
            let b: Matrix<i64> = random_matrix_full_range(k, n, &mut rng);
            let c0: Matrix<i64> = random_matrix_full_range(m, n, &mut rng);
            let mut want = c0.clone();
            crate::gemm(
                3,
                a.as_ref(),
                b.as_ref(),
                -2,
                want.as_mut(),
                &GemmOptions::new(Algorithm::Naive),
            )
            .unwrap();
            let schemes = [&schedule::STRASSEN_PRODUCTS, &schedule::WINOGRAD_PRODUCTS];
            // Two levels, and four (thousands of primitives, up to 81
            // destinations each: the bounded search).
            for (products, max_depth) in schemes.into_iter().flat_map(|s| [(s, 2), (s, 4)]) {
                let plan = Plan {
                    schedule: &schedule::STRASSEN_FRUGAL,
                    beta_schedule: &schedule::STRASSEN_TEMPORARIES,
                    threshold: 4,
                    start: 0,
                    max_depth,
                    fused: Some(products),
                    lazy_sum_terms: 0,
                };
                let mut got = c0.clone();
                let base = GemmOptions::new(Algorithm::Packed);
                let mut backend = Grouped {
                    inner: CpuBackend::new(
                        a.as_ref(),
                        b.as_ref(),
                        got.as_mut(),
                        base,
                        SumStores::Auto,
                    ),
                    sizes: Vec::new(),
                };
                let report = engine::run(&mut backend, plan, 3, -2, (m, k, n)).unwrap();
                let sizes = std::mem::take(&mut backend.sizes);
                drop(backend);
                assert_eq!(got, want, "{m}×{k}×{n}");
                if (m, k, n, max_depth) == (64, 64, 64, 2) {
                    // Two levels, 49 products: C's top-left sixteenth takes
                    // 16 of them (Strassen: 4 × 4), so at least 16 groups;
                    // grouping must fold the 49 into far fewer launches.
                    assert_eq!(report.levels, 2);
                    assert_eq!(sizes.iter().sum::<usize>(), 49, "{sizes:?}");
                    assert!(sizes.len() < 30, "{} groups: {sizes:?}", sizes.len());
                }
            }
        }
    }
}
