//! The environment fastmm reads, read once into one [`Config`] value.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FASTMM_CPU_KERNEL` | `packed` microkernel family: `avx512`, `avx2`, `generic` (as `--cpu-kernel`) | the fastest the CPU runs |
//! | `FASTMM_BLOCKS` | `packed` cache blocks `MC,KC,NC` (as `--blocks`) | tuning file, else derived from the caches |
//! | `FASTMM_CUDA_KERNEL` | `cuda-fast` family: `auto`, `simt`, `mma` (as `--cuda-kernel`) | `auto` |
//! | `FASTMM_TUNING` | the tuning file's path, or `off` | `$XDG_CONFIG_HOME/fastmm/tuning.toml`, else `~/.config/fastmm/tuning.toml` |
//! | `FASTMM_KERNEL_CACHE` | directory of compiled GPU kernels (PTX), or `off` | `$XDG_CACHE_HOME/fastmm/kernels`, else `~/.cache/fastmm/kernels` |
//! | `FASTMM_NUM_THREADS` | CPU threads of a product (as `--threads`) | `OMP_NUM_THREADS`, else the tuning file's, else every hardware thread |
//!
//! `OMP_NUM_THREADS` is honoured (its first number, as OpenBLAS and MKL
//! read it) where `FASTMM_NUM_THREADS` is unset: it is how a job script
//! or an MPI launcher limits every library of a process at once, and a
//! fastmm that ignored it would oversubscribe the cores those limit. A
//! value of it that does not parse is ignored (other libraries read it
//! too) and named in [`Config::ignored`].
//!
//! An option given to a product ([`crate::GemmOptions`]) wins over the
//! environment, the environment over the tuning file, and the tuning file
//! over the built-in rules. A value that does not parse is kept as its
//! error and reported by the first product that needs it.
//!
//! **Developer switches.** Builds with the `dev` cargo feature also read
//! `FASTMM_DEV_CUDA_STREAM_K` (`off`, `on` or a number of whole waves),
//! `FASTMM_DEV_CUDA_WAVE_TAIL` (`on`/`off`), `FASTMM_DEV_CUDA_MBAR`
//! (`on`/`off`) and `FASTMM_DEV_CUDA_RING_STAGES` (2–8): the schedules and
//! kernel variants of `cuda-fast` that experiments compare; and
//! `FASTMM_DEV_CUDA_INT8` (`cublas`, `wgmma` or `wgmma-pairs`): which
//! kernels multiply the emulated product's INT8 planes. Other builds
//! ignore them and name them in [`Config::ignored`].

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::element::DType;
use crate::error::Error;
use crate::options::{BlockSizes, CpuKernel, CudaKernel};
use crate::tuning::{CpuTuning, CudaTuning, Tuning, TypeTuning};

/// `packed`'s microkernel family.
pub const CPU_KERNEL_ENV: &str = "FASTMM_CPU_KERNEL";
/// `packed`'s cache blocks.
pub const BLOCKS_ENV: &str = "FASTMM_BLOCKS";
/// `cuda-fast`'s kernel family.
pub const CUDA_KERNEL_ENV: &str = "FASTMM_CUDA_KERNEL";
/// The tuning file, or `off`.
pub const TUNING_ENV: &str = "FASTMM_TUNING";
/// The compiled-kernel cache directory, or `off`.
pub const KERNEL_CACHE_ENV: &str = "FASTMM_KERNEL_CACHE";
/// CPU threads of a product.
pub const NUM_THREADS_ENV: &str = "FASTMM_NUM_THREADS";
/// OpenMP's thread count, honoured where [`NUM_THREADS_ENV`] is unset.
pub const OMP_NUM_THREADS_ENV: &str = "OMP_NUM_THREADS";
/// Developer switch: `cuda-fast`'s stream-K schedule.
pub const DEV_STREAM_K_ENV: &str = "FASTMM_DEV_CUDA_STREAM_K";
/// Developer switch: `cuda-fast`'s wave-tail split.
pub const DEV_WAVE_TAIL_ENV: &str = "FASTMM_DEV_CUDA_WAVE_TAIL";
/// Developer switch: `cuda-fast`'s f64 mbarrier kernel.
pub const DEV_MBAR_ENV: &str = "FASTMM_DEV_CUDA_MBAR";
/// Developer switch: stages of `cuda-fast`'s cp.async ring.
pub const DEV_RING_STAGES_ENV: &str = "FASTMM_DEV_CUDA_RING_STAGES";
/// Developer switch: the emulated product's INT8 kernels.
pub const DEV_INT8_ENV: &str = "FASTMM_DEV_CUDA_INT8";
/// Read by the test suite only: fail, rather than skip, the NVRTC tests.
pub const REQUIRE_NVRTC_ENV: &str = "FASTMM_REQUIRE_NVRTC";
/// Read by the test suite only: fail, rather than skip, the checks that
/// round-trip files through numpy.
pub const REQUIRE_NUMPY_ENV: &str = "FASTMM_REQUIRE_NUMPY";

/// Every variable of the table above, the developer switches and the test
/// suite's own.
pub const VARIABLES: &[&str] = &[
    CPU_KERNEL_ENV,
    BLOCKS_ENV,
    CUDA_KERNEL_ENV,
    TUNING_ENV,
    KERNEL_CACHE_ENV,
    NUM_THREADS_ENV,
    DEV_STREAM_K_ENV,
    DEV_WAVE_TAIL_ENV,
    DEV_MBAR_ENV,
    DEV_RING_STAGES_ENV,
    DEV_INT8_ENV,
    REQUIRE_NVRTC_ENV,
    REQUIRE_NUMPY_ENV,
];

/// Variables earlier versions read, and what replaced each.
const REPLACED: &[(&str, &str)] = &[
    (
        "FASTMM_CUDA_STREAM_K",
        "the developer switch FASTMM_DEV_CUDA_STREAM_K",
    ),
    (
        "FASTMM_CUDA_WAVE_TAIL",
        "the developer switch FASTMM_DEV_CUDA_WAVE_TAIL",
    ),
    (
        "FASTMM_CUDA_MBAR",
        "the developer switch FASTMM_DEV_CUDA_MBAR",
    ),
    (
        "FASTMM_CUDA_RING_STAGES",
        "the developer switch FASTMM_DEV_CUDA_RING_STAGES",
    ),
    (
        "FASTMM_SUM_STORES",
        "the option --sum-stores (GemmOptions::sum_stores)",
    ),
];

/// Why a `FASTMM_*` variable that fastmm does not read is ignored.
/// The options a drop-in front end's environment asks for: the accuracy
/// level `FASTMM_ACCURACY` (default `native`) and the algorithm named by
/// `algorithm_var` (default `auto`). A value that does not parse, or
/// options that do not validate, are reported through `warn` and the
/// default used: a program given a drop-in library expects products,
/// not a failure to start. `var` is the environment, or a test's table.
pub fn front_end_options(
    var: &dyn Fn(&str) -> Option<String>,
    algorithm_var: &str,
    warn: &dyn Fn(&str),
) -> crate::options::GemmOptions {
    use crate::options::{Accuracy, Algorithm, GemmOptions};
    fn read<V: std::str::FromStr>(
        var: &dyn Fn(&str) -> Option<String>,
        name: &str,
        default: V,
        warn: &dyn Fn(&str),
    ) -> V
    where
        V::Err: std::fmt::Display,
    {
        match var(name) {
            None => default,
            Some(text) => text.trim().parse().unwrap_or_else(|e| {
                warn(&format!("{name}={text}: {e}; using the default"));
                default
            }),
        }
    }
    let accuracy = read(var, "FASTMM_ACCURACY", Accuracy::Native, warn);
    let algorithm = read(var, algorithm_var, Algorithm::Auto, warn);
    let opts = GemmOptions::new(algorithm).accuracy(accuracy);
    match opts.validate() {
        Ok(()) => opts,
        Err(e) => {
            warn(&format!("{e}; using auto at native accuracy"));
            GemmOptions::default()
        }
    }
}

fn unread(name: &str) -> String {
    match REPLACED.iter().find(|(old, _)| *old == name) {
        Some((_, new)) => format!("{name} (replaced by {new})"),
        None => format!("{name} (not a fastmm variable)"),
    }
}

/// The developer switches of `cuda-fast` (see the module docs). `None`
/// everywhere unless a `dev` build was given them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevSwitches {
    /// Stream-K off, on, or on with a number of whole waves.
    pub stream_k: Option<StreamK>,
    /// The wave-tail split on or off.
    pub wave_tail: Option<bool>,
    /// The f64 8×8 mbarrier kernel on or off.
    pub mbarriers: Option<bool>,
    /// Shared-memory stages of the cp.async ring.
    pub ring_stages: Option<usize>,
    /// The emulated product's INT8 kernels.
    pub int8: Option<Int8Kernels>,
}

/// Which kernels multiply the emulated product's INT8 planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Kernels {
    /// cuBLAS's integer GEMMs, in tiles.
    Cublas,
    /// fastmm's own warpgroup-MMA kernel (sm_90 only).
    Wgmma,
    /// The same in clusters of two blocks that share B's copies.
    WgmmaPairs,
}

/// The stream-K developer switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamK {
    /// Never stream-K.
    Off,
    /// Stream-K with the built-in number of whole waves.
    On,
    /// Stream-K sharing this many whole waves with the partial last one.
    Waves(usize),
}

/// The tuning file: where it was looked for and what was found.
#[derive(Debug, Clone)]
pub enum TuningState {
    /// `FASTMM_TUNING=off`, or no home directory to look in.
    Disabled,
    /// No file there: built-in rules.
    Missing,
    /// Read; [`Config::tuned_cpu`] and [`Config::tuned_cuda`] say what of
    /// it applies here.
    Loaded(Box<Tuning>),
    /// Unreadable or malformed: built-in rules, and this error to report.
    Invalid(String),
}

/// What the environment asks of fastmm, read once per process
/// ([`Config::get`]), or from any lookup for tests ([`Config::from_lookup`]).
#[derive(Debug, Clone)]
pub struct Config {
    cpu_kernel: Result<Option<CpuKernel>, Error>,
    blocks: Result<Option<BlockSizes>, Error>,
    cuda_kernel: Result<Option<CudaKernel>, Error>,
    threads: Result<Option<usize>, Error>,
    tuning_path: Option<PathBuf>,
    tuning: TuningState,
    kernel_cache: Option<PathBuf>,
    dev: Result<DevSwitches, Error>,
    ignored: Vec<String>,
    cpu_model: String,
}

/// The value of a variable that is set and not blank.
fn set(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name).filter(|v| !v.trim().is_empty())
}

/// A variable parsed with `parse`; its error names the variable.
fn parsed<T>(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, Error>,
) -> Result<Option<T>, Error> {
    set(lookup, name)
        .map(|text| parse(text.trim()).map_err(|e| Error::InvalidOption(format!("{name}: {e}"))))
        .transpose()
}

/// A thread count of at least 1.
fn thread_count(text: &str) -> Result<usize, Error> {
    match text.parse() {
        Ok(threads @ 1..) => Ok(threads),
        _ => Err(Error::InvalidOption(format!(
            "'{text}' is not a thread count of at least 1"
        ))),
    }
}

/// `FASTMM_NUM_THREADS`, else the first count of `OMP_NUM_THREADS` (an
/// OpenMP list such as `4,2` gives its outer level); an `OMP_NUM_THREADS`
/// that is no count is left to the libraries that read it and noted.
fn threads(
    lookup: &dyn Fn(&str) -> Option<String>,
    ignored: &mut Vec<String>,
) -> Result<Option<usize>, Error> {
    if set(lookup, NUM_THREADS_ENV).is_some() {
        return parsed(lookup, NUM_THREADS_ENV, thread_count);
    }
    let Some(omp) = set(lookup, OMP_NUM_THREADS_ENV) else {
        return Ok(None);
    };
    let first = omp.split(',').next().unwrap_or("").trim();
    match thread_count(first) {
        Ok(threads) => Ok(Some(threads)),
        Err(_) => {
            ignored.push(format!(
                "{OMP_NUM_THREADS_ENV}={omp} (not a thread count; every hardware thread is used)"
            ));
            Ok(None)
        }
    }
}

/// `on`/`1` or `off`/`0`, any case.
fn switch(text: &str) -> Result<bool, Error> {
    match text.to_ascii_lowercase().as_str() {
        "on" | "1" => Ok(true),
        "off" | "0" => Ok(false),
        other => Err(Error::InvalidOption(format!("'{other}' is not on or off"))),
    }
}

/// `off`, `on` or a number of whole waves.
fn stream_k(text: &str) -> Result<StreamK, Error> {
    match text.to_ascii_lowercase().as_str() {
        "off" => Ok(StreamK::Off),
        "on" => Ok(StreamK::On),
        number => number.parse().map(StreamK::Waves).map_err(|_| {
            Error::InvalidOption(format!("'{number}' is not off, on or a number of waves"))
        }),
    }
}

fn dev_switches(lookup: &dyn Fn(&str) -> Option<String>) -> Result<DevSwitches, Error> {
    Ok(DevSwitches {
        stream_k: parsed(lookup, DEV_STREAM_K_ENV, stream_k)?,
        wave_tail: parsed(lookup, DEV_WAVE_TAIL_ENV, switch)?,
        mbarriers: parsed(lookup, DEV_MBAR_ENV, switch)?,
        ring_stages: parsed(lookup, DEV_RING_STAGES_ENV, |text| match text.parse() {
            Ok(stages @ 2..=8) => Ok(stages),
            _ => Err(Error::InvalidOption(format!(
                "'{text}' is not 2 to 8 stages"
            ))),
        })?,
        int8: parsed(lookup, DEV_INT8_ENV, |text| {
            match text.to_ascii_lowercase().as_str() {
                "cublas" => Ok(Int8Kernels::Cublas),
                "wgmma" => Ok(Int8Kernels::Wgmma),
                "wgmma-pairs" => Ok(Int8Kernels::WgmmaPairs),
                other => Err(Error::InvalidOption(format!(
                    "'{other}' is not cublas, wgmma or wgmma-pairs"
                ))),
            }
        })?,
    })
}

/// A home-relative default: `$xdg/fastmm/…` else `$HOME/dot/fastmm/…`.
fn home_path(
    lookup: &dyn Fn(&str) -> Option<String>,
    xdg: &str,
    dot: &str,
    leaf: &str,
) -> Option<PathBuf> {
    set(lookup, xdg)
        .map(PathBuf::from)
        .or_else(|| set(lookup, "HOME").map(|home| PathBuf::from(home).join(dot)))
        .map(|base| base.join("fastmm").join(leaf))
}

/// A path variable: `off`/`none` disables it, unset takes `default`.
fn path_or_off(
    lookup: &dyn Fn(&str) -> Option<String>,
    name: &str,
    default: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    match lookup(name) {
        Some(v) if v.is_empty() || v == "off" || v == "none" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => default(),
    }
}

fn read_tuning(path: &Option<PathBuf>) -> TuningState {
    let Some(path) = path else {
        return TuningState::Disabled;
    };
    match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => TuningState::Missing,
        Err(e) => TuningState::Invalid(format!("cannot read {}: {e}", path.display())),
        Ok(text) => match Tuning::parse(&text) {
            Ok(t) => TuningState::Loaded(Box::new(t)),
            Err(e) => TuningState::Invalid(format!("{}: {e}", path.display())),
        },
    }
}

impl Config {
    /// The process's configuration, read from the environment (and the
    /// tuning file) on first use.
    pub fn get() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| {
            let lookup = |name: &str| std::env::var(name).ok();
            let mut config = Config::from_lookup(&lookup);
            config.ignored.extend(
                std::env::vars()
                    .map(|(name, _)| name)
                    .filter(|name| name.starts_with("FASTMM_") && !VARIABLES.contains(&&**name))
                    .map(|name| unread(&name)),
            );
            config
        })
    }

    /// The configuration a lookup of variables describes (for tests and
    /// tools; [`Config::get`] is the process's).
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Config {
        let tuning_path = path_or_off(lookup, TUNING_ENV, || {
            home_path(lookup, "XDG_CONFIG_HOME", ".config", "tuning.toml")
        });
        let dev = dev_switches(lookup);
        let mut ignored = Vec::new();
        let dev = if cfg!(feature = "dev") {
            dev
        } else {
            ignored.extend(
                [
                    DEV_STREAM_K_ENV,
                    DEV_WAVE_TAIL_ENV,
                    DEV_MBAR_ENV,
                    DEV_RING_STAGES_ENV,
                    DEV_INT8_ENV,
                ]
                .into_iter()
                .filter(|name| set(lookup, name).is_some())
                .map(|name| format!("{name} (a developer switch: build with --features dev)")),
            );
            Ok(DevSwitches::default())
        };
        let threads = threads(lookup, &mut ignored);
        Config {
            cpu_kernel: parsed(lookup, CPU_KERNEL_ENV, str::parse),
            threads,
            blocks: parsed(lookup, BLOCKS_ENV, BlockSizes::parse),
            cuda_kernel: parsed(lookup, CUDA_KERNEL_ENV, str::parse),
            tuning: read_tuning(&tuning_path),
            tuning_path,
            kernel_cache: path_or_off(lookup, KERNEL_CACHE_ENV, || {
                home_path(lookup, "XDG_CACHE_HOME", ".cache", "kernels")
            }),
            dev,
            ignored,
            cpu_model: crate::system::cpu_model(),
        }
    }

    /// `FASTMM_CPU_KERNEL`, when set.
    pub fn cpu_kernel(&self) -> Result<Option<CpuKernel>, Error> {
        self.cpu_kernel.clone()
    }

    /// `FASTMM_BLOCKS`, when set.
    pub fn blocks(&self) -> Result<Option<BlockSizes>, Error> {
        self.blocks.clone()
    }

    /// The CPU threads the environment asks for: `FASTMM_NUM_THREADS`,
    /// else `OMP_NUM_THREADS` (see the module docs), when set.
    pub fn threads(&self) -> Result<Option<usize>, Error> {
        self.threads.clone()
    }

    /// `FASTMM_CUDA_KERNEL`, when set.
    pub fn cuda_kernel(&self) -> Result<Option<CudaKernel>, Error> {
        self.cuda_kernel.clone()
    }

    /// Where compiled GPU kernels are kept between processes (`None`: off,
    /// or no home directory).
    pub fn kernel_cache(&self) -> Option<&PathBuf> {
        self.kernel_cache.as_ref()
    }

    /// The developer switches (all `None` outside `dev` builds).
    pub fn dev(&self) -> Result<DevSwitches, Error> {
        self.dev.clone()
    }

    /// `FASTMM_*` variables that are set but have no effect here, each
    /// with the reason.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// Where the tuning file was looked for (`None`: disabled, or no home
    /// directory).
    pub fn tuning_path(&self) -> Option<&PathBuf> {
        self.tuning_path.as_ref()
    }

    /// What became of the tuning file.
    pub fn tuning(&self) -> &TuningState {
        &self.tuning
    }

    /// The tuning file's CPU section, when it was measured on this CPU model.
    pub fn tuned_cpu(&self) -> Option<&CpuTuning> {
        match &self.tuning {
            TuningState::Loaded(t) => t.cpu.as_ref().filter(|c| c.model == self.cpu_model),
            _ => None,
        }
    }

    /// The tuning file's CUDA section, when it was measured on a GPU of
    /// this name.
    pub fn tuned_cuda(&self, gpu_name: &str) -> Option<&CudaTuning> {
        match &self.tuning {
            TuningState::Loaded(t) => t.cuda.as_ref().filter(|c| c.gpu == gpu_name),
            _ => None,
        }
    }

    /// The tuning file's CPU parameters of one type, where they apply.
    pub fn tuned_cpu_type(&self, dtype: DType) -> Option<&TypeTuning> {
        self.tuned_cpu()?.of(dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Config {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn thread_counts_come_from_fastmm_then_openmp() {
        let threads = |vars: &[(&str, &str)]| config(vars).threads();
        assert_eq!(threads(&[]).unwrap(), None);
        assert_eq!(threads(&[(NUM_THREADS_ENV, " 3 ")]).unwrap(), Some(3));
        assert_eq!(threads(&[(OMP_NUM_THREADS_ENV, "4")]).unwrap(), Some(4));
        // OpenMP's nested list: the outer level's count.
        assert_eq!(threads(&[(OMP_NUM_THREADS_ENV, "4,2")]).unwrap(), Some(4));
        assert_eq!(
            threads(&[(NUM_THREADS_ENV, "2"), (OMP_NUM_THREADS_ENV, "8")]).unwrap(),
            Some(2)
        );
        // fastmm's own variable is checked; OpenMP's is left to OpenMP.
        for bad in ["0", "-1", "two"] {
            let err = threads(&[(NUM_THREADS_ENV, bad)]).unwrap_err().to_string();
            assert!(err.contains(NUM_THREADS_ENV), "{err}");
        }
        let c = config(&[(OMP_NUM_THREADS_ENV, "many")]);
        assert_eq!(c.threads().unwrap(), None);
        assert!(c
            .ignored()
            .iter()
            .any(|i| i.contains("OMP_NUM_THREADS=many")));
    }

    #[test]
    fn variables_parse_and_their_errors_name_them() {
        let c = config(&[
            (CPU_KERNEL_ENV, "avx2"),
            (BLOCKS_ENV, "96,256,1024"),
            (CUDA_KERNEL_ENV, " simt "),
            (TUNING_ENV, "off"),
            (KERNEL_CACHE_ENV, "/tmp/k"),
        ]);
        assert_eq!(c.cpu_kernel().unwrap(), Some(CpuKernel::Avx2));
        assert_eq!(c.blocks().unwrap().unwrap().kc, 256);
        assert_eq!(c.cuda_kernel().unwrap(), Some(CudaKernel::Simt));
        assert!(matches!(c.tuning(), TuningState::Disabled));
        assert_eq!(c.kernel_cache().unwrap(), &PathBuf::from("/tmp/k"));
        let bad = config(&[(CPU_KERNEL_ENV, "sse9"), (BLOCKS_ENV, "1,2")]);
        let err = bad.cpu_kernel().unwrap_err().to_string();
        assert!(
            err.contains(CPU_KERNEL_ENV) && err.contains("sse9"),
            "{err}"
        );
        assert!(bad.blocks().unwrap_err().to_string().contains(BLOCKS_ENV));
        // Blank is unset.
        assert_eq!(config(&[(CPU_KERNEL_ENV, " ")]).cpu_kernel().unwrap(), None);
    }

    #[test]
    fn variables_that_moved_say_where() {
        assert!(unread("FASTMM_SUM_STORES").contains("--sum-stores"));
        assert!(unread("FASTMM_CUDA_MBAR").contains("FASTMM_DEV_CUDA_MBAR"));
        assert!(unread("FASTMM_THREADZ").contains("not a fastmm variable"));
    }

    #[test]
    fn paths_default_under_the_home_directories() {
        let c = config(&[("HOME", "/home/u")]);
        assert_eq!(
            c.tuning_path().unwrap(),
            &PathBuf::from("/home/u/.config/fastmm/tuning.toml")
        );
        assert_eq!(
            c.kernel_cache().unwrap(),
            &PathBuf::from("/home/u/.cache/fastmm/kernels")
        );
        let xdg = config(&[
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/c"),
            (KERNEL_CACHE_ENV, ""),
        ]);
        assert!(xdg.kernel_cache().is_none());
        let xdg = config(&[("HOME", "/h"), ("XDG_CACHE_HOME", "/c")]);
        assert_eq!(
            xdg.kernel_cache().unwrap(),
            &PathBuf::from("/c/fastmm/kernels")
        );
        assert!(config(&[]).tuning_path().is_none());
    }

    #[test]
    fn developer_switches_parse_and_are_ignored_outside_dev_builds() {
        let lookup = |name: &str| {
            Some(
                match name {
                    DEV_STREAM_K_ENV => "2",
                    DEV_WAVE_TAIL_ENV => "off",
                    DEV_MBAR_ENV => "ON",
                    DEV_RING_STAGES_ENV => "4",
                    DEV_INT8_ENV => "WGMMA",
                    _ => return None,
                }
                .to_string(),
            )
        };
        let parsed = dev_switches(&lookup).unwrap();
        assert_eq!(
            parsed,
            DevSwitches {
                stream_k: Some(StreamK::Waves(2)),
                wave_tail: Some(false),
                mbarriers: Some(true),
                ring_stages: Some(4),
                int8: Some(Int8Kernels::Wgmma),
            }
        );
        let c = Config::from_lookup(&lookup);
        if cfg!(feature = "dev") {
            assert_eq!(c.dev().unwrap(), parsed);
        } else {
            assert_eq!(c.dev().unwrap(), DevSwitches::default());
            assert_eq!(c.ignored().len(), 5, "{:?}", c.ignored());
        }
        for (name, bad) in [
            (DEV_STREAM_K_ENV, "lots"),
            (DEV_WAVE_TAIL_ENV, "maybe"),
            (DEV_RING_STAGES_ENV, "9"),
            (DEV_INT8_ENV, "cutlass"),
        ] {
            let err = dev_switches(&|n: &str| (n == name).then(|| bad.to_string()))
                .unwrap_err()
                .to_string();
            assert!(err.contains(name) && err.contains(bad), "{err}");
        }
        assert_eq!(stream_k("off").unwrap(), StreamK::Off);
        assert_eq!(stream_k("ON").unwrap(), StreamK::On);
    }
}
