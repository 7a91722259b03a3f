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

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::cublas;
use crate::cuda::kernels::int8::{
    alloc_written, int8_product, int8_product_part, launch_err, ptr, Clock, MAX_GRID_Y,
};
use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::CUDA_EMULATION_MEMORY_FRACTION;
use crate::element::Element;
use crate::emulation::certify::{
    certificate_depth, route, settle, wants_full_depth, Goal, Route, Target, NORM_SLACK,
};
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
    /// The column statistics' three steps: maxima, chunk sums, totals.
    stats_cols: [CudaFunction; 3],
    split: CudaFunction,
    need: CudaFunction,
    accumulate: CudaFunction,
    fixup: CudaFunction,
    /// What every product's certificate makes its elements meet.
    goal: Goal,
    tally: Mutex<Tally>,
}

/// Where the statistics of a set of vectors live on the GPU.
struct Stats {
    exps: CudaSlice<i32>,
    norms: CudaSlice<f64>,
    states: CudaSlice<i32>,
}

fn alloc<V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    gpu: &Gpu,
    len: usize,
    what: &str,
) -> Result<CudaSlice<V>, Error> {
    gpu.stream
        .alloc_zeros::<V>(len.max(1))
        .map_err(|e| cuda_err(&format!("cannot allocate the emulated product's {what}"), e))
}

/// One thread per element of `rows` rows of C, 256 per block: the launch
/// of `emu_need` and `emu_accumulate`.
fn per_element((rows, n): (usize, usize)) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(256) as u32, rows as u32, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
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
        let [stats_rows, cols_max, cols_sum, cols_finish, split, need, accumulate, fixup] =
            KernelSource::EMULATED_ENTRIES;
        Ok(EmulatedGemm {
            stats_rows: gpu.entry_function(key, stats_rows)?,
            stats_cols: [
                gpu.entry_function(key, cols_max)?,
                gpu.entry_function(key, cols_sum)?,
                gpu.entry_function(key, cols_finish)?,
            ],
            split: gpu.entry_function(key, split)?,
            need: gpu.entry_function(key, need)?,
            accumulate: gpu.entry_function(key, accumulate)?,
            fixup: gpu.entry_function(key, fixup)?,
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
            let (route, phase_us) = self.run_slice(gpu, slice)?;
            self.tally.lock().expect("tally lock").add(route, phase_us);
            p0 += depth;
            beta = T::ONE;
            if p0 >= k {
                return Ok(());
            }
        }
    }

    /// Statistics of `count` vectors of `len` entries: rows of x (ld) when
    /// `rows`, else columns.
    fn stats(
        &self,
        gpu: &Gpu,
        (count, len): (usize, usize),
        x: Operand,
        rows: bool,
    ) -> Result<Stats, Error> {
        let stats = Stats {
            exps: alloc(gpu, count, "exponents")?,
            norms: alloc(gpu, count, "norms")?,
            states: alloc(gpu, count, "states")?,
        };
        if !rows {
            self.column_stats(gpu, (count, len), x, &stats)?;
            return Ok(stats);
        }
        let (ci, li, ld) = (to_i32("count", count)?, to_i32("len", len)?, x.ld as i64);
        let (e, nr, s) = (
            ptr(gpu, &stats.exps),
            ptr(gpu, &stats.norms),
            ptr(gpu, &stats.states),
        );
        let config = LaunchConfig {
            grid_dim: (count as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = gpu.stream.launch_builder(&self.stats_rows);
        launch
            .arg(&ci)
            .arg(&li)
            .arg(&x.ptr)
            .arg(&ld)
            .arg(&e)
            .arg(&nr)
            .arg(&s);
        // SAFETY: (int, int, const ELEM*, long long, int*, double*, int*):
        // x addresses count rows of len entries with this ld, and the
        // outputs hold count entries each.
        unsafe { launch.launch(config) }.map_err(launch_err("statistics"))?;
        Ok(stats)
    }

    /// The statistics of `count` columns of `len` entries (entry p of
    /// column v at x[p·ld + v]) into `stats`: the columns' maxima and
    /// chunk sums over a grid of 32 columns × a chunk of the length per
    /// block, so that a short row of long columns still fills the GPU,
    /// then the chunks' sums added in order per column.
    fn column_stats(
        &self,
        gpu: &Gpu,
        (count, len): (usize, usize),
        x: Operand,
        stats: &Stats,
    ) -> Result<(), Error> {
        // At least 8 entries per lane, at most 64 chunks.
        let chunk = len.div_ceil(64).max(256).div_ceil(8) * 8;
        let chunks = len.div_ceil(chunk).max(1);
        let top_bits: CudaSlice<u64> = alloc(gpu, count, "column maxima")?;
        let bad: CudaSlice<i32> = alloc(gpu, count, "column flags")?;
        let partial: CudaSlice<f64> = alloc_written(gpu, chunks * count, "column sums")?;
        let (ci, li, chi, chunks_i, ld) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            to_i32("chunk", chunk)?,
            to_i32("chunks", chunks)?,
            x.ld as i64,
        );
        let (tp, bp, pp) = (ptr(gpu, &top_bits), ptr(gpu, &bad), ptr(gpu, &partial));
        let grid = LaunchConfig {
            grid_dim: (count.div_ceil(32) as u32, chunks as u32, 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let [max, sum, finish] = &self.stats_cols;
        // The two passes over the columns share their first seven
        // arguments; the sums' pass adds its partial sums.
        let pass = |step| {
            let mut launch = gpu.stream.launch_builder(step);
            launch
                .arg(&ci)
                .arg(&li)
                .arg(&chi)
                .arg(&x.ptr)
                .arg(&ld)
                .arg(&tp)
                .arg(&bp);
            launch
        };
        let mut launch = pass(max);
        // SAFETY: (int, int, int, const ELEM*, long long, unsigned long
        // long*, int*): x addresses count columns of len entries with this
        // ld; top_bits and bad hold count zeroed entries.
        unsafe { launch.launch(grid) }.map_err(launch_err("column maxima"))?;
        let mut launch = pass(sum);
        launch.arg(&pp);
        // SAFETY: as above, and partial holds chunks·count doubles, one
        // written by each (chunk, column) of the grid.
        unsafe { launch.launch(grid) }.map_err(launch_err("column sums"))?;
        let (e, nr, s) = (
            ptr(gpu, &stats.exps),
            ptr(gpu, &stats.norms),
            ptr(gpu, &stats.states),
        );
        let mut launch = gpu.stream.launch_builder(finish);
        launch
            .arg(&ci)
            .arg(&chunks_i)
            .arg(&tp)
            .arg(&bp)
            .arg(&pp)
            .arg(&e)
            .arg(&nr)
            .arg(&s);
        // SAFETY: (int, int, const unsigned long long*, const int*, const
        // double*, int*, double*, int*): the inputs as written above; the
        // outputs hold count entries each. The temporaries are freed in
        // stream order after this launch as they drop.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (count.div_ceil(256) as u32, 1, 1),
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
    /// residue planes.
    fn split(
        &self,
        gpu: &Gpu,
        (count, len, kp): (usize, usize, usize),
        (x, rows): (Operand, bool),
        (exps, states): (CUdeviceptr, CUdeviceptr),
        (bits, nmod): (u32, usize),
        (out, plane): (CUdeviceptr, usize),
    ) -> Result<(), Error> {
        let (ci, li, kpi) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            to_i32("kp", kp)?,
        );
        let (ld, rows_i, bits_i, nmod_i, plane_i) = (
            x.ld as i64,
            i32::from(rows),
            bits as i32,
            nmod as i32,
            plane as i64,
        );
        let config = LaunchConfig {
            grid_dim: ((kp / 32).max(1) as u32, count.div_ceil(32) as u32, 1),
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
            .arg(&rows_i)
            .arg(&exps)
            .arg(&states)
            .arg(&bits_i)
            .arg(&nmod_i)
            .arg(&out)
            .arg(&plane_i);
        // SAFETY: (int, int, int, const ELEM*, long long, int, const int*,
        // const int*, int, int, signed char*, long long): x addresses count
        // vectors of len entries; exps and states hold count entries; out
        // holds max(nmod, 1) planes of count×kp bytes, `plane` apart; kp
        // is a multiple of 32, so the grid covers every column.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .map_err(launch_err("split"))
    }

    /// One slice of depth k ≤ [`EMULATION_K_CHUNK`]; its route and the
    /// GPU time of its phases (zero on the native route).
    fn run_slice<T: Element>(
        &self,
        gpu: &Gpu,
        product: DeviceGemm<T>,
    ) -> Result<(Route, [u64; Phase::COUNT]), Error> {
        let DeviceGemm {
            shape: (m, k, n),
            alpha,
            a,
            b,
            beta,
            c,
        } = product;
        let mut clock = Clock::new();
        clock.mark(gpu, Phase::Certificate)?;
        let kp = k.div_ceil(2 * PAD).max(1) * 2 * PAD;
        let np = n.div_ceil(PAD) * PAD;
        // A's rows and B's columns are vectors of their storage's rows or
        // columns, by whether each is a transposed view.
        let rows = self.stats(gpu, (m, k), a, !a.trans)?;
        let cols = self.stats(gpu, (n, k), b, b.trans)?;
        let (row_e, row_s, col_e, col_s) = (
            ptr(gpu, &rows.exps),
            ptr(gpu, &rows.states),
            ptr(gpu, &cols.exps),
            ptr(gpu, &cols.states),
        );
        let budget = {
            let (free, _) = gpu.memory_info()?;
            (free as f64 * CUDA_EMULATION_MEMORY_FRACTION) as usize
        };
        let too_big = |what: &str, needed: usize| Error::OutOfMemory {
            what: format!("the emulated product's {what}"),
            needed: crate::system::format_bytes(needed as u128),
            available: crate::system::format_bytes(budget as u128),
        };

        // Phase 1: the certificate, from the first part of the depth and
        // then, where that could pay, the whole.
        let need: CudaSlice<u8> = alloc_written(gpu, m * n, "needs")?;
        let mut histogram: CudaSlice<u64> = alloc(gpu, 256, "histogram")?;
        let chosen = {
            let mag_b: CudaSlice<i8> = alloc_written(gpu, n * kp, "magnitudes of B")?;
            self.split(
                gpu,
                (n, k, kp),
                (b, b.trans),
                (col_e, col_s),
                (0, 1),
                (ptr(gpu, &mag_b), n * kp),
            )?;
            let fixed = m * n + n * kp;
            let per_row = kp + 4 * np;
            let block = budget.saturating_sub(fixed) / per_row;
            if block == 0 {
                return Err(too_big("certificate", fixed + per_row));
            }
            let block = block.min(m).min(MAX_GRID_Y);
            let mag_a: CudaSlice<i8> = alloc_written(gpu, block * kp, "magnitudes of A")?;
            let g: CudaSlice<i32> = alloc_written(gpu, block * np, "magnitude product")?;
            let target = Target::of(self.goal, (m, k, n), T::DTYPE);
            let t = target.tau();
            // The padding beyond k is zeros: a first depth of k is kp.
            let first = match certificate_depth(k, target) {
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
                        self.split(
                            gpu,
                            (r, k, kp),
                            (a.at::<T>(i0, 0), !a.trans),
                            (row_e + 4 * i0 as u64, row_s + 4 * i0 as u64),
                            (0, 1),
                            (ptr(gpu, &mag_a), r * kp),
                        )?;
                    }
                    int8_product_part(
                        gpu,
                        (r, n, kp, np),
                        span,
                        span.0 > 0,
                        ptr(gpu, &mag_a),
                        ptr(gpu, &mag_b),
                        ptr(gpu, &g),
                    )?;
                    let (i0i, ni, ki, ldg) = (i0 as i32, n as i32, k as i32, np as i64);
                    let config = per_element((r, n));
                    let (gp, rn, cn, np_, hp) = (
                        ptr(gpu, &g),
                        ptr(gpu, &rows.norms),
                        ptr(gpu, &cols.norms),
                        ptr(gpu, &need),
                        ptr(gpu, &histogram),
                    );
                    let mut launch = gpu.stream.launch_builder(&self.need);
                    launch
                        .arg(&i0i)
                        .arg(&ni)
                        .arg(&ki)
                        .arg(&gp)
                        .arg(&ldg)
                        .arg(&row_s)
                        .arg(&rn)
                        .arg(&col_s)
                        .arg(&cn)
                        .arg(&t)
                        .arg(&NORM_SLACK)
                        .arg(&np_)
                        .arg(&hp);
                    // SAFETY: (int, int, int, const int*, long long, const
                    // int*, const double*, const int*, const double*,
                    // double, double, unsigned char*, unsigned long long*):
                    // g holds r rows of np INT32; the statistics cover rows
                    // i0.. and every column; need holds m·n bytes;
                    // histogram 256 counters.
                    unsafe { launch.launch(config) }.map_err(launch_err("certificate"))?;
                    i0 += r;
                }
                let mut counts = vec![0u64; 256];
                gpu.stream
                    .memcpy_dtoh(&histogram, &mut counts[..])
                    .map_err(|e| cuda_err("cannot read the certificate's histogram", e))?;
                gpu.synchronize()?;
                let histogram_host: [u64; 256] = counts.try_into().expect("256 bins");
                let found = route(&histogram_host, m, k, n, target);
                if span.1 == kp || !wants_full_depth(found, k, target) {
                    break settle(found, &histogram_host, k, target);
                }
                gpu.stream
                    .memset_zeros(&mut histogram)
                    .map_err(|e| cuda_err("cannot clear the certificate's histogram", e))?;
                span = if block >= m { (span.1, kp) } else { (0, kp) };
            }
        };
        let (bits, nmod, fixups) = match chosen {
            Route::Native { .. } => {
                cublas::gemm(gpu, GpuPrecision::Fp32, product)?;
                return Ok((chosen, [0; Phase::COUNT]));
            }
            Route::Emulated {
                bits,
                moduli,
                fixups,
            } => (bits, moduli, fixups),
        };

        // Phase 2: residues, INT8 products, CRT.
        clock.mark(gpu, Phase::Split)?;
        let res_b: CudaSlice<i8> = alloc_written(gpu, nmod * n * kp, "residues of B")?;
        self.split(
            gpu,
            (n, k, kp),
            (b, b.trans),
            (col_e, col_s),
            (bits, nmod),
            (ptr(gpu, &res_b), n * kp),
        )?;
        let fixed = m * n + nmod * n * kp;
        let per_row = nmod * (kp + 4 * np);
        let block = budget.saturating_sub(fixed) / per_row;
        if block == 0 {
            return Err(too_big("residues", fixed + per_row));
        }
        let block = block.min(m).min(MAX_GRID_Y);
        let res_a: CudaSlice<i8> = alloc_written(gpu, nmod * block * kp, "residues of A")?;
        let planes: CudaSlice<i32> = alloc_written(gpu, nmod * block * np, "INT32 products")?;
        let fix_count: CudaSlice<u32> = alloc(gpu, 1, "fix-up count")?;
        let cap = usize::try_from(fixups).unwrap_or(usize::MAX).max(1);
        let fix_list: CudaSlice<u64> = alloc(gpu, cap, "fix-up list")?;
        let (alpha64, beta64) = (alpha.to_f64(), beta.to_f64());
        let mut i0 = 0;
        while i0 < m {
            let r = block.min(m - i0);
            clock.mark(gpu, Phase::Split)?;
            self.split(
                gpu,
                (r, k, kp),
                (a.at::<T>(i0, 0), !a.trans),
                (row_e + 4 * i0 as u64, row_s + 4 * i0 as u64),
                (bits, nmod),
                (ptr(gpu, &res_a), block * kp),
            )?;
            clock.mark(gpu, Phase::Products)?;
            for l in 0..nmod {
                int8_product(
                    gpu,
                    (r, n, kp, np),
                    ptr(gpu, &res_a) + (l * block * kp) as u64,
                    ptr(gpu, &res_b) + (l * n * kp) as u64,
                    ptr(gpu, &planes) + (4 * l * block * np) as u64,
                )?;
            }
            let (i0i, ni, nmodi, bitsi, capi) = (
                i0 as i32,
                n as i32,
                nmod as i32,
                bits as i32,
                u32::try_from(cap).unwrap_or(u32::MAX),
            );
            let (plane, ldp, ldc) = ((block * np) as i64, np as i64, c.ld as i64);
            let (pp, needp, fc, fl) = (
                ptr(gpu, &planes),
                ptr(gpu, &need),
                ptr(gpu, &fix_count),
                ptr(gpu, &fix_list),
            );
            let config = per_element((r, n));
            clock.mark(gpu, Phase::Accumulate)?;
            let mut launch = gpu.stream.launch_builder(&self.accumulate);
            launch
                .arg(&i0i)
                .arg(&ni)
                .arg(&pp)
                .arg(&plane)
                .arg(&ldp)
                .arg(&nmodi)
                .arg(&bitsi)
                .arg(&needp)
                .arg(&row_e)
                .arg(&col_e)
                .arg(&alpha64)
                .arg(&beta64)
                .arg(&c.ptr)
                .arg(&ldc)
                .arg(&fc)
                .arg(&fl)
                .arg(&capi);
            // SAFETY: (int, int, const int*, long long, long long, int,
            // int, const unsigned char*, const int*, const int*, double,
            // double, ELEM*, long long, unsigned int*, unsigned long long*,
            // unsigned int): planes holds nmod planes of r rows of np INT32
            // `plane` apart; need, the exponents and C cover rows i0..i0+r
            // and n columns; the list holds `cap` entries.
            unsafe { launch.launch(config) }.map_err(launch_err("accumulation"))?;
            i0 += r;
        }
        let mut listed = [0u32];
        gpu.stream
            .memcpy_dtoh(&fix_count, &mut listed[..])
            .map_err(|e| cuda_err("cannot read the fix-up count", e))?;
        gpu.synchronize()?;
        let listed = listed[0] as usize;
        if listed as u64 != fixups {
            return Err(Error::Cuda(format!(
                "emulated product: {listed} elements listed for native recomputation, the certificate counted {fixups}"
            )));
        }
        if listed > 0 {
            let (count, ni, ki) = (listed as u32, n as i32, k as i32);
            let ((ar, ac), (br, bc)) = (a.strides(), b.strides());
            let (ar, ac, br, bc, ldc) = (ar as i64, ac as i64, br as i64, bc as i64, c.ld as i64);
            let fl = ptr(gpu, &fix_list);
            let config = LaunchConfig {
                grid_dim: (listed.div_ceil(8) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = gpu.stream.launch_builder(&self.fixup);
            launch
                .arg(&fl)
                .arg(&count)
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
            // `count` element indices i·n + j of C; a, b and c are the
            // product's operands, addressed by their element strides.
            unsafe { launch.launch(config) }.map_err(launch_err("fix-up"))?;
        }
        // The temporaries are freed in stream order as they drop.
        Ok((chosen, clock.finish(gpu)?))
    }
}
