//! The CPU algorithms and the table that dispatches to them.
//!
//! [`multiply`] hands each algorithm one contract: **C ← α·A·B + β·C** for
//! views of matching shape with m, n, k ≥ 1 and α ≠ 0, where β = 0 never
//! reads C. Empty shapes, orientation and option checks are handled once, at
//! the boundary ([`crate::gemm`]), so the modules below never see them. The
//! simple algorithms apply β in a first pass ([`apply_beta`]) and then
//! accumulate C += α·A·B. Adding an algorithm means adding its module, its
//! row in [`ALGORITHMS`] and its arm in [`multiply`].

pub mod ikj;
pub mod naive;
pub mod parallel;
pub mod tiled;

use std::fmt;
use std::str::FromStr;

use crate::element::Element;
use crate::error::Error;
use crate::matrix::{MatMut, MatRef};
use crate::packed::{self, BlockSizes, CpuKernel};
use crate::strassen::{self, Scheme, Variant};
use crate::threads::available_threads;
use crate::tunables::DEFAULT_TILE;

/// A multiplication algorithm, selectable by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// The i-j-k triple loop with a dot product per element of C.
    Naive,
    /// Loop interchange i-k-j: the inner loop streams contiguous rows.
    Ikj,
    /// i-k-j inside square tiles, so a tile of B stays in cache.
    Tiled,
    /// `Tiled` with tiles of C distributed over a thread pool.
    Parallel,
    /// BLIS-style packed panels and a SIMD microkernel, multithreaded.
    Packed,
    /// Strassen's 7-product recursion over `packed` (see [`crate::strassen`]).
    Strassen,
    /// Winograd's variant of Strassen, 15 additions per level.
    Winograd,
    /// CUDA: one thread per element of C, global memory only.
    CudaNaive,
    /// CUDA: square shared-memory tiles, one thread per element of C.
    CudaTiled,
    /// CUDA: own kernels, register-blocked SIMT (f32/i32 128×256 tiles,
    /// 8×16 per thread; 8-byte types 64×64, 4×4) or, for f64, the FP64
    /// tensor cores.
    CudaFast,
    /// cuBLAS sgemm/dgemm.
    Cublas,
    /// Strassen's recursion on the GPU over cuBLAS or an own kernel.
    CudaStrassen,
    /// Winograd's variant on the GPU.
    CudaWinograd,
}

/// Where an algorithm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host CPU.
    Cpu,
    /// An NVIDIA GPU through CUDA.
    Cuda,
}

impl Device {
    /// Name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

/// What the dispatch table knows about an algorithm.
#[derive(Debug, Clone, Copy)]
pub struct AlgorithmInfo {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its name on the command line and in reports.
    pub name: &'static str,
    /// One line for `--help` and docs.
    pub summary: &'static str,
    /// Whether it honours `tile`.
    pub uses_tile: bool,
    /// Whether it honours `threads`.
    pub uses_threads: bool,
    /// Where it runs.
    pub device: Device,
}

/// The table of algorithms, in the order of the optimisation ladder.
pub const ALGORITHMS: &[AlgorithmInfo] = &[
    AlgorithmInfo {
        algorithm: Algorithm::Naive,
        name: "naive",
        summary: "i-j-k triple loop, one dot product per element (every seed)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Ikj,
        name: "ikj",
        summary: "loop interchange over contiguous rows (seed 002 §5)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Tiled,
        name: "tiled",
        summary: "i-k-j inside square tiles (seed 002 §6.3-6.4)",
        uses_tile: true,
        uses_threads: false,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Parallel,
        name: "parallel",
        summary: "tiled, with tiles of C spread over threads (seed 002 §6-7)",
        uses_tile: true,
        uses_threads: true,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Packed,
        name: "packed",
        summary: "BLIS-style cache blocking, packing and SIMD microkernels",
        uses_tile: false,
        uses_threads: true,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Strassen,
        name: "strassen",
        summary: "Strassen's recursion (7 products, 18 additions) over packed (seeds 000, 003)",
        uses_tile: false,
        uses_threads: true,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Winograd,
        name: "winograd",
        summary: "Winograd's variant (7 products, 15 additions) over packed (seeds 000, 003)",
        uses_tile: false,
        uses_threads: true,
        device: Device::Cpu,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaNaive,
        name: "cuda-naive",
        summary: "CUDA, one thread per element, global memory only (seeds 001, 002 §10.3.1, 004)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cuda,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaTiled,
        name: "cuda-tiled",
        summary: "CUDA, shared-memory tiles (seeds 000 §5.3, 001, 002 §10.3.4, 004)",
        uses_tile: true,
        uses_threads: false,
        device: Device::Cuda,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaFast,
        name: "cuda-fast",
        summary:
            "CUDA, own kernels: register-blocked SIMT tiles; f64 on the FP64 tensor cores (sm_90+)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cuda,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Cublas,
        name: "cublas",
        summary: "cuBLAS sgemm/dgemm, row-major through the Cᵀ = BᵀAᵀ swap",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cuda,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaStrassen,
        name: "cuda-strassen",
        summary:
            "Strassen on the GPU over cublas (or --base cuda-tiled/cuda-naive) (seeds 000, 003)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cuda,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaWinograd,
        name: "cuda-winograd",
        summary: "Winograd's variant on the GPU, 15 additions per level (seeds 000, 003)",
        uses_tile: false,
        uses_threads: false,
        device: Device::Cuda,
    },
];

impl Algorithm {
    /// Its row of the dispatch table.
    pub fn info(self) -> &'static AlgorithmInfo {
        ALGORITHMS
            .iter()
            .find(|info| info.algorithm == self)
            .expect("every algorithm has a row in ALGORITHMS")
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Where it runs.
    pub fn device(self) -> Device {
        self.info().device
    }

    /// Every algorithm, in ladder order.
    pub fn all() -> impl Iterator<Item = Algorithm> {
        ALGORITHMS.iter().map(|info| info.algorithm)
    }

    /// Every algorithm that runs on `device`, in ladder order.
    pub fn all_on(device: Device) -> impl Iterator<Item = Algorithm> {
        Algorithm::all().filter(move |a| a.device() == device)
    }

    /// Comma-separated list of the names, for messages.
    pub fn names() -> String {
        ALGORITHMS
            .iter()
            .map(|i| i.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Parses a comma list such as `"naive,ikj"`, keeping order; `all`
    /// stands for every CPU algorithm.
    pub fn parse_list(list: &str) -> Result<Vec<Algorithm>, Error> {
        Algorithm::parse_list_on(list, Device::Cpu)
    }

    /// Parses a comma list, where `all` stands for every algorithm that
    /// runs on `device`.
    pub fn parse_list_on(list: &str, device: Device) -> Result<Vec<Algorithm>, Error> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim) {
            if name.eq_ignore_ascii_case("all") {
                out.extend(Algorithm::all_on(device));
            } else {
                out.push(name.parse()?);
            }
        }
        Ok(out)
    }
}

/// The automatic choice: the fastest algorithm fastmm has on the CPU.
impl Default for Algorithm {
    fn default() -> Self {
        Algorithm::Packed
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        ALGORITHMS
            .iter()
            .find(|info| info.name.eq_ignore_ascii_case(s.trim()))
            .map(|info| info.algorithm)
            .ok_or_else(|| {
                Error::UnknownAlgorithm(s.to_string(), format!("{}, all", Algorithm::names()))
            })
    }
}

/// How to multiply: the algorithm and its tunables. `None` means the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GemmOptions {
    /// Which algorithm runs.
    pub algorithm: Algorithm,
    /// Worker threads for threaded algorithms (default: all hardware threads).
    pub threads: Option<usize>,
    /// Tile edge for tiled algorithms (default: [`DEFAULT_TILE`]).
    pub tile: Option<usize>,
    /// Microkernel family of `packed` (default: `FASTMM_CPU_KERNEL`, else
    /// the fastest this CPU runs).
    pub cpu_kernel: Option<CpuKernel>,
    /// Cache block sizes of `packed` (default: derived from the caches).
    pub block_sizes: Option<BlockSizes>,
    /// Memory schedule of `strassen`/`winograd` (default: frugal).
    pub variant: Option<Variant>,
    /// `strassen`/`winograd` recurse while m, k, n are all at least this
    /// (default: the measured crossover, [`crate::strassen::effective_threshold`]).
    pub threshold: Option<usize>,
    /// Most recursion levels of `strassen`/`winograd` (default: the
    /// accuracy rule, [`crate::strassen::effective_max_depth`]).
    pub depth: Option<usize>,
    /// `strassen`/`winograd` with stored schedules: operand sums of at most
    /// this many blocks read by a leaf product are formed while `packed`
    /// packs, not stored (default: [`crate::tunables::STRASSEN_LAZY_SUM_TERMS`];
    /// 0 stores every sum).
    pub lazy_sums: Option<usize>,
    /// The classical algorithm under `strassen`/`winograd` (default:
    /// `packed`); e.g. `naive` to reproduce the seeds' naive-vs-Strassen
    /// experiments.
    pub base: Option<Algorithm>,
    /// Where GPU algorithms keep their operands (default: device memory).
    #[cfg(feature = "cuda")]
    pub gpu_memory: Option<crate::cuda::GpuMemory>,
    /// GPU algorithms: stage host↔device copies in page-locked memory.
    pub gpu_pinned: bool,
    /// GPU algorithms: the most GPU memory a product may use, in bytes
    /// (default: the free memory). A product whose A, B and C exceed it
    /// runs out of core, streamed through the GPU in tiles.
    pub gpu_max_memory: Option<u64>,
    /// GPU algorithms: stream the product in tiles even when it fits.
    pub gpu_out_of_core: bool,
    /// `cublas` on f32: the tensor-core mode (default: IEEE f32).
    #[cfg(feature = "cuda")]
    pub gpu_precision: Option<crate::cuda::GpuPrecision>,
    /// `cuda-fast`: the kernel family (default: `FASTMM_CUDA_KERNEL`, else
    /// `auto`).
    #[cfg(feature = "cuda")]
    pub cuda_kernel: Option<crate::cuda::FastKernel>,
}

impl GemmOptions {
    /// Options that run `algorithm` with default tunables.
    pub fn new(algorithm: Algorithm) -> Self {
        GemmOptions {
            algorithm,
            ..Default::default()
        }
    }

    /// Sets the thread count.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Sets the tile edge.
    pub fn tile(mut self, tile: usize) -> Self {
        self.tile = Some(tile);
        self
    }

    /// Forces a microkernel family for `packed`.
    pub fn cpu_kernel(mut self, kernel: CpuKernel) -> Self {
        self.cpu_kernel = Some(kernel);
        self
    }

    /// Sets the cache block sizes of `packed`.
    pub fn block_sizes(mut self, blocks: BlockSizes) -> Self {
        self.block_sizes = Some(blocks);
        self
    }

    /// Sets the memory schedule of `strassen`/`winograd`.
    pub fn variant(mut self, variant: Variant) -> Self {
        self.variant = Some(variant);
        self
    }

    /// Sets the recursion threshold n₀ of `strassen`/`winograd`.
    pub fn threshold(mut self, threshold: usize) -> Self {
        self.threshold = Some(threshold);
        self
    }

    /// Caps the recursion levels of `strassen`/`winograd`.
    pub fn depth(mut self, depth: usize) -> Self {
        self.depth = Some(depth);
        self
    }

    /// Sets the most terms of an operand sum that a leaf product of
    /// `strassen`/`winograd` forms while packing (0: every sum stored).
    pub fn lazy_sums(mut self, terms: usize) -> Self {
        self.lazy_sums = Some(terms);
        self
    }

    /// Sets the classical algorithm under `strassen`/`winograd`.
    pub fn base(mut self, base: Algorithm) -> Self {
        self.base = Some(base);
        self
    }

    /// Rejects option values no algorithm can use.
    pub fn validate(&self) -> Result<(), Error> {
        if self.threads == Some(0) {
            return Err(Error::InvalidOption(
                "thread count must be at least 1".into(),
            ));
        }
        if self.tile == Some(0) {
            return Err(Error::InvalidOption("tile size must be at least 1".into()));
        }
        if matches!(self.threshold, Some(t) if t < 2) {
            return Err(Error::InvalidOption(
                "Strassen threshold must be at least 2 (each level halves m, k and n)".into(),
            ));
        }
        if let Some(base) = self.base {
            if Scheme::of(base).is_some() {
                return Err(Error::InvalidOption(format!(
                    "the base of strassen/winograd must be a classical algorithm, not {base}"
                )));
            }
            if Scheme::of(self.algorithm).is_some() && base.device() != self.algorithm.device() {
                return Err(Error::InvalidOption(format!(
                    "the base of {} must run on the {} too, not {base}",
                    self.algorithm,
                    self.algorithm.device().name()
                )));
            }
            if base != Algorithm::Packed && matches!(self.lazy_sums, Some(t) if t > 0) {
                return Err(Error::InvalidOption(format!(
                    "lazy sums are formed inside packed's packing, so the base must be packed, not {base}"
                )));
            }
            if base != Algorithm::Packed && self.variant == Some(Variant::Fused) {
                return Err(Error::InvalidOption(match self.algorithm.device() {
                    Device::Cpu => format!(
                        "the fused variant forms its sums inside packed's packing, so its base must be packed, not {base}"
                    ),
                    Device::Cuda => format!(
                        "the fused variant on the GPU runs its own kernel (kernels/fused.cu) for every product, so it takes no base ({base} given)"
                    ),
                }));
            }
        }
        if Scheme::of(self.algorithm).is_some()
            && self.algorithm.device() == Device::Cuda
            && matches!(self.lazy_sums, Some(t) if t > 0)
        {
            return Err(Error::InvalidOption(format!(
                "lazy sums are formed inside packed's packing, on the CPU; {} stores its sums",
                self.algorithm
            )));
        }
        if let Some(b) = self.block_sizes {
            if b.mc == 0 || b.kc == 0 || b.nc == 0 {
                return Err(Error::InvalidOption(
                    "block sizes must be at least 1".into(),
                ));
            }
        }
        Ok(())
    }

    /// The thread count the algorithm will actually use.
    pub fn effective_threads(&self) -> usize {
        if self.algorithm.info().uses_threads {
            self.threads
                .or_else(crate::tuning::threads)
                .unwrap_or_else(available_threads)
        } else {
            1
        }
    }

    /// The tile edge the algorithm will actually use (`None` if untiled).
    pub fn effective_tile(&self) -> Option<usize> {
        let default = match self.algorithm.device() {
            Device::Cpu => DEFAULT_TILE,
            Device::Cuda => crate::tunables::CUDA_DEFAULT_TILE,
        };
        self.algorithm.info().uses_tile.then(|| {
            self.tile
                .or_else(|| crate::tuning::tile(self.algorithm.device()))
                .unwrap_or(default)
        })
    }
}

/// C ← βC; with β = 0 the old C is never read.
pub(crate) fn apply_beta<T: Element>(beta: T, mut c: MatMut<'_, T>) {
    if beta == T::ZERO {
        c.fill(T::ZERO);
    } else if beta != T::ONE {
        c.scale(beta);
    }
}

/// C ← α·A·B + β·C with the chosen algorithm. The caller (the boundary in
/// [`crate::gemm`]) guarantees matching shapes, m, n, k ≥ 1, α ≠ 0 and
/// valid options.
pub(crate) fn multiply<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    mut c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    let tile = opts.effective_tile().unwrap_or(DEFAULT_TILE);
    // The simple algorithms accumulate into C after a β pass; packed folds β
    // into its first microkernel call.
    let scaled = |c: &mut MatMut<'_, T>| apply_beta(beta, c.rb_mut());
    match opts.algorithm {
        Algorithm::Naive => {
            scaled(&mut c);
            naive::accumulate(alpha, a, b, c);
        }
        Algorithm::Ikj => {
            scaled(&mut c);
            ikj::accumulate(alpha, a, b, c);
        }
        Algorithm::Tiled => {
            scaled(&mut c);
            tiled::accumulate(alpha, a, b, c, tile);
        }
        Algorithm::Parallel => {
            scaled(&mut c);
            parallel::accumulate(alpha, a, b, c, tile, opts.effective_threads())?;
        }
        Algorithm::Packed => packed::multiply(alpha, a, b, beta, c, opts)?,
        Algorithm::Strassen => strassen::multiply(Scheme::Strassen, alpha, a, b, beta, c, opts)?,
        Algorithm::Winograd => strassen::multiply(Scheme::Winograd, alpha, a, b, beta, c, opts)?,
        Algorithm::CudaNaive
        | Algorithm::CudaTiled
        | Algorithm::CudaFast
        | Algorithm::Cublas
        | Algorithm::CudaStrassen
        | Algorithm::CudaWinograd => multiply_on_gpu(alpha, a, b, beta, c, opts)?,
    }
    Ok(())
}

/// A GPU algorithm on host matrices: copies in, multiplies, copies back;
/// out of core, streamed in tiles, when A, B and C exceed the GPU memory
/// budget (a typed error in a build without the `cuda` feature).
fn multiply_on_gpu<T: Element>(
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: MatMut<'_, T>,
    opts: &GemmOptions,
) -> Result<(), Error> {
    #[cfg(feature = "cuda")]
    {
        let gpu = crate::cuda::Gpu::default_gpu()?;
        let shape = (a.rows(), a.cols(), b.cols());
        if crate::cuda::out_of_core::needed::<T>(gpu, shape, opts)? {
            crate::cuda::out_of_core::multiply(gpu, alpha, a, b, beta, c, opts).map(|_| ())
        } else {
            crate::cuda::multiply_once(gpu, alpha, a, b, beta, c, opts).map(|_| ())
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (alpha, a, b, beta, c);
        Err(Error::CudaUnavailable(format!(
            "{} needs fastmm built with the `cuda` feature",
            opts.algorithm
        )))
    }
}
