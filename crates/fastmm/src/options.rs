//! What a product is asked to do: the algorithm, the device it runs on and
//! every option the algorithms take. Plain data, shared by every layer
//! above; it names nothing but the element types and the error type.
//!
//! An [`Algorithm`] is chosen independently of the [`Device`]: Strassen on
//! the CPU and Strassen on a GPU are one algorithm on two devices. The
//! seeds' GPU kernels (`cuda-naive`, `cuda-tiled`), fastmm's own GPU
//! kernels (`cuda-fast`) and cuBLAS are distinct kernels and keep their
//! names; they run on CUDA devices only.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// Defines a choice among named values: the enum, `ALL`, `name()`,
/// `Display`, and a case-insensitive `FromStr` whose error lists the names.
macro_rules! named_choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in display order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Its name on the command line and in reports.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name().eq_ignore_ascii_case(s.trim()))
                    .ok_or_else(|| {
                        let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                        Error::InvalidOption(format!(
                            "unknown {} '{}' (expected {})",
                            $what,
                            s.trim(),
                            names.join(", ")
                        ))
                    })
            }
        }
    };
}

named_choice! {
    /// Where algorithms of a kind run: the host CPU or NVIDIA GPUs.
    pub enum DeviceKind ("device kind") {
        /// The host CPU.
        Cpu = "cpu",
        /// An NVIDIA GPU through CUDA.
        Cuda = "cuda",
    }
}

/// One device a product runs on: the CPU, or the CUDA GPU of an ordinal.
///
/// Spelled `cpu`, `cuda` (GPU 0) or `cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The host CPU (all its hardware threads, or `threads`).
    #[default]
    Cpu,
    /// The CUDA GPU of this ordinal.
    Cuda(usize),
}

impl Device {
    /// The kind of device.
    pub fn kind(self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Cuda(_) => DeviceKind::Cuda,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(ordinal) => write!(f, "cuda:{ordinal}"),
        }
    }
}

impl serde::Serialize for Device {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let text = s.trim().to_ascii_lowercase();
        let bad = |why: &str| {
            Error::InvalidOption(format!(
                "device '{}' {why} (expected cpu, cuda or cuda:N)",
                s.trim()
            ))
        };
        match text.split_once(':') {
            None if text == "cpu" => Ok(Device::Cpu),
            None if text == "cuda" => Ok(Device::Cuda(0)),
            None => Err(bad("is unknown")),
            Some(("cuda", ordinals)) if ordinals.contains(',') || ordinals.trim() == "all" => Err(
                bad("names several GPUs; a Context is one device (several run as a Team)"),
            ),
            Some(("cuda", ordinal)) => ordinal
                .trim()
                .parse()
                .map(Device::Cuda)
                .map_err(|_| bad("has no GPU ordinal")),
            Some(_) => Err(bad("is unknown")),
        }
    }
}

/// The devices a product runs on together: one device, a list of GPUs
/// (`cuda:0,1,3`) or every GPU the driver reports (`cuda:all`), resolved
/// when opened ([`crate::Team::open_list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceList {
    /// These devices (one, or distinct GPUs).
    Listed(Vec<Device>),
    /// Every GPU of the host.
    AllGpus,
}

impl DeviceList {
    /// Whether it names more than one device (or every GPU).
    pub fn is_team(&self) -> bool {
        !matches!(self, DeviceList::Listed(d) if d.len() == 1)
    }
}

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceList::AllGpus => f.write_str("cuda:all"),
            DeviceList::Listed(devices) if devices.len() > 1 => {
                let ordinals: Vec<String> = devices
                    .iter()
                    .map(|d| match d {
                        Device::Cuda(o) => o.to_string(),
                        Device::Cpu => "cpu".into(),
                    })
                    .collect();
                write!(f, "cuda:{}", ordinals.join(","))
            }
            DeviceList::Listed(devices) => match devices.first() {
                Some(d) => write!(f, "{d}"),
                None => Ok(()),
            },
        }
    }
}

impl FromStr for DeviceList {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let text = s.trim().to_ascii_lowercase();
        let bad = |why: String| {
            Error::InvalidOption(format!(
                "device list '{}' {why} (expected cpu, cuda, cuda:N, cuda:N,M,… or cuda:all)",
                s.trim()
            ))
        };
        match text.split_once(':') {
            Some(("cuda", "all")) => Ok(DeviceList::AllGpus),
            Some(("cuda", list)) if list.contains(',') => {
                let mut devices = Vec::new();
                for item in list.split(',') {
                    let ordinal: usize = item
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("has '{}', not a GPU ordinal", item.trim())))?;
                    if devices.contains(&Device::Cuda(ordinal)) {
                        return Err(bad(format!("lists cuda:{ordinal} twice")));
                    }
                    devices.push(Device::Cuda(ordinal));
                }
                Ok(DeviceList::Listed(devices))
            }
            _ => Ok(DeviceList::Listed(vec![s.parse::<Device>()?])),
        }
    }
}

/// A multiplication algorithm, selectable by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Algorithm {
    /// The fastest product by the measured rules: `winograd` where its
    /// crossover gives the shape a level, else the device's classical
    /// product (`packed` on the CPU; `cublas` for floats and `cuda-fast`
    /// for integers on a GPU).
    #[default]
    Auto,
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
    /// Strassen's 7-product recursion (18 additions per level) over a
    /// classical base product, on either device.
    Strassen,
    /// Winograd's variant of Strassen (15 additions per level), on either
    /// device.
    Winograd,
    /// CUDA: one thread per element of C, global memory only.
    CudaNaive,
    /// CUDA: square shared-memory tiles, one thread per element of C.
    CudaTiled,
    /// CUDA: fastmm's own kernels, register-blocked SIMT tiles, and for
    /// f64 the FP64 tensor cores.
    CudaFast,
    /// cuBLAS sgemm/dgemm.
    Cublas,
    /// f32/f64 products from exact integer ones (Ozaki scheme II): INT8
    /// products of residues, certified per element against the classical
    /// bound, uncertified elements recomputed natively. On a GPU the INT8
    /// tensor cores; on the CPU the reference twin (slow). i32 and i64:
    /// exact (wrapping) products of their balanced byte digits, the same
    /// INT8 products.
    Emulated,
}

/// What the algorithm table knows about an algorithm.
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
    /// Whether it honours `threads` (on the CPU).
    pub uses_threads: bool,
    /// Whether it runs on the CPU.
    pub on_cpu: bool,
    /// Whether it runs on a CUDA GPU.
    pub on_cuda: bool,
}

/// The algorithms, in the order of the optimisation ladder.
pub const ALGORITHMS: &[AlgorithmInfo] = &[
    AlgorithmInfo {
        algorithm: Algorithm::Auto,
        name: "auto",
        summary: "winograd where its measured crossover gives a level, else the device's classical product (packed; cublas, or cuda-fast for integers)",
        uses_tile: false,
        uses_threads: true,
        on_cpu: true,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Naive,
        name: "naive",
        summary: "i-j-k triple loop, one dot product per element (every seed)",
        uses_tile: false,
        uses_threads: false,
        on_cpu: true,
        on_cuda: false,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Ikj,
        name: "ikj",
        summary: "loop interchange over contiguous rows (seed 002 §5)",
        uses_tile: false,
        uses_threads: false,
        on_cpu: true,
        on_cuda: false,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Tiled,
        name: "tiled",
        summary: "i-k-j inside square tiles (seed 002 §6.3-6.4)",
        uses_tile: true,
        uses_threads: false,
        on_cpu: true,
        on_cuda: false,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Parallel,
        name: "parallel",
        summary: "tiled, with tiles of C spread over threads (seed 002 §6-7)",
        uses_tile: true,
        uses_threads: true,
        on_cpu: true,
        on_cuda: false,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Packed,
        name: "packed",
        summary: "BLIS-style cache blocking, packing and SIMD microkernels",
        uses_tile: false,
        uses_threads: true,
        on_cpu: true,
        on_cuda: false,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Strassen,
        name: "strassen",
        summary: "Strassen's recursion (7 products, 18 additions) over packed, or on a GPU over cublas/cuda-fast (seeds 000, 003)",
        uses_tile: false,
        uses_threads: true,
        on_cpu: true,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Winograd,
        name: "winograd",
        summary: "Winograd's variant (7 products, 15 additions), on either device (seeds 000, 003)",
        uses_tile: false,
        uses_threads: true,
        on_cpu: true,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaNaive,
        name: "cuda-naive",
        summary: "CUDA, one thread per element, global memory only (seeds 001, 002 §10.3.1, 004)",
        uses_tile: false,
        uses_threads: false,
        on_cpu: false,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaTiled,
        name: "cuda-tiled",
        summary: "CUDA, shared-memory tiles (seeds 000 §5.3, 001, 002 §10.3.4, 004)",
        uses_tile: true,
        uses_threads: false,
        on_cpu: false,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::CudaFast,
        name: "cuda-fast",
        summary: "CUDA, own kernels: register-blocked SIMT tiles; f64 on the FP64 tensor cores (sm_90+)",
        uses_tile: false,
        uses_threads: false,
        on_cpu: false,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Cublas,
        name: "cublas",
        summary: "cuBLAS sgemm/dgemm, row-major through the Cᵀ = BᵀAᵀ swap",
        uses_tile: false,
        uses_threads: false,
        on_cpu: false,
        on_cuda: true,
    },
    AlgorithmInfo {
        algorithm: Algorithm::Emulated,
        name: "emulated",
        summary: "f32/f64 from exact INT8 residue products (Ozaki scheme II), certified within the classical bound; i32/i64 exact from INT8 products of their bytes; INT8 tensor cores on a GPU, the slow reference twin on the CPU",
        uses_tile: false,
        uses_threads: false,
        on_cpu: true,
        on_cuda: true,
    },
];

/// Names the algorithms had when the device was part of the name, and the
/// spelling that replaced them.
const RENAMED: &[(&str, &str)] = &[
    ("cuda-strassen", "strassen on a CUDA device"),
    ("cuda-winograd", "winograd on a CUDA device"),
];

impl Algorithm {
    /// Its row of the table.
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

    /// Whether it runs on devices of `kind`.
    pub fn runs_on(self, kind: DeviceKind) -> bool {
        let info = self.info();
        match kind {
            DeviceKind::Cpu => info.on_cpu,
            DeviceKind::Cuda => info.on_cuda,
        }
    }

    /// The kinds of device it runs on, the CPU first.
    pub fn device_kinds(self) -> impl Iterator<Item = DeviceKind> {
        DeviceKind::ALL
            .iter()
            .copied()
            .filter(move |&kind| self.runs_on(kind))
    }

    /// The classical algorithm `auto` stands for on devices of `kind` for
    /// `dtype`: `packed` on the CPU; on a GPU cuBLAS for floats and
    /// `cuda-fast` for integers (cuBLAS has no integer GEMM). It is also
    /// Strassen's default base there.
    pub fn auto_for(kind: DeviceKind, dtype: crate::element::DType) -> Algorithm {
        match kind {
            DeviceKind::Cpu => Algorithm::Packed,
            DeviceKind::Cuda if dtype.is_integer() => Algorithm::CudaFast,
            DeviceKind::Cuda => Algorithm::Cublas,
        }
    }

    /// Whether it is Strassen's or Winograd's recursion.
    pub fn is_fast(self) -> bool {
        matches!(self, Algorithm::Strassen | Algorithm::Winograd)
    }

    /// Whether it can be the classical base under Strassen/Winograd.
    pub fn is_classical(self) -> bool {
        !self.is_fast() && self != Algorithm::Auto
    }

    /// Every algorithm but `auto`, in ladder order.
    pub fn all() -> impl Iterator<Item = Algorithm> {
        ALGORITHMS
            .iter()
            .map(|info| info.algorithm)
            .filter(|&a| a != Algorithm::Auto)
    }

    /// Every algorithm but `auto` that runs on devices of `kind`.
    pub fn all_on(kind: DeviceKind) -> impl Iterator<Item = Algorithm> {
        Algorithm::all().filter(move |a| a.runs_on(kind))
    }

    /// Whether it multiplies elements of `dtype`: cuBLAS takes floats only
    /// (it has no integer GEMM).
    pub fn supports(self, dtype: crate::element::DType) -> bool {
        !(dtype.is_integer() && self == Algorithm::Cublas)
    }

    /// Every algorithm but `auto` that runs on devices of `kind` and
    /// multiplies elements of `dtype`.
    pub fn all_for(
        kind: DeviceKind,
        dtype: crate::element::DType,
    ) -> impl Iterator<Item = Algorithm> {
        Algorithm::all_on(kind).filter(move |a| a.supports(dtype))
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
    /// stands for every algorithm that runs on devices of `kind`.
    pub fn parse_list(list: &str, kind: DeviceKind) -> Result<Vec<Algorithm>, Error> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim) {
            if name.eq_ignore_ascii_case("all") {
                out.extend(Algorithm::all_on(kind));
            } else {
                out.push(name.parse()?);
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let name = s.trim();
        if let Some((old, new)) = RENAMED
            .iter()
            .find(|(old, _)| old.eq_ignore_ascii_case(name))
        {
            return Err(Error::UnknownAlgorithm(
                old.to_string(),
                format!("it is now {new}: --algo {} --device cuda", &old[5..]),
            ));
        }
        ALGORITHMS
            .iter()
            .find(|info| info.name.eq_ignore_ascii_case(name))
            .map(|info| info.algorithm)
            .ok_or_else(|| {
                Error::UnknownAlgorithm(
                    name.to_string(),
                    format!("expected one of: {}, all", Algorithm::names()),
                )
            })
    }
}

named_choice! {
    /// A family of CPU microkernels of `packed`, one per element type.
    pub enum CpuKernel ("CPU kernel") {
        /// AVX-512F/DQ with FMA (x86-64).
        Avx512 = "avx512",
        /// AVX2 with FMA (x86-64).
        Avx2 = "avx2",
        /// Portable scalar loops: the reference twin.
        Generic = "generic",
    }
}

named_choice! {
    /// How Strassen/Winograd use memory at each level.
    #[derive(Default)]
    pub enum Variant ("variant") {
        /// Every sum and product of a level in its own temporary (seed 000).
        Temporaries = "temporaries",
        /// Products straight into C, 2–3 temporaries per level (seed 003);
        /// the default where `batched`'s temporaries do not fit.
        #[default]
        Frugal = "frugal",
        /// No temporaries: each product's operand sums are formed while the
        /// base product packs (CPU) or stages (GPU) its tiles, and its
        /// result is added into every C block it feeds (Huang et al., SC16).
        Fused = "fused",
        /// Every sum and product stored, as in `temporaries`, with a
        /// level's sums in three groups (those of A, of B, C's quadrants)
        /// formed in one pass each, reading every source once.
        Batched = "batched",
    }
}

named_choice! {
    /// How Strassen/Winograd on the CPU write a freshly formed sum.
    ///
    /// A pass of sums whose destinations outgrow the last-level cache is
    /// evicted before the products read it, so ordinary stores only add a
    /// read for ownership of every line; non-temporal stores skip it.
    #[derive(Default)]
    pub enum SumStores ("sum-store policy") {
        /// Stream the passes whose fresh destinations total at least half
        /// of the last-level cache.
        #[default]
        Auto = "auto",
        /// Stream every fresh sum.
        Stream = "stream",
        /// Never stream.
        Cached = "cached",
    }
}

named_choice! {
    /// Where GPU algorithms keep their operands.
    #[derive(Default)]
    pub enum GpuMemory ("GPU memory") {
        /// `cuMemAlloc`: linear device memory (the default).
        #[default]
        Device = "device",
        /// `cuMemAllocPitch`: rows padded so each starts aligned.
        Pitched = "pitched",
        /// `cuMemAllocManaged`: one address for host and device; pages
        /// migrate on first touch, inside the kernel's time.
        Managed = "managed",
    }
}

named_choice! {
    /// The arithmetic of a `cublas` f32 product: IEEE f32, or a tensor-core
    /// mode (opt-in, reported in every output, verified against the looser
    /// bound of its input precision).
    #[derive(Default)]
    pub enum GpuPrecision ("precision") {
        /// IEEE f32 throughout (sgemm; the default).
        #[default]
        Fp32 = "fp32",
        /// TF32 tensor cores (operands rounded to a 10-bit mantissa).
        Tf32 = "tf32",
        /// Operands in bfloat16, f32 accumulation.
        Bf16 = "bf16",
        /// Operands in IEEE half, f32 accumulation.
        F16 = "f16",
    }
}

impl GpuPrecision {
    /// Unit roundoff of the operands as the tensor cores see them.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            GpuPrecision::Fp32 => f64::from(f32::EPSILON) / 2.0,
            GpuPrecision::Tf32 | GpuPrecision::F16 => 2f64.powi(-11),
            GpuPrecision::Bf16 => 2f64.powi(-8),
        }
    }

    /// How much larger than f32's the error bound of a product may be: the
    /// ratio of unit roundoffs.
    pub fn error_growth(self) -> f64 {
        self.unit_roundoff() / GpuPrecision::Fp32.unit_roundoff()
    }
}

/// What a product promises about its error: the contract `auto` chooses
/// within and the emulated product certifies.
///
/// * `native` (the default): as accurate as the device's native classical
///   product (`packed` on the CPU; cuBLAS sgemm/dgemm, `cuda-fast` for
///   integers on a GPU) on the same inputs. Measured: over the input
///   classes of the `accuracy` module and depths from hundreds to 16384,
///   the relative Frobenius error and the largest |Ĉ − C|/(|A||B|) are
///   each within 2× the native product's. The emulated product certifies
///   every element within c·√k·u·(|A||B|)_ij (the certificate's target,
///   in the `emulation` module).
/// * `bound`: within the classical componentwise bound (k+1)·u·(|A||B|)_ij
///   (the verifier's, with the plan's growth for Strassen's levels):
///   Strassen/Winograd levels and fewer moduli are allowed.
/// * `tf32`, `bf16`: the same bound at the unit roundoff of TF32 (2⁻¹¹) or
///   bfloat16 (2⁻⁸): cuBLAS's tensor-core modes are allowed.
/// * `bits:N`: the emulated product with N bits per scaled entry (the
///   moduli follow from N and k), for experts; NaN and ∞ still go native.
///
/// Integer products are exact at every level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Accuracy {
    /// As accurate as the device's native classical product.
    #[default]
    Native,
    /// Within the classical componentwise bound.
    Bound,
    /// Within the classical bound at TF32's unit roundoff.
    Tf32,
    /// Within the classical bound at bfloat16's unit roundoff.
    Bf16,
    /// The emulated product at this many bits per scaled entry.
    Bits(u32),
}

impl Accuracy {
    /// The named levels, strictest first (`bits:N` is not among them).
    pub const LEVELS: [Accuracy; 4] = [
        Accuracy::Native,
        Accuracy::Bound,
        Accuracy::Tf32,
        Accuracy::Bf16,
    ];

    /// The most bits `bits:N` may ask for (a scaled entry converts to an
    /// i64).
    pub const MAX_BITS: u32 = 62;

    /// How loose the level is: 0 for `native`, growing with each relaxed
    /// level; `bits:N` ranks with the level its precision reaches at no
    /// depth in particular, so it is kept apart (`None`).
    pub fn rank(self) -> Option<u8> {
        match self {
            Accuracy::Native => Some(0),
            Accuracy::Bound => Some(1),
            Accuracy::Tf32 => Some(2),
            Accuracy::Bf16 => Some(3),
            Accuracy::Bits(_) => None,
        }
    }

    /// Whether a product that gives `given` meets this level: a level is
    /// met by itself and by every stricter one; `bits:N` only by itself.
    pub fn met_by(self, given: Accuracy) -> bool {
        match (self.rank(), given.rank()) {
            (Some(asked), Some(got)) => got <= asked,
            _ => self == given,
        }
    }

    /// The unit roundoff of the level's bound for elements of `dtype`:
    /// the type's own for `native` and `bound`, TF32's or bfloat16's where
    /// those are coarser; the type's for `bits:N`.
    pub fn unit_roundoff(self, dtype: crate::element::DType) -> f64 {
        let own = dtype.unit_roundoff();
        match self {
            Accuracy::Tf32 => own.max(GpuPrecision::Tf32.unit_roundoff()),
            Accuracy::Bf16 => own.max(GpuPrecision::Bf16.unit_roundoff()),
            _ => own,
        }
    }

    /// The level a cuBLAS f32 mode gives.
    pub fn of_precision(precision: GpuPrecision) -> Accuracy {
        match precision {
            GpuPrecision::Fp32 => Accuracy::Native,
            // IEEE half has TF32's mantissa (and a narrower range, which
            // the verifier's bound does not cover; it is never chosen).
            GpuPrecision::Tf32 | GpuPrecision::F16 => Accuracy::Tf32,
            GpuPrecision::Bf16 => Accuracy::Bf16,
        }
    }
}

impl fmt::Display for Accuracy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accuracy::Native => f.write_str("native"),
            Accuracy::Bound => f.write_str("bound"),
            Accuracy::Tf32 => f.write_str("tf32"),
            Accuracy::Bf16 => f.write_str("bf16"),
            Accuracy::Bits(bits) => write!(f, "bits:{bits}"),
        }
    }
}

impl serde::Serialize for Accuracy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl FromStr for Accuracy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let text = s.trim().to_ascii_lowercase();
        let bad = || {
            Error::InvalidOption(format!(
                "unknown accuracy '{}' (expected native, bound, tf32, bf16 or bits:N with N from 1 to {})",
                s.trim(),
                Accuracy::MAX_BITS
            ))
        };
        if let Some(bits) = text.strip_prefix("bits:") {
            return match bits.trim().parse::<u32>() {
                Ok(n) if (1..=Accuracy::MAX_BITS).contains(&n) => Ok(Accuracy::Bits(n)),
                _ => Err(bad()),
            };
        }
        Accuracy::LEVELS
            .iter()
            .copied()
            .find(|level| level.to_string() == text)
            .ok_or_else(bad)
    }
}

named_choice! {
    /// The kernel family of `cuda-fast`.
    #[derive(Default)]
    pub enum CudaKernel ("CUDA kernel") {
        /// `mma` for f64 on sm_90 and later, else `simt`.
        #[default]
        Auto = "auto",
        /// Register-blocked SIMT tiles on the FMA units; every type.
        Simt = "simt",
        /// f64 on the FP64 tensor cores (sm_90 and later).
        Mma = "mma",
    }
}

/// MC, KC and NC of `packed`'s five-loop driver, in elements: rows of A
/// packed at once, the depth of one packed block, columns of B packed at
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockSizes {
    /// Rows of A packed at once.
    pub mc: usize,
    /// Depth (shared dimension) of one packed block.
    pub kc: usize,
    /// Columns of B packed at once.
    pub nc: usize,
}

impl BlockSizes {
    /// Parses "MC,KC,NC", as given to `--blocks` or `FASTMM_BLOCKS`.
    pub fn parse(text: &str) -> Result<BlockSizes, Error> {
        let bad = || {
            Error::InvalidOption(format!(
                "block sizes '{text}' are not three positive integers MC,KC,NC"
            ))
        };
        let values: Vec<usize> = text
            .split(',')
            .map(|v| v.trim().parse::<usize>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match values[..] {
            [mc, kc, nc] if mc > 0 && kc > 0 && nc > 0 => Ok(BlockSizes { mc, kc, nc }),
            _ => Err(bad()),
        }
    }

    /// The same sizes rounded up to whole micro-panels of an `mr`×`nr` kernel.
    pub fn fitted(self, mr: usize, nr: usize) -> BlockSizes {
        BlockSizes {
            mc: self.mc.div_ceil(mr) * mr,
            kc: self.kc,
            nc: self.nc.div_ceil(nr) * nr,
        }
    }
}

impl fmt::Display for BlockSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.mc, self.kc, self.nc)
    }
}

/// How to multiply: what is asked (the algorithm, the accuracy level,
/// the threads), then the tunables in groups, each checked by its own
/// `check`: the fast algorithms' ([`FastOptions`]), the CPU's
/// ([`CpuOptions`]) and the GPU's ([`GpuOptions`]). `None` means the
/// default: the option given here wins, then the environment
/// ([`crate::config`]), then the tuning file, then the built-in rule.
///
/// The device is not an option: it is the [`crate::Context`] the product
/// runs in.
///
/// ```
/// use fastmm::{Algorithm, GemmOptions, Variant};
/// let opts = GemmOptions::new(Algorithm::Winograd).threshold(512).variant(Variant::Frugal);
/// assert_eq!(opts.fast.threshold, Some(512));
/// assert!(opts.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GemmOptions {
    /// Which algorithm runs.
    pub algorithm: Algorithm,
    /// What the product promises about its error (default `native`):
    /// `auto` takes the fastest product that meets it, and the emulated
    /// product certifies it.
    pub accuracy: Accuracy,
    /// CPU: worker threads of the threaded algorithms (default: the tuning
    /// file's, else all hardware threads). A count above the hardware
    /// threads runs as asked, oversubscribing the cores; the command line
    /// caps it.
    pub threads: Option<usize>,
    /// Tile edge of `tiled`, `parallel` and `cuda-tiled`; micro-tile rows
    /// of `cuda-fast`'s SIMT kernel.
    pub tile: Option<usize>,
    /// `strassen`'s and `winograd`'s choices.
    pub fast: FastOptions,
    /// The CPU's kernel and blocks.
    pub cpu: CpuOptions,
    /// The GPU's kernels, memory and budget.
    pub gpu: GpuOptions,
    /// A flag another thread may raise to stop the product between
    /// blocks, which then returns [`Error::Interrupted`] (default: none,
    /// and nothing is checked).
    pub interrupt: Option<Interrupt>,
}

/// The choices of `strassen` and `winograd` (the classical algorithms
/// ignore them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastOptions {
    /// Memory schedule (default: `batched` when its temporaries fit, else
    /// `frugal`).
    pub variant: Option<Variant>,
    /// Recurse while m, k, n are all at least this (default: the measured
    /// crossover of the device and type).
    pub threshold: Option<usize>,
    /// With `threshold`: apply a first level only from this size (default
    /// 0: from the threshold). A plan pins the crossover it chose here,
    /// so that its product runs that crossover and decides nothing again.
    pub start: Option<usize>,
    /// Most recursion levels (default: the accuracy rule: f32 2, f64 4,
    /// integers unlimited).
    pub depth: Option<usize>,
    /// The classical product below (default: `packed` on the CPU;
    /// `cublas`, or `cuda-fast` for integers, on a GPU).
    pub base: Option<Algorithm>,
    /// CPU, stored schedules: operand sums of at most this many blocks
    /// read by a leaf product are formed while `packed` packs instead of
    /// stored (default 0: every sum stored).
    pub lazy_sums: Option<usize>,
    /// CPU: how fresh sums are stored (default `auto`).
    pub sum_stores: Option<SumStores>,
}

/// The CPU's choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuOptions {
    /// Microkernel family of `packed` (default: `FASTMM_CPU_KERNEL`, else
    /// the fastest this CPU runs).
    pub kernel: Option<CpuKernel>,
    /// Cache block sizes of `packed` (default: `FASTMM_BLOCKS`, else the
    /// tuning file's, else derived from the caches).
    pub block_sizes: Option<BlockSizes>,
    /// `packed`: products of at least this edge cubed (m·k·n ≥ n³) run on
    /// several threads, smaller ones on the calling thread alone (default:
    /// the tuning file's measured crossover, else 128 for 8-byte and 160
    /// for 4-byte elements).
    pub parallel_from: Option<usize>,
}

/// The GPU's choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuOptions {
    /// Where the operands live (default: device memory).
    pub memory: Option<GpuMemory>,
    /// Stage host↔device copies in page-locked memory.
    pub pinned: bool,
    /// The most GPU memory a product may use, in bytes (default: the free
    /// memory). A product whose A, B and C exceed it runs out of core,
    /// streamed through the GPU in tiles.
    pub max_memory: Option<u64>,
    /// Stream the product in tiles even when it fits.
    pub out_of_core: bool,
    /// `cublas` on f32: the tensor-core mode (default: IEEE f32).
    pub precision: Option<GpuPrecision>,
    /// `cuda-fast`: the kernel family (default: `FASTMM_CUDA_KERNEL`, else
    /// `auto`).
    pub kernel: Option<CudaKernel>,
}

/// When a call on GPU-resident operands returns
/// ([`crate::Context::gemm_gpu_batch`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GpuCompletion {
    /// When its products are complete and any kernel error is reported.
    #[default]
    Complete,
    /// As an operation on the CUDA stream of this raw handle would (a
    /// `CUstream` of the context's GPU, as torch's `Stream.cuda_stream`
    /// gives it; 0 is the legacy default stream): the products follow the
    /// work queued on that stream before the call, and later work on it
    /// follows them, both through events; the call returns once they are
    /// queued, and the host does not wait. A product that reads its own
    /// results midway (the emulated product's certificate), keeps
    /// temporaries or runs on several streams also waits as
    /// [`GpuCompletion::Complete`] does.
    OnStream(usize),
}

/// A flag that stops a running product between blocks: a fast
/// algorithm's sub-products, `packed`'s panels of k on large products,
/// out-of-core tiles. The product then returns [`Error::Interrupted`] and
/// leaves C unspecified, so a caller that must keep C intact multiplies
/// into a temporary.
///
/// It refers to a `'static` flag so that [`GemmOptions`] stays a plain
/// `Copy` value; [`Interrupt::leak`] makes one, to be reused (a thread's
/// own, say) rather than made per product.
///
/// ```
/// use fastmm::{gemm, Algorithm, Error, GemmOptions, Interrupt, Matrix};
/// let stop = Interrupt::leak();
/// let opts = GemmOptions::new(Algorithm::Packed).interrupt(stop);
/// let a = Matrix::<f64>::from_fn(64, 64, |i, j| (i + j) as f64);
/// let mut c = Matrix::zeros(64, 64);
/// stop.raise(); // as a signal handler or a watchdog thread would
/// assert_eq!(gemm(1.0, a.as_ref(), a.as_ref(), 0.0, c.as_mut(), &opts), Err(Error::Interrupted));
/// stop.clear();
/// assert!(gemm(1.0, a.as_ref(), a.as_ref(), 0.0, c.as_mut(), &opts).is_ok());
/// ```
#[derive(Clone, Copy)]
pub struct Interrupt(&'static std::sync::atomic::AtomicBool);

impl Interrupt {
    /// An interrupt on `flag`: raised while the flag holds `true`.
    pub fn new(flag: &'static std::sync::atomic::AtomicBool) -> Interrupt {
        Interrupt(flag)
    }

    /// A new flag, lowered, that lives as long as the process.
    pub fn leak() -> Interrupt {
        Interrupt(Box::leak(Box::new(std::sync::atomic::AtomicBool::new(
            false,
        ))))
    }

    /// Asks every product that holds this interrupt to stop.
    pub fn raise(self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Lowers the flag again, for the next product.
    pub fn clear(self) {
        self.0.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the flag is raised.
    pub fn is_raised(self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `Err(Error::Interrupted)` once raised: the check between blocks.
    pub fn check(self) -> Result<(), Error> {
        if self.is_raised() {
            Err(Error::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// Two interrupts are equal when they share a flag.
impl PartialEq for Interrupt {
    fn eq(&self, other: &Interrupt) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Interrupt {}

impl fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Interrupt(raised: {})", self.is_raised())
    }
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
        self.cpu.kernel = Some(kernel);
        self
    }

    /// Sets the cache block sizes of `packed`.
    pub fn block_sizes(mut self, blocks: BlockSizes) -> Self {
        self.cpu.block_sizes = Some(blocks);
        self
    }

    /// Sets the memory schedule of `strassen`/`winograd`.
    pub fn variant(mut self, variant: Variant) -> Self {
        self.fast.variant = Some(variant);
        self
    }

    /// Sets the recursion threshold n₀ of `strassen`/`winograd`.
    pub fn threshold(mut self, threshold: usize) -> Self {
        self.fast.threshold = Some(threshold);
        self
    }

    /// Runs `packed` on several threads from products of `edge`³
    /// multiply-adds (0 or 1: every product that has its threads).
    pub fn parallel_from(mut self, edge: usize) -> Self {
        self.cpu.parallel_from = Some(edge);
        self
    }

    /// Caps the recursion levels of `strassen`/`winograd`.
    pub fn depth(mut self, depth: usize) -> Self {
        self.fast.depth = Some(depth);
        self
    }

    /// Sets the most terms of an operand sum that a leaf product of
    /// `strassen`/`winograd` forms while packing (0: every sum stored).
    pub fn lazy_sums(mut self, terms: usize) -> Self {
        self.fast.lazy_sums = Some(terms);
        self
    }

    /// Sets how CPU `strassen`/`winograd` store fresh sums.
    pub fn sum_stores(mut self, policy: SumStores) -> Self {
        self.fast.sum_stores = Some(policy);
        self
    }

    /// Sets the classical algorithm under `strassen`/`winograd`.
    pub fn base(mut self, base: Algorithm) -> Self {
        self.fast.base = Some(base);
        self
    }

    /// Sets the accuracy level.
    pub fn accuracy(mut self, accuracy: Accuracy) -> Self {
        self.accuracy = accuracy;
        self
    }

    /// Lets `interrupt` stop the product between blocks.
    pub fn interrupt(mut self, interrupt: Interrupt) -> Self {
        self.interrupt = Some(interrupt);
        self
    }

    /// `Err(Error::Interrupted)` when this product's interrupt is raised.
    pub fn check_interrupt(&self) -> Result<(), Error> {
        self.interrupt.map_or(Ok(()), Interrupt::check)
    }

    /// Rejects option values no algorithm can use, whatever the device:
    /// the request's here, each group's by its own `check` (the device's
    /// rules come when the product is planned, [`FastOptions::check_on`]
    /// and [`GpuOptions::check_streamed`]).
    pub fn validate(&self) -> Result<(), Error> {
        if self.threads == Some(0) {
            return Err(Error::InvalidOption(
                "thread count must be at least 1".into(),
            ));
        }
        if self.tile == Some(0) {
            return Err(Error::InvalidOption("tile size must be at least 1".into()));
        }
        if let Accuracy::Bits(bits) = self.accuracy {
            if !(1..=Accuracy::MAX_BITS).contains(&bits) {
                return Err(Error::InvalidOption(format!(
                    "bits:{bits}: an emulated product takes 1 to {} bits per entry",
                    Accuracy::MAX_BITS
                )));
            }
        }
        self.fast.check()?;
        self.cpu.check()
    }
}

impl FastOptions {
    /// Rejects values no device can use.
    pub fn check(&self) -> Result<(), Error> {
        if matches!(self.threshold, Some(t) if t < 2) {
            return Err(Error::InvalidOption(
                "Strassen threshold must be at least 2 (each level halves m, k and n)".into(),
            ));
        }
        if let Some(base) = self.base {
            if !base.is_classical() {
                return Err(Error::InvalidOption(format!(
                    "the base of strassen/winograd must be a classical algorithm, not {base}"
                )));
            }
            if base != Algorithm::Packed && matches!(self.lazy_sums, Some(t) if t > 0) {
                return Err(Error::InvalidOption(format!(
                    "lazy sums are formed inside packed's packing, so the base must be packed, not {base}"
                )));
            }
        }
        Ok(())
    }

    /// The base `algorithm` runs on a CPU: the option, else `packed`.
    pub fn cpu_base(&self) -> Algorithm {
        self.base.unwrap_or(Algorithm::Packed)
    }

    /// The rules of `algorithm` (Strassen or Winograd) on `device`: its
    /// base runs there too; on the CPU the fused variant forms its sums in
    /// `packed`'s packing (so its base is `packed`); on a GPU the fused
    /// variant runs its own kernel (no base) and sums are stored (no lazy
    /// sums).
    pub fn check_on(&self, algorithm: Algorithm, device: DeviceKind) -> Result<(), Error> {
        match device {
            DeviceKind::Cpu => {
                let base = self.cpu_base();
                if !base.runs_on(DeviceKind::Cpu) {
                    return Err(Error::InvalidOption(format!(
                        "the base of {algorithm} must run on the CPU too, not {base}"
                    )));
                }
                if base != Algorithm::Packed && self.variant == Some(Variant::Fused) {
                    return Err(Error::InvalidOption(format!(
                        "the fused variant forms its sums inside packed's packing, so its base must be packed, not {base}"
                    )));
                }
            }
            DeviceKind::Cuda => {
                if let Some(base) = self.base {
                    if !base.runs_on(DeviceKind::Cuda) {
                        return Err(Error::InvalidOption(format!(
                            "the base of {algorithm} must run on the GPU too, not {base}"
                        )));
                    }
                    if self.variant == Some(Variant::Fused) {
                        return Err(Error::InvalidOption(format!(
                            "the fused variant on the GPU runs its own kernel (kernels/fused.cu) for every product, so it takes no base ({base} given)"
                        )));
                    }
                }
                if matches!(self.lazy_sums, Some(t) if t > 0) {
                    return Err(Error::InvalidOption(format!(
                        "lazy sums are formed inside packed's packing, on the CPU; {algorithm} on a GPU stores its sums"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl CpuOptions {
    /// Rejects values no CPU product can use.
    pub fn check(&self) -> Result<(), Error> {
        if let Some(b) = self.block_sizes {
            if b.mc == 0 || b.kc == 0 || b.nc == 0 {
                return Err(Error::InvalidOption(
                    "block sizes must be at least 1".into(),
                ));
            }
        }
        Ok(())
    }
}

impl GpuOptions {
    /// The rules of a product streamed through the GPU out of core: it
    /// streams through device memory, and takes f32's own arithmetic or
    /// TF32 (the 16-bit modes convert whole operands).
    pub fn check_streamed(&self) -> Result<(), Error> {
        if let Some(memory) = self.memory.filter(|&m| m != GpuMemory::Device) {
            return Err(Error::InvalidOption(format!(
                "an out-of-core product streams through device memory, not {memory} memory"
            )));
        }
        if let Some(p) = self
            .precision
            .filter(|&p| !matches!(p, GpuPrecision::Fp32 | GpuPrecision::Tf32))
        {
            return Err(Error::InvalidOption(format!(
                "precision {p} converts whole operands to 16 bits; an out-of-core product takes fp32 or tf32"
            )));
        }
        Ok(())
    }
}

/// How a complex product is made of real ones (see `fastmm::complex`,
/// which states each form's bound); cuBLAS's own complex products on
/// GPU-resident interleaved operands are the same two forms (cgemm/zgemm
/// and cgemm3m/zgemm3m).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComplexForm {
    /// Four real products: the complex product's own rounding bound.
    Classical,
    /// Three real products (Gauss's trick, "3M"): a quarter fewer
    /// multiplications, a weaker componentwise bound on the imaginary part.
    Gauss,
}

impl ComplexForm {
    /// The form a level runs: the classical four real products at
    /// `native` (the complex product's own componentwise bound, as
    /// zgemm's), Gauss's three (3M) at the relaxed levels, which bound
    /// products norm-wise.
    pub fn for_level(level: Accuracy) -> ComplexForm {
        match level {
            Accuracy::Native => ComplexForm::Classical,
            _ => ComplexForm::Gauss,
        }
    }

    /// The form's name: "4m" or "3m".
    pub fn name(self) -> &'static str {
        match self {
            ComplexForm::Classical => "4m",
            ComplexForm::Gauss => "3m",
        }
    }

    /// Real products per complex product.
    pub fn products(self) -> usize {
        match self {
            ComplexForm::Classical => 4,
            ComplexForm::Gauss => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        for (text, device) in [
            ("cpu", Device::Cpu),
            ("CUDA", Device::Cuda(0)),
            ("cuda:3", Device::Cuda(3)),
            (" cuda:0 ", Device::Cuda(0)),
        ] {
            assert_eq!(text.parse::<Device>().unwrap(), device, "{text}");
        }
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
        for (text, list) in [
            ("cuda:all", DeviceList::AllGpus),
            (
                "CUDA:0, 2",
                DeviceList::Listed(vec![Device::Cuda(0), Device::Cuda(2)]),
            ),
            ("cpu", DeviceList::Listed(vec![Device::Cpu])),
            ("cuda:1", DeviceList::Listed(vec![Device::Cuda(1)])),
        ] {
            let parsed = text.parse::<DeviceList>().unwrap();
            assert_eq!(parsed, list, "{text}");
            assert_eq!(parsed.to_string().parse::<DeviceList>().unwrap(), list);
        }
        for bad in ["cuda:0,0", "cuda:0,x", "cuda:,1", "gpu:all"] {
            assert!(
                matches!(bad.parse::<DeviceList>(), Err(Error::InvalidOption(_))),
                "{bad}"
            );
        }
        for bad in ["gpu", "cuda:", "cuda:x", "cuda:0,1", "tpu:0"] {
            let err = bad.parse::<Device>().unwrap_err().to_string();
            assert!(err.contains(bad.trim()), "{bad}: {err}");
        }
    }

    #[test]
    fn algorithms_name_their_devices_and_old_names_say_what_replaced_them() {
        assert!(Algorithm::Strassen.runs_on(DeviceKind::Cpu));
        assert!(Algorithm::Strassen.runs_on(DeviceKind::Cuda));
        assert!(!Algorithm::Packed.runs_on(DeviceKind::Cuda));
        assert!(!Algorithm::Cublas.runs_on(DeviceKind::Cpu));
        assert!(Algorithm::all().all(|a| a.device_kinds().count() >= 1));
        assert!(!Algorithm::all().any(|a| a == Algorithm::Auto));
        for algorithm in Algorithm::all().chain([Algorithm::Auto]) {
            assert_eq!(algorithm.name().parse::<Algorithm>().unwrap(), algorithm);
        }
        let err = "cuda-strassen"
            .parse::<Algorithm>()
            .unwrap_err()
            .to_string();
        assert!(err.contains("--device cuda"), "{err}");
        assert_eq!(
            Algorithm::parse_list("all", DeviceKind::Cuda).unwrap(),
            Algorithm::all_on(DeviceKind::Cuda).collect::<Vec<_>>()
        );
    }

    #[test]
    fn named_choices_round_trip_and_list_the_names_when_unknown() {
        for &v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>().unwrap(), v);
        }
        assert_eq!(" AVX2 ".parse::<CpuKernel>().unwrap(), CpuKernel::Avx2);
        let err = "sse".parse::<CpuKernel>().unwrap_err().to_string();
        assert!(err.contains("avx512, avx2, generic"), "{err}");
        assert_eq!(GpuPrecision::default(), GpuPrecision::Fp32);
        assert_eq!(GpuPrecision::Fp32.error_growth(), 1.0);
        assert_eq!(GpuPrecision::Bf16.error_growth(), 65536.0);
    }

    #[test]
    fn block_sizes_parse_and_fit() {
        assert_eq!(
            BlockSizes::parse("96, 256,1024").unwrap(),
            BlockSizes {
                mc: 96,
                kc: 256,
                nc: 1024
            }
        );
        for bad in ["1,2", "0,1,2", "a,b,c", "1,2,3,4"] {
            assert!(BlockSizes::parse(bad).is_err(), "{bad}");
        }
        let fitted = BlockSizes::parse("10,64,50").unwrap().fitted(8, 24);
        assert_eq!((fitted.mc, fitted.kc, fitted.nc), (16, 64, 72));
    }

    #[test]
    fn options_that_no_algorithm_can_use_are_refused() {
        for bad in [
            GemmOptions::new(Algorithm::Packed).threads(0),
            GemmOptions::new(Algorithm::Tiled).tile(0),
            GemmOptions::new(Algorithm::Strassen).threshold(1),
            GemmOptions::new(Algorithm::Strassen).base(Algorithm::Winograd),
            GemmOptions::new(Algorithm::Strassen)
                .base(Algorithm::Naive)
                .lazy_sums(2),
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::InvalidOption(_))),
                "{bad:?}"
            );
        }
        assert!(GemmOptions::default().validate().is_ok());
        let blocks = BlockSizes {
            mc: 0,
            kc: 256,
            nc: 1024,
        };
        assert!(GemmOptions::default()
            .block_sizes(blocks)
            .validate()
            .is_err());
    }

    #[test]
    fn each_group_checks_its_own_rules() {
        let refused = |r: Result<(), Error>| matches!(r, Err(Error::InvalidOption(_)));
        let gpu = |memory, precision| GpuOptions {
            memory: Some(memory),
            precision: Some(precision),
            ..GpuOptions::default()
        };
        assert!(gpu(GpuMemory::Device, GpuPrecision::Tf32)
            .check_streamed()
            .is_ok());
        assert!(refused(
            gpu(GpuMemory::Managed, GpuPrecision::Fp32).check_streamed()
        ));
        assert!(refused(
            gpu(GpuMemory::Device, GpuPrecision::Bf16).check_streamed()
        ));
        // The same fast options, held to each device's rules.
        let lazy = FastOptions {
            lazy_sums: Some(2),
            ..FastOptions::default()
        };
        assert!(lazy.check().is_ok());
        assert!(lazy.check_on(Algorithm::Strassen, DeviceKind::Cpu).is_ok());
        assert!(refused(
            lazy.check_on(Algorithm::Strassen, DeviceKind::Cuda)
        ));
        let fused_on_cublas = FastOptions {
            variant: Some(Variant::Fused),
            base: Some(Algorithm::Cublas),
            ..FastOptions::default()
        };
        assert!(refused(
            fused_on_cublas.check_on(Algorithm::Winograd, DeviceKind::Cpu)
        ));
        assert!(refused(
            fused_on_cublas.check_on(Algorithm::Winograd, DeviceKind::Cuda)
        ));
        assert_eq!(FastOptions::default().cpu_base(), Algorithm::Packed);
    }
}
