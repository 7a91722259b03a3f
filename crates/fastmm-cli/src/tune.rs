//! `fastmm tune`: measures the parameters `auto` would otherwise take
//! from built-in rules — threads, the tile of the tiled loops, `packed`'s
//! cache blocks, the size from which `packed` runs on several threads and
//! the Strassen/Winograd crossover per type, and on a GPU
//! the shared-memory tile and the crossover over cuBLAS — on this machine,
//! and saves them to the tuning file (see `fastmm::tuning`), keeping the
//! other device's section.
//!
//! Every candidate runs through `run`'s measure-and-verify path, so a
//! candidate that computes a wrong result stops the search. A candidate
//! replaces the default only when it is faster by [`KEEP_MARGIN`], so
//! noise does not move a parameter.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::config::{Config, TuningState, TUNING_ENV};
use fastmm::info::{analytical_blocks, DEFAULT_TILE};
use fastmm::tuning::{CpuTuning, CudaTuning, Tuning};
use fastmm::{BlockSizes, Context, DType, Device, Element};

use crate::common::{machine_line, parse_dtypes, thread_counts, utc_now, write_stdout, Outcome};
use crate::run::{measure, RunArgs};

/// A candidate must beat the default's median by this fraction to replace
/// it: this machine's repeat-to-repeat noise is a few percent.
const KEEP_MARGIN: f64 = 0.02;

/// Times a winner and the default are measured again before the winner
/// replaces the default.
const CONFIRM_ROUNDS: usize = 2;

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// What to tune: cpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Element types whose blocks and crossovers to tune.
    #[arg(short = 'd', long, default_value = "f32,f64")]
    dtype: String,
    /// A small search (seconds), for trying the command and for CI; its
    /// sizes are too small to move the Strassen crossovers.
    #[arg(long)]
    quick: bool,
    /// Timed repetitions per candidate (the median counts).
    #[arg(short = 'r', long, default_value_t = 3)]
    reps: usize,
    /// Where to save (default: the tuning file `auto` reads).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Measure and print, but save nothing.
    #[arg(long)]
    dry_run: bool,
}

/// The measurements so far, as Markdown rows, and the devices they ran on
/// (opened once for the whole search).
struct Log {
    rows: String,
    devices: crate::common::Devices,
}

impl Log {
    fn row(&mut self, step: &str, candidate: &str, ms: f64, flops: f64, note: &str) {
        let _ = writeln!(
            self.rows,
            "| {step} | {candidate} | {ms:.3} | {:.1} | {note} |",
            flops / (ms * 1e6)
        );
        eprintln!("  {step}: {candidate}: {ms:.3} ms {note}");
    }
}

/// Median time of one verified run of `args` (one algorithm, one dtype).
fn time(log: &mut Log, args: &RunArgs) -> Result<f64> {
    let (_, records) = measure(args, &mut log.devices)?;
    let record = records.first().context("nothing was measured")?;
    if !record.ok {
        bail!(
            "{} {} {}×{}×{} gave a wrong result (relative error {:.2e})",
            record.algorithm,
            record.kernel,
            record.m,
            record.k,
            record.n,
            record.rel_error
        );
    }
    Ok(record.median_ms)
}

/// Times each candidate (`set` applies it to a copy of `base`) and
/// returns the index of the one to keep: the fastest, if it beats
/// `candidates[default]` by [`KEEP_MARGIN`], else the default.
fn choose(
    log: &mut Log,
    step: &str,
    base: &RunArgs,
    candidates: &[String],
    default: usize,
    set: &dyn Fn(&mut RunArgs, &str) -> Result<()>,
) -> Result<usize> {
    let flops = 2.0 * base.size.pow(3) as f64;
    let mut times = Vec::new();
    for candidate in candidates {
        let mut args = base.clone();
        set(&mut args, candidate)?;
        let ms = time(log, &args).with_context(|| format!("{step} {candidate}"))?;
        times.push(ms);
    }
    let best = (0..times.len())
        .min_by(|&a, &b| times[a].total_cmp(&times[b]))
        .unwrap_or(default);
    let beats = |times: &[f64]| times[best] < times[default] * (1.0 - KEEP_MARGIN);
    let mut keep = if beats(&times) { best } else { default };
    if keep != default {
        // One lucky run must not move a parameter: the winner and the
        // default run again, alternately, and the winner must win again.
        let mut again = times.clone();
        for round in 0..CONFIRM_ROUNDS {
            for i in [default, best] {
                let mut args = base.clone();
                set(&mut args, &candidates[i])?;
                let ms = time(log, &args)?;
                again[i] = if round == 0 { ms } else { again[i].min(ms) };
            }
        }
        if !beats(&again) {
            keep = default;
            eprintln!(
                "  {step}: {} did not beat the default again ({:.3} against {:.3} ms); the default stays",
                candidates[best], again[best], again[default]
            );
        }
    }
    for (i, (candidate, ms)) in candidates.iter().zip(&times).enumerate() {
        let mut note = String::new();
        if i == default {
            note += "default ";
        }
        if i == keep {
            note += "← chosen";
        }
        log.row(step, candidate, *ms, flops, note.trim());
    }
    Ok(keep)
}

/// Two runs of one size, timed against each other: the baseline and the
/// candidate that may beat it, each with its name in the log.
struct Contest {
    baseline: RunArgs,
    baseline_name: String,
    candidate: RunArgs,
    candidate_name: String,
}

/// For each of `sizes`, whether the candidate of `contest(size)` beats its
/// baseline by [`KEEP_MARGIN`]: a win counts only when it repeats in every
/// one of [`CONFIRM_ROUNDS`] further rounds. Every time is logged.
fn repeated_wins(
    log: &mut Log,
    step: &str,
    sizes: &[usize],
    contest: &dyn Fn(usize) -> Contest,
) -> Result<Vec<bool>> {
    let mut wins = Vec::new();
    for &size in sizes {
        let c = contest(size);
        let flops = 2.0 * (size as f64).powi(3);
        let mut won = true;
        for round in 0..=CONFIRM_ROUNDS {
            let baseline = time(log, &c.baseline)?;
            let candidate = time(log, &c.candidate)?;
            let again = if round == 0 { "" } else { " (again)" };
            let name = |who: &str| format!("{who} n={size}{again}");
            log.row(step, &name(&c.baseline_name), baseline, flops, "");
            log.row(
                step,
                &name(&c.candidate_name),
                candidate,
                flops,
                &format!("{:.3}× {}", baseline / candidate, c.baseline_name),
            );
            won = candidate < baseline * (1.0 - KEEP_MARGIN);
            if !won {
                break;
            }
        }
        wins.push(won);
    }
    Ok(wins)
}

/// The first index from which every size won.
fn keeps_winning_from(wins: &[bool]) -> Option<usize> {
    (0..wins.len()).find(|&i| wins[i..].iter().all(|&w| w))
}

/// Where one level of `algorithm` beats `classical`: (the smallest size
/// where it wins, which becomes the threshold for recursing further; the
/// smallest size from which it wins at every larger size measured, which
/// becomes the start), or `None` when it wins at no size from which it
/// keeps winning.
fn crossover(
    log: &mut Log,
    step: &str,
    base: &RunArgs,
    classical: &str,
    algorithm: &str,
    sizes: &[usize],
) -> Result<Option<(usize, usize)>> {
    let wins = repeated_wins(log, step, sizes, &|size| {
        let mut plain = base.clone();
        plain.size = size;
        plain.algo = classical.to_string();
        let mut fast = plain.clone();
        fast.algo = algorithm.to_string();
        fast.options.threshold = size.to_string();
        fast.options.depth = Some(1);
        Contest {
            baseline: plain,
            baseline_name: classical.to_string(),
            candidate: fast,
            candidate_name: format!("{algorithm} 1 level"),
        }
    })?;
    let first = wins.iter().position(|&w| w);
    let start = keeps_winning_from(&wins);
    Ok(first.zip(start).map(|(f, s)| (sizes[f], sizes[s])))
}

/// The smallest of `sizes` from which `packed` on `threads` threads beats
/// it on one at every larger size measured (each win repeated, as in
/// [`crossover`]), or `None` when the team does not keep winning even at
/// the largest.
fn parallel_crossover(
    log: &mut Log,
    step: &str,
    base: &RunArgs,
    threads: usize,
    sizes: &[usize],
) -> Result<Option<usize>> {
    let wins = repeated_wins(log, step, sizes, &|size| {
        let mut one = base.clone();
        one.size = size;
        one.options.threads = Some(1);
        // Small products: more repetitions, or noise decides.
        one.reps = one.reps.max(31);
        let mut team = one.clone();
        team.options.threads = Some(threads);
        team.options.parallel_from = Some(1);
        Contest {
            baseline: one,
            baseline_name: "1 thread".into(),
            candidate: team,
            candidate_name: format!("{threads} threads"),
        }
    })?;
    Ok(keeps_winning_from(&wins).map(|i| sizes[i]))
}

pub fn run(args: &TuneArgs) -> Result<Outcome> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let path = match &args.out {
        Some(p) => Some(p.clone()),
        None => Config::get().tuning_path().cloned(),
    };
    let dtypes = parse_dtypes(&args.dtype)?;
    let mut base = RunArgs::from_argv(&[])?;
    base.reps = args.reps;
    base.warmup = 1;
    // Candidates are set explicitly; the file being replaced must not
    // steer the ones that are not.
    let mut tuning = match path.as_ref().map(std::fs::read_to_string) {
        Some(Ok(text)) => Tuning::parse(&text).unwrap_or_default(),
        _ => Tuning::default(),
    };
    let mut log = Log {
        rows: "| step | candidate | median ms | GFLOP/s | |\n|---|---|---|---|---|\n".into(),
        devices: crate::common::Devices::default(),
    };
    let device = args.device.parse::<Device>()?;
    let gpu = match device {
        Device::Cpu => {
            tuning.cpu = Some(tune_cpu(args, &base, &dtypes, &mut log)?);
            None
        }
        Device::Cuda(_) => {
            let gpu = Context::open(device)?;
            tuning.cuda = Some(tune_cuda(args, &gpu, &base, &dtypes, &mut log)?);
            Some(gpu)
        }
    };
    tuning.tuned = Some(format!(
        "{} by `{}`",
        utc_now(),
        std::env::args().collect::<Vec<_>>().join(" ")
    ));
    let text = tuning.to_toml()?;
    let mut report = format!(
        "fastmm tune: {}\n\n{}\n",
        machine_line(gpu.as_ref()),
        log.rows
    );
    report += &format!("```toml\n{text}```\n");
    write_stdout(&report)?;
    match (&path, args.dry_run) {
        (_, true) => eprintln!("dry run: nothing saved"),
        (None, false) => bail!(
            "no place to save the tuning ({} is off and there is no home directory); use --out",
            TUNING_ENV
        ),
        (Some(path), false) => {
            save(path, &text)?;
            eprintln!("saved to {}", path.display());
            if args.out.is_none() && matches!(Config::get().tuning(), TuningState::Invalid(_)) {
                eprintln!("note: it replaced an unusable tuning file");
            }
        }
    }
    Ok(Outcome::AllCorrect)
}

/// Writes the file whole: to a temporary name beside it, then renamed, so
/// a reader never sees half a file.
fn save(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(fastmm::partial::write_whole(path, text.as_bytes())?)
}

fn tune_cpu(args: &TuneArgs, base: &RunArgs, dtypes: &[DType], log: &mut Log) -> Result<CpuTuning> {
    let mut cpu = CpuTuning {
        model: fastmm::system::cpu_model(),
        ..Default::default()
    };
    let first = dtypes.first().copied().unwrap_or(DType::F64);

    let mut packed = base.clone();
    packed.algo = "packed".into();
    packed.dtype = first.name().into();
    packed.size = if args.quick { 384 } else { 1536 };
    let (_, analytical) = match first {
        DType::F32 => kernel_blocks::<f32>(packed.size)?,
        DType::F64 => kernel_blocks::<f64>(packed.size)?,
        DType::I32 => kernel_blocks::<i32>(packed.size)?,
        DType::I64 => kernel_blocks::<i64>(packed.size)?,
    };
    packed.options.blocks = Some(format!(
        "{},{},{}",
        analytical.mc, analytical.kc, analytical.nc
    ));
    let counts: Vec<String> = thread_counts().iter().map(usize::to_string).collect();
    let chosen = choose(
        log,
        "threads",
        &packed,
        &counts,
        counts.len() - 1,
        &|a, v| {
            a.options.threads = Some(v.parse()?);
            Ok(())
        },
    )?;
    let threads: usize = counts[chosen].parse()?;
    cpu.threads = Some(threads);

    let mut tiled = base.clone();
    tiled.algo = "tiled".into();
    tiled.dtype = "f32".into();
    tiled.size = if args.quick { 256 } else { 1024 };
    let tiles: Vec<String> = [32, 64, 128, 256, 512]
        .iter()
        .map(usize::to_string)
        .collect();
    let default_tile = tiles
        .iter()
        .position(|t| *t == DEFAULT_TILE.to_string())
        .unwrap_or(0);
    let chosen = choose(
        log,
        "tile (tiled)",
        &tiled,
        &tiles,
        default_tile,
        &|a, v| {
            a.options.tile = Some(v.parse()?);
            Ok(())
        },
    )?;
    cpu.tile = Some(tiles[chosen].parse()?);

    for &dtype in dtypes {
        let size = if args.quick { 256 } else { 2048 };
        let (kernel, analytical) = match dtype {
            DType::F32 => kernel_blocks::<f32>(size)?,
            DType::F64 => kernel_blocks::<f64>(size)?,
            DType::I32 => kernel_blocks::<i32>(size)?,
            DType::I64 => kernel_blocks::<i64>(size)?,
        };
        let mut packed = base.clone();
        packed.algo = "packed".into();
        packed.dtype = dtype.name().into();
        packed.options.threads = Some(threads);
        packed.size = size;
        let candidates = block_candidates(analytical, args.quick);
        let chosen = choose(
            log,
            &format!("blocks {dtype} ({kernel})"),
            &packed,
            &candidates,
            0,
            &|a, v| {
                a.options.blocks = Some(v.to_string());
                Ok(())
            },
        )?;
        let blocks = BlockSizes::parse(&candidates[chosen])?;
        let entry = cpu.of_mut(dtype);
        entry.kernel = Some(kernel);
        entry.blocks = Some([blocks.mc, blocks.kc, blocks.nc]);

        let mut fast = packed.clone();
        fast.options.blocks = Some(candidates[chosen].clone());
        let sizes: &[usize] = if args.quick {
            &[256, 512]
        } else {
            &[1024, 1536, 2048, 3072, 4096]
        };
        match crossover(
            log,
            &format!("strassen {dtype}"),
            &fast,
            "packed",
            "winograd",
            sizes,
        )? {
            Some(_) if args.quick => {
                eprintln!("  strassen {dtype}: --quick sizes do not move the crossover")
            }
            Some((threshold, start)) => {
                entry.strassen_threshold = Some(threshold);
                entry.strassen_start = Some(start);
            }
            None => eprintln!(
                "  strassen {dtype}: one level never won up to {}; the built-in rule stays",
                sizes[sizes.len() - 1]
            ),
        }

        if threads > 1 {
            let sizes: &[usize] = if args.quick {
                &[96, 192]
            } else {
                &[64, 80, 96, 112, 128, 144, 160, 192, 224, 256, 320, 384]
            };
            let mut small = packed.clone();
            small.options.blocks = None;
            match parallel_crossover(log, &format!("parallel {dtype}"), &small, threads, sizes)? {
                Some(_) if args.quick => {
                    eprintln!("  parallel {dtype}: --quick sizes do not move the crossover")
                }
                Some(edge) => entry.parallel_from = Some(edge),
                None => eprintln!(
                    "  parallel {dtype}: {threads} threads did not keep beating one up to {}; the built-in rule stays",
                    sizes[sizes.len() - 1]
                ),
            }
        }
    }
    Ok(cpu)
}

/// The `packed` kernel `auto` picks for T and its analytical blocks for a
/// `size`² product (whose C is larger than L2: the products tuned blocks
/// apply to).
fn kernel_blocks<T: Element>(size: usize) -> Result<(String, BlockSizes)> {
    Ok(analytical_blocks::<T>(None, (size, size))?)
}

/// Block sizes to try, the analytical ones first: MC (rows of Ã, in L2)
/// halved and doubled, KC (depth) 256, NC (columns of B̃, in L3) a quarter.
fn block_candidates(analytical: BlockSizes, quick: bool) -> Vec<String> {
    let BlockSizes { mc, kc, nc } = analytical;
    let mut list = vec![(mc, kc, nc)];
    let mcs = [mc, (mc / 2).max(1), mc * 2];
    let kcs = [kc, 256];
    let ncs = [nc, (nc / 4).max(1)];
    for &m in &mcs {
        for &k in &kcs {
            for &n in &ncs {
                if !list.contains(&(m, k, n)) {
                    list.push((m, k, n));
                }
            }
        }
    }
    if quick {
        list.truncate(4);
    }
    list.into_iter()
        .map(|(m, k, n)| format!("{m},{k},{n}"))
        .collect()
}

fn tune_cuda(
    args: &TuneArgs,
    gpu: &Context,
    base: &RunArgs,
    dtypes: &[DType],
    log: &mut Log,
) -> Result<CudaTuning> {
    let name = gpu
        .gpu_info()
        .map(|info| info.name.clone())
        .unwrap_or_default();
    let mut cuda = CudaTuning {
        gpu: name,
        ..Default::default()
    };
    let mut tiled = base.clone();
    tiled.algo = "cuda-tiled".into();
    tiled.options.device = gpu.device().to_string();
    tiled.dtype = "f32".into();
    tiled.size = if args.quick { 512 } else { 2048 };
    let tiles: Vec<String> = ["8", "16", "32"].map(String::from).to_vec();
    let chosen = choose(log, "tile (cuda-tiled)", &tiled, &tiles, 2, &|a, v| {
        a.options.tile = Some(v.parse()?);
        Ok(())
    })?;
    cuda.tile = Some(tiles[chosen].parse()?);
    for &dtype in dtypes {
        let classical = if dtype.is_integer() {
            "cuda-fast"
        } else {
            "cublas"
        };
        let mut fast = base.clone();
        fast.dtype = dtype.name().into();
        fast.options.device = gpu.device().to_string();
        let sizes: &[usize] = if args.quick {
            &[512, 1024]
        } else {
            &[2048, 4096, 6144, 8192]
        };
        match crossover(
            log,
            &format!("winograd on the GPU, {dtype}"),
            &fast,
            classical,
            "winograd",
            sizes,
        )? {
            Some(_) if args.quick => {
                eprintln!("  winograd on the GPU, {dtype}: --quick sizes do not move the crossover")
            }
            Some((threshold, start)) => {
                let entry = cuda.of_mut(dtype);
                entry.strassen_threshold = Some(threshold);
                entry.strassen_start = Some(start);
            }
            None => eprintln!(
                "  winograd on the GPU, {dtype}: one level never won up to {}; the built-in rule stays",
                sizes[sizes.len() - 1]
            ),
        }
    }
    Ok(cuda)
}
