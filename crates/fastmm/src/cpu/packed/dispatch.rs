//! Kernels are data: for each element type a table of kernels, best first,
//! and a choice resolved from the CPU's features, or forced by an option or
//! `FASTMM_CPU_KERNEL`.

use std::any::Any;
use std::sync::OnceLock;

use crate::config::Config;
use crate::cpu::packed::blocking::{analytical_blocks, CoreRates};
use crate::cpu::packed::kernel::Microkernel;
use crate::cpu::packed::kernels::generic::Generic;
use crate::cpu::packed::{direct, driver};
use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::options::{BlockSizes, CpuKernel};
use crate::system::cache_sizes;

/// Whether this CPU can run the kernels of `family` (the same answer for
/// every element type).
pub(crate) fn is_supported(family: CpuKernel) -> bool {
    kernels::<f32>()
        .iter()
        .any(|k| k.family == family && (k.is_available)())
}

/// The signature of [`Microkernel::run`].
pub(crate) type MicrokernelFn<T> =
    unsafe fn(usize, T, *const T, *const T, T, (*mut T, isize, isize));

/// The driver instantiated for one kernel: C ← αAB + βC on a thread count.
pub(crate) type GemmFn<T> =
    fn(T, MatRef<'_, T>, MatRef<'_, T>, T, MatMut<'_, T>, &BlockSizes, usize);

/// The direct (unpacked) driver instantiated for one kernel: C ← αAB + βC
/// with k in steps of the last argument (see [`direct::gemm_direct`]).
pub(crate) type DirectFn<T> = fn(T, MatRef<'_, T>, MatRef<'_, T>, T, MatMut<'_, T>, usize);

/// The fused driver instantiated for one kernel (see [`driver::gemm_fused`]).
pub(crate) type FusedFn<T> = unsafe fn(driver::Fused<'_, '_, T>, &BlockSizes, usize);

/// One row of a kernel table: a microkernel and the driver instantiated for it.
pub(crate) struct PackedKernel<T: Element> {
    /// The family it belongs to.
    pub family: CpuKernel,
    /// Name shown in reports, e.g. `avx512 8x48`.
    pub name: &'static str,
    /// Tile rows.
    pub mr: usize,
    /// Tile columns.
    pub nr: usize,
    pub(crate) is_available: fn() -> bool,
    #[cfg_attr(not(feature = "dev"), allow(dead_code))]
    pub(crate) micro: MicrokernelFn<T>,
    pub(crate) gemm: GemmFn<T>,
    pub(crate) fused: FusedFn<T>,
    /// The direct driver, for kernels with their own direct code.
    pub(crate) direct: Option<DirectFn<T>>,
    /// The analytical blocks, worked out on first use for a C that fits
    /// in L2 and one that does not (the only way they depend on the
    /// product): a small product's call is a few hundred nanoseconds, and
    /// working them out took a fifth of a 4³ call.
    analytical: [OnceLock<BlockSizes>; 2],
}

impl<T: Element> PackedKernel<T> {
    /// The table row for kernel K of `family`.
    pub(crate) const fn of<K: Microkernel<T>>(family: CpuKernel) -> PackedKernel<T> {
        PackedKernel {
            family,
            name: K::NAME,
            mr: K::MR,
            nr: K::NR,
            is_available: K::is_available,
            micro: K::run,
            gemm: driver::gemm::<T, K>,
            fused: driver::gemm_fused::<T, K>,
            direct: if K::DIRECT {
                Some(direct::gemm_direct::<T, K>)
            } else {
                None
            },
            analytical: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// Throughput of the microkernel alone, in GFLOP/s: `calls` calls on
    /// cache-resident panels of depth `kc`, updating one C tile (β = 1).
    /// This is the ceiling the whole GEMM can approach.
    #[cfg(feature = "dev")]
    pub fn microkernel_gflops(&self, kc: usize, calls: usize) -> f64 {
        self.streaming_gflops(kc, 1, self.nr, calls)
    }

    /// Throughput of the microkernel as the driver's inner loop runs it, in
    /// GFLOP/s: one B̃ micro-panel (kc deep) against `a_panels` micro-panels
    /// of Ã in turn (an MC×kc block, from L2 when it is larger than L1),
    /// each tile added into the next MR rows of a column of tiles of a C
    /// with `ldc` columns, `calls` calls in all.
    #[cfg(feature = "dev")]
    pub fn streaming_gflops(&self, kc: usize, a_panels: usize, ldc: usize, calls: usize) -> f64 {
        let a = vec![T::from_f64(0.5); a_panels * self.mr * kc];
        let b = vec![T::from_f64(0.25); kc * self.nr];
        let ldc = ldc.max(self.nr);
        let mut c = vec![T::ZERO; a_panels * self.mr * ldc];
        assert!((self.is_available)());
        let start = std::time::Instant::now();
        for call in 0..calls {
            let panel = call % a_panels;
            // SAFETY: panel < a_panels, so the Ã panel (MR·kc elements) and
            // the MR×NR tile at row panel·MR (row stride ldc ≥ NR) are inside
            // their buffers; the kernel's features were checked above.
            unsafe {
                (self.micro)(
                    kc,
                    T::ONE,
                    a.as_ptr().add(panel * self.mr * kc),
                    b.as_ptr(),
                    T::ONE,
                    (c.as_mut_ptr().add(panel * self.mr * ldc), ldc as isize, 1),
                )
            };
        }
        let seconds = start.elapsed().as_secs_f64();
        std::hint::black_box(&c);
        2.0 * (self.mr * self.nr * kc * calls) as f64 / seconds / 1e9
    }

    /// The block sizes `packed` uses unless told otherwise for a product
    /// whose C is m×n: where C is larger than L2, the tuning file's for this
    /// kernel and type (see [`crate::tuning`]; `fastmm tune` measures them
    /// on such a product), else the analytical ones, which depend on
    /// whether C fits in L2 ([`BlockSizes::for_kernel`]).
    pub fn default_blocks_for(&self, m: usize, n: usize) -> BlockSizes {
        let c_bytes = m.saturating_mul(n).saturating_mul(size_of::<T>());
        let tuned = (c_bytes > cache_sizes().l2)
            .then(|| {
                Config::get()
                    .tuned_cpu_type(T::DTYPE)?
                    .blocks_for(self.name)
            })
            .flatten();
        tuned.unwrap_or_else(|| self.analytical_blocks_for(c_bytes))
    }

    /// The analytical block sizes for this kernel on this machine's caches.
    #[cfg(feature = "dev")]
    pub fn analytical_blocks(&self) -> BlockSizes {
        self.analytical_blocks_for(0)
    }

    /// The analytical block sizes for a product whose C takes `c_bytes`.
    pub fn analytical_blocks_for(&self, c_bytes: usize) -> BlockSizes {
        let caches = cache_sizes();
        let large = c_bytes > caches.l2;
        *self.analytical[usize::from(large)].get_or_init(|| {
            analytical_blocks(
                caches,
                size_of::<T>(),
                self.mr,
                self.nr,
                CoreRates::of(self.family),
                c_bytes,
            )
        })
    }
}

macro_rules! kernel_table {
    ($fn_name:ident, $t:ty, $mr:expr, $nr:expr, $avx512:ident, $avx2:ident) => {
        /// Kernel table for this type, fastest first; the last row is the generic twin.
        fn $fn_name() -> &'static &'static [PackedKernel<$t>] {
            #[cfg(target_arch = "x86_64")]
            {
                use crate::cpu::packed::kernels::x86;
                static ROWS: [PackedKernel<$t>; 3] = [
                    PackedKernel::of::<x86::$avx512>(CpuKernel::Avx512),
                    PackedKernel::of::<x86::$avx2>(CpuKernel::Avx2),
                    PackedKernel::of::<Generic<$t, $mr, $nr>>(CpuKernel::Generic),
                ];
                static TABLE: &[PackedKernel<$t>] = &ROWS;
                &TABLE
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                static ROWS: [PackedKernel<$t>; 1] = [PackedKernel::of::<Generic<$t, $mr, $nr>>(
                    CpuKernel::Generic,
                )];
                static TABLE: &[PackedKernel<$t>] = &ROWS;
                &TABLE
            }
        }
    };
}

kernel_table!(f32_kernels, f32, 4, 8, Avx512F32, Avx2F32);
kernel_table!(f64_kernels, f64, 4, 4, Avx512F64, Avx2F64);
kernel_table!(i32_kernels, i32, 4, 8, Avx512I32, Avx2I32);
kernel_table!(i64_kernels, i64, 4, 4, Avx512I64, Avx2I64);

/// The kernel table of T, fastest first; the last row is the generic twin.
pub(crate) fn kernels<T: Element>() -> &'static [PackedKernel<T>] {
    let tables: [&'static dyn Any; 4] =
        [f32_kernels(), f64_kernels(), i32_kernels(), i64_kernels()];
    tables
        .into_iter()
        .find_map(|table| table.downcast_ref::<&'static [PackedKernel<T>]>())
        .copied()
        .expect("every element type has a kernel table")
}

/// The family `packed` runs unless an option names one:
/// `FASTMM_CPU_KERNEL` if set, else the fastest the CPU supports.
pub(crate) fn default_cpu_kernel() -> Result<CpuKernel, Error> {
    Ok(Config::get().cpu_kernel()?.unwrap_or_else(|| {
        CpuKernel::ALL
            .iter()
            .copied()
            .find(|&k| is_supported(k))
            .unwrap_or(CpuKernel::Generic)
    }))
}

/// The kernel of `family` (or of the default) for T, checked against the
/// CPU.
pub(crate) fn select_kernel<T: Element>(
    family: Option<CpuKernel>,
) -> Result<&'static PackedKernel<T>, Error> {
    let family = match family {
        Some(f) => f,
        None => default_cpu_kernel()?,
    };
    let kernel = kernels::<T>()
        .iter()
        .find(|k| k.family == family)
        .ok_or_else(|| Error::Unsupported {
            algorithm: "packed",
            what: format!("the {family} kernel on this architecture"),
        })?;
    if !(kernel.is_available)() {
        return Err(Error::Unsupported {
            algorithm: "packed",
            what: format!("the {family} kernel on this CPU (it lacks the instructions)"),
        });
    }
    Ok(kernel)
}
