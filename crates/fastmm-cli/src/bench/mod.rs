//! `fastmm bench`: a sweep over shapes × algorithms × dtypes × devices and
//! the swept `run` options (threads, tile, threshold, depth, blocks, GPU
//! memory, variant, base), each point measured and verified as `fastmm
//! run` does it, with peers (OpenBLAS through numpy, cuBLAS) in the same
//! run; speedups over a baseline and parallel efficiency; the results as
//! a Markdown table and, with `--out DIR`, CSV, JSON and plots. Built-in
//! suites (`--suite`) replay the seeds' experiments.

mod axes;
mod plots;
mod report;
mod suites;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::{Algorithm, DType, Device, DeviceKind};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::common::{
    machine_line, median, parse_dtypes, utc_now, write_stdout, Devices, Outcome, Target,
};
use crate::measurement::Record;
use crate::run::{measure, RunArgs};
pub use axes::{Axis, AxisKind};
use report::Measured;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Run a built-in suite, one per seed experiment (list them with
    /// --list-suites); it fixes the sweep, and --quick, --out, --peers and
    /// --python still apply.
    #[arg(long, value_name = "NAME")]
    suite: Option<String>,
    /// List the built-in suites and exit.
    #[arg(long)]
    list_suites: bool,
    /// With --suite: the CI-sized version (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Shapes: a comma list of N (square) or MxKxN, and ranges of square
    /// sizes A..BxF (A, A·F, … up to B) or A..B+S (A, A+S, … up to B),
    /// e.g. `256..4096x2,6144,4096x256x4096`.
    #[arg(long, default_value = "256..1024x2")]
    sizes: String,
    /// Thread counts to sweep (CPU algorithms), a list or ranges as for
    /// sizes; default: --threads, else all hardware threads.
    #[arg(long, value_name = "LIST")]
    thread_counts: Option<String>,
    /// Tile edges to sweep (`tiled`, `parallel`, `cuda-tiled`, `cuda-fast`).
    #[arg(long, value_name = "LIST")]
    tiles: Option<String>,
    /// Strassen/Winograd thresholds n₀ to sweep (numbers, ranges, `auto`).
    #[arg(long, value_name = "LIST")]
    thresholds: Option<String>,
    /// Strassen/Winograd most recursion levels to sweep.
    #[arg(long, value_name = "LIST")]
    depths: Option<String>,
    /// `packed` cache blocks to sweep: MC,KC,NC triples separated by `;`.
    #[arg(long, value_name = "LIST")]
    blocks_list: Option<String>,
    /// GPU memory kinds to sweep: device, pitched, managed.
    #[arg(long, value_name = "LIST")]
    gpu_memories: Option<String>,
    /// Strassen/Winograd memory schedules to sweep.
    #[arg(long, value_name = "LIST")]
    variants: Option<String>,
    /// Strassen/Winograd base-case algorithms to sweep.
    #[arg(long, value_name = "LIST")]
    bases: Option<String>,
    /// The algorithm speedups are relative to (default: the first of
    /// --algo).
    #[arg(long)]
    baseline: Option<String>,
    /// Peers measured in the same run: `auto` (OpenBLAS through numpy for
    /// CPU sweeps of f32/f64, cuBLAS for GPU sweeps), `none`, or a list of
    /// openblas, cublas. A peer that is not available is skipped with a
    /// note.
    #[arg(long, default_value = "auto")]
    peers: String,
    /// Python interpreter with numpy (and, optionally, threadpoolctl) for
    /// the OpenBLAS peer.
    #[arg(long, default_value = "python3")]
    python: String,
    /// Write results.md, results.csv, results.json and the figures (PNG
    /// and SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Everything else as for `fastmm run` (--algo, --device, --dtype,
    /// --reps, …); --size and the swept options are set per point.
    #[command(flatten)]
    run: RunArgs,
}

/// A resolved sweep: what `bench` measures, from the options or a suite.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Names the figures and the report.
    pub title: String,
    /// What it replays (a seed's tables or figures), for captions.
    pub source: Option<String>,
    pub shapes: Vec<(usize, usize, usize)>,
    /// The algorithms and the devices they run on.
    pub targets: Vec<Target>,
    pub axes: Vec<Axis>,
    pub baseline: String,
    /// Options common to every point (dtype, reps, seed, …).
    pub run: RunArgs,
    pub openblas: bool,
}

/// A point the sweep could not measure, and why (an unsupported tile, a
/// missing GPU, …): reported, not fatal.
#[derive(Serialize, Debug)]
struct Skipped {
    what: String,
    reason: String,
}

/// The sizes (or counts) a list like `256..4096x2,6144,100..400+100` names,
/// in order, without repeats. Every value must be at least 1.
pub fn parse_list(text: &str) -> Result<Vec<usize>> {
    let mut values = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        for v in parse_item(item)? {
            if !values.contains(&v) {
                values.push(v);
            }
        }
    }
    if values.is_empty() {
        bail!("'{text}' names no size");
    }
    Ok(values)
}

fn parse_item(item: &str) -> Result<Vec<usize>> {
    let number = |text: &str, what: &str| -> Result<usize> {
        text.parse()
            .with_context(|| format!("'{item}': '{text}' is not a {what}"))
    };
    let Some((start, rest)) = item.split_once("..") else {
        let v = number(item, "size")?;
        if v == 0 {
            bail!("'{item}': sizes and counts start at 1");
        }
        return Ok(vec![v]);
    };
    let start = number(start, "size")?;
    let (end, step, geometric) = if let Some((end, f)) = rest.split_once('x') {
        (end, f, true)
    } else if let Some((end, s)) = rest.split_once('+') {
        (end, s, false)
    } else {
        bail!("'{item}': a range is A..BxF (geometric) or A..B+S (arithmetic)")
    };
    let end = number(end, "size")?;
    let step = number(step, "step")?;
    if start == 0 || (geometric && step < 2) || (!geometric && step == 0) {
        bail!("'{item}': the range must start at 1 or more and grow");
    }
    let mut range = Vec::new();
    let mut v = start;
    while v <= end {
        range.push(v);
        v = if geometric { v * step } else { v + step };
    }
    Ok(range)
}

/// Shapes: square sizes and ranges as [`parse_list`], or `MxKxN` items.
pub fn parse_shapes(text: &str) -> Result<Vec<(usize, usize, usize)>> {
    let mut shapes = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed = if item.contains("..") {
            parse_item(item)?.into_iter().map(|n| (n, n, n)).collect()
        } else if item.contains('x') {
            let dims = item
                .split('x')
                .map(|d| d.trim().parse::<usize>())
                .collect::<Result<Vec<_>, _>>()
                .ok()
                .filter(|d| d.len() == 3 && d.iter().all(|&v| v > 0));
            match dims {
                Some(d) => vec![(d[0], d[1], d[2])],
                None => bail!("'{item}': a shape is MxKxN with positive M, K, N"),
            }
        } else {
            parse_item(item)?.into_iter().map(|n| (n, n, n)).collect()
        };
        for shape in parsed {
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
    }
    if shapes.is_empty() {
        bail!("'{text}' names no shape");
    }
    Ok(shapes)
}

impl BenchArgs {
    /// The sweep the options describe.
    fn sweep(&self) -> Result<Sweep> {
        let mut axes = Vec::new();
        for (kind, list) in [
            (AxisKind::Threads, &self.thread_counts),
            (AxisKind::Tile, &self.tiles),
            (AxisKind::Threshold, &self.thresholds),
            (AxisKind::Depth, &self.depths),
            (AxisKind::Blocks, &self.blocks_list),
            (AxisKind::GpuMemory, &self.gpu_memories),
            (AxisKind::Variant, &self.variants),
            (AxisKind::Base, &self.bases),
        ] {
            if let Some(list) = list {
                axes.push(kind.parse(list)?);
            }
        }
        let targets = self.run.options.targets(&self.run.algo)?;
        let baseline = match &self.baseline {
            Some(name) => name.trim().to_string(),
            None => targets.first().map(Target::label).unwrap_or_default(),
        };
        Ok(Sweep {
            title: "fastmm bench".to_string(),
            source: None,
            shapes: parse_shapes(&self.sizes)?,
            targets,
            axes,
            baseline,
            run: self.run.clone(),
            openblas: false,
        })
    }
}

pub fn run(args: &BenchArgs) -> Result<Outcome> {
    if args.list_suites {
        write_stdout(&suites::listing())?;
        return Ok(Outcome::AllCorrect);
    }
    let mut sweep = match &args.suite {
        Some(name) => suites::sweep(name, args.quick, &args.run)?,
        None if args.quick => bail!("--quick applies to --suite only"),
        None => args.sweep()?,
    };
    let mut devices = Devices::default();
    add_peers(&mut sweep, &args.peers, &mut devices)?;
    let interrupted = crate::interrupt::stop_gracefully();
    let (measured, skipped) = measure_sweep(&sweep, &args.python, interrupted, &mut devices)?;
    let sms = devices
        .gpus()
        .first()
        .and_then(|gpu| gpu.gpu_info())
        .map(|info| info.multiprocessors);
    let points = report::derive(measured, &sweep.baseline, sms);
    let axis_names: Vec<&'static str> = sweep.axes.iter().map(|a| a.kind.name()).collect();
    let machine = machine_line(devices.gpus());
    let mut text = format!(
        "{}{}: baseline {}, median of {} after {} warm-up; {}\n\n",
        sweep.title,
        sweep
            .source
            .as_ref()
            .map_or(String::new(), |s| format!(" ({s})")),
        sweep.baseline,
        sweep.run.reps,
        sweep.run.warmup,
        machine
    );
    text += &report::markdown(&points, &axis_names)?;
    for s in &skipped {
        text += &format!("\nskipped: {}: {}", s.what, s.reason);
    }
    if !skipped.is_empty() {
        text.push('\n');
    }
    write_stdout(&text)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // Each file whole or not at all, so an interrupt while writing
        // leaves the previous run's file in place.
        let write = |name: &str, content: &str| {
            Ok::<(), anyhow::Error>(fastmm::partial::write_whole(
                &dir.join(name),
                content.as_bytes(),
            )?)
        };
        write("results.md", &text)?;
        write("results.csv", &report::csv(&points, &axis_names)?)?;
        let json = serde_json::json!({
            "fastmm": env!("CARGO_PKG_VERSION"),
            "date": utc_now(),
            "machine": machine,
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "sweep": sweep.title,
            "replays": sweep.source,
            "baseline": sweep.baseline,
            "points": points,
            "skipped": skipped,
        });
        write(
            "results.json",
            &(serde_json::to_string_pretty(&json)? + "\n"),
        )?;
        let figures = plots::draw_all(dir, &sweep, &points, &machine)?;
        eprintln!(
            "wrote results.md, results.csv, results.json{} to {}",
            if figures.is_empty() {
                String::new()
            } else {
                format!(" and {} figures ({})", figures.len(), figures.join(", "))
            },
            dir.display()
        );
    }
    if interrupted.load(Ordering::SeqCst) {
        eprintln!(
            "interrupted: kept the {} measured points{}",
            points.len(),
            if args.out.is_some() { " (written)" } else { "" }
        );
        // The conventional status of a run stopped by SIGINT.
        std::process::exit(130);
    }
    let failed = points.iter().filter(|p| !p.record.ok).count();
    Ok(if failed == 0 {
        Outcome::AllCorrect
    } else {
        Outcome::Failures(failed)
    })
}

/// Adds the peers `--peers` asks for: cuBLAS as one more algorithm, and
/// OpenBLAS as a flag for the sweep to start numpy. Missing peers are
/// skipped with a note.
fn add_peers(sweep: &mut Sweep, peers: &str, devices: &mut Devices) -> Result<()> {
    let on_gpu = sweep
        .targets
        .iter()
        .any(|t| t.device.kind() == DeviceKind::Cuda);
    let on_cpu = sweep.targets.iter().any(|t| t.device == Device::Cpu);
    let wanted: Vec<String> = match peers.trim().to_ascii_lowercase().as_str() {
        "none" => Vec::new(),
        "auto" => {
            let mut auto = Vec::new();
            if on_cpu {
                auto.push("openblas".to_string());
            }
            // cuBLAS multiplies floats only.
            let floats = parse_dtypes(&sweep.run.dtype)?
                .iter()
                .any(|d| !d.is_integer());
            if on_gpu && floats {
                auto.push("cublas".to_string());
            }
            auto
        }
        list => list.split(',').map(|s| s.trim().to_string()).collect(),
    };
    for peer in wanted {
        match peer.as_str() {
            "openblas" => sweep.openblas = true,
            "cublas" => {
                // On the GPU the sweep runs on.
                let device = sweep
                    .targets
                    .iter()
                    .map(|t| t.device)
                    .find(|d| d.kind() == DeviceKind::Cuda)
                    .unwrap_or(Device::Cuda(0));
                let cublas = Target {
                    algorithm: Algorithm::Cublas,
                    device,
                    team: None,
                };
                match devices.machine(&cublas) {
                    Ok(_) if !sweep.targets.contains(&cublas) => sweep.targets.push(cublas),
                    Ok(_) => {}
                    Err(e) => eprintln!("note: peer cuBLAS skipped: {e:#}"),
                }
            }
            other => bail!("unknown peer '{other}' (expected openblas, cublas, auto or none)"),
        }
    }
    Ok(())
}

/// Measures every point of the sweep; points that fail with an error
/// (an unsupported option for that algorithm, no GPU) are skipped with
/// the reason.
fn measure_sweep(
    sweep: &Sweep,
    python: &str,
    interrupted: &AtomicBool,
    devices: &mut Devices,
) -> Result<(Vec<Measured>, Vec<Skipped>)> {
    let combos = axes::combinations(&sweep.axes);
    let dtypes = parse_dtypes(&sweep.run.dtype)?;
    let total = sweep.shapes.len() * combos.len() * sweep.targets.len();
    let progress = progress_bar(total as u64);
    let mut measured = Vec::new();
    let mut skipped = Vec::new();
    'sweep: for &(m, k, n) in &sweep.shapes {
        for combo in &combos {
            let settings = |target: Option<Target>| -> Vec<(&'static str, String, bool)> {
                sweep
                    .axes
                    .iter()
                    .zip(combo)
                    .map(|(axis, &i)| {
                        let applies = target.is_none_or(|t| axis.kind.affects(t));
                        (axis.kind.name(), axis.values[i].clone(), applies)
                    })
                    .collect()
            };
            let mut point = sweep.run.clone();
            point.m = Some(m);
            point.k = Some(k);
            point.n = Some(n);
            for (axis, &i) in sweep.axes.iter().zip(combo) {
                axis.kind.apply(&mut point, &axis.values[i])?;
            }
            let describe = |name: &str| {
                let mut what = format!("{name} {m}×{k}×{n}");
                for (axis, value, _) in settings(None) {
                    what += &format!(" {axis}={value}");
                }
                what
            };
            for &target in &sweep.targets {
                if interrupted.load(Ordering::SeqCst) {
                    break 'sweep;
                }
                // An axis that does not change this algorithm is measured
                // at its first value only.
                let repeat = sweep
                    .axes
                    .iter()
                    .zip(combo)
                    .any(|(axis, &i)| i > 0 && !axis.kind.affects(target));
                progress.inc(1);
                if repeat {
                    continue;
                }
                let label = target.label();
                progress.set_message(describe(&label));
                let mut one = point.clone();
                one.algo = label.clone();
                match measure(&one, devices) {
                    Ok((_, records)) => {
                        measured.extend(records.into_iter().map(|record| Measured {
                            record,
                            settings: settings(Some(target)),
                        }))
                    }
                    Err(e) => skipped.push(Skipped {
                        what: describe(&label),
                        reason: format!("{e:#}"),
                    }),
                }
            }
            let first_of_others = sweep
                .axes
                .iter()
                .zip(combo)
                .all(|(axis, &i)| i == 0 || axis.kind == AxisKind::Threads);
            if sweep.openblas && first_of_others {
                for &dtype in dtypes
                    .iter()
                    .filter(|d| matches!(d, DType::F32 | DType::F64))
                {
                    match openblas(&point, (m, k, n), dtype, python) {
                        Ok(record) => measured.push(Measured {
                            record,
                            settings: settings(None)
                                .into_iter()
                                .map(|(name, value, _)| (name, value, name == "threads"))
                                .collect(),
                        }),
                        Err(e) => skipped.push(Skipped {
                            what: describe(&format!("openblas {dtype}")),
                            reason: format!("{e:#}"),
                        }),
                    }
                }
            }
        }
    }
    progress.finish_and_clear();
    Ok((measured, skipped))
}

/// numpy's `a @ b` on the same shape, dtype and threads as one point:
/// warm-up, then `reps` timed products (each after an untimed one). Its
/// result is numpy's own and is not verified here.
fn openblas(
    point: &RunArgs,
    shape: (usize, usize, usize),
    dtype: DType,
    python: &str,
) -> Result<Record> {
    let threads = point
        .options
        .threads
        .unwrap_or_else(fastmm::system::available_threads);
    // OpenBLAS at its best here (`OPENBLAS_CORETYPE` overrides).
    let core = fastmm_peers::numpy::OpenBlasCore::Auto;
    let mut numpy = fastmm_peers::numpy::Numpy::start(python, shape, dtype, threads, &core)?;
    for _ in 0..point.warmup {
        numpy.time_one()?;
    }
    let mut times = (0..point.reps)
        .map(|_| numpy.time_one())
        .collect::<Result<Vec<f64>>>()?;
    times.sort_by(f64::total_cmp);
    let (m, k, n) = shape;
    let median_ms = median(&times);
    Ok(Record {
        algorithm: "openblas".to_string(),
        kernel: numpy.label.clone(),
        device: "cpu".to_string(),
        dtype: dtype.name(),
        m,
        k,
        n,
        threads,
        tile: None,
        reps: point.reps,
        median_ms,
        min_ms: times[0],
        max_ms: times[times.len() - 1],
        gflops: 2.0 * m as f64 * k as f64 * n as f64 / (median_ms * 1e6),
        speedup: 1.0,
        rel_error: f64::NAN,
        bound_ratio: f64::NAN,
        check: "peer",
        ok: true,
        // OpenBLAS is the CPU's other native product.
        accuracy: fastmm::Accuracy::Native.to_string(),
        accuracy_asked: fastmm::Accuracy::Native.to_string(),
        precision: format!("{dtype} FMA sums (OpenBLAS)"),
        seed: 42,
        decades: 0.0,
        upload_ms: None,
        download_ms: None,
        end_to_end_gflops: None,
        levels: None,
        runs_as: None,
        extra_bytes: 0,
        comm_words: None,
        comm_bound_ratio: None,
    })
}

/// A bar with an ETA over the sweep's points on a terminal (stderr), and
/// nothing when stderr is not one (logs, CI, pipes).
fn progress_bar(points: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(points);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta} — {msg}")
    {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges_of_sizes() {
        assert_eq!(
            parse_list("256..4096x2").unwrap(),
            [256, 512, 1024, 2048, 4096]
        );
        assert_eq!(
            parse_list("100..400+100,64").unwrap(),
            [100, 200, 300, 400, 64]
        );
        assert_eq!(parse_list("7, 7,3..10x3").unwrap(), [7, 3, 9]);
        assert_eq!(
            parse_list("5..4x2").unwrap_err().to_string(),
            "'5..4x2' names no size"
        );
        for bad in ["", "0", "1..8x1", "1..8+0", "a", "1..8", "0..8x2", "4..x2"] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shapes_mix_squares_ranges_and_rectangles() {
        assert_eq!(
            parse_shapes("64..256x2, 100x7x3,64").unwrap(),
            [(64, 64, 64), (128, 128, 128), (256, 256, 256), (100, 7, 3)]
        );
        for bad in ["", "3x4", "3x0x4", "ax2x3", "1..4"] {
            assert!(parse_shapes(bad).is_err(), "{bad}");
        }
    }
}
