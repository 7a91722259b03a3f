//! The `emulated` algorithm on a GPU: Ozaki scheme II with its accuracy
//! certificate ([`crate::emulation`], whose CPU code is the twin of every
//! step here), the INT8 products on the tensor cores through cuBLAS
//! (`cublasGemmEx`, INT8 in, INT32 out, both operands k-contiguous: the
//! "TN" layout of the integer tensor-core kernels) and the memory-bound
//! steps in `kernels/emulated.cu`.
//!
//! One product of depth k ≤ [`EMULATION_K_CHUNK`] runs in two phases:
//!
//! 1. **Certificate.** Statistics of A's rows and B's columns; the 7-bit
//!    magnitudes of B, then per block of rows of A its magnitudes, their
//!    INT8 product G and each element's need (bits), counted in a
//!    histogram that the host reads to choose the route
//!    ([`crate::emulation::certify::route`]).
//! 2. **Product.** Natively (cuBLAS) where the route says so; else the N
//!    residue planes of B, then per block of rows of A its residue planes,
//!    N INT8 products and the CRT accumulation into C; the few uncertified
//!    elements are then recomputed natively from a list.
//!
//! Deeper products run in slices of k added with β = 1, so that every
//! INT32 sum stays exact. Row blocks are as tall as the GPU's free memory
//! allows.

use std::sync::Mutex;

mod complex;
pub(crate) use complex::ComplexGemm;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::cublas;
use crate::cuda::kernels::int8::{
    alloc_written, int8_kernels, int8_product, int8_product_batch, int8_product_part,
    int8_residues, launch_err, ptr, Clock, Planes, MAX_GRID_Y,
};
use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::{Gpu, Workspace};
use crate::cuda::tunables::{
    emulation_prices, CUDA_EMULATION_INT8_TILE, CUDA_EMULATION_MEMORY_FRACTION,
};
use crate::element::Element;
use crate::emulation::certify::{
    certificate_depth, fixup_allowance, priced, route, sample_verdict, settle, wants_full_depth,
    EmulationRoute, Goal, Sums, Target, NORM_SLACK,
};
use crate::emulation::moduli::MODULI;
use crate::emulation::{Phase, Tally};
use crate::error::Error;
use crate::options::{Accuracy, GpuPrecision};
use crate::tunables::EMULATION_K_CHUNK;

/// Rows and k-contiguous widths are padded to this many elements: cuBLAS's
/// integer kernels want leading dimensions that are multiples of 4, and 16
/// keeps every INT8 row 16-byte aligned.
const PAD: usize = 16;

/// `emulated.cu`'s kernels for one element type, and what its products
/// did since the tally was last taken.
pub(crate) struct EmulatedGemm {
    stats_rows: CudaFunction,
    /// The column statistics' two steps: the chunks' maxima and sums,
    /// then the columns' totals.
    stats_cols: [CudaFunction; 2],
    split: CudaFunction,
    need: CudaFunction,
    /// The CRT accumulation for 1 to 8 moduli, and for 9 to 16, from
    /// INT32 sums; then the same from residue bytes.
    accumulate: [CudaFunction; 4],
    fixup: CudaFunction,
    /// Complex products: the parts' statistics merged, residues of the
    /// parts' sums, and the CRT of both parts from three products.
    complex: [CudaFunction; 3],
    /// What every product's certificate makes its elements meet.
    goal: Goal,
    tally: Mutex<Tally>,
}

/// Where the statistics of a set of vectors live on the GPU, with each
/// product's largest norm (the bits of a non-negative f64), which bounds
/// its INT8 products' sums ([`Sums`]).
struct Stats {
    exps: CudaSlice<i32>,
    norms: CudaSlice<f64>,
    states: CudaSlice<i32>,
    tops: CudaSlice<u64>,
}

/// The device addresses of [`Stats`]' three arrays, advanced together.
#[derive(Debug, Clone, Copy)]
struct StatsAt {
    exps: CUdeviceptr,
    norms: CUdeviceptr,
    states: CUdeviceptr,
}

impl Stats {
    /// Each product's largest norm, read back: the host waits for the
    /// stream.
    fn widest(&self, gpu: &Gpu) -> Result<Vec<f64>, Error> {
        let mut bits = vec![0u64; self.tops.len()];
        gpu.stream
            .memcpy_dtoh(&self.tops, &mut bits[..])
            .map_err(|e| cuda_err("cannot read the largest norms", e))?;
        gpu.synchronize()?;
        Ok(bits.into_iter().map(f64::from_bits).collect())
    }

    fn at(&self, gpu: &Gpu) -> StatsAt {
        StatsAt {
            exps: ptr(gpu, &self.exps),
            norms: ptr(gpu, &self.norms),
            states: ptr(gpu, &self.states),
        }
    }
}

impl StatsAt {
    /// The statistics from entry `entries` on.
    fn skip(self, entries: usize) -> StatsAt {
        let e = entries as u64;
        StatsAt {
            exps: self.exps + 4 * e,
            norms: self.norms + 8 * e,
            states: self.states + 4 * e,
        }
    }
}

/// Products along the kernels' batch dimension: how many, and how far
/// product z's input (in its elements) and output (in its entries) lie
/// after product z − 1's; a stride of 0 repeats one operand.
#[derive(Debug, Clone, Copy)]
struct Batch {
    products: usize,
    input: usize,
    output: usize,
}

impl Batch {
    const ONE: Batch = Batch {
        products: 1,
        input: 0,
        output: 0,
    };

    /// The grid extent of the products.
    fn grid(self) -> Result<u32, Error> {
        products_grid(self.products)
    }
}

/// `products` as the extent of a grid's batch dimension.
fn products_grid(products: usize) -> Result<u32, Error> {
    if products > MAX_GRID_Y {
        return Err(Error::Cuda(format!(
            "emulated product: a batch of {products} products exceeds a grid's {MAX_GRID_Y}"
        )));
    }
    Ok(products as u32)
}

/// The depth padded for the INT8 planes (a multiple of 32, at least 32)
/// and the width of C's INT32 planes (a multiple of 16).
fn padded(k: usize, n: usize) -> (usize, usize) {
    (k.div_ceil(2 * PAD).max(1) * 2 * PAD, n.div_ceil(PAD) * PAD)
}

/// Consecutive regions of a scratch buffer: each starts at a multiple of
/// 256 bytes (every plane's rows are then as aligned as the pool's own
/// allocations, which cuBLAS's INT8 kernels and the word stores want).
#[derive(Debug, Default, Clone, Copy)]
struct Carve {
    end: usize,
}

impl Carve {
    const ALIGN: usize = 256;

    /// The offset of the next `bytes` bytes.
    fn take(&mut self, bytes: usize) -> usize {
        let at = self.end;
        self.end = (at + bytes.max(1)).next_multiple_of(Self::ALIGN);
        at
    }

    /// The bytes taken so far.
    fn end(self) -> usize {
        self.end
    }

    /// Regions of `sizes` bytes after those taken, in `scratch` reserved
    /// for them all (its first `keep` bytes kept): the scratch's start and
    /// each region's address.
    fn place<const R: usize>(
        mut self,
        scratch: &mut Workspace<'_>,
        sizes: [usize; R],
        keep: usize,
    ) -> Result<(CUdeviceptr, [CUdeviceptr; R]), Error> {
        let at = sizes.map(|bytes| self.take(bytes));
        let base = scratch.reserve(self.end, keep)?;
        Ok((base, at.map(|offset| base + offset as u64)))
    }
}

fn alloc<V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    gpu: &Gpu,
    len: usize,
    what: &str,
) -> Result<CudaSlice<V>, Error> {
    gpu.retrying(|| gpu.stream.alloc_zeros::<V>(len.max(1)))
        .map_err(|e| cuda_err(&format!("cannot allocate the emulated product's {what}"), e))
}

/// Four elements of `rows` rows of C per thread, 1024 per block of 256,
/// for each of `products`: the launch of `emu_need` and `emu_accumulate`.
fn per_element((rows, n): (usize, usize), products: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(1024) as u32, rows as u32, products),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The steps of 1024 columns one block of `emu_need` takes: its bins'
/// clearing and flush, two barriers, are paid once per this many.
const NEED_STEPS: usize = 4;

/// [`per_element`] for `emu_need`, whose blocks loop over [`NEED_STEPS`]
/// steps of the columns.
fn per_need((rows, n): (usize, usize), products: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            n.div_ceil(1024).div_ceil(NEED_STEPS).max(1) as u32,
            rows as u32,
            products,
        ),
        ..per_element((rows, n), products)
    }
}

/// A distinct operand per product, or one repeated (stride 0): how many
/// there are, and how far apart `unit` entries of their derived arrays
/// lie.
fn distinct(stride: usize, count: usize, unit: usize) -> (usize, usize) {
    match stride {
        0 => (1, 0),
        _ => (count, unit),
    }
}

impl EmulatedGemm {
    /// The kernels for T (f32 or f64), compiled or fetched.
    pub fn resolve<T: Element>(gpu: &Gpu, accuracy: Accuracy) -> Result<EmulatedGemm, Error> {
        crate::emulation::check_float::<T>()?;
        let key = KernelKey {
            source: KernelSource::Emulated,
            dtype: T::DTYPE,
            tile: 0,
        };
        let [stats_rows, cols_max, cols_finish, split, need, accumulate, accumulate_wide, fixup, merge, add, complex, accumulate_r8, accumulate_wide_r8] =
            KernelSource::EMULATED_ENTRIES;
        Ok(EmulatedGemm {
            stats_rows: gpu.entry_function(key, stats_rows)?,
            stats_cols: [
                gpu.entry_function(key, cols_max)?,
                gpu.entry_function(key, cols_finish)?,
            ],
            split: gpu.entry_function(key, split)?,
            need: gpu.entry_function(key, need)?,
            accumulate: [
                gpu.entry_function(key, accumulate)?,
                gpu.entry_function(key, accumulate_wide)?,
                gpu.entry_function(key, accumulate_r8)?,
                gpu.entry_function(key, accumulate_wide_r8)?,
            ],
            fixup: gpu.entry_function(key, fixup)?,
            complex: [
                gpu.entry_function(key, merge)?,
                gpu.entry_function(key, add)?,
                gpu.entry_function(key, complex)?,
            ],
            goal: Goal::on_cublas(accuracy, T::DTYPE),
            tally: Mutex::new(Tally::default()),
        })
    }

    /// What the products did since the last call, and a fresh count.
    pub fn take_tally(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().expect("tally lock"))
    }

    /// c ← α·a·b + β·c (β = 0 never reads c), on the GPU's stream; waits
    /// for the certificate's histogram midway.
    pub fn run<T: Element>(&self, gpu: &Gpu, product: DeviceGemm<T>) -> Result<(), Error> {
        self.run_in(gpu, &mut gpu.workspace(), product)
    }

    /// [`EmulatedGemm::run`] in the GPU's scratch, held.
    fn run_in<T: Element>(
        &self,
        gpu: &Gpu,
        scratch: &mut Workspace<'_>,
        product: DeviceGemm<T>,
    ) -> Result<(), Error> {
        let (m, k, n) = product.shape;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let mut beta = product.beta;
        let mut p0 = 0;
        loop {
            let depth = (k - p0).min(EMULATION_K_CHUNK);
            let slice = DeviceGemm {
                beta,
                ..product.block((0, p0, 0), (m, depth, n))
            };
            let (route, phase_us) = self.run_slice(gpu, scratch, slice)?;
            self.tally.lock().expect("tally lock").add(route, phase_us);
            p0 += depth;
            beta = T::ONE;
            if p0 >= k {
                return Ok(());
            }
        }
    }

    /// Statistics of `count` vectors of `len` entries: rows of x (ld) when
    /// `rows`, else columns; for each product of `batch` (its input stride
    /// in x's elements), `count` entries after the previous product's.
    fn stats(
        &self,
        gpu: &Gpu,
        (count, len): (usize, usize),
        (x, rows): (Operand, bool),
        batch: Batch,
    ) -> Result<Stats, Error> {
        let entries = count * batch.products;
        // Every vector's exponent, norm and state is written by the
        // statistics' last kernel (a thread per vector of each product), so
        // only the largest norms, kept by atomic maxima, start zeroed: each
        // memset is a launch before every emulated product, the sample's
        // included.
        let stats = Stats {
            exps: alloc_written(gpu, entries, "exponents")?,
            norms: alloc_written(gpu, entries, "norms")?,
            states: alloc_written(gpu, entries, "states")?,
            tops: alloc(gpu, batch.products, "largest norms")?,
        };
        if !rows {
            self.column_stats(gpu, (count, len), x, batch, &stats)?;
            return Ok(stats);
        }
        let (ci, li, ld, xs) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            x.ld as i64,
            batch.input as i64,
        );
        let at = stats.at(gpu);
        let config = LaunchConfig {
            grid_dim: (count.div_ceil(8) as u32, batch.grid()?, 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = gpu.stream.launch_builder(&self.stats_rows);
        launch
            .arg(&ci)
            .arg(&li)
            .arg(&x.ptr)
            .arg(&ld)
            .arg(&xs)
            .arg(&at.exps)
            .arg(&at.norms)
            .arg(&at.states)
            .arg(&stats.tops);
        // SAFETY: (int, int, const ELEM*, long long, long long, int*,
        // double*, int*, unsigned long long*): x addresses, for each
        // product xs elements after the previous one's, count rows of len
        // entries with this ld; the outputs hold count entries per
        // product, tops one zeroed entry per product.
        unsafe { launch.launch(config) }.map_err(launch_err("statistics"))?;
        Ok(stats)
    }

    /// The statistics of `count` columns of `len` entries (entry p of
    /// column v at x[p·ld + v]) into `stats`, for each product of `batch`:
    /// each chunk's maxima and sums over a grid of 32 columns × a chunk of
    /// the length per block, so that a short row of long columns still
    /// fills the GPU, then the chunks' sums rescaled and added in order
    /// per column.
    fn column_stats(
        &self,
        gpu: &Gpu,
        (count, len): (usize, usize),
        x: Operand,
        batch: Batch,
        stats: &Stats,
    ) -> Result<(), Error> {
        // At least 8 entries per lane, at most 64 chunks.
        let chunk = len.div_ceil(64).max(256).div_ceil(8) * 8;
        let chunks = len.div_ceil(chunk).max(1);
        let entries = count * batch.products;
        let top_bits: CudaSlice<u64> = alloc(gpu, entries, "column maxima")?;
        let bad: CudaSlice<i32> = alloc(gpu, entries, "column flags")?;
        let partial: CudaSlice<f64> = alloc_written(gpu, chunks * entries, "column sums")?;
        let pexp: CudaSlice<i32> = alloc_written(gpu, chunks * entries, "column sums' exponents")?;
        let (ci, li, chi, chunks_i, ld, xs) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            to_i32("chunk", chunk)?,
            to_i32("chunks", chunks)?,
            x.ld as i64,
            batch.input as i64,
        );
        let (tp, bp, pp, ep) = (
            ptr(gpu, &top_bits),
            ptr(gpu, &bad),
            ptr(gpu, &partial),
            ptr(gpu, &pexp),
        );
        let products = batch.grid()?;
        let grid = LaunchConfig {
            grid_dim: (count.div_ceil(32) as u32, chunks as u32, products),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let [chunked, finish] = &self.stats_cols;
        let mut launch = gpu.stream.launch_builder(chunked);
        launch
            .arg(&ci)
            .arg(&li)
            .arg(&chi)
            .arg(&x.ptr)
            .arg(&ld)
            .arg(&xs)
            .arg(&tp)
            .arg(&bp)
            .arg(&pp)
            .arg(&ep);
        // SAFETY: (int, int, int, const ELEM*, long long, long long,
        // unsigned long long*, int*, double*, int*): x addresses, for each
        // product xs elements after the previous one's, count columns of
        // len entries with this ld; top_bits and bad hold count zeroed
        // entries per product, partial and pexp chunks·count per product,
        // one written by each (chunk, column) of the grid.
        unsafe { launch.launch(grid) }.map_err(launch_err("column maxima and sums"))?;
        let at = stats.at(gpu);
        let mut launch = gpu.stream.launch_builder(finish);
        launch
            .arg(&ci)
            .arg(&chunks_i)
            .arg(&tp)
            .arg(&bp)
            .arg(&pp)
            .arg(&ep)
            .arg(&at.exps)
            .arg(&at.norms)
            .arg(&at.states)
            .arg(&stats.tops);
        // SAFETY: (int, int, const unsigned long long*, const int*, const
        // double*, const int*, int*, double*, int*, unsigned long long*):
        // the inputs as written above; the outputs hold count entries per
        // product, tops one zeroed entry per product. The temporaries are
        // freed in stream order after this launch as they drop.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (count.div_ceil(256) as u32, products, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map(|_| ())
        .map_err(launch_err("column statistics"))
    }

    /// `count` vectors of `len` entries (rows of x when `rows`, else
    /// columns) into k-contiguous INT8 planes of width kp at `out`, plane
    /// after plane `plane` bytes apart: magnitudes (bits = 0) or `nmod`
    /// residue planes; for each product of `batch`, its input and its
    /// planes the batch's strides on (elements of x, bytes), its
    /// statistics `count` entries on.
    fn split(
        &self,
        gpu: &Gpu,
        (count, len, kp): (usize, usize, usize),
        (x, rows, batch): (Operand, bool, Batch),
        stats: StatsAt,
        (bits, nmod): (u32, usize),
        (out, plane): (CUdeviceptr, usize),
    ) -> Result<(), Error> {
        let (ci, li, kpi) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            to_i32("kp", kp)?,
        );
        let (ld, xs, rows_i, bits_i, nmod_i, plane_i, os) = (
            x.ld as i64,
            batch.input as i64,
            i32::from(rows),
            bits as i32,
            nmod as i32,
            plane as i64,
            batch.output as i64,
        );
        let config = LaunchConfig {
            grid_dim: (
                (kp / 32).max(1) as u32,
                count.div_ceil(32) as u32,
                batch.grid()?,
            ),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = gpu.stream.launch_builder(&self.split);
        launch
            .arg(&ci)
            .arg(&li)
            .arg(&kpi)
            .arg(&x.ptr)
            .arg(&ld)
            .arg(&xs)
            .arg(&rows_i)
            .arg(&stats.exps)
            .arg(&stats.states)
            .arg(&bits_i)
            .arg(&nmod_i)
            .arg(&out)
            .arg(&plane_i)
            .arg(&os);
        // SAFETY: (int, int, int, const ELEM*, long long, long long, int,
        // const int*, const int*, int, int, signed char*, long long, long
        // long): x addresses count vectors of len entries per product, xs
        // elements apart; exps and states hold count entries per product;
        // out holds, per product os bytes apart, max(nmod, 1) planes of
        // count×kp bytes `plane` apart; kp is a multiple of 32, so the
        // grid covers every column.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .map_err(launch_err("split"))
    }

    /// The needs of rows i0..i0+r of each product of `batch` (its `gs`,
    /// `rs`, `cs` and `ns` strides on G, the row and column statistics
    /// and the needs), from the magnitude product G (ld ldg), counted in
    /// the product's histogram of 256 bins.
    #[allow(clippy::too_many_arguments)]
    fn needs(
        &self,
        gpu: &Gpu,
        (i0, r, n, k): (usize, usize, usize, usize),
        (g, g2, ldg, gs): (CUdeviceptr, CUdeviceptr, usize, usize),
        (rows, rs): (StatsAt, usize),
        (cols, cs): (StatsAt, usize),
        t: f64,
        (need, ns, histogram): (CUdeviceptr, usize, CUdeviceptr),
        products: usize,
    ) -> Result<(), Error> {
        let (i0i, ni, ki, ldg, gs, rs, cs, ns) = (
            to_i32("row", i0)?,
            to_i32("n", n)?,
            to_i32("k", k)?,
            ldg as i64,
            gs as i64,
            rs as i64,
            cs as i64,
            ns as i64,
        );
        let config = per_need((r, n), products_grid(products)?);
        let mut launch = gpu.stream.launch_builder(&self.need);
        launch
            .arg(&i0i)
            .arg(&ni)
            .arg(&ki)
            .arg(&g)
            .arg(&g2)
            .arg(&ldg)
            .arg(&gs)
            .arg(&rows.states)
            .arg(&rows.norms)
            .arg(&rs)
            .arg(&cols.states)
            .arg(&cols.norms)
            .arg(&cs)
            .arg(&t)
            .arg(&NORM_SLACK)
            .arg(&need)
            .arg(&ns)
            .arg(&histogram);
        // SAFETY: (int, int, int, const int*, const int*, long long, long
        // long, const int*, const double*, long long, const int*, const
        // double*, long long, double, double, unsigned char*, long long,
        // unsigned long long*): per product at its strides, g (and g2,
        // unless null) holds r rows of ldg INT32;
        // the statistics cover rows i0..i0+r and every column; need holds
        // the product's m·n bytes; its histogram 256 counters.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .map_err(launch_err("certificate"))
    }

    /// The certificate of a central block of the product, `SAMPLE` rows
    /// by `SAMPLE` columns over the whole depth, for products at least
    /// four such blocks on each side: the native route where more than
    /// `SAMPLE_NATIVE` times the fix-up allowance of its elements need
    /// more bits than the moduli hold (wide exponent ranges, NaN or ∞ in
    /// many rows), decided before any statistics of the whole operands,
    /// so that such a product costs about its native one (the rest of
    /// the certificate would read A and B three times more and run an
    /// INT8 product to reach the same route); [`EmulationRoute::Slower`]
    /// where emulation cannot pay once the certificate is counted
    /// ([`sample_verdict`]). None otherwise: a product the sample cannot
    /// condemn takes the whole certificate.
    fn sample_goes_native<T: Element>(
        &self,
        gpu: &Gpu,
        product: DeviceGemm<T>,
    ) -> Result<Option<EmulationRoute>, Error> {
        const SAMPLE: usize = 256;
        const SAMPLE_NATIVE: u64 = 4;
        let (m, k, n) = product.shape;
        if m < 4 * SAMPLE || n < 4 * SAMPLE {
            return Ok(None);
        }
        let (i0, j0) = ((m - SAMPLE) / 2, (n - SAMPLE) / 2);
        let (a, b) = (product.a.at::<T>(i0, 0), product.b.at::<T>(0, j0));
        let (kp, np) = padded(k, SAMPLE);
        let rows = self.stats(gpu, (SAMPLE, k), (a, !a.trans), Batch::ONE)?;
        let cols = self.stats(gpu, (SAMPLE, k), (b, b.trans), Batch::ONE)?;
        // One zeroed region holds the two magnitude planes (their padding
        // must read as zero), their product and the needs; the histogram
        // has two words more, where the largest norms are copied, so that
        // what the host decides on comes back in one read: the sample
        // stands before every emulated product, and each allocation and
        // wait is paid where emulation may not.
        let mut carve = Carve::default();
        let at = [
            carve.take(SAMPLE * kp),
            carve.take(SAMPLE * kp),
            carve.take(4 * SAMPLE * np),
            carve.take(SAMPLE * SAMPLE),
        ];
        let region: CudaSlice<u8> = alloc(gpu, carve.end(), "sample")?;
        let mut words: CudaSlice<u64> = alloc(gpu, 256 + 2, "sample histogram")?;
        let base = ptr(gpu, &region);
        let [ma, mb, g, need] = at.map(|offset| base + offset as u64);
        self.split(
            gpu,
            (SAMPLE, k, kp),
            (a, !a.trans, Batch::ONE),
            rows.at(gpu),
            (0, 1),
            (ma, SAMPLE * kp),
        )?;
        self.split(
            gpu,
            (SAMPLE, k, kp),
            (b, b.trans, Batch::ONE),
            cols.at(gpu),
            (0, 1),
            (mb, SAMPLE * kp),
        )?;
        int8_product(gpu, (SAMPLE, SAMPLE, kp, np), ma, mb, g)?;
        let target = Target::of(self.goal, (m, k, n), T::DTYPE);
        self.needs(
            gpu,
            (0, SAMPLE, SAMPLE, k),
            (g, 0, np, 0),
            (rows.at(gpu), 0),
            (cols.at(gpu), 0),
            target.tau(),
            (need, 0, ptr(gpu, &words)),
            1,
        )?;
        for (top, slot) in [(&rows.tops, 256), (&cols.tops, 257)] {
            gpu.stream
                .memcpy_dtod(top, &mut words.slice_mut(slot..slot + 1))
                .map_err(|e| cuda_err("cannot gather the sample's largest norms", e))?;
        }
        let mut read = [0u64; 256 + 2];
        gpu.stream
            .memcpy_dtoh(&words, &mut read[..])
            .map_err(|e| cuda_err("cannot read the sample's certificate", e))?;
        gpu.synchronize()?;
        let counts: [u64; 256] = read[..256].try_into().expect("256 bins");
        let sums = Sums::with_norms(k, f64::from_bits(read[256]), f64::from_bits(read[257]));
        let scale = (m as u64 * n as u64) / (SAMPLE * SAMPLE) as u64;
        Ok(sample_verdict(
            &counts,
            (SAMPLE, SAMPLE),
            sums,
            target,
            &emulation_prices(T::DTYPE),
            (SAMPLE_NATIVE, scale),
        ))
    }

    /// One slice of depth k ≤ [`EMULATION_K_CHUNK`]; its route and the
    /// GPU time of its phases (zero on the native route).
    fn run_slice<T: Element>(
        &self,
        gpu: &Gpu,
        scratch: &mut Workspace<'_>,
        product: DeviceGemm<T>,
    ) -> Result<(EmulationRoute, [u64; Phase::COUNT]), Error> {
        let DeviceGemm {
            shape: (m, k, n),
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        let mut clock = Clock::new();
        clock.mark(gpu, Phase::Sample)?;
        if let Some(route) = self.sample_goes_native::<T>(gpu, product)? {
            cublas::gemm(gpu, GpuPrecision::Fp32, product)?;
            return Ok((route, [0; Phase::COUNT]));
        }
        clock.mark(gpu, Phase::Statistics)?;
        let (kp, np) = padded(k, n);
        // A's rows and B's columns are vectors of their storage's rows or
        // columns, by whether each is a transposed view.
        let row_stats = self.stats(gpu, (m, k), (a, !a.trans), Batch::ONE)?;
        let col_stats = self.stats(gpu, (n, k), (b, b.trans), Batch::ONE)?;
        let (rows, cols) = (row_stats.at(gpu), col_stats.at(gpu));
        // The largest norms bound the sums, and so the moduli and the
        // certificate's first depth: the host waits for the statistics.
        let sums = Sums::with_norms(k, row_stats.widest(gpu)?[0], col_stats.widest(gpu)?[0]);
        let budget = memory_budget(gpu, scratch.capacity())?;

        // The needs lie at the start of the scratch through both phases,
        // each phase's planes after them.
        let mut carve = Carve::default();
        carve.take(m * n);
        let kept = carve.end();
        let mut histogram: CudaSlice<u64> = alloc(gpu, 256, "histogram")?;

        // Phase 1: the certificate, from the first part of the depth and
        // then, where that could pay, the whole.
        let chosen = {
            let fixed = m * n + n * kp;
            let per_row = kp + 4 * np;
            let block = block_rows(budget, (fixed, per_row), m, "certificate")?;
            let (need, [mag_b, mag_a, g]) =
                carve.place(scratch, [n * kp, block * kp, 4 * block * np], 0)?;
            clock.mark(gpu, Phase::Magnitudes)?;
            self.split(
                gpu,
                (n, k, kp),
                (b, b.trans, Batch::ONE),
                cols,
                (0, 1),
                (mag_b, n * kp),
            )?;
            let target = Target::of(self.goal, (m, k, n), T::DTYPE);
            let t = target.tau();
            // The padding beyond k is zeros: a first depth of k is kp.
            let first = match certificate_depth(sums, target) {
                d if d < k => d,
                _ => kp,
            };
            // (depth done, depth wanted): one block of rows keeps its G and
            // adds the rest; several start again over the whole depth.
            let mut span = (0, first);
            loop {
                let mut i0 = 0;
                while i0 < m {
                    let r = block.min(m - i0);
                    if span.0 == 0 {
                        clock.mark(gpu, Phase::Magnitudes)?;
                        self.split(
                            gpu,
                            (r, k, kp),
                            (a.at::<T>(i0, 0), !a.trans, Batch::ONE),
                            rows.skip(i0),
                            (0, 1),
                            (mag_a, r * kp),
                        )?;
                    }
                    clock.mark(gpu, Phase::MagnitudeProduct)?;
                    int8_product_part(gpu, (r, n, kp, np), span, span.0 > 0, mag_a, mag_b, g)?;
                    clock.mark(gpu, Phase::Needs)?;
                    self.needs(
                        gpu,
                        (i0, r, n, k),
                        (g, 0, np, 0),
                        (rows, 0),
                        (cols, 0),
                        t,
                        (need, 0, ptr(gpu, &histogram)),
                        1,
                    )?;
                    i0 += r;
                }
                let histogram_host = read_histograms(gpu, &histogram, 1)?[0];
                let found = route(&histogram_host, m, sums, n, target);
                if span.1 == kp || !wants_full_depth(found, sums, target) {
                    let settled = settle(found, &histogram_host, sums, target);
                    break priced(settled, (m * n) as u64, &emulation_prices(T::DTYPE), false);
                }
                gpu.stream
                    .memset_zeros(&mut histogram)
                    .map_err(|e| cuda_err("cannot clear the certificate's histogram", e))?;
                span = if block >= m { (span.1, kp) } else { (0, kp) };
            }
        };
        let Some((bits, nmod, fixups)) = chosen.emulated() else {
            cublas::gemm(gpu, GpuPrecision::Fp32, product)?;
            return Ok((chosen, [0; Phase::COUNT]));
        };

        // Phase 2: residues, INT8 products, CRT.
        clock.mark(gpu, Phase::Split)?;
        let kernels = int8_kernels(gpu)?;
        let kind = Planes::of(kernels);
        let unit = kind.bytes();
        let fixed = m * n + nmod * n * kp;
        let per_row = nmod * (kp + unit * np);
        let block = block_rows(budget, (fixed, per_row), m, "residues")?;
        let (need, [res_b, res_a, planes]) = carve.place(
            scratch,
            [nmod * n * kp, nmod * block * kp, unit * nmod * block * np],
            kept,
        )?;
        self.split(
            gpu,
            (n, k, kp),
            (b, b.trans, Batch::ONE),
            cols,
            (bits, nmod),
            (res_b, n * kp),
        )?;
        let fix_count: CudaSlice<u32> = alloc(gpu, 1, "fix-up count")?;
        let cap = usize::try_from(fixups).unwrap_or(usize::MAX).max(1);
        let fix_list: CudaSlice<u64> = alloc(gpu, cap, "fix-up list")?;
        let mut i0 = 0;
        while i0 < m {
            let r = block.min(m - i0);
            clock.mark(gpu, Phase::Split)?;
            self.split(
                gpu,
                (r, k, kp),
                (a.at::<T>(i0, 0), !a.trans, Batch::ONE),
                rows.skip(i0),
                (bits, nmod),
                (res_a, block * kp),
            )?;
            clock.mark(gpu, Phase::Products)?;
            for (l, &modulus) in MODULI.iter().enumerate().take(nmod) {
                let (a_l, b_l, out) = (
                    res_a + (l * block * kp) as u64,
                    res_b + (l * n * kp) as u64,
                    planes + (unit * l * block * np) as u64,
                );
                match kind {
                    Planes::Sums => int8_product(gpu, (r, n, kp, np), a_l, b_l, out)?,
                    Planes::Bytes => {
                        int8_residues(gpu, kernels, (r, n, kp, np), modulus, (a_l, b_l, out))?
                    }
                }
            }
            clock.mark(gpu, Phase::Accumulate)?;
            self.accumulate(
                gpu,
                (i0, r, n),
                (planes, block * np, np, 0, kind),
                (bits, nmod),
                (need, (rows.exps, 0), (cols.exps, 0), 0),
                (alpha, beta, c, 0),
                (ptr(gpu, &fix_count), ptr(gpu, &fix_list), cap),
                1,
            )?;
            i0 += r;
        }
        let mut listed = [0u32];
        gpu.stream
            .memcpy_dtoh(&fix_count, &mut listed[..])
            .map_err(|e| cuda_err("cannot read the fix-up count", e))?;
        gpu.synchronize()?;
        self.fix_up(gpu, product, (listed[0], fixups), ptr(gpu, &fix_list))?;
        // The small temporaries are freed in stream order as they drop; the
        // scratch stays for the next product on the stream.
        Ok((chosen, clock.finish(gpu)?))
    }

    /// The CRT accumulation of rows i0..i0+r of each of `products`, at its
    /// strides: planes (INT32 sums, or residue bytes where `Planes::Bytes`)
    /// `plane` entries apart (ld ldp, the next product's `ps` entries on),
    /// its needs (`ns` bytes on) and exponents (`rs`, `cs` on), C (`cs_c`
    /// elements on) and its fix-up count and list (`cap` entries each).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn accumulate<T: Element>(
        &self,
        gpu: &Gpu,
        (i0, r, n): (usize, usize, usize),
        (planes, plane, ldp, ps, kind): (CUdeviceptr, usize, usize, usize, Planes),
        (bits, nmod): (u32, usize),
        (need, (row_e, rs), (col_e, cs), ns): (
            CUdeviceptr,
            (CUdeviceptr, usize),
            (CUdeviceptr, usize),
            usize,
        ),
        (alpha, beta, c, cs_c): (T, T, Operand, usize),
        (fix_count, fix_list, cap): (CUdeviceptr, CUdeviceptr, usize),
        products: usize,
    ) -> Result<(), Error> {
        let (i0i, ni, nmodi, bitsi, capi) = (
            to_i32("row", i0)?,
            to_i32("n", n)?,
            nmod as i32,
            bits as i32,
            u32::try_from(cap).unwrap_or(u32::MAX),
        );
        let (plane, ldp, ps, ns, rs, cs, ldc, cs_c) = (
            plane as i64,
            ldp as i64,
            ps as i64,
            ns as i64,
            rs as i64,
            cs as i64,
            c.ld as i64,
            cs_c as i64,
        );
        let (alpha64, beta64) = (alpha.to_f64(), beta.to_f64());
        let config = per_element((r, n), products_grid(products)?);
        let mut launch = gpu.stream.launch_builder(
            &self.accumulate[usize::from(nmod > 8) + 2 * usize::from(kind == Planes::Bytes)],
        );
        launch
            .arg(&i0i)
            .arg(&ni)
            .arg(&planes)
            .arg(&plane)
            .arg(&ldp)
            .arg(&ps)
            .arg(&nmodi)
            .arg(&bitsi)
            .arg(&need)
            .arg(&ns)
            .arg(&row_e)
            .arg(&rs)
            .arg(&col_e)
            .arg(&cs)
            .arg(&alpha64)
            .arg(&beta64)
            .arg(&c.ptr)
            .arg(&ldc)
            .arg(&cs_c)
            .arg(&fix_count)
            .arg(&fix_list)
            .arg(&capi);
        // SAFETY: (int, int, const int* or const signed char* by `kind`,
        // long long, long long, long long,
        // int, int, const unsigned char*, long long, const int*, long long,
        // const int*, long long, double, double, ELEM*, long long, long
        // long, unsigned int*, unsigned long long*, unsigned int): per
        // product at its strides, planes holds nmod planes of r rows of ldp
        // entries of `kind` `plane` apart; need, the exponents and C cover rows
        // i0..i0+r and n columns (no product's C another's); each product
        // has one count and a list of `cap` entries.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .map_err(launch_err("accumulation"))
    }

    /// Recomputes natively the `listed` elements of `product`'s C whose
    /// indices the accumulation wrote to `list`, once the count is known to
    /// be the certificate's (`counted`).
    fn fix_up<T: Element>(
        &self,
        gpu: &Gpu,
        product: DeviceGemm<T>,
        (listed, counted): (u32, u64),
        list: CUdeviceptr,
    ) -> Result<(), Error> {
        if u64::from(listed) != counted {
            return Err(Error::Cuda(format!(
                "emulated product: {listed} elements listed for native recomputation, the certificate counted {counted}"
            )));
        }
        if listed == 0 {
            return Ok(());
        }
        let DeviceGemm {
            shape: (_, k, n),
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        let (ni, ki) = (to_i32("n", n)?, to_i32("k", k)?);
        let ((ar, ac), (br, bc)) = (a.strides(), b.strides());
        let (ar, ac, br, bc, ldc) = (ar as i64, ac as i64, br as i64, bc as i64, c.ld as i64);
        let (alpha64, beta64) = (alpha.to_f64(), beta.to_f64());
        let config = LaunchConfig {
            grid_dim: (listed.div_ceil(8), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = gpu.stream.launch_builder(&self.fixup);
        launch
            .arg(&list)
            .arg(&listed)
            .arg(&ni)
            .arg(&ki)
            .arg(&a.ptr)
            .arg(&ar)
            .arg(&ac)
            .arg(&b.ptr)
            .arg(&br)
            .arg(&bc)
            .arg(&alpha64)
            .arg(&beta64)
            .arg(&c.ptr)
            .arg(&ldc);
        // SAFETY: (const unsigned long long*, unsigned int, int, int,
        // const ELEM*, long long, long long, const ELEM*, long long,
        // long long, double, double, ELEM*, long long): the list holds
        // `listed` element indices i·n + j of C; a, b and c are the
        // product's operands, addressed by their element strides.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .map_err(launch_err("fix-up"))
    }

    /// A strided batch of `count` products (product i is
    /// `first.nth(i, strides)`, a stride of 0 repeating an operand), each
    /// with the route [`EmulatedGemm::run`] would give it and the same
    /// result, but every step one launch over as many products as the
    /// GPU's memory holds: two host reads per group of products instead of
    /// two per product, and the INT8 products of each modulus one strided
    /// batch. Shapes a group cannot take (depth beyond
    /// [`EMULATION_K_CHUNK`], sides beyond one INT8 tile, too little
    /// memory for two products) run product by product.
    pub fn run_strided<T: Element>(
        &self,
        gpu: &Gpu,
        first: DeviceGemm<T>,
        (count, strides): (usize, (usize, usize, usize)),
    ) -> Result<(), Error> {
        let (m, k, n) = first.shape;
        if m == 0 || n == 0 || count == 0 {
            return Ok(());
        }
        let mut scratch = gpu.workspace();
        let group =
            match k <= EMULATION_K_CHUNK && m <= MAX_GRID_Y && m.max(n) <= CUDA_EMULATION_INT8_TILE
            {
                true => (memory_budget(gpu, scratch.capacity())? / group_bytes((m, k, n)))
                    .min(MAX_GRID_Y)
                    .min(count),
                false => 0,
            };
        if group < 2 {
            return (0..count)
                .try_for_each(|i| self.run_in(gpu, &mut scratch, first.nth(i, strides)));
        }
        let mut i0 = 0;
        while i0 < count {
            let len = group.min(count - i0);
            let (routes, phase_us) =
                self.run_group(gpu, &mut scratch, first.nth(i0, strides), (len, strides))?;
            let mut tally = self.tally.lock().expect("tally lock");
            for (i, route) in routes.into_iter().enumerate() {
                tally.add(route, if i == 0 { phase_us } else { [0; Phase::COUNT] });
            }
            i0 += len;
        }
        Ok(())
    }

    /// One group of [`EmulatedGemm::run_strided`]: the routes of its
    /// products and the GPU time of its phases.
    fn run_group<T: Element>(
        &self,
        gpu: &Gpu,
        scratch: &mut Workspace<'_>,
        first: DeviceGemm<T>,
        (count, strides): (usize, (usize, usize, usize)),
    ) -> Result<(Vec<EmulationRoute>, [u64; Phase::COUNT]), Error> {
        let DeviceGemm {
            shape: (m, k, n),
            a,
            b,
            ..
        } = first;
        let (sa, sb, _) = strides;
        let mut clock = Clock::new();
        clock.mark(gpu, Phase::Statistics)?;
        let (kp, np) = padded(k, n);
        // A repeated operand's statistics and planes are made once; `rs`
        // and `cs` are how far one product's row and column statistics lie
        // from the previous one's.
        let (na, rs) = distinct(sa, count, m);
        let (nb, cs) = distinct(sb, count, n);
        let batch_a = |output| Batch {
            products: na,
            input: sa,
            output,
        };
        let batch_b = |output| Batch {
            products: nb,
            input: sb,
            output,
        };
        let row_stats = self.stats(gpu, (m, k), (a, !a.trans), batch_a(0))?;
        let col_stats = self.stats(gpu, (n, k), (b, b.trans), batch_b(0))?;
        let (rows, cols) = (row_stats.at(gpu), col_stats.at(gpu));
        let target = Target::of(self.goal, (m, k, n), T::DTYPE);
        let t = target.tau();
        // Product i's largest norms, its own or the one operand's where a
        // stride of 0 repeats it: the host waits for the statistics.
        let (row_tops, col_tops) = (row_stats.widest(gpu)?, col_stats.widest(gpu)?);
        let sums: Vec<Sums> = (0..count)
            .map(|i| {
                let (ia, ib) = (if rs == 0 { 0 } else { i }, if cs == 0 { 0 } else { i });
                Sums::with_norms(k, row_tops[ia], col_tops[ib])
            })
            .collect();
        // One first depth for the group: the widest of its products'.
        let first_depth = sums
            .iter()
            .map(|&s| certificate_depth(s, target))
            .max()
            .unwrap_or(k);
        let histograms: CudaSlice<u64> = alloc(gpu, count * 256, "histograms")?;
        let hist_at = ptr(gpu, &histograms);
        // The needs lie at the start of the scratch through both phases,
        // each phase's planes after them.
        let mut carve = Carve::default();
        carve.take(count * m * n);
        let kept = carve.end();

        // Phase 1: the certificates, from the first part of the depth and
        // then, for the products where that could pay, the whole.
        let routes = {
            let (need_at, [mb, ma, gp]) =
                carve.place(scratch, [nb * n * kp, na * m * kp, 4 * count * m * np], 0)?;
            clock.mark(gpu, Phase::Magnitudes)?;
            self.split(
                gpu,
                (n, k, kp),
                (b, b.trans, batch_b(n * kp)),
                cols,
                (0, 1),
                (mb, n * kp),
            )?;
            self.split(
                gpu,
                (m, k, kp),
                (a, !a.trans, batch_a(m * kp)),
                rows,
                (0, 1),
                (ma, m * kp),
            )?;
            // The padding beyond k is zeros: a first depth of k is kp.
            let depth = match first_depth {
                d if d < k => d,
                _ => kp,
            };
            let plane_strides = (rs * kp, cs * kp, m * np);
            clock.mark(gpu, Phase::MagnitudeProduct)?;
            int8_product_batch(
                gpu,
                (m, n, kp, np),
                (0, depth),
                false,
                (ma, mb, gp),
                (count, plane_strides),
            )?;
            clock.mark(gpu, Phase::Needs)?;
            self.needs(
                gpu,
                (0, m, n, k),
                (gp, 0, np, m * np),
                (rows, rs),
                (cols, cs),
                t,
                (need_at, m * n, hist_at),
                count,
            )?;
            let first_counts = read_histograms(gpu, &histograms, count)?;
            let found: Vec<EmulationRoute> = first_counts
                .iter()
                .zip(&sums)
                .map(|(h, &s)| route(h, m, s, n, target))
                .collect();
            let again: Vec<usize> = (0..count)
                .filter(|&i| depth < kp && wants_full_depth(found[i], sums[i], target))
                .collect();
            // The products that want it add the rest of the depth to their
            // G and count their needs again, each as it would alone.
            let second: CudaSlice<u64> = alloc(gpu, again.len() * 256, "histograms")?;
            for (slot, &i) in again.iter().enumerate() {
                let gi = gp + (4 * i * m * np) as u64;
                clock.mark(gpu, Phase::MagnitudeProduct)?;
                int8_product_batch(
                    gpu,
                    (m, n, kp, np),
                    (depth, kp),
                    true,
                    (ma + (i * rs * kp) as u64, mb + (i * cs * kp) as u64, gi),
                    (1, (0, 0, 0)),
                )?;
                clock.mark(gpu, Phase::Needs)?;
                self.needs(
                    gpu,
                    (0, m, n, k),
                    (gi, 0, np, 0),
                    (rows.skip(i * rs), 0),
                    (cols.skip(i * cs), 0),
                    t,
                    (
                        need_at + (i * m * n) as u64,
                        0,
                        ptr(gpu, &second) + (8 * 256 * slot) as u64,
                    ),
                    1,
                )?;
            }
            let second_counts = match again.is_empty() {
                true => Vec::new(),
                false => read_histograms(gpu, &second, again.len())?,
            };
            let mut routes: Vec<EmulationRoute> = found
                .iter()
                .zip(&first_counts)
                .zip(&sums)
                .map(|((&r, h), &s)| settle(r, h, s, target))
                .collect();
            for (&i, h) in again.iter().zip(&second_counts) {
                routes[i] = settle(route(h, m, sums[i], n, target), h, sums[i], target);
            }
            let prices = emulation_prices(T::DTYPE);
            routes
                .into_iter()
                .map(|r| priced(r, (m * n) as u64, &prices, false))
                .collect::<Vec<EmulationRoute>>()
        };
        drop(histograms);

        // Phase 2 over each run of consecutive products on one emulated
        // route: residues, INT8 products, CRT; the native ones by cuBLAS.
        let fixups_of = |r: &EmulationRoute| match r {
            EmulationRoute::Emulated { fixups, .. } => *fixups,
            EmulationRoute::Native { .. } | EmulationRoute::Slower { .. } => 0,
        };
        let cap = routes.iter().map(fixups_of).max().unwrap_or(0);
        let cap = usize::try_from(cap).unwrap_or(usize::MAX).max(1);
        let fix_count: CudaSlice<u32> = alloc(gpu, count, "fix-up counts")?;
        let fix_list: CudaSlice<u64> = alloc(gpu, count * cap, "fix-up lists")?;
        let (fc, fl) = (ptr(gpu, &fix_count), ptr(gpu, &fix_list));
        let mut i = 0;
        while i < count {
            let EmulationRoute::Emulated {
                bits, moduli: nmod, ..
            } = routes[i]
            else {
                cublas::gemm(gpu, GpuPrecision::Fp32, first.nth(i, strides))?;
                i += 1;
                continue;
            };
            let run = routes[i..]
                .iter()
                .take_while(|r| {
                    matches!(r, EmulationRoute::Emulated { bits: b, moduli: l, .. } if *b == bits && *l == nmod)
                })
                .count();
            let head = first.nth(i, strides);
            let (ra, rb) = (distinct(sa, run, 0).0, distinct(sb, run, 0).0);
            let (rows_i, cols_i) = (rows.skip(i * rs), cols.skip(i * cs));
            clock.mark(gpu, Phase::Split)?;
            // Plane l of every product lies after plane l − 1 of every
            // product, so that each modulus is one strided batch. A later
            // run reuses the scratch after this one in stream order.
            let (need_at, [pb, pa, pp]) = carve.place(
                scratch,
                [
                    nmod * rb * n * kp,
                    nmod * ra * m * kp,
                    4 * nmod * run * m * np,
                ],
                kept,
            )?;
            let over_b = Batch {
                products: rb,
                input: sb,
                output: n * kp,
            };
            let over_a = Batch {
                products: ra,
                input: sa,
                output: m * kp,
            };
            self.split(
                gpu,
                (n, k, kp),
                (head.b, b.trans, over_b),
                cols_i,
                (bits, nmod),
                (pb, rb * n * kp),
            )?;
            self.split(
                gpu,
                (m, k, kp),
                (head.a, !a.trans, over_a),
                rows_i,
                (bits, nmod),
                (pa, ra * m * kp),
            )?;
            clock.mark(gpu, Phase::Products)?;
            for l in 0..nmod {
                int8_product_batch(
                    gpu,
                    (m, n, kp, np),
                    (0, kp),
                    false,
                    (
                        pa + (l * ra * m * kp) as u64,
                        pb + (l * rb * n * kp) as u64,
                        pp + (4 * l * run * m * np) as u64,
                    ),
                    (run, (rs * kp, cs * kp, m * np)),
                )?;
            }
            clock.mark(gpu, Phase::Accumulate)?;
            self.accumulate(
                gpu,
                (0, m, n),
                (pp, run * m * np, np, m * np, Planes::Sums),
                (bits, nmod),
                (
                    need_at + (i * m * n) as u64,
                    (rows_i.exps, rs),
                    (cols_i.exps, cs),
                    m * n,
                ),
                (head.alpha, head.beta, head.c, strides.2),
                (fc + 4 * i as u64, fl + (8 * i * cap) as u64, cap),
                run,
            )?;
            i += run;
        }
        let mut listed = vec![0u32; count];
        gpu.stream
            .memcpy_dtoh(&fix_count, &mut listed[..])
            .map_err(|e| cuda_err("cannot read the fix-up counts", e))?;
        gpu.synchronize()?;
        for (i, route) in routes.iter().enumerate() {
            if let EmulationRoute::Emulated { fixups, .. } = route {
                let list = fl + (8 * i * cap) as u64;
                self.fix_up(gpu, first.nth(i, strides), (listed[i], *fixups), list)?;
            }
        }
        Ok((routes, clock.finish(gpu)?))
    }
}

/// The bytes of GPU memory the emulated product may take: a share of what
/// is free now and of the scratch it holds (`held` bytes).
fn memory_budget(gpu: &Gpu, held: usize) -> Result<usize, Error> {
    let (free, _) = gpu.memory_info()?;
    Ok(((free + held) as f64 * CUDA_EMULATION_MEMORY_FRACTION) as usize)
}

/// The rows of A per block of a phase that holds `fixed` bytes and
/// `per_row` more per row, within `budget`: at most m and a grid's
/// extent.
fn block_rows(
    budget: usize,
    (fixed, per_row): (usize, usize),
    m: usize,
    what: &str,
) -> Result<usize, Error> {
    match budget.saturating_sub(fixed) / per_row.max(1) {
        0 => Err(too_big(what, fixed + per_row, budget)),
        block => Ok(block.min(m).min(MAX_GRID_Y)),
    }
}

/// The error for a step that does not fit in `budget` bytes.
fn too_big(what: &str, needed: usize, budget: usize) -> Error {
    Error::OutOfMemory {
        what: format!("the emulated product's {what}"),
        needed: crate::system::format_bytes(needed as u128),
        available: crate::system::format_bytes(budget as u128),
    }
}

/// The most bytes one product of a group of [`EmulatedGemm::run_strided`]
/// holds at once, with as many moduli as any route of depth k may take:
/// its needs, its share of the magnitudes and G or of the residues and
/// INT32 planes, its fix-up list and statistics.
fn group_bytes((m, k, n): (usize, usize, usize)) -> usize {
    let (kp, np) = padded(k, n);
    // Any route's moduli: the norms' bound may take more bits than the
    // depth's, never more moduli than there are.
    let moduli = MODULI.len();
    let planes = (m + n) * kp + 4 * m * np;
    let fixups = usize::try_from(fixup_allowance(m, n)).unwrap_or(usize::MAX);
    (m * n)
        .saturating_add(planes.saturating_mul(moduli.max(1)))
        .saturating_add(fixups.saturating_mul(8))
        .saturating_add(64 * (m + n) + 4096)
        .max(1)
}

/// `count` histograms of 256 bins, read back: the host waits for the
/// stream.
fn read_histograms(
    gpu: &Gpu,
    histograms: &CudaSlice<u64>,
    count: usize,
) -> Result<Vec<[u64; 256]>, Error> {
    let mut flat = vec![0u64; histograms.len()];
    gpu.stream
        .memcpy_dtoh(histograms, &mut flat[..])
        .map_err(|e| cuda_err("cannot read the certificates' histograms", e))?;
    gpu.synchronize()?;
    Ok(flat
        .chunks_exact(256)
        .take(count)
        .map(|h| h.try_into().expect("256 bins"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `emu_norm_step` of emulated.cu, operation for operation: one lane's
    /// largest, and its sum in units of 2^el rescaled when a larger
    /// exponent comes.
    fn norm_step(a: f64, (top, sum, above, el): &mut (f64, f64, f64, i32)) {
        use crate::emulation::scaling::{exponent, ldexp};
        if a >= *above && a > 0.0 {
            let e = exponent(a);
            if *top > 0.0 {
                *sum = ldexp(*sum, *el - e);
            }
            *el = e;
            *above = ldexp(1.0, e + 1);
        }
        *top = top.max(a);
        if a > 0.0 {
            *sum += ldexp(a, -*el);
        }
    }

    /// The statistics kernels' one pass gives the norms the two-pass code
    /// gave: lanes (a row's 32, a column chunk's 8) sum their strided
    /// entries in their own units, each lane's sum is rescaled to the
    /// vector's E and the lanes are added in order — the same doubles as
    /// every lane summing in units of 2^E from the start, since scaling
    /// by a power of two commutes with rounding away from subnormals.
    #[test]
    fn one_pass_norms_are_the_two_pass_norms() {
        use crate::emulation::scaling::{exponent, ldexp};
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        for (len, lanes, spread) in [
            (1, 32, 0),
            (100, 32, 0),
            (4099, 32, 30),
            (777, 8, 60),
            (64, 8, 3),
        ] {
            for _ in 0..20 {
                let x: Vec<f64> = (0..len)
                    .map(|_| {
                        let v: f64 = rng.random_range(-1.0..1.0);
                        let e: i32 = rng.random_range(-spread..=spread);
                        if rng.random_bool(0.05) {
                            0.0
                        } else {
                            ldexp(v, e)
                        }
                    })
                    .collect();
                let top = x.iter().fold(0.0f64, |t, v| t.max(v.abs()));
                if top == 0.0 {
                    continue;
                }
                let e = exponent(top);
                for lane in 0..lanes {
                    let mut direct = 0.0;
                    let mut state = (0.0, 0.0, 0.0, 0);
                    for v in x.iter().skip(lane).step_by(lanes) {
                        direct += ldexp(v.abs(), -e);
                        norm_step(v.abs(), &mut state);
                    }
                    let rescaled = match state.0 > 0.0 {
                        true => ldexp(state.1, state.3 - e),
                        false => 0.0,
                    };
                    assert_eq!(
                        rescaled.to_bits(),
                        f64::to_bits(direct),
                        "len {len}, spread {spread}, lane {lane}"
                    );
                }
            }
        }
    }

    /// `emu_residues_x4_limbs`' arithmetic (|x| ≤ 2^52), operation for
    /// operation in 32-bit unsigned integers: three limbs of 18 bits, the
    /// top one lifted by the multiple of m from 2^16 up, one remainder.
    fn limb_residue(x: i64, m: u32) -> i8 {
        let u = x as u64;
        let (x0, x1, x2) = (
            (u & 0x3ffff) as u32,
            ((u >> 18) & 0x3ffff) as u32,
            (x >> 36) as i32,
        );
        let k = (1u32 << 16).div_ceil(m) * m;
        let (c1, c2) = (
            ((1u64 << 18) % u64::from(m)) as u32,
            ((1u64 << 36) % u64::from(m)) as u32,
        );
        let h = m / 2;
        let sum = (x2 as u32)
            .wrapping_add(k)
            .checked_mul(c2)
            .and_then(|v| v.checked_add(x1 * c1)?.checked_add(x0)?.checked_add(h));
        let sum = sum.expect("the kernel's sum stays below 2^32");
        assert!(sum < 1 << 27);
        ((sum % m) as i32 - h as i32) as i8
    }

    /// `emu_residues_x4_wide`'s arithmetic (|x| ≤ 2^62): x split at 32
    /// bits, hi lifted by the multiple of m from 2^30 up, the pieces'
    /// remainders joined.
    fn wide_residue(x: i64, m: u32) -> i8 {
        let hi = (x >> 32) as i32;
        let lo = (x as u64 & 0xffff_ffff) as u32;
        let k = (1u32 << 30).div_ceil(m) * m;
        let w = ((1u64 << 32) % u64::from(m)) as u32;
        let h = m / 2;
        let t = (hi as u32).wrapping_add(k) % m;
        let sum = t.checked_mul(w).and_then(|v| v.checked_add(lo % m + h));
        let sum = sum.expect("the kernel's sum stays below 2^32");
        ((sum % m) as i32 - h as i32) as i8
    }

    /// `emu_crt_wide`'s arithmetic for 8 < N ≤ 16, operation for
    /// operation: unsigned digits, Horner's rule in two 64-bit pieces
    /// joined in 128 bits, the top of the balanced range.
    fn wide_crt(p: &[i32]) -> i128 {
        use crate::emulation::moduli::MODULI;
        let n = p.len();
        let radix = |l: usize, m: u64| MODULI[..l].iter().fold(1u64, |r, &x| r * u64::from(x) % m);
        let mut d = [0u32; 16];
        for l in 0..n {
            let m = MODULI[l];
            let lift = (1u32 << 30).div_ceil(m) * m;
            let r = (p[l] as u32).wrapping_add(lift) % m;
            let s: u32 = (0..l).map(|q| d[q] * radix(q, u64::from(m)) as u32).sum();
            let r_l = radix(l, u64::from(m)) as u32;
            let inv = (1..m).find(|&v| r_l * v % m == 1).unwrap();
            d[l] = (r + 4096 * m - s) * inv % m;
        }
        let (mut lo, mut hi) = (0u64, 0u64);
        for l in (0..8).rev() {
            lo = lo * u64::from(MODULI[l]) + u64::from(d[l]);
        }
        for l in (8..n).rev() {
            hi = hi * u64::from(MODULI[l]) + u64::from(d[l]);
        }
        let (mut low_radix, mut big_m, mut top) = (1u64, 1u128, 0u128);
        for (l, &m) in MODULI[..n].iter().enumerate() {
            top += u128::from(m.div_ceil(2) - 1) * big_m;
            big_m *= u128::from(m);
            if l < 8 {
                low_radix *= u64::from(m);
            }
        }
        let x = u128::from(hi) * u128::from(low_radix) + u128::from(lo);
        if x > top {
            x.wrapping_sub(big_m) as i128
        } else {
            x as i128
        }
    }

    /// The accumulation's CRT beyond 8 moduli gives Garner's balanced
    /// integer, for INT32 sums anywhere in ±2^30 and integers up to ±M/2.
    #[test]
    fn the_unsigned_crt_beyond_eight_moduli_is_garners() {
        use crate::emulation::moduli::{modulus, Garner, MODULI};
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for n in 9..=16 {
            let garner = Garner::new(n);
            let half = (modulus(n) / 2) as i128;
            for t in 0..4000 {
                // A target integer, its residues, then each residue moved
                // by a multiple of its modulus within ±2^30.
                let want: i128 = match t {
                    0 => -half,
                    1 => half - 1,
                    2 => 0,
                    _ => {
                        ((u128::from(next()) << 64 | u128::from(next())) % (2 * half as u128))
                            as i128
                            - half
                    }
                };
                let p: Vec<i32> = MODULI[..n]
                    .iter()
                    .map(|&m| {
                        let r = want.rem_euclid(i128::from(m)) as i64;
                        let steps = (1i64 << 30) / i64::from(m);
                        let k = (next() % (2 * steps as u64)) as i64 - steps;
                        (r + k * i64::from(m)) as i32
                    })
                    .collect();
                let wide: Vec<i64> = p.iter().map(|&v| i64::from(v)).collect();
                assert_eq!(garner.reconstruct(&wide), want, "{n} moduli");
                assert_eq!(wide_crt(&p), want, "{n} moduli: {p:?}");
            }
        }
    }

    /// The split's integer residues of wide scaled entries (f64 at more
    /// than 30 bits: limbs to 52 bits, two pieces beyond) are the twin's
    /// symmetric residues, at every modulus, up to the ends of each range.
    #[test]
    fn wide_residues_in_32_bit_integers_are_the_symmetric_residues() {
        use crate::emulation::moduli::{symmetric_residue, MODULI};
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for top in [52u32, 62] {
            let edge = 1i64 << top;
            let mut values = vec![0, 1, -1, edge, -edge, edge - 1, 1 - edge];
            values.extend([18, 32, 36].map(|s| 1i64 << s));
            values.extend([18, 32, 36].map(|s| -(1i64 << s)));
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                values.push((x as i64) >> (63 - top));
            }
            for &v in &values {
                assert!(v.unsigned_abs() <= 1 << top);
                for &m in &MODULI {
                    let want = symmetric_residue(i128::from(v), m);
                    assert_eq!(wide_residue(v, m), want, "{v} mod {m}, split at 32");
                    if top <= 52 {
                        assert_eq!(limb_residue(v, m), want, "{v} mod {m}, in limbs");
                    }
                }
            }
        }
    }

    #[test]
    fn a_repeated_operand_is_one_with_no_stride() {
        assert_eq!(distinct(0, 64, 2048), (1, 0));
        assert_eq!(distinct(2048 * 2048, 64, 2048), (64, 2048));
        // A batch of one with a stride still counts its one product.
        assert_eq!(distinct(7, 1, 3), (1, 3));
    }

    #[test]
    fn a_group_holds_every_buffer_of_the_widest_route() {
        let (m, k, n) = (2048, 2048, 2048);
        let bytes = group_bytes((m, k, n));
        // Any route's moduli, whatever bound of its sums it takes.
        let moduli = MODULI.len();
        // The needs, and the residues and INT32 planes at the most moduli.
        assert!(bytes >= m * n + moduli * ((m + n) * k + 4 * m * n));
        // Padding: rows to 16 entries, depths to 32.
        assert!(group_bytes((3, 5, 7)) >= 3 * 7 + (3 + 7) * 32 + 4 * 3 * 16);
        assert!(group_bytes((1, 1, 1)) > 0);
        assert!(group_bytes((m, 2 * k, n)) > bytes);
    }

    #[test]
    fn a_batch_beyond_a_grid_is_an_error() {
        let within = Batch {
            products: MAX_GRID_Y,
            ..Batch::ONE
        };
        assert_eq!(within.grid().ok(), Some(MAX_GRID_Y as u32));
        let beyond = Batch {
            products: MAX_GRID_Y + 1,
            ..Batch::ONE
        };
        assert!(beyond.grid().is_err());
    }

    #[test]
    fn carved_regions_are_aligned_and_apart() {
        let mut carve = Carve::default();
        let sizes = [1000, 0, 1, 256, 4097];
        let at: Vec<usize> = sizes.iter().map(|&b| carve.take(b)).collect();
        assert_eq!(at, [0, 1024, 1280, 1536, 1792]);
        assert_eq!(carve.end(), 6144);
        for (w, &b) in at.windows(2).zip(&sizes) {
            assert_eq!(w[0] % Carve::ALIGN, 0);
            assert!(w[0] + b <= w[1]);
        }
    }
}
