//! The CPU backend: `packed` for the classical products, row-parallel loops
//! for the linear combinations, and one heap buffer per temporary.

use std::marker::PhantomData;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::algo::{Algorithm, GemmOptions};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::packed;
use crate::packed::blocking::cache_sizes;
use crate::packed::workspace::{Pool, Workspace};
use crate::strassen::backend::{Backend, Block, Combination, Store};
use crate::tunables::{
    STRASSEN_GROUP_SPAN_BYTES, STRASSEN_PARALLEL_MIN_ELEMENTS, STRASSEN_STREAM_MIN_L3_FRACTION,
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

/// How the CPU backend writes a fresh sum (keep = 0) to memory.
///
/// A pass of sums whose destinations together outgrow the last-level cache
/// ([`STRASSEN_STREAM_MIN_L3_FRACTION`] of it) evicts them before the
/// products read them, so ordinary stores only add a read for ownership of
/// every line: non-temporal stores skip it, moving 3 blocks instead of 4
/// for a two-term sum. Forced by [`SUM_STORES_ENV`] (`auto`, `stream`,
/// `cached`) so that both paths are tested on any machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumStores {
    /// Stream passes larger than the L3 fraction.
    Auto,
    /// Stream every fresh sum.
    Stream,
    /// Never stream.
    Cached,
}

/// The environment variable that forces a [`SumStores`] policy.
pub const SUM_STORES_ENV: &str = "FASTMM_SUM_STORES";

impl SumStores {
    /// Every policy.
    pub const ALL: [SumStores; 3] = [SumStores::Auto, SumStores::Stream, SumStores::Cached];

    /// Name as accepted by [`SUM_STORES_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            SumStores::Auto => "auto",
            SumStores::Stream => "stream",
            SumStores::Cached => "cached",
        }
    }

    /// The process-wide policy: [`SUM_STORES_ENV`] if set, else `auto`.
    /// Read once.
    pub fn from_env() -> Result<SumStores, Error> {
        static CHOICE: OnceLock<Result<SumStores, Error>> = OnceLock::new();
        CHOICE
            .get_or_init(|| match std::env::var(SUM_STORES_ENV) {
                Ok(forced) if !forced.trim().is_empty() => SumStores::ALL
                    .into_iter()
                    .find(|p| p.name() == forced.trim())
                    .ok_or_else(|| {
                        Error::InvalidOption(format!(
                            "{SUM_STORES_ENV}: unknown policy `{forced}` (auto, stream, cached)"
                        ))
                    }),
                _ => Ok(SumStores::Auto),
            })
            .clone()
    }

    /// Passes writing at least this many bytes of fresh sums stream them.
    pub fn min_bytes(self) -> usize {
        match self {
            SumStores::Auto => {
                let (numerator, denominator) = STRASSEN_STREAM_MIN_L3_FRACTION;
                cache_sizes().l3 * numerator / denominator
            }
            SumStores::Stream => 0,
            SumStores::Cached => usize::MAX,
        }
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
            stream_min_bytes: stores.min_bytes(),
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
    unsafe fn read(&mut self, block: Block) -> MatRef<'a, T> {
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
    unsafe fn write(&mut self, block: Block) -> MatMut<'a, T> {
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
        let (a, b, c) = unsafe { (self.read(a), self.read(b), self.write(c)) };
        if a.cols() == 0 {
            crate::algo::apply_beta(beta, c);
            return Ok(());
        }
        crate::algo::multiply(alpha, a, b, beta, c, &self.base)
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

    /// One pass over the rows: each row is cut into spans of
    /// [`STRASSEN_GROUP_SPAN_BYTES`], and every sum of the group is formed
    /// on a span before the next, so each source span comes from memory
    /// once and from L1 for the other sums that read it.
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
        let span = (STRASSEN_GROUP_SPAN_BYTES / std::mem::size_of::<T>()).max(1);
        let fresh = sums.iter().filter(|sum| sum.keep == T::ZERO).count();
        let stream = self.streams(rows * cols * fresh * std::mem::size_of::<T>());
        let row = |i: usize| {
            let mut buffer = stream.then(StreamBuffer::new);
            for first in (0..cols).step_by(span) {
                let end = (first + span).min(cols);
                for (keep, out, sources) in &raw {
                    // SAFETY: row i < rows and [first, end) ⊂ 0..cols of
                    // every block (one shape); no destination overlaps a
                    // source of the group (the engine's contract) or
                    // another destination, and each call of `row` writes
                    // only row i.
                    unsafe { combine_span(*keep, *out, sources, i, (first, end), buffer.as_mut()) }
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
        Ok(())
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let (rows, cols) = (dst.rows, dst.cols);
        let out = self.raw(dst);
        let sources: Vec<(T, Raw<T>)> = terms.iter().map(|&(w, t)| (w, self.raw(t))).collect();
        let stream = keep == T::ZERO && self.streams(rows * cols * std::mem::size_of::<T>());
        let row = |i: usize| {
            let mut buffer = stream.then(StreamBuffer::new);
            // SAFETY: row i < rows of the destination and of every source
            // (all rows×cols); the destination overlaps no source, and each
            // call writes only its own row.
            unsafe { combine_span(keep, out, &sources, i, (0, cols), buffer.as_mut()) };
            if stream {
                store_fence();
            }
        };
        if rows * cols >= STRASSEN_PARALLEL_MIN_ELEMENTS {
            (0..rows).into_par_iter().for_each(row);
        } else {
            (0..rows).for_each(row);
        }
        Ok(())
    }
}

/// A [`Combination`] resolved to memory: (keep, destination, weighted sources).
type RawCombination<T> = (T, Raw<T>, Vec<(T, Raw<T>)>);

/// Columns [first, end) of row i of dst ← keep·dst + Σ w·src.
///
/// With a `stream` buffer and keep = 0 on contiguous rows, the sum is
/// formed in that L1 buffer and written with non-temporal stores: a destination too large
/// to stay cached is then written without first being read for ownership,
/// 3 quarter-block transfers instead of 4 for a two-term sum. The caller
/// fences ([`store_fence`]) before the row is read by another thread.
///
/// # Safety
/// Those elements of row i of `out` are writable and touched by no one
/// else; the same elements of row i of each source are readable and do
/// not overlap them.
unsafe fn combine_span<T: Element>(
    keep: T,
    out: Raw<T>,
    sources: &[(T, Raw<T>)],
    i: usize,
    (first, end): (usize, usize),
    stream: Option<&mut StreamBuffer>,
) {
    let cols = end - first;
    let at = |raw: Raw<T>, j: usize| {
        raw.ptr
            .wrapping_add(i * raw.row_stride + (first + j) * raw.col_stride)
    };
    let contiguous = out.col_stride == 1 && sources.iter().all(|(_, s)| s.col_stride == 1);
    // SAFETY (whole body): per the contract, every address formed below is
    // inside the span of row i of its block.
    unsafe {
        if contiguous {
            let slice = |raw: Raw<T>, j: usize, len: usize| {
                std::slice::from_raw_parts(at(raw, j).cast_const(), len)
            };
            if let (Some(buffer), true) = (stream, keep == T::ZERO && !sources.is_empty()) {
                let chunk = buffer.capacity::<T>();
                for start in (0..cols).step_by(chunk) {
                    let len = chunk.min(cols - start);
                    let sum = buffer.slice_mut::<T>(len);
                    let terms = sources.iter().map(|&(w, s)| (w, slice(s, start, len)));
                    accumulate(T::ZERO, sum, terms);
                    stream_copy(at(out, start), sum);
                }
                return;
            }
            let dst = std::slice::from_raw_parts_mut(at(out, 0), cols);
            accumulate(
                keep,
                dst,
                sources.iter().map(|&(w, s)| (w, slice(s, 0, cols))),
            );
            return;
        }
        for j in 0..cols {
            let d = at(out, j);
            let mut value = if keep == T::ZERO {
                T::ZERO
            } else {
                keep.mul(*d)
            };
            for &(w, source) in sources {
                value = value.add(w.mul(*at(source, j)));
            }
            *d = value;
        }
    }
}

/// dst ← keep·dst + Σ w·src (keep = 0 never reads dst), one pass per term
/// so each is a simple vectorisable loop over a span that stays in L1.
fn accumulate<'s, T: Element>(
    keep: T,
    dst: &mut [T],
    mut sources: impl Iterator<Item = (T, &'s [T])>,
) {
    if keep == T::ZERO {
        match sources.next() {
            None => dst.fill(T::ZERO),
            Some((w, src)) => {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = w.mul(s);
                }
            }
        }
    } else if keep != T::ONE {
        for d in dst.iter_mut() {
            *d = keep.mul(*d);
        }
    }
    for (w, src) in sources {
        if w == T::ONE {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = d.add(s);
            }
        } else if w == T::ZERO.sub(T::ONE) {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = d.sub(s);
            }
        } else {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = d.add(w.mul(s));
            }
        }
    }
}

/// A cache-line-aligned L1 buffer in which a streamed span is summed.
#[repr(C, align(64))]
struct StreamBuffer([u64; STREAM_BUFFER_BYTES / 8]);

/// Bytes of one [`StreamBuffer`]: a span of sums, small enough for L1
/// beside its sources.
const STREAM_BUFFER_BYTES: usize = 2048;

impl StreamBuffer {
    fn new() -> Self {
        StreamBuffer([0; STREAM_BUFFER_BYTES / 8])
    }

    /// Elements of T the buffer holds.
    fn capacity<T: Element>(&self) -> usize {
        STREAM_BUFFER_BYTES / std::mem::size_of::<T>()
    }

    /// The first `len` ≤ capacity elements, as T.
    fn slice_mut<T: Element>(&mut self, len: usize) -> &mut [T] {
        assert!(len <= self.capacity::<T>() && std::mem::align_of::<T>() <= 64);
        // SAFETY: every Element (f32, f64, i32, i64; the trait is sealed) is
        // plain data valid for any bit pattern, with alignment ≤ 8 ≤ 64; the
        // buffer holds STREAM_BUFFER_BYTES ≥ len·size_of::<T>() bytes and
        // is borrowed mutably for the slice's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<T>(), len) }
    }
}

/// Writes `src` to `dst` with non-temporal stores where the target has
/// them (x86-64: SSE2, in every x86-64), ordinary stores elsewhere.
///
/// # Safety
/// `dst` is valid for writes of `src.len()` elements, aligned for T, and
/// does not overlap `src`.
unsafe fn stream_copy<T: Element>(dst: *mut T, src: &[T]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract; every store below lies in
    // dst[0..src.len()] and every load in src.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let bytes = std::mem::size_of_val(src);
        let (to, from) = (dst.cast::<u8>(), src.as_ptr().cast::<u8>());
        // `movntdq` needs 16-byte alignment; dst is aligned for T, so the
        // unaligned head is whole elements.
        let head = (to.align_offset(16)).min(bytes);
        std::ptr::copy_nonoverlapping(from, to, head);
        let mut offset = head;
        while offset + 16 <= bytes {
            let value = _mm_loadu_si128(from.add(offset).cast::<__m128i>());
            _mm_stream_si128(to.add(offset).cast::<__m128i>(), value);
            offset += 16;
        }
        std::ptr::copy_nonoverlapping(from.add(offset), to.add(offset), bytes - offset);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
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
