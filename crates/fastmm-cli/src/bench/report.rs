//! What `fastmm bench` derives from the measured records — speedups over
//! the baseline, speedup and efficiency against one thread (per SM on a
//! GPU) — and how it writes them: a Markdown table, CSV and JSON.

use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;

use crate::measurement::Record;

/// Fewer timed repetitions than this and a point's times, and every
/// speedup computed from them, are marked as not reliable: one sample of
/// a product of microseconds can be off by several times (a core waking
/// up, a page fault, another process).
pub const MIN_RELIABLE_REPS: usize = 3;

/// The mark of a row or series measured fewer than [`MIN_RELIABLE_REPS`]
/// times, and its footnote.
pub const FEW_REPS_MARK: &str = "‡";

/// One measured record and the sweep settings it was measured at.
#[derive(Debug, Clone)]
pub struct Measured {
    pub record: Record,
    /// (axis name, value, whether the axis changes this algorithm), one
    /// per axis of the sweep; an algorithm an axis does not change was
    /// measured at the axis's first value only.
    pub settings: Vec<(&'static str, String, bool)>,
}

/// One point of the sweep: a `run` record and what the sweep derives.
#[derive(Serialize, Debug)]
pub struct Point {
    #[serde(flatten)]
    pub record: Record,
    /// The swept settings that apply to this algorithm, by axis name.
    pub settings: std::collections::BTreeMap<&'static str, String>,
    /// Baseline median time over this one, at the same shape, dtype and
    /// settings (for the settings that change the baseline).
    pub speedup_vs_baseline: f64,
    /// (speedup_vs_baseline − 1) × 100.
    pub improvement_percent: f64,
    /// The same algorithm's median time on one thread over this one, when
    /// the sweep measured one thread.
    pub speedup_vs_one_thread: Option<f64>,
    /// CPU: speedup_vs_one_thread / threads. GPU: speedup_vs_baseline /
    /// SMs when the baseline runs on the CPU (seed 002 §10.7 divides by
    /// CUDA cores).
    pub efficiency: Option<f64>,
    /// "threads" or "SMs": what `efficiency` divides by.
    pub efficiency_per: Option<&'static str>,
    /// Whether this point and the baseline its speedup divides by were
    /// each timed at least [`MIN_RELIABLE_REPS`] times.
    pub reliable: bool,
}

/// Speedups against `baseline` and efficiencies, for every record.
/// `sms` is the GPU's multiprocessor count, when a GPU ran.
pub fn derive(measured: Vec<Measured>, baseline: &str, sms: Option<usize>) -> Vec<Point> {
    let same_problem =
        |a: &Record, b: &Record| (a.m, a.k, a.n, a.dtype) == (b.m, b.k, b.n, b.dtype);
    // A setting of `of` matches `candidate` when they agree on it, or it
    // does not change the candidate (measured at one value only).
    let matches = |candidate: &Measured, of: &Measured, except: Option<&str>| {
        candidate.settings.iter().zip(&of.settings).all(
            |((name, value, applies), (_, other, _))| {
                Some(*name) == except || !applies || value == other
            },
        )
    };
    let baseline_ms = |of: &Measured| {
        measured
            .iter()
            .find(|b| {
                b.record.algorithm == baseline
                    && same_problem(&b.record, &of.record)
                    && matches(b, of, None)
            })
            .map(|b| (b.record.median_ms, b.record.device.clone(), b.record.reps))
    };
    let one_thread_ms = |of: &Measured| {
        measured
            .iter()
            .find(|s| {
                s.record.algorithm == of.record.algorithm
                    && same_problem(&s.record, &of.record)
                    && s.record.threads == 1
                    && of
                        .settings
                        .iter()
                        .any(|(name, _, applies)| *name == "threads" && *applies)
                    && matches(s, of, Some("threads"))
            })
            .map(|s| s.record.median_ms)
    };
    let derived: Vec<_> = measured
        .iter()
        .map(|m| (baseline_ms(m), one_thread_ms(m)))
        .collect();
    measured
        .into_iter()
        .zip(derived)
        .map(|(m, (base, single))| {
            let r = &m.record;
            let speedup = base.as_ref().map_or(f64::NAN, |(b, _, _)| b / r.median_ms);
            let reliable = r.reps >= MIN_RELIABLE_REPS
                && base
                    .as_ref()
                    .is_none_or(|(_, _, reps)| *reps >= MIN_RELIABLE_REPS);
            let self_speedup = single.map(|s| s / r.median_ms);
            let on_gpu = r.device.starts_with("cuda");
            let base_on_cpu = base.as_ref().is_some_and(|(_, device, _)| device == "cpu");
            let (efficiency, per) = match (on_gpu, base_on_cpu, sms) {
                (true, true, Some(sms)) => (Some(speedup / sms as f64), Some("SMs")),
                (true, _, _) => (None, None),
                _ => match self_speedup {
                    Some(s) => (Some(s / r.threads as f64), Some("threads")),
                    None => (None, None),
                },
            };
            Point {
                settings: m
                    .settings
                    .iter()
                    .filter(|(_, _, applies)| *applies)
                    .map(|(name, value, _)| (*name, value.clone()))
                    .collect(),
                speedup_vs_baseline: speedup,
                improvement_percent: (speedup - 1.0) * 100.0,
                speedup_vs_one_thread: self_speedup,
                efficiency,
                efficiency_per: per,
                reliable,
                record: m.record,
            }
        })
        .collect()
}

/// The columns of a point as (header, value for tables, value for CSV):
/// one list, so the Markdown table and the CSV file cannot drift apart.
/// `axes` are the swept settings, shown after the shape.
fn columns(p: &Point, axes: &[&'static str]) -> Vec<(String, String, String)> {
    let r = &p.record;
    let both = |header: &str, value: String| (header.to_string(), value.clone(), value);
    let quoted = |text: &str| format!("\"{}\"", text.replace('"', "\"\""));
    let mut cols = vec![
        both("m", r.m.to_string()),
        both("k", r.k.to_string()),
        both("n", r.n.to_string()),
        both("dtype", r.dtype.to_string()),
        both("threads", r.threads.to_string()),
    ];
    for axis in axes.iter().filter(|a| **a != "threads") {
        let value = p.settings.get(axis).cloned();
        cols.push((
            axis.to_string(),
            value.clone().unwrap_or_else(|| "–".into()),
            value.map_or(String::new(), |v| quoted(&v)),
        ));
    }
    cols.extend([
        both("algorithm", r.algorithm.to_string()),
        ("kernel".into(), r.kernel.clone(), quoted(&r.kernel)),
        (
            "median ms".into(),
            crate::common::format_ms(r.median_ms),
            r.median_ms.to_string(),
        ),
        (
            "min ms".into(),
            crate::common::format_ms(r.min_ms),
            r.min_ms.to_string(),
        ),
        (
            "max ms".into(),
            crate::common::format_ms(r.max_ms),
            r.max_ms.to_string(),
        ),
        (
            "reps".into(),
            if p.reliable {
                r.reps.to_string()
            } else {
                format!("{} {FEW_REPS_MARK}", r.reps)
            },
            r.reps.to_string(),
        ),
        (
            "GFLOP/s".into(),
            format!("{:.2}", r.gflops),
            r.gflops.to_string(),
        ),
        (
            "e2e GFLOP/s".into(),
            r.end_to_end_gflops
                .map_or("–".to_string(), |g| format!("{g:.2}")),
            r.end_to_end_gflops.map_or(String::new(), |g| g.to_string()),
        ),
        (
            "speedup".into(),
            if p.reliable {
                format!("{:.3}", p.speedup_vs_baseline)
            } else {
                format!("{:.3} {FEW_REPS_MARK}", p.speedup_vs_baseline)
            },
            p.speedup_vs_baseline.to_string(),
        ),
        (
            "improvement %".into(),
            format!("{:+.1}", p.improvement_percent),
            p.improvement_percent.to_string(),
        ),
        (
            "efficiency".into(),
            match (p.efficiency, p.efficiency_per) {
                (Some(e), Some("SMs")) => format!("{e:.4}/SM"),
                (Some(e), _) => format!("{e:.2}"),
                _ => "–".to_string(),
            },
            p.efficiency.map_or(String::new(), |e| e.to_string()),
        ),
        (
            "rel error".into(),
            if r.rel_error.is_nan() {
                "–".into()
            } else {
                format!("{:.2e}", r.rel_error)
            },
            r.rel_error.to_string(),
        ),
        (
            "ok".into(),
            match (r.ok, r.check) {
                (true, "peer") => "peer".to_string(),
                (true, _) => "yes".to_string(),
                (false, _) => "NO".to_string(),
            },
            r.ok.to_string(),
        ),
    ]);
    cols
}

/// A Markdown table of the points, one row each.
pub fn markdown(points: &[Point], axes: &[&'static str]) -> Result<String> {
    let mut out = String::new();
    let Some(first) = points.first() else {
        return Ok(out);
    };
    let headers: Vec<String> = columns(first, axes).into_iter().map(|c| c.0).collect();
    writeln!(out, "| {} |", headers.join(" | "))?;
    writeln!(out, "|{}", "---|".repeat(headers.len()))?;
    for p in points {
        let cells: Vec<String> = columns(p, axes).into_iter().map(|c| c.1).collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    if points.iter().any(|p| !p.reliable) {
        writeln!(
            out,
            "\n{FEW_REPS_MARK} timed fewer than {MIN_RELIABLE_REPS} times (or against a baseline that was): an indication, not a measurement; rerun with --reps {MIN_RELIABLE_REPS} or more before comparing."
        )?;
    }
    Ok(out)
}

/// The points as CSV, headers in snake case.
pub fn csv(points: &[Point], axes: &[&'static str]) -> Result<String> {
    let mut out = String::new();
    let Some(first) = points.first() else {
        return Ok(out);
    };
    let headers: Vec<String> = columns(first, axes)
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
        let cells: Vec<String> = columns(p, axes).into_iter().map(|c| c.2).collect();
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(out)
}
