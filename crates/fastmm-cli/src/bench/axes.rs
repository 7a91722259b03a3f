//! The swept options of `fastmm bench` besides size, algorithm and dtype:
//! each axis sets one `run` option per point, and knows which algorithms
//! it changes, so an algorithm it does not change is measured once, at
//! the axis's first value, instead of once per value.

use anyhow::{bail, Context, Result};
use fastmm::{Algorithm, BlockSizes, DeviceKind, GpuMemory, Variant};

use super::parse_list;
use crate::common::Target;
use crate::run::RunArgs;

/// An option of `run` that a sweep can vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AxisKind {
    Threads,
    Tile,
    Threshold,
    Depth,
    Blocks,
    GpuMemory,
    Variant,
    Base,
}

/// One swept option and its values, in the order given.
#[derive(Debug, Clone)]
pub struct Axis {
    pub kind: AxisKind,
    pub values: Vec<String>,
}

impl AxisKind {
    /// Its column header and its name in `settings`.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Threads => "threads",
            AxisKind::Tile => "tile",
            AxisKind::Threshold => "threshold",
            AxisKind::Depth => "depth",
            AxisKind::Blocks => "blocks",
            AxisKind::GpuMemory => "gpu memory",
            AxisKind::Variant => "variant",
            AxisKind::Base => "base",
        }
    }

    /// What a figure's x axis says for it.
    pub fn label(self) -> &'static str {
        match self {
            AxisKind::Threads => "threads",
            AxisKind::Tile => "tile edge (elements)",
            AxisKind::Threshold => "Strassen threshold n₀",
            AxisKind::Depth => "recursion levels (most)",
            AxisKind::Blocks => "packed blocks MC,KC,NC",
            AxisKind::GpuMemory => "GPU memory",
            AxisKind::Variant => "memory schedule",
            AxisKind::Base => "base-case algorithm",
        }
    }

    /// Whether its values are numbers (a figure puts them on a numeric
    /// axis) rather than names.
    pub fn numeric(self) -> bool {
        matches!(
            self,
            AxisKind::Threads | AxisKind::Tile | AxisKind::Threshold | AxisKind::Depth
        )
    }

    /// Whether changing it can change what `target` computes or how fast.
    pub fn affects(self, target: Target) -> bool {
        let algorithm = target.algorithm;
        let info = algorithm.info();
        let fast = algorithm.is_fast();
        let on_cpu = target.device.kind() == DeviceKind::Cpu;
        match self {
            AxisKind::Threads => info.uses_threads && on_cpu,
            AxisKind::Tile => info.uses_tile || algorithm == Algorithm::CudaFast,
            AxisKind::Threshold | AxisKind::Depth | AxisKind::Variant | AxisKind::Base => fast,
            AxisKind::Blocks => on_cpu && (algorithm == Algorithm::Packed || fast),
            AxisKind::GpuMemory => !on_cpu,
        }
    }

    /// Sets this option of one point's `run` arguments.
    pub fn apply(self, run: &mut RunArgs, value: &str) -> Result<()> {
        let number = || {
            value
                .parse::<usize>()
                .with_context(|| format!("{} '{value}' is not a number", self.name()))
        };
        match self {
            AxisKind::Threads => run.options.threads = Some(number()?),
            AxisKind::Tile => run.options.tile = Some(number()?),
            AxisKind::Threshold => run.options.threshold = value.to_string(),
            AxisKind::Depth => run.options.depth = Some(number()?),
            AxisKind::Blocks => run.options.blocks = Some(value.to_string()),
            AxisKind::GpuMemory => run.options.gpu_memory = value.to_string(),
            AxisKind::Variant => run.options.variant = value.to_string(),
            AxisKind::Base => run.options.base = Some(value.to_string()),
        }
        Ok(())
    }

    /// Checks one value as `run` would parse it, so that a typo stops the
    /// sweep before it starts rather than skipping every point.
    fn check(self, value: &str) -> Result<()> {
        match self {
            AxisKind::Threads | AxisKind::Tile | AxisKind::Depth => {
                value.parse::<usize>()?;
            }
            AxisKind::Threshold => {
                if !value.eq_ignore_ascii_case("auto") {
                    value.parse::<usize>()?;
                }
            }
            AxisKind::Blocks => {
                BlockSizes::parse(value)?;
            }
            AxisKind::GpuMemory => {
                value.parse::<GpuMemory>()?;
            }
            AxisKind::Variant => {
                if !value.eq_ignore_ascii_case("auto") {
                    value.parse::<Variant>()?;
                }
            }
            AxisKind::Base => {
                value.parse::<Algorithm>()?;
            }
        }
        Ok(())
    }

    /// The values a command-line list names: numbers take the ranges of
    /// `--sizes`; thresholds and variants may say `auto`; block triples
    /// are separated by `;` or spaces.
    pub fn parse(self, text: &str) -> Result<Axis> {
        let values: Vec<String> = match self {
            AxisKind::Threads | AxisKind::Tile | AxisKind::Depth => parse_list(text)?
                .into_iter()
                .map(|v| v.to_string())
                .collect(),
            AxisKind::Threshold => {
                let mut values = Vec::new();
                for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if item.eq_ignore_ascii_case("auto") {
                        values.push("auto".to_string());
                    } else {
                        values.extend(parse_list(item)?.into_iter().map(|v| v.to_string()));
                    }
                }
                values
            }
            AxisKind::Blocks => text
                .split([';', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            _ => text
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        };
        if values.is_empty() {
            bail!("the {} list '{text}' is empty", self.name());
        }
        for value in &values {
            self.check(value)
                .with_context(|| format!("{} '{value}'", self.name()))?;
        }
        Ok(Axis { kind: self, values })
    }
}

/// Every combination of one value per axis, the first axis slowest.
pub fn combinations(axes: &[Axis]) -> Vec<Vec<usize>> {
    let mut combos = vec![Vec::new()];
    for axis in axes {
        combos = combos
            .into_iter()
            .flat_map(|prefix| {
                (0..axis.values.len()).map(move |i| {
                    let mut next = prefix.clone();
                    next.push(i);
                    next
                })
            })
            .collect();
    }
    combos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_and_combine() {
        let tiles = AxisKind::Tile.parse("16..64x2").unwrap();
        assert_eq!(tiles.values, ["16", "32", "64"]);
        let thresholds = AxisKind::Threshold.parse("auto,512..2048x2").unwrap();
        assert_eq!(thresholds.values, ["auto", "512", "1024", "2048"]);
        let blocks = AxisKind::Blocks.parse("96,256,1024; 48,512,2048").unwrap();
        assert_eq!(blocks.values, ["96,256,1024", "48,512,2048"]);
        assert!(AxisKind::Blocks.parse("96,256").is_err());
        assert!(AxisKind::Variant.parse("frugal,lazy").is_err());
        assert!(AxisKind::GpuMemory.parse("device,pitched,managed").is_ok());
        assert!(AxisKind::Base.parse("packed,quick").is_err());
        let combos = combinations(&[tiles, blocks]);
        assert_eq!(combos.len(), 6);
        assert_eq!(combos[0], [0, 0]);
        assert_eq!(combos[1], [0, 1]);
        assert_eq!(combos[5], [2, 1]);
        assert_eq!(combinations(&[]), [Vec::<usize>::new()]);
    }

    #[test]
    fn axes_know_what_they_change() {
        let at = |text: &str| Target::parse(text, crate::common::Placement::AUTO).unwrap();
        assert!(AxisKind::Tile.affects(at("tiled")));
        assert!(AxisKind::Tile.affects(at("cuda-tiled")));
        assert!(!AxisKind::Tile.affects(at("packed")));
        assert!(AxisKind::Threads.affects(at("packed")));
        assert!(!AxisKind::Threads.affects(at("naive")));
        assert!(!AxisKind::Threads.affects(at("strassen@cuda")));
        assert!(AxisKind::Threshold.affects(at("winograd@cuda")));
        assert!(!AxisKind::Threshold.affects(at("cublas")));
        assert!(AxisKind::Blocks.affects(at("strassen")));
        assert!(!AxisKind::Blocks.affects(at("strassen@cuda")));
        assert!(AxisKind::GpuMemory.affects(at("cuda-naive")));
        assert!(!AxisKind::GpuMemory.affects(at("winograd")));
    }
}
