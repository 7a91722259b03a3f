//! Strassen and Winograd on a GPU: the GPU's crossovers and default memory
//! schedule, and the backend of the fast algorithms: the same recursion as on the CPU
//! ([`crate::strassen::engine`]) with the classical products on cuBLAS or an
//! own kernel (`--base`), the linear combinations in `kernels/combine.cu`,
//! and the temporaries in device memory, allocated once per product (seed
//! 000 §2.2.1's per-level workspace, or seed 003's few temporaries with
//! `--variant frugal`) and reused by repeated runs of the same product.

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use crate::config::Config;
use crate::cuda::kernels::fused::{FusedKernel, FusedProduct};
use crate::cuda::kernels::gemm::launch::{combine_launch_config, launch_combine};
use crate::cuda::kernels::gemm::{default_base, to_i32, ClassicalGemm, DeviceGemm, Operand};
use crate::cuda::runtime::compile::{KernelKey, KernelSource};
use crate::cuda::runtime::cuda_err;
use crate::cuda::runtime::device::Gpu;
use crate::cuda::tunables::{
    CUDA_COMBINE_ROWS_PER_BLOCK, CUDA_STRASSEN_AUTO_START, CUDA_STRASSEN_AUTO_THRESHOLD,
    CUDA_STRASSEN_AUTO_THRESHOLD_F64, CUDA_STRASSEN_AUTO_THRESHOLD_INT,
};
use crate::element::{DType, Element};
use crate::error::Error;
use crate::options::{Algorithm, GemmOptions, Variant};
use crate::strassen::backend::{Backend, Block, Combination, Primitive, Store};
use crate::strassen::engine::{self, Plan};
use crate::strassen::{Crossover, Explained, Recursed, Scheme};

/// Where the recursion stops on the GPU named `gpu_name`: an explicit
/// threshold (applying a first level from it too), else the tuning file's
/// crossover for a GPU of that name, else the measured one for the type
/// (see the tunables).
pub(crate) fn crossover(gpu_name: &str, opts: &GemmOptions, dtype: DType) -> Crossover {
    if let Some(given) = Crossover::given(&opts.fast) {
        return given;
    }
    let tuned = Config::get()
        .tuned_cuda(gpu_name)
        .and_then(|t| t.of(dtype))
        .and_then(|t| t.strassen());
    if let Some((threshold, start)) = tuned {
        return Crossover { threshold, start };
    }
    match dtype {
        DType::F32 => Crossover {
            threshold: CUDA_STRASSEN_AUTO_THRESHOLD,
            start: CUDA_STRASSEN_AUTO_START,
        },
        DType::F64 => Crossover {
            threshold: CUDA_STRASSEN_AUTO_THRESHOLD_F64,
            start: 0,
        },
        DType::I32 | DType::I64 => Crossover {
            threshold: CUDA_STRASSEN_AUTO_THRESHOLD_INT,
            start: 0,
        },
    }
}

/// The classical product under the recursion: the option, else cuBLAS for
/// floats and `cuda-fast` for integers.
pub(crate) fn base(opts: &GemmOptions, dtype: DType) -> Algorithm {
    match opts.fast.base {
        Some(base) if base != Algorithm::Auto => base,
        _ => default_base(dtype),
    }
}

/// The recursion for `variant` on the GPU named `gpu_name`.
pub(crate) fn plan<T: Element>(
    gpu_name: &str,
    scheme: Scheme,
    variant: Variant,
    opts: &GemmOptions,
) -> Plan {
    crate::strassen::plan(
        scheme,
        variant,
        crossover(gpu_name, opts, T::DTYPE),
        T::DTYPE,
        opts,
        0,
    )
}

/// The levels and temporary workspace of C ← αAB + βC (A m×k, B k×n)
/// with `variant` on the GPU named `gpu_name`, without running it.
pub(crate) fn dry_run<T: Element>(
    gpu_name: &str,
    scheme: Scheme,
    variant: Variant,
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Recursed {
    engine::dry_run::<T, CudaBackend<'static, T>>(
        plan::<T>(gpu_name, scheme, variant, opts),
        beta_is_zero,
        shape,
    )
}

/// The memory schedule for C ← αAB + βC when `opts` names none: `batched`,
/// the fastest on the H100 (docs/results.md), when its temporaries and A,
/// B and C fit in the GPU's free memory, else `frugal`, which needs 2–3
/// temporaries per level. An explicit variant is returned as given.
pub(crate) fn variant<T: Element>(
    gpu: &Gpu,
    scheme: Scheme,
    (m, k, n): (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Result<Variant, Error> {
    if let Some(variant) = opts.fast.variant {
        return Ok(variant);
    }
    let temporaries = dry_run::<T>(
        &gpu.info().name,
        scheme,
        Variant::Batched,
        (m, k, n),
        beta_is_zero,
        opts,
    )
    .workspace_elements;
    let bytes = (temporaries + m * k + k * n + m * n) * std::mem::size_of::<T>();
    let (free, _) = gpu.memory_info()?;
    Ok(if bytes <= free {
        Variant::Batched
    } else {
        Variant::Frugal
    })
}

/// What C ← αAB + βC of `opts.algorithm` (Strassen or Winograd) would use
/// on this GPU.
pub(crate) fn explain<T: Element>(
    gpu: &Gpu,
    shape: (usize, usize, usize),
    beta_is_zero: bool,
    opts: &GemmOptions,
) -> Result<Explained, Error> {
    let scheme = Scheme::of(opts.algorithm).expect("a fast algorithm");
    let variant = variant::<T>(gpu, scheme, shape, beta_is_zero, opts)?;
    Ok(Explained {
        variant,
        crossover: crossover(&gpu.info().name, opts, T::DTYPE),
        lazy_sums: 0,
        base: base(opts, T::DTYPE),
        report: dry_run::<T>(&gpu.info().name, scheme, variant, shape, beta_is_zero, opts),
    })
}

/// Sources and destinations one `combine_group` launch takes
/// (`GROUP_SOURCES`, `GROUP_DESTS` of `kernels/combine_group.cu`).
const GROUP_SOURCES: usize = 8;
const GROUP_DESTS: usize = 8;

/// The `Group` argument of `kernels/combine_group.cu`, field for field.
#[repr(C)]
#[derive(Clone, Copy)]
struct GroupArgs<T> {
    src: [u64; GROUP_SOURCES],
    src_ld: [i64; GROUP_SOURCES],
    dst: [u64; GROUP_DESTS],
    dst_ld: [i64; GROUP_DESTS],
    keep: [T; GROUP_DESTS],
    weight: [[T; GROUP_SOURCES]; GROUP_DESTS],
    sources: i32,
    dests: i32,
}

// SAFETY: a plain #[repr(C)] struct of integers and T (f32, f64, i32 or
// i64), laid out as the kernel's `Group` (pointers as 64-bit addresses,
// long long as i64, ELEM as T, int as i32, in the same order), so its
// bytes are a valid kernel parameter.
unsafe impl<T: Element> DeviceRepr for GroupArgs<T> {}

/// A, B, C and the temporaries of one product on the GPU.
pub(crate) struct CudaBackend<'g, T: Element> {
    gpu: &'g Gpu,
    classical: ClassicalGemm,
    combine: CudaFunction,
    combine_group: CudaFunction,
    a: Operand,
    b: Operand,
    c: Operand,
    temps: Vec<CudaSlice<T>>,
    temp_ptrs: Vec<u64>,
    capacities: Vec<usize>,
    /// The options the fused kernel is resolved with (its tile).
    opts: GemmOptions,
    /// The fused primitive's kernel, compiled on the first primitive.
    fused: Option<FusedKernel>,
}

impl<'g, T: Element> CudaBackend<'g, T> {
    pub(crate) fn new(
        gpu: &'g Gpu,
        classical: ClassicalGemm,
        opts: &GemmOptions,
        (a, b, c): (Operand, Operand, Operand),
    ) -> Result<Self, Error> {
        let combine = gpu.function(KernelKey {
            source: KernelSource::Combine,
            dtype: T::DTYPE,
            tile: CUDA_COMBINE_ROWS_PER_BLOCK,
        })?;
        let combine_group = gpu.function(KernelKey {
            source: KernelSource::CombineGroup,
            dtype: T::DTYPE,
            tile: CUDA_COMBINE_ROWS_PER_BLOCK,
        })?;
        Ok(CudaBackend {
            gpu,
            classical,
            combine,
            combine_group,
            a,
            b,
            c,
            temps: Vec::new(),
            temp_ptrs: Vec::new(),
            capacities: Vec::new(),
            opts: *opts,
            fused: None,
        })
    }

    /// Points the backend at another product's A, B and C, keeping its
    /// temporaries (the out-of-core pipeline runs one product per tile).
    pub(crate) fn retarget(&mut self, (a, b, c): (Operand, Operand, Operand)) {
        (self.a, self.b, self.c) = (a, b, c);
    }

    /// Address and leading dimension of a block.
    pub(crate) fn operand(&self, block: Block) -> Operand {
        let store = match block.store {
            Store::A => self.a,
            Store::B => self.b,
            Store::C => self.c,
            Store::Temp { id, ld } => Operand::row_major(self.temp_ptrs[id], ld),
        };
        store.at::<T>(block.row, block.col)
    }

    /// The weighted device addresses of `terms`, all of which must share
    /// one leading dimension (`what` names them in the error).
    fn addresses(&self, terms: &[(T, Block)], what: &str) -> Result<(Vec<(T, u64)>, usize), Error> {
        let operands: Vec<(T, Operand)> =
            terms.iter().map(|&(w, b)| (w, self.operand(b))).collect();
        let ld = operands.first().map_or(0, |(_, o)| o.ld);
        if operands.iter().any(|(_, o)| o.ld != ld) {
            return Err(Error::Unsupported {
                algorithm: "the fused variant on the GPU",
                what: format!("{what} blocks with different leading dimensions"),
            });
        }
        Ok((operands.iter().map(|&(w, o)| (w, o.ptr)).collect(), ld))
    }
}

impl<T: Element> Backend<T> for CudaBackend<'_, T> {
    /// `kernels/fused.cu` forms the sums in its tile loads.
    const FUSES_PRIMITIVE: bool = true;
    /// A group of primitives is one launch (z picks the product).
    const GROUPS_PRIMITIVES: bool = true;

    fn primitive(
        &mut self,
        alpha: T,
        a: &[(T, Block)],
        b: &[(T, Block)],
        beta: T,
        c: &[(T, Block)],
        scratch: [Block; 3],
    ) -> Result<(), Error> {
        let one = Primitive {
            a: a.to_vec(),
            b: b.to_vec(),
            c: c.to_vec(),
            scratch,
        };
        self.primitives(alpha, beta, std::slice::from_ref(&one))
    }

    fn primitives(&mut self, alpha: T, beta: T, group: &[Primitive<T>]) -> Result<(), Error> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let (m, k, n) = first.shape();
        if k == 0 {
            // M = 0: only β applies.
            for p in group {
                for &(_, dest) in &p.c {
                    self.combine(beta, dest, &[])?;
                }
            }
            return Ok(());
        }
        let mut products = Vec::with_capacity(group.len());
        let mut lds = None;
        for p in group {
            debug_assert_eq!(p.shape(), (m, k, n), "a group has one shape");
            let (a, lda) = self.addresses(&p.a, "A")?;
            let (b, ldb) = self.addresses(&p.b, "B")?;
            let (c, ldc) = self.addresses(&p.c, "C")?;
            match lds {
                None => lds = Some((lda, ldb, ldc)),
                Some(same) if same == (lda, ldb, ldc) => {}
                Some(_) => {
                    return Err(Error::Unsupported {
                        algorithm: "the fused variant on the GPU",
                        what: "products of one group with different leading dimensions".into(),
                    })
                }
            }
            products.push(FusedProduct { a, b, c });
        }
        if self.fused.is_none() {
            self.fused = Some(FusedKernel::resolve::<T>(self.gpu, &self.opts)?);
        }
        let kernel = self.fused.as_ref().expect("resolved above");
        kernel.run(
            self.gpu,
            (m, k, n),
            (alpha, beta),
            &products,
            lds.expect("the group is not empty"),
        )
    }
    fn allocate(&mut self, capacities: &[usize]) -> Result<(), Error> {
        // The same product asks for the same capacities every run, and a
        // smaller tile of an out-of-core product for smaller ones: keep
        // temporaries that are large enough.
        if self.capacities.len() == capacities.len()
            && self
                .capacities
                .iter()
                .zip(capacities)
                .all(|(have, need)| have >= need)
        {
            return Ok(());
        }
        let (free, _) = self.gpu.memory_info()?;
        let bytes: usize = capacities.iter().sum::<usize>() * std::mem::size_of::<T>();
        if bytes > free {
            return Err(Error::Cuda(format!(
                "the fast algorithm's temporaries need {bytes} bytes but only {free} are free on the GPU"
            )));
        }
        self.temps.clear();
        for &capacity in capacities {
            // SAFETY: every schedule writes a temporary before reading it.
            let slice = unsafe { self.gpu.stream.alloc::<T>(capacity.max(1)) }
                .map_err(|e| cuda_err("cannot allocate a temporary", e))?;
            self.temps.push(slice);
        }
        self.temp_ptrs = self
            .temps
            .iter()
            .map(|t| t.device_ptr(&self.gpu.stream).0)
            .collect();
        self.capacities = capacities.to_vec();
        Ok(())
    }

    fn gemm(&mut self, alpha: T, a: Block, b: Block, beta: T, c: Block) -> Result<(), Error> {
        if a.cols == 0 {
            return self.combine(beta, c, &[]);
        }
        let product = DeviceGemm {
            shape: (a.rows, a.cols, b.cols),
            alpha,
            a: self.operand(a),
            b: self.operand(b),
            beta,
            c: self.operand(c),
        };
        self.classical.run(self.gpu, product)
    }

    /// One `combine_group` launch when the group fits it (one shape, at
    /// most 8 distinct sources and 8 destinations), else one combine per
    /// sum.
    fn combine_group(&mut self, sums: &[Combination<T>]) -> Result<(), Error> {
        let Some(first) = sums.first() else {
            return Ok(());
        };
        let shape = (first.dst.rows, first.dst.cols);
        let mut sources: Vec<Block> = Vec::new();
        for sum in sums {
            for &(_, block) in &sum.terms {
                if !sources.contains(&block) {
                    sources.push(block);
                }
            }
        }
        let fits = sums.len() <= GROUP_DESTS
            && sources.len() <= GROUP_SOURCES
            && sums.iter().all(|sum| {
                (sum.dst.rows, sum.dst.cols) == shape
                    && sum.terms.iter().all(|(_, t)| (t.rows, t.cols) == shape)
            });
        if !fits {
            for sum in sums {
                self.combine(sum.keep, sum.dst, &sum.terms)?;
            }
            return Ok(());
        }
        let (rows, cols) = shape;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let mut args = GroupArgs {
            src: [0; GROUP_SOURCES],
            src_ld: [0; GROUP_SOURCES],
            dst: [0; GROUP_DESTS],
            dst_ld: [0; GROUP_DESTS],
            keep: [T::ZERO; GROUP_DESTS],
            weight: [[T::ZERO; GROUP_SOURCES]; GROUP_DESTS],
            sources: sources.len() as i32,
            dests: sums.len() as i32,
        };
        for (s, &block) in sources.iter().enumerate() {
            let operand = self.operand(block);
            args.src[s] = operand.ptr;
            args.src_ld[s] = operand.ld as i64;
        }
        for (d, sum) in sums.iter().enumerate() {
            let operand = self.operand(sum.dst);
            args.dst[d] = operand.ptr;
            args.dst_ld[d] = operand.ld as i64;
            args.keep[d] = sum.keep;
            for &(w, block) in &sum.terms {
                let s = sources
                    .iter()
                    .position(|&x| x == block)
                    .expect("collected above");
                args.weight[d][s] = args.weight[d][s].add(w);
            }
        }
        let (rows_i, cols_i) = (to_i32("rows", rows)?, to_i32("cols", cols)?);
        let config = combine_launch_config(rows, cols);
        let mut launch = self.gpu.stream.launch_builder(&self.combine_group);
        launch.arg(&rows_i).arg(&cols_i).arg(&args);
        // SAFETY: the arguments match `combine_group(int, int, Group)`;
        // every pointer addresses a rows×cols block (of A, B, C or a
        // temporary the dry run sized) with its leading dimension, and the
        // engine's groups never name one sum's destination among another's
        // sources, so each thread's reads precede its own writes only.
        unsafe { launch.launch(config) }.map_err(|e| cuda_err("combine_group launch failed", e))?;
        Ok(())
    }

    fn combine(&mut self, keep: T, dst: Block, terms: &[(T, Block)]) -> Result<(), Error> {
        let sources: Vec<(T, Operand)> = terms.iter().map(|&(w, t)| (w, self.operand(t))).collect();
        // SAFETY: the engine gives blocks inside A, B, C or a temporary of
        // the capacity the dry run sized, all rows×cols, the destination
        // overlapping no source.
        unsafe {
            launch_combine(
                self.gpu,
                &self.combine,
                keep,
                self.operand(dst),
                (dst.rows, dst.cols),
                &sources,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No tuning file applies to a GPU of this name.
    const NO_GPU: &str = "a GPU no tuning file names";

    fn levels<T: Element>(n: usize, opts: &GemmOptions) -> usize {
        let variant = opts.fast.variant.unwrap_or_default();
        dry_run::<T>(NO_GPU, Scheme::Winograd, variant, (n, n, n), true, opts).levels
    }

    #[test]
    fn gpu_options_are_checked_before_anything_runs() {
        let check = |opts: &GemmOptions| {
            opts.fast
                .check_on(opts.algorithm, crate::options::DeviceKind::Cuda)
        };
        let bad = |opts: GemmOptions| matches!(check(&opts), Err(Error::InvalidOption(_)));
        assert!(bad(
            GemmOptions::new(Algorithm::Strassen).base(Algorithm::Packed)
        ));
        // The fused variant runs its own kernel on the GPU: no base.
        assert!(check(&GemmOptions::new(Algorithm::Winograd).variant(Variant::Fused)).is_ok());
        assert!(bad(GemmOptions::new(Algorithm::Winograd)
            .variant(Variant::Fused)
            .base(Algorithm::Cublas)));
        assert!(bad(GemmOptions::new(Algorithm::Winograd).lazy_sums(2)));
        assert!(check(&GemmOptions::new(Algorithm::Strassen).base(Algorithm::CudaTiled)).is_ok());
        assert_eq!(
            base(&GemmOptions::new(Algorithm::Strassen), DType::F32),
            Algorithm::Cublas
        );
        assert_eq!(
            base(&GemmOptions::new(Algorithm::Strassen), DType::I64),
            Algorithm::CudaFast
        );
    }

    #[test]
    fn auto_recurses_from_the_measured_crossovers() {
        // f32 recurses while n ≥ 4096 but starts only from 8192 (at most
        // two levels: accuracy); f64 and integers from 8192.
        let gpu = GemmOptions::new(Algorithm::Winograd);
        for (n, f32_levels, f64_levels, i32_levels) in [
            (4096, 0, 0, 0),
            (6144, 0, 0, 0),
            (8192, 2, 1, 1),
            (12288, 2, 1, 1),
            (16384, 2, 2, 2),
            (32768, 2, 3, 3),
        ] {
            assert_eq!(levels::<f32>(n, &gpu), f32_levels, "f32 {n}");
            assert_eq!(levels::<f64>(n, &gpu), f64_levels, "f64 {n}");
            assert_eq!(levels::<i32>(n, &gpu), i32_levels, "i32 {n}");
        }
        // The fused variant needs no workspace at any depth.
        let fused = GemmOptions::new(Algorithm::Strassen)
            .variant(Variant::Fused)
            .threshold(16);
        let report = dry_run::<f32>(
            NO_GPU,
            Scheme::Strassen,
            Variant::Fused,
            (130, 97, 129),
            true,
            &fused,
        );
        assert_eq!((report.levels, report.workspace_elements), (2, 0));
    }

    #[test]
    fn the_workspace_at_8192_is_what_the_gpu_reported() {
        // Frugal Winograd at one level, n = 8192: Douglas's two
        // temporaries of 4096² (the H100 run reported 128 MiB of f32);
        // batched stores 15 of them (960 MiB).
        let one_level = GemmOptions::new(Algorithm::Winograd).threshold(8192);
        for (variant, blocks) in [(Variant::Frugal, 2), (Variant::Batched, 15)] {
            let report = dry_run::<f32>(
                NO_GPU,
                Scheme::Winograd,
                variant,
                (8192, 8192, 8192),
                true,
                &one_level,
            );
            assert_eq!(report.workspace_elements, blocks * 4096 * 4096, "{variant}");
        }
    }
}
