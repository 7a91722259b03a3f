//! `fastmm bench`: a sweep over sizes × algorithms × dtypes × thread
//! counts, each point measured and verified as `fastmm run` does it, with
//! the speedup over a baseline algorithm, the parallel efficiency against
//! the same algorithm on one thread, and the results as a Markdown table
//! and, with `--out DIR`, as CSV and JSON files.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::run::{measure, Outcome, Record, RunArgs};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Square sizes: a comma list of N, ranges A..BxF (A, A·F, … up to B)
    /// or A..B+S (A, A+S, … up to B), e.g. `256..4096x2,6144`.
    #[arg(long, default_value = "256..1024x2")]
    sizes: String,
    /// Thread counts to sweep (CPU algorithms), a comma list or ranges as
    /// for sizes; default: all hardware threads only.
    #[arg(long, value_name = "LIST")]
    thread_counts: Option<String>,
    /// The algorithm speedups are relative to (default: the first of
    /// --algo).
    #[arg(long)]
    baseline: Option<String>,
    /// Write results.csv, results.json and results.md into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Everything else as for `fastmm run` (--algo, --dtype, --reps, …);
    /// --size and --threads are set per point.
    #[command(flatten)]
    run: RunArgs,
}

/// One point of the sweep: a `run` record and what the sweep derives.
#[derive(Serialize, Debug)]
struct Point {
    #[serde(flatten)]
    record: Record,
    /// The thread count the sweep asked for (`threads` is what the
    /// algorithm used: 1 for the single-threaded ones).
    threads_requested: usize,
    /// Baseline median time over this one, at the same size, dtype and
    /// thread count.
    speedup_vs_baseline: f64,
    /// (speedup_vs_baseline − 1) × 100.
    improvement_percent: f64,
    /// Speedup over the same algorithm on one thread, divided by the
    /// threads (when the sweep measured one thread and the algorithm uses
    /// the threads it is given).
    efficiency: Option<f64>,
}

/// The sizes (or counts) a list like `256..4096x2,6144,100..400+100` names,
/// in order, without repeats. Every value must be at least 1.
pub fn parse_list(text: &str) -> Result<Vec<usize>> {
    let mut values = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed: Vec<usize> = match item.split_once("..") {
            None => vec![item
                .parse()
                .with_context(|| format!("'{item}' is not a size"))?],
            Some((start, rest)) => {
                let start: usize = start
                    .parse()
                    .with_context(|| format!("'{item}': '{start}' is not a size"))?;
                let (end, step, geometric) = if let Some((end, f)) = rest.split_once('x') {
                    (end, f, true)
                } else if let Some((end, s)) = rest.split_once('+') {
                    (end, s, false)
                } else {
                    bail!("'{item}': a range is A..BxF (geometric) or A..B+S (arithmetic)")
                };
                let end: usize = end
                    .parse()
                    .with_context(|| format!("'{item}': '{end}' is not a size"))?;
                let step: usize = step
                    .parse()
                    .with_context(|| format!("'{item}': '{step}' is not a step"))?;
                if start == 0 || (geometric && step < 2) || (!geometric && step == 0) {
                    bail!("'{item}': the range must start at 1 or more and grow");
                }
                let mut range = Vec::new();
                let mut v = start;
                while v <= end {
                    range.push(v);
                    v = if geometric { v * step } else { v + step };
                }
                range
            }
        };
        for v in parsed {
            if v == 0 {
                bail!("'{item}': sizes and counts start at 1");
            }
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

pub fn run(args: &BenchArgs) -> Result<Outcome> {
    let sizes = parse_list(&args.sizes)?;
    let thread_counts: Vec<Option<usize>> = match &args.thread_counts {
        Some(list) => parse_list(list)?.into_iter().map(Some).collect(),
        None => vec![args.run.threads],
    };
    let baseline = match &args.baseline {
        Some(name) => name.trim().to_string(),
        None => args
            .run
            .algo
            .split(',')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    let mut records = Vec::new();
    let progress = progress_bar((sizes.len() * thread_counts.len()) as u64);
    let interrupted = stop_on_ctrl_c();
    'sweep: for &size in &sizes {
        for &threads in &thread_counts {
            if interrupted.load(Ordering::SeqCst) {
                break 'sweep;
            }
            progress.set_message(format!(
                "n = {size}, threads {}",
                threads.map_or("all".to_string(), |t| t.to_string())
            ));
            let mut point = args.run.clone();
            point.size = size;
            point.threads = threads;
            let (_, measured) =
                measure(&point).with_context(|| format!("at size {size}, threads {threads:?}"))?;
            let requested = threads.unwrap_or_else(fastmm::threads::available_threads);
            records.extend(measured.into_iter().map(|r| (r, requested)));
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    let points = derive(records, &baseline);
    let table = markdown(&points)?;
    crate::write_stdout(&table)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
        };
        write("results.md", &table)?;
        write("results.csv", &csv(&points)?)?;
        write(
            "results.json",
            &(serde_json::to_string_pretty(&points)? + "\n"),
        )?;
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

/// Speedups against the baseline at the same (size, dtype, requested
/// threads), and efficiencies against the same algorithm on one thread.
fn derive(records: Vec<(Record, usize)>, baseline: &str) -> Vec<Point> {
    let shape = |r: &Record| (r.m, r.k, r.n, r.dtype);
    let find = |algorithm: &str, of: &Record, threads: usize| {
        records
            .iter()
            .find(|(b, t)| b.algorithm == algorithm && shape(b) == shape(of) && *t == threads)
            .map(|(b, _)| b.median_ms)
    };
    let derived: Vec<(Option<f64>, Option<f64>)> = records
        .iter()
        .map(|(r, threads)| (find(baseline, r, *threads), find(r.algorithm, r, 1)))
        .collect();
    records
        .into_iter()
        .zip(derived)
        .map(|((record, requested), (base, single))| {
            let speedup = base.map_or(f64::NAN, |b| b / record.median_ms);
            let uses_threads = record.threads == requested;
            let efficiency = single
                .filter(|_| uses_threads)
                .map(|s| s / record.median_ms / requested as f64);
            Point {
                speedup_vs_baseline: speedup,
                improvement_percent: (speedup - 1.0) * 100.0,
                efficiency,
                threads_requested: requested,
                record,
            }
        })
        .collect()
}

/// The columns of a point as (header, value for tables, value for CSV):
/// one list, so the Markdown table and the CSV file cannot drift apart.
fn columns(p: &Point) -> Vec<(&'static str, String, String)> {
    let r = &p.record;
    let both = |header, value: String| (header, value.clone(), value);
    vec![
        both("m", r.m.to_string()),
        both("k", r.k.to_string()),
        both("n", r.n.to_string()),
        both("dtype", r.dtype.to_string()),
        both("threads", p.threads_requested.to_string()),
        both("algorithm", r.algorithm.to_string()),
        (
            "kernel",
            r.kernel.clone(),
            format!("\"{}\"", r.kernel.replace('"', "\"\"")),
        ),
        (
            "median ms",
            format!("{:.3}", r.median_ms),
            r.median_ms.to_string(),
        ),
        ("min ms", format!("{:.3}", r.min_ms), r.min_ms.to_string()),
        ("max ms", format!("{:.3}", r.max_ms), r.max_ms.to_string()),
        ("GFLOP/s", format!("{:.2}", r.gflops), r.gflops.to_string()),
        (
            "speedup",
            format!("{:.3}", p.speedup_vs_baseline),
            p.speedup_vs_baseline.to_string(),
        ),
        (
            "improvement %",
            format!("{:+.1}", p.improvement_percent),
            p.improvement_percent.to_string(),
        ),
        (
            "efficiency",
            p.efficiency.map_or("–".to_string(), |e| format!("{e:.2}")),
            p.efficiency.map_or(String::new(), |e| e.to_string()),
        ),
        (
            "rel error",
            format!("{:.2e}", r.rel_error),
            r.rel_error.to_string(),
        ),
        (
            "ok",
            if r.ok { "yes" } else { "NO" }.to_string(),
            r.ok.to_string(),
        ),
    ]
}

fn markdown(points: &[Point]) -> Result<String> {
    let mut out = String::new();
    let Some(first) = points.first() else {
        return Ok(out);
    };
    let headers: Vec<&str> = columns(first).into_iter().map(|c| c.0).collect();
    writeln!(out, "| {} |", headers.join(" | "))?;
    writeln!(out, "|{}", "---|".repeat(headers.len()))?;
    for p in points {
        let cells: Vec<String> = columns(p).into_iter().map(|c| c.1).collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    Ok(out)
}

fn csv(points: &[Point]) -> Result<String> {
    let mut out = String::new();
    let Some(first) = points.first() else {
        return Ok(out);
    };
    let headers: Vec<String> = columns(first)
        .into_iter()
        .map(|c| {
            c.0.replace(" %", "_percent")
                .replace("/s", "s")
                .replace(' ', "_")
                .to_lowercase()
        })
        .collect();
    writeln!(out, "{}", headers.join(","))?;
    for p in points {
        let cells: Vec<String> = columns(p).into_iter().map(|c| c.2).collect();
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(out)
}

/// A flag that the first Ctrl-C raises, so the sweep stops after the
/// point it is measuring and still writes what it has; a second Ctrl-C
/// ends the process at once. (If a handler cannot be installed, Ctrl-C
/// keeps its default meaning.)
fn stop_on_ctrl_c() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let raised = Arc::clone(&flag);
    let _ = ctrlc::set_handler(move || {
        if raised.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nCtrl-C: finishing this point, then writing the results (again to quit)");
    });
    flag
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
}
