//! The `emulated` algorithm on i32 and i64: exact wrapping products from
//! INT8 tensor-core products of the operands' balanced byte digits
//! ([`crate::emulation::bytes`], whose CPU code is the twin of every step
//! here). The INT8 products go through cuBLAS in the layout the emulated
//! float product uses (both operands k-contiguous), the splitting and the
//! combination through `kernels/bytes.cu`.
//!
//! B's D digit planes are made once; then per block of rows of A (as tall
//! as the GPU's free memory allows) its D planes, and per slice of k
//! ([`slice_depth`]) the D INT32 planes P_s = Σ_{p+q=s} A_p·B_q, each
//! accumulated over its s + 1 products, combined into C with α and β.

use std::sync::Mutex;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use crate::cuda::kernels::int8::{
    alloc_written, int8_product_part, launch_err, ptr, Clock, MAX_GRID_Y,
};
use crate::cuda::kernels::operand::{to_i32, DeviceGemm, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::CUDA_EMULATION_MEMORY_FRACTION;
use crate::element::Element;
use crate::emulation::bytes::{products_per_slice, slice_depth};
use crate::emulation::{EmulationRoute, Phase, Tally};
use crate::error::Error;

/// Widths of the planes are padded to this many elements (cuBLAS's
/// integer kernels want leading dimensions that are multiples of 4; 16
/// keeps every INT8 row 16-byte aligned).
const PAD: usize = 16;

/// `bytes.cu`'s kernels for one integer type, and what its products did
/// since the tally was last taken.
pub(crate) struct BytesGemm {
    split: CudaFunction,
    combine: CudaFunction,
    tally: Mutex<Tally>,
}

impl BytesGemm {
    /// The kernels for T (i32 or i64), compiled or fetched.
    pub fn resolve<T: Element>(gpu: &Gpu) -> Result<BytesGemm, Error> {
        if !T::DTYPE.is_integer() {
            return Err(Error::Unsupported {
                algorithm: "emulated (byte planes)",
                what: format!("{} (floats take Ozaki scheme II)", T::DTYPE),
            });
        }
        let key = KernelKey {
            source: KernelSource::Bytes,
            dtype: T::DTYPE,
            tile: 0,
        };
        let [split, combine] = KernelSource::BYTES_ENTRIES;
        Ok(BytesGemm {
            split: gpu.entry_function(key, split)?,
            combine: gpu.entry_function(key, combine)?,
            tally: Mutex::new(Tally::default()),
        })
    }

    /// What the products did since the last call, and a fresh count.
    pub fn take_tally(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().expect("tally lock"))
    }

    /// `count` vectors of `len` entries (rows of x when `rows`, else
    /// columns) into `digits` k-contiguous INT8 planes of width kp at
    /// `out`, `plane` bytes apart.
    fn split(
        &self,
        gpu: &Gpu,
        (count, len, kp): (usize, usize, usize),
        x: Operand,
        rows: bool,
        out: CUdeviceptr,
        plane: usize,
    ) -> Result<(), Error> {
        let (ci, li, kpi) = (
            to_i32("count", count)?,
            to_i32("len", len)?,
            to_i32("kp", kp)?,
        );
        let (ld, rows_i, plane_i) = (x.ld as i64, i32::from(rows), plane as i64);
        let config = LaunchConfig {
            grid_dim: (kp.div_ceil(32) as u32, count.div_ceil(32) as u32, 1),
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
            .arg(&out)
            .arg(&plane_i);
        // SAFETY: (int, int, int, const ELEM*, long long, int, signed
        // char*, long long): x addresses count vectors of len entries with
        // this ld; out holds DIGITS planes of count×kp bytes, `plane`
        // apart; the grid covers every (vector, column) pair.
        unsafe { launch.launch(config) }.map_err(launch_err("byte split"))?;
        Ok(())
    }

    /// Rows i0..i0 + rows of C ← α·Σ_s 256^s·P_s + β·C (C read only where
    /// `read_c`), the INT32 planes `plane` elements apart, rows of np.
    fn combine<T: Element>(
        &self,
        gpu: &Gpu,
        (i0, rows, n, np): (usize, usize, usize, usize),
        planes: CUdeviceptr,
        alpha: T,
        (beta, read_c): (T, bool),
        c: Operand,
    ) -> Result<(), Error> {
        let (i0i, ni) = (to_i32("i0", i0)?, to_i32("n", n)?);
        let (plane, ldp, ldc, read) = (
            (rows * np) as i64,
            np as i64,
            c.ld as i64,
            i32::from(read_c),
        );
        let config = LaunchConfig {
            grid_dim: (n.div_ceil(256) as u32, rows as u32, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = gpu.stream.launch_builder(&self.combine);
        launch
            .arg(&i0i)
            .arg(&ni)
            .arg(&planes)
            .arg(&plane)
            .arg(&ldp)
            .arg(&alpha)
            .arg(&beta)
            .arg(&read)
            .arg(&c.ptr)
            .arg(&ldc);
        // SAFETY: (int, int, const int*, long long, long long, ELEM, ELEM,
        // int, ELEM*, long long), ELEM being T: the planes hold DIGITS
        // planes of rows×np INT32; C has rows i0..i0 + rows of n entries
        // with this ld; rows ≤ 65535 (the grid's y extent).
        unsafe { launch.launch(config) }.map_err(launch_err("byte combine"))?;
        Ok(())
    }

    /// c ← α·a·b + β·c (β = 0 never reads c), wrapping, on the GPU's
    /// stream.
    pub fn run<T: Element>(
        &self,
        gpu: &Gpu,
        DeviceGemm {
            shape: (m, k, n),
            alpha,
            a,
            b,
            beta,
            c,
        }: DeviceGemm<T>,
    ) -> Result<(), Error> {
        if m == 0 || n == 0 {
            return Ok(());
        }
        let digits = std::mem::size_of::<T>();
        let kp = k.max(1).next_multiple_of(PAD);
        let np = n.next_multiple_of(PAD);
        let mut clock = Clock::new();
        clock.mark(gpu, Phase::Split)?;
        // B's planes, once: n vectors (its columns, which are its
        // storage's rows when B is a transposed view) of k entries.
        let b_bytes = digits * n * kp;
        let b_planes = alloc_written::<i8>(gpu, b_bytes, "B's byte planes")?;
        self.split(gpu, (n, k, kp), b, b.trans, ptr(gpu, &b_planes), n * kp)?;
        // Rows of A per block: its planes and the INT32 planes of C.
        let (free, _) = gpu.memory_info()?;
        let budget = (free as f64 * CUDA_EMULATION_MEMORY_FRACTION) as usize;
        let per_row = digits * kp + 4 * digits * np;
        let rows_max = (budget / per_row).min(m).min(MAX_GRID_Y);
        if rows_max == 0 {
            return Err(Error::OutOfMemory {
                what: "the byte planes of B and of one row of A and C".into(),
                needed: crate::system::format_bytes((b_bytes + per_row) as u128),
                available: crate::system::format_bytes(free as u128 + b_bytes as u128),
            });
        }
        let a_planes = alloc_written::<i8>(gpu, digits * rows_max * kp, "A's byte planes")?;
        // Every INT32 plane is written by the first product of its slice.
        let sums = alloc_written::<i32>(gpu, digits * rows_max * np, "INT32 planes")?;
        let (a_at, sums_at) = (ptr(gpu, &a_planes), ptr(gpu, &sums));
        let b_at = ptr(gpu, &b_planes);
        let depth = slice_depth(digits);
        let mut slices = 0u32;
        for i0 in (0..m).step_by(rows_max) {
            let rows = rows_max.min(m - i0);
            clock.mark(gpu, Phase::Split)?;
            // A's rows are its storage's rows, or its columns when A is
            // a transposed view.
            let a_block = a.at::<T>(i0, 0);
            self.split(gpu, (rows, k, kp), a_block, !a.trans, a_at, rows * kp)?;
            let mut slice_beta = (beta, beta != T::ZERO);
            for p0 in (0..kp).step_by(depth) {
                let p1 = (p0 + depth).min(kp);
                clock.mark(gpu, Phase::Products)?;
                for s in 0..digits {
                    for p in 0..=s {
                        int8_product_part(
                            gpu,
                            (rows, n, kp, np),
                            (p0, p1),
                            p > 0,
                            a_at + (p * rows * kp) as u64,
                            b_at + ((s - p) * n * kp) as u64,
                            sums_at + (4 * s * rows * np) as u64,
                        )?;
                    }
                }
                clock.mark(gpu, Phase::Accumulate)?;
                self.combine(gpu, (i0, rows, n, np), sums_at, alpha, slice_beta, c)?;
                slice_beta = (T::ONE, true);
                if i0 == 0 {
                    slices += 1;
                }
            }
        }
        let phase_us = clock.finish(gpu)?;
        let route = EmulationRoute::Emulated {
            bits: 8 * digits as u32,
            moduli: products_per_slice(digits),
            fixups: 0,
        };
        let mut tally = self.tally.lock().expect("tally lock");
        for slice in 0..slices {
            // The phases' times once, with the first slice.
            let us = if slice == 0 {
                phase_us
            } else {
                [0; Phase::COUNT]
            };
            tally.add(route, us);
        }
        Ok(())
    }
}
