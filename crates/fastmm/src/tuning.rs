//! The tuning file that `fastmm tune` writes: parameters measured on one
//! machine, which `auto` choices prefer to the built-in rules.
//!
//! This module is the file's format; [`crate::config`] finds it (see there
//! for its path), reads it once and says which parts apply here. An option
//! given explicitly wins, then the environment, then the tuning file, then
//! the built-in rule. Its CPU section applies only on the CPU model it was
//! tuned on, its CUDA section only on the GPU it names, and block sizes
//! only to the microkernel they were measured with, so a file copied to
//! another machine changes nothing there.
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

use serde::{Deserialize, Serialize};

use crate::element::DType;
use crate::error::Error;
use crate::options::BlockSizes;

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
    /// `packed` runs on several threads from products of this edge cubed
    /// (the measured crossover of one thread and the team).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_from: Option<usize>,
}

impl TypeTuning {
    /// The tuned `packed` blocks, when they were measured with `kernel`
    /// (a microkernel's name).
    pub fn blocks_for(&self, kernel: &str) -> Option<BlockSizes> {
        let [mc, kc, nc] = self
            .blocks
            .filter(|_| self.kernel.as_deref() == Some(kernel))?;
        Some(BlockSizes { mc, kc, nc })
    }

    /// The tuned Strassen/Winograd (threshold, start); a start without a
    /// threshold, or the reverse, takes the other's value.
    pub fn strassen(&self) -> Option<(usize, usize)> {
        match (self.strassen_threshold, self.strassen_start) {
            (Some(threshold), Some(start)) => Some((threshold, start.max(threshold))),
            (Some(n0), None) | (None, Some(n0)) => Some((n0, n0)),
            (None, None) => None,
        }
    }
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
        f64_tuning.parallel_from = Some(144);
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
