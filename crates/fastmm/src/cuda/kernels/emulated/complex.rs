//! Complex products on the GPU by Karatsuba on the residues, the twin of
//! [`crate::emulation::complex`]: one scale per complex row of A and
//! column of B (the parts' statistics merged), the residues of both parts
//! and of their sum modulo each m, three INT8 products per modulus
//! (Aᵣ·Bᵣ, Aᵢ·Bᵢ, (Aᵣ+Aᵢ)·(Bᵣ+Bᵢ)), and one CRT pass that writes both
//! parts of C. The certificate takes depth 2k, its magnitude products
//! G_re = ÂᵣB̂ᵣ + ÂᵢB̂ᵢ and G_im = ÂᵣB̂ᵢ + ÂᵢB̂ᵣ, each element needing the
//! more of its parts' bits.

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::{
    alloc, block_rows, launch_err, memory_budget, padded, per_element, ptr, read_histograms, Batch,
    Carve, Clock, EmulatedGemm, Stats,
};
use crate::cuda::kernels::cublas;
use crate::cuda::kernels::int8::{int8_product, int8_product_part};
use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::{Gpu, Workspace};
use crate::element::Element;
use crate::emulation::certify::{route, settle, EmulationRoute, Sums, Target};
use crate::emulation::Phase;
use crate::error::Error;
use crate::options::GpuPrecision;
use crate::tunables::EMULATION_K_CHUNK;

/// A complex product's operands as device parts (real, imaginary):
/// C ← A·B + β·C (β = 0 never reads C), C row-major.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ComplexGemm<T> {
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// A's parts, m×k.
    pub a: (Operand, Operand),
    /// B's parts, k×n.
    pub b: (Operand, Operand),
    /// C's old value's weight.
    pub beta: T,
    /// C's parts, m×n, row-major.
    pub c: (Operand, Operand),
}

impl<T: Element> ComplexGemm<T> {
    /// The depths p0..p0 + depth of the product.
    fn slice(self, p0: usize, depth: usize) -> ComplexGemm<T> {
        let (m, _, n) = self.shape;
        ComplexGemm {
            shape: (m, depth, n),
            a: (self.a.0.at::<T>(0, p0), self.a.1.at::<T>(0, p0)),
            b: (self.b.0.at::<T>(p0, 0), self.b.1.at::<T>(p0, 0)),
            ..self
        }
    }

    /// The four real products of the classical form, each with its α and
    /// β: Cᵣ = AᵣBᵣ − AᵢBᵢ and Cᵢ = AᵣBᵢ + AᵢBᵣ, the second of each pair
    /// added to the first.
    fn real_products(self) -> [DeviceGemm<T>; 4] {
        let (ar, ai) = self.a;
        let (br, bi) = self.b;
        let (cr, ci) = self.c;
        let part = |a, b, alpha, beta, c| DeviceGemm {
            shape: self.shape,
            alpha,
            a,
            b,
            beta,
            c,
        };
        [
            part(ar, br, T::ONE, self.beta, cr),
            part(ai, bi, T::from_f64(-1.0), T::ONE, cr),
            part(ar, bi, T::ONE, self.beta, ci),
            part(ai, br, T::ONE, T::ONE, ci),
        ]
    }
}

/// The deepest slice whose INT32 sums stay exact: Re = P₁ − P₂ must stay
/// within the CRT's 2^30, and the certificate sums 2k magnitudes.
pub(crate) const COMPLEX_K_CHUNK: usize = EMULATION_K_CHUNK / 2;

impl EmulatedGemm {
    /// A complex product by Karatsuba on the residues, on the GPU's
    /// stream, in slices of depth at most [`COMPLEX_K_CHUNK`] added with
    /// β = 1; waits for each slice's certificate midway.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a transposed C; the GPU's errors.
    pub fn run_complex<T: Element>(&self, gpu: &Gpu, product: ComplexGemm<T>) -> Result<(), Error> {
        let (m, k, n) = product.shape;
        if product.c.0.trans || product.c.1.trans {
            return Err(Error::InvalidOption(
                "the emulated complex product writes row-major C parts only".into(),
            ));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            // C ← β·C: the four real products take no depth; cuBLAS
            // scales C.
            return product
                .real_products()
                .into_iter()
                .step_by(2)
                .try_for_each(|p| cublas::gemm(gpu, GpuPrecision::Fp32, p));
        }
        let mut scratch = gpu.workspace();
        let mut beta = product.beta;
        let mut p0 = 0;
        while p0 < k {
            let depth = (k - p0).min(COMPLEX_K_CHUNK);
            let slice = ComplexGemm {
                beta,
                ..product.slice(p0, depth)
            };
            let (route, phase_us) = self.run_complex_slice(gpu, &mut scratch, slice)?;
            self.tally.lock().expect("tally lock").add(route, phase_us);
            p0 += depth;
            beta = T::ONE;
        }
        Ok(())
    }

    /// The statistics of complex vectors from their parts'.
    fn merged(&self, gpu: &Gpu, count: usize, re: &Stats, im: &Stats) -> Result<Stats, Error> {
        let stats = Stats {
            exps: alloc(gpu, count, "exponents")?,
            norms: alloc(gpu, count, "norms")?,
            states: alloc(gpu, count, "states")?,
            tops: alloc(gpu, 1, "largest norms")?,
        };
        let ci = to_i32("count", count)?;
        let (x, y, out) = (re.at(gpu), im.at(gpu), stats.at(gpu));
        let mut launch = gpu.stream.launch_builder(&self.complex[0]);
        launch
            .arg(&ci)
            .arg(&x.exps)
            .arg(&x.norms)
            .arg(&x.states)
            .arg(&y.exps)
            .arg(&y.norms)
            .arg(&y.states)
            .arg(&out.exps)
            .arg(&out.norms)
            .arg(&out.states)
            .arg(&stats.tops);
        // SAFETY: (int, const int*, const double*, const int*, const int*,
        // const double*, const int*, int*, double*, int*, unsigned long
        // long*): each statistics array holds count entries, tops one
        // zeroed entry.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: (count.div_ceil(256) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map_err(launch_err("complex statistics"))?;
        Ok(stats)
    }

    /// out ← x + y modulo each of the first `nmod` moduli, bytewise, over
    /// planes of `bytes` bytes (a multiple of 4) that lie `plane` bytes
    /// apart.
    fn add_residues(
        &self,
        gpu: &Gpu,
        (x, y, out): (CUdeviceptr, CUdeviceptr, CUdeviceptr),
        (bytes, plane, nmod): (usize, usize, usize),
    ) -> Result<(), Error> {
        debug_assert!(bytes % 4 == 0 && plane % 4 == 0);
        let (words, plane_words) = ((bytes / 4) as i64, (plane / 4) as i64);
        let mut launch = gpu.stream.launch_builder(&self.complex[1]);
        launch
            .arg(&words)
            .arg(&plane_words)
            .arg(&x)
            .arg(&y)
            .arg(&out);
        // SAFETY: (long long, long long, const unsigned int*, const
        // unsigned int*, unsigned int*): x, y and out each hold nmod
        // planes of `words` words, `plane_words` apart, 4-byte aligned.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim: ((bytes / 4).div_ceil(256).max(1) as u32, nmod as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            })
        }
        .map(|_| ())
        .map_err(launch_err("residues of the parts' sums"))
    }

    /// One slice of depth k ≤ [`COMPLEX_K_CHUNK`]; its route and the GPU
    /// time of its phases (zero on the native route).
    fn run_complex_slice<T: Element>(
        &self,
        gpu: &Gpu,
        scratch: &mut Workspace<'_>,
        product: ComplexGemm<T>,
    ) -> Result<(EmulationRoute, [u64; Phase::COUNT]), Error> {
        let ComplexGemm {
            shape: (m, k, n),
            a: (ar, ai),
            b: (br, bi),
            beta,
            c: (cr, ci),
        } = product;
        let depth = 2 * k;
        let mut clock = Clock::new();
        clock.mark(gpu, Phase::Statistics)?;
        let (kp, np) = padded(k, n);
        let row_parts = [
            self.stats(gpu, (m, k), (ar, !ar.trans), Batch::ONE)?,
            self.stats(gpu, (m, k), (ai, !ai.trans), Batch::ONE)?,
        ];
        let col_parts = [
            self.stats(gpu, (n, k), (br, br.trans), Batch::ONE)?,
            self.stats(gpu, (n, k), (bi, bi.trans), Batch::ONE)?,
        ];
        let row_stats = self.merged(gpu, m, &row_parts[0], &row_parts[1])?;
        let col_stats = self.merged(gpu, n, &col_parts[0], &col_parts[1])?;
        drop((row_parts, col_parts));
        let (rows, cols) = (row_stats.at(gpu), col_stats.at(gpu));
        let budget = memory_budget(gpu, scratch.capacity())?;
        let mut carve = Carve::default();
        carve.take(m * n);
        let kept = carve.end();
        let histogram: CudaSlice<u64> = alloc(gpu, 256, "histogram")?;
        let target = Target::of(self.goal, (m, depth, n), T::DTYPE);

        // Phase 1: B's parts' magnitudes, then per block of rows A's, the
        // two magnitude products and each element's need.
        let chosen = {
            let fixed = m * n + 2 * n * kp;
            let per_row = 2 * kp + 8 * np;
            let block = block_rows(budget, (fixed, per_row), m, "complex certificate")?;
            let (need, [mbr, mbi, mar, mai, g_re, g_im]) = carve.place(
                scratch,
                [
                    n * kp,
                    n * kp,
                    block * kp,
                    block * kp,
                    4 * block * np,
                    4 * block * np,
                ],
                0,
            )?;
            clock.mark(gpu, Phase::Magnitudes)?;
            for (part, out) in [(br, mbr), (bi, mbi)] {
                self.split(
                    gpu,
                    (n, k, kp),
                    (part, part.trans, Batch::ONE),
                    cols,
                    (0, 1),
                    (out, n * kp),
                )?;
            }
            let mut i0 = 0;
            while i0 < m {
                let r = block.min(m - i0);
                clock.mark(gpu, Phase::Magnitudes)?;
                for (part, out) in [(ar, mar), (ai, mai)] {
                    self.split(
                        gpu,
                        (r, k, kp),
                        (part.at::<T>(i0, 0), !part.trans, Batch::ONE),
                        rows.skip(i0),
                        (0, 1),
                        (out, r * kp),
                    )?;
                }
                let dims = (r, n, kp, np);
                clock.mark(gpu, Phase::MagnitudeProduct)?;
                int8_product(gpu, dims, mar, mbr, g_re)?;
                int8_product_part(gpu, dims, (0, kp), true, mai, mbi, g_re)?;
                int8_product(gpu, dims, mar, mbi, g_im)?;
                int8_product_part(gpu, dims, (0, kp), true, mai, mbr, g_im)?;
                clock.mark(gpu, Phase::Needs)?;
                self.needs(
                    gpu,
                    (i0, r, n, depth),
                    (g_re, g_im, np, 0),
                    (rows, 0),
                    (cols, 0),
                    target.tau(),
                    (need, 0, ptr(gpu, &histogram)),
                    1,
                )?;
                i0 += r;
            }
            let counts = read_histograms(gpu, &histogram, 1)?[0];
            let sums =
                Sums::with_norms(depth, row_stats.widest(gpu)?[0], col_stats.widest(gpu)?[0]);
            settle(route(&counts, m, sums, n, target), &counts, sums, target)
        };
        let Some((bits, nmod, fixups)) = chosen.emulated() else {
            for p in product.real_products() {
                cublas::gemm(gpu, GpuPrecision::Fp32, p)?;
            }
            return Ok((chosen, [0; Phase::COUNT]));
        };

        // Phase 2: residues of both parts and their sums, three INT8
        // products per modulus, the CRT of both parts.
        clock.mark(gpu, Phase::Split)?;
        let fixed = m * n + 3 * nmod * n * kp;
        let per_row = nmod * (3 * kp + 12 * np);
        let block = block_rows(budget, (fixed, per_row), m, "complex residues")?;
        let (need, [rbr, rbi, rbs, rar, rai, ras, planes]) = carve.place(
            scratch,
            [
                nmod * n * kp,
                nmod * n * kp,
                nmod * n * kp,
                nmod * block * kp,
                nmod * block * kp,
                nmod * block * kp,
                12 * nmod * block * np,
            ],
            kept,
        )?;
        for (part, out) in [(br, rbr), (bi, rbi)] {
            self.split(
                gpu,
                (n, k, kp),
                (part, part.trans, Batch::ONE),
                cols,
                (bits, nmod),
                (out, n * kp),
            )?;
        }
        self.add_residues(gpu, (rbr, rbi, rbs), (n * kp, n * kp, nmod))?;
        let fix_count: CudaSlice<u32> = alloc(gpu, 1, "fix-up count")?;
        let cap = usize::try_from(fixups).unwrap_or(usize::MAX).max(1);
        let fix_list: CudaSlice<u64> = alloc(gpu, cap, "fix-up list")?;
        let (ni, nmodi, bitsi, capi) = (
            to_i32("n", n)?,
            nmod as i32,
            bits as i32,
            u32::try_from(cap).unwrap_or(u32::MAX),
        );
        let (plane, part, ldp, ldc) = (
            (block * np) as i64,
            (nmod * block * np) as i64,
            np as i64,
            cr.ld as i64,
        );
        if ci.ld != cr.ld {
            return Err(Error::InvalidOption(
                "the emulated complex product's C parts differ in leading dimension".into(),
            ));
        }
        let beta64 = beta.to_f64();
        let (fc, fl) = (ptr(gpu, &fix_count), ptr(gpu, &fix_list));
        let mut i0 = 0;
        while i0 < m {
            let r = block.min(m - i0);
            clock.mark(gpu, Phase::Split)?;
            for (part, out) in [(ar, rar), (ai, rai)] {
                self.split(
                    gpu,
                    (r, k, kp),
                    (part.at::<T>(i0, 0), !part.trans, Batch::ONE),
                    rows.skip(i0),
                    (bits, nmod),
                    (out, block * kp),
                )?;
            }
            self.add_residues(gpu, (rar, rai, ras), (r * kp, block * kp, nmod))?;
            clock.mark(gpu, Phase::Products)?;
            let dims = (r, n, kp, np);
            for l in 0..nmod {
                let (at_a, at_b) = ((l * block * kp) as u64, (l * n * kp) as u64);
                for (s, (x, y)) in [(rar, rbr), (rai, rbi), (ras, rbs)].into_iter().enumerate() {
                    let out = planes + (4 * ((s * nmod + l) * block * np)) as u64;
                    int8_product(gpu, dims, x + at_a, y + at_b, out)?;
                }
            }
            clock.mark(gpu, Phase::Accumulate)?;
            let (i0i, exps_r, exps_c) = (to_i32("row", i0)?, rows.exps, cols.exps);
            let mut launch = gpu.stream.launch_builder(&self.complex[2]);
            launch
                .arg(&i0i)
                .arg(&ni)
                .arg(&planes)
                .arg(&plane)
                .arg(&part)
                .arg(&ldp)
                .arg(&nmodi)
                .arg(&bitsi)
                .arg(&need)
                .arg(&exps_r)
                .arg(&exps_c)
                .arg(&beta64)
                .arg(&cr.ptr)
                .arg(&ci.ptr)
                .arg(&ldc)
                .arg(&fc)
                .arg(&fl)
                .arg(&capi);
            // SAFETY: (int, int, const int*, long long, long long, long
            // long, int, int, const unsigned char*, const int*, const
            // int*, double, ELEM*, ELEM*, long long, unsigned int*,
            // unsigned long long*, unsigned int): planes holds 3·nmod
            // INT32 planes of r rows (ld np) `plane` entries apart, the
            // three products `part` entries apart; the needs cover m·n
            // elements, the exponents every row and column; C's parts
            // are m×n row-major with ld ldc; the list holds cap entries.
            unsafe { launch.launch(per_element((r, n), 1)) }.map_err(launch_err("complex CRT"))?;
            i0 += r;
        }
        let mut listed = [0u32];
        gpu.stream
            .memcpy_dtoh(&fix_count, &mut listed[..])
            .map_err(|e| cuda_err("cannot read the fix-up count", e))?;
        gpu.synchronize()?;
        // The listed elements natively, as the classical form's four real
        // products: each pair's second adds to its first.
        for p in product.real_products() {
            self.fix_up(gpu, p, (listed[0], fixups), fl)?;
        }
        Ok((chosen, clock.finish(gpu)?))
    }
}
