//! Tuned parameters for this machine, from the file `fastmm tune` writes.
//!
//! `auto` choices read it once: the option given explicitly wins, then the
//! tuning file, then the built-in rule ([`crate::tunables`]). The file is
//! `$FASTMM_TUNING` if set (`off` or `none` disables tuning), else
//! `$XDG_CONFIG_HOME/fastmm/tuning.toml`, else
//! `~/.config/fastmm/tuning.toml`. Its CPU section applies only on the CPU
//! model it was tuned on, its CUDA section only on the GPU it names, and
//! block sizes only to the microkernel they were measured with, so a file
//! copied to another machine changes nothing there.
//!
//! ```toml
//! [cpu]
//! model = "AMD EPYC 9R14"
//! threads = 2
//! tile = 256
//!
//! [cpu.f64]
//! kernel = "avx512 8x24"
//! blocks = [8192, 192, 840]
//! strassen_threshold = 2048
//! strassen_start = 3072
//!
//! [cuda]
//! gpu = "NVIDIA H100 80GB HBM3"
//! tile = 32
//!
//! [cuda.f32]
//! strassen_threshold = 4096
//! strassen_start = 8192
//! ```

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::algo::Device;
use crate::element::DType;
use crate::error::Error;
use crate::packed::BlockSizes;

/// The environment variable naming the tuning file (`off`: none).
pub const TUNING_ENV: &str = "FASTMM_TUNING";

/// The contents of a tuning file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tuning {
    /// When and how it was made (free text, for people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<String>,
    /// The CPU's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTuning>,
    /// The GPU's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaTuning>,
}

/// Tuned CPU parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuTuning {
    /// The CPU model (as [`crate::system::cpu_model`] reports it) they
    /// were measured on.
    pub model: String,
    /// Threads of the threaded algorithms when `--threads` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Tile edge of `tiled` and `parallel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<usize>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f32: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f64: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i32: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i64: Option<TypeTuning>,
}

/// Tuned GPU parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaTuning {
    /// The GPU's name they were measured on.
    pub gpu: String,
    /// Tile edge of `cuda-tiled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<usize>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f32: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f64: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i32: Option<TypeTuning>,
    /// Per element type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i64: Option<TypeTuning>,
}

/// Tuned parameters of one element type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeTuning {
    /// The `packed` microkernel the blocks were measured with (its name,
    /// e.g. "avx512 8x24"); the blocks apply to that kernel only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// `packed`'s MC, KC, NC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<[usize; 3]>,
    /// `strassen`/`winograd` recurse while every dimension is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strassen_threshold: Option<usize>,
    /// ...and apply a first level only from this size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strassen_start: Option<usize>,
}

macro_rules! per_type {
    ($section:ty) => {
        impl $section {
            /// The parameters of one element type.
            pub fn of(&self, dtype: DType) -> Option<&TypeTuning> {
                match dtype {
                    DType::F32 => self.f32.as_ref(),
                    DType::F64 => self.f64.as_ref(),
                    DType::I32 => self.i32.as_ref(),
                    DType::I64 => self.i64.as_ref(),
                }
            }

            /// The parameters of one element type, to fill in.
            pub fn of_mut(&mut self, dtype: DType) -> &mut TypeTuning {
                match dtype {
                    DType::F32 => self.f32.get_or_insert_with(Default::default),
                    DType::F64 => self.f64.get_or_insert_with(Default::default),
                    DType::I32 => self.i32.get_or_insert_with(Default::default),
                    DType::I64 => self.i64.get_or_insert_with(Default::default),
                }
            }
        }
    };
}
per_type!(CpuTuning);
per_type!(CudaTuning);

impl Tuning {
    /// Parses a tuning file's text; every value must be positive.
    pub fn parse(text: &str) -> Result<Tuning, Error> {
        let tuning: Tuning = toml::from_str(text)
            .map_err(|e| Error::InvalidOption(format!("tuning file: {}", e.message())))?;
        let types = |get: &dyn Fn(DType) -> Option<TypeTuning>| {
            DType::ALL.into_iter().filter_map(get).collect::<Vec<_>>()
        };
        let mut values: Vec<usize> = Vec::new();
        let mut per_type = Vec::new();
        if let Some(cpu) = &tuning.cpu {
            values.extend(cpu.threads.iter().chain(&cpu.tile));
            per_type.extend(types(&|d| cpu.of(d).cloned()));
        }
        if let Some(cuda) = &tuning.cuda {
            values.extend(cuda.tile.iter());
            per_type.extend(types(&|d| cuda.of(d).cloned()));
        }
        for t in &per_type {
            values.extend(t.blocks.iter().flatten());
            values.extend(t.strassen_threshold.iter().chain(&t.strassen_start));
        }
        if values.contains(&0) {
            return Err(Error::InvalidOption(
                "tuning file: every count and size must be at least 1".into(),
            ));
        }
        Ok(tuning)
    }

    /// The file's text, with a header saying what wrote it.
    pub fn to_toml(&self) -> Result<String, Error> {
        let body = toml::to_string(self)
            .map_err(|e| Error::InvalidOption(format!("cannot write the tuning: {e}")))?;
        Ok(format!(
            "# fastmm tuning: read by `auto` (explicit options and FASTMM_BLOCKS win).\n\
             # Written by `fastmm tune`; delete a line to go back to the built-in rule.\n{body}"
        ))
    }
}

/// Where the tuning comes from, and whether it applies here.
#[derive(Debug, Clone)]
pub struct TuningSource {
    /// The file looked for (`None` when disabled or no home directory).
    pub path: Option<PathBuf>,
    /// What became of it.
    pub state: TuningState,
}

/// The outcome of looking for the tuning file.
#[derive(Debug, Clone)]
pub enum TuningState {
    /// `FASTMM_TUNING=off`.
    Disabled,
    /// No file there: built-in rules.
    Missing,
    /// Read; the sections that apply to this machine are in `active()`.
    Loaded(Box<Tuning>),
    /// Unreadable or malformed: built-in rules, and this error to report.
    Invalid(String),
}

/// The tuning file's path: `$FASTMM_TUNING`, else the XDG config
/// directory, else `~/.config`; `None` when disabled or homeless.
pub fn tuning_path() -> Option<PathBuf> {
    match std::env::var_os(TUNING_ENV) {
        Some(v) if v == "off" || v == "none" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let config = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
            Some(config.join("fastmm").join("tuning.toml"))
        }
    }
}

/// The tuning file as read once per process.
pub fn source() -> &'static TuningSource {
    static SOURCE: OnceLock<TuningSource> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let path = tuning_path();
        let state = match &path {
            None => TuningState::Disabled,
            Some(p) => match std::fs::read_to_string(p) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => TuningState::Missing,
                Err(e) => TuningState::Invalid(format!("cannot read {}: {e}", p.display())),
                Ok(text) => match Tuning::parse(&text) {
                    Ok(t) => TuningState::Loaded(Box::new(t)),
                    Err(e) => TuningState::Invalid(format!("{}: {e}", p.display())),
                },
            },
        };
        TuningSource { path, state }
    })
}

/// The CPU section, when the file has one for this CPU model.
pub fn cpu() -> Option<&'static CpuTuning> {
    static CPU: OnceLock<Option<&'static CpuTuning>> = OnceLock::new();
    *CPU.get_or_init(|| match &source().state {
        TuningState::Loaded(t) => t
            .cpu
            .as_ref()
            .filter(|c| c.model == crate::system::cpu_model()),
        _ => None,
    })
}

/// The CUDA section, when the file has one for the GPU in use.
pub fn cuda() -> Option<&'static CudaTuning> {
    static CUDA: OnceLock<Option<&'static CudaTuning>> = OnceLock::new();
    *CUDA.get_or_init(|| match &source().state {
        TuningState::Loaded(t) => t
            .cuda
            .as_ref()
            .filter(|c| gpu_name().as_deref() == Some(&c.gpu)),
        _ => None,
    })
}

#[cfg(feature = "cuda")]
fn gpu_name() -> Option<String> {
    crate::cuda::Gpu::default_gpu()
        .ok()
        .map(|g| g.info().name.clone())
}

#[cfg(not(feature = "cuda"))]
fn gpu_name() -> Option<String> {
    None
}

/// Tuned threads for the threaded CPU algorithms.
pub fn threads() -> Option<usize> {
    cpu()?.threads
}

/// Tuned tile edge of the tiled algorithms of `device`.
pub fn tile(device: Device) -> Option<usize> {
    match device {
        Device::Cpu => cpu()?.tile,
        Device::Cuda => cuda()?.tile,
    }
}

/// Tuned `packed` blocks for `dtype`, when measured with `kernel`.
pub fn blocks(dtype: DType, kernel: &str) -> Option<BlockSizes> {
    let t = cpu()?.of(dtype)?;
    let [mc, kc, nc] = t.blocks.filter(|_| t.kernel.as_deref() == Some(kernel))?;
    Some(BlockSizes { mc, kc, nc })
}

/// Tuned Strassen/Winograd (threshold, start) on `device` for `dtype`;
/// a start without a threshold, or the reverse, takes the other's value.
pub fn strassen(device: Device, dtype: DType) -> Option<(usize, usize)> {
    let t = match device {
        Device::Cpu => cpu()?.of(dtype)?,
        Device::Cuda => cuda()?.of(dtype)?,
    };
    match (t.strassen_threshold, t.strassen_start) {
        (Some(threshold), Some(start)) => Some((threshold, start.max(threshold))),
        (Some(n0), None) | (None, Some(n0)) => Some((n0, n0)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuning_file_round_trips_and_rejects_nonsense() {
        let mut tuning = Tuning {
            tuned: Some("test".into()),
            cpu: Some(CpuTuning {
                model: "Some CPU".into(),
                threads: Some(2),
                tile: Some(128),
                ..Default::default()
            }),
            cuda: None,
        };
        let f64_tuning = tuning.cpu.as_mut().unwrap().of_mut(DType::F64);
        f64_tuning.kernel = Some("avx512 8x24".into());
        f64_tuning.blocks = Some([96, 256, 2048]);
        f64_tuning.strassen_threshold = Some(2048);
        let text = tuning.to_toml().unwrap();
        assert!(text.starts_with("# fastmm tuning"), "{text}");
        assert!(text.contains("[cpu.f64]"), "{text}");
        assert_eq!(Tuning::parse(&text).unwrap(), tuning);
        for bad in [
            "[cpu]\nmodel = \"x\"\nthreads = 0\n",
            "[cpu]\nmodel = \"x\"\nthredas = 2\n",
            "[cpu]\nthreads = 2\n",
            "[cuda]\ngpu = \"g\"\n[cuda.f32]\nblocks = [1, 2]\n",
            "not toml",
        ] {
            assert!(Tuning::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Tuning::parse("").unwrap(), Tuning::default());
    }
}
