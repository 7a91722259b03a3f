//! numpy's `a @ b` (OpenBLAS on most installs) in a child Python process
//! that times one product per request, so its runs can interleave with
//! other contestants' and its thread count is pinned like theirs.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

use anyhow::{bail, Context, Result};
use fastmm::DType;

/// The child's program, embedded so that an installed or copied binary
/// does not depend on the source tree.
const SCRIPT: &str = include_str!("../../../scripts/numpy_gemm.py");

/// Which of OpenBLAS's kernel sets (`OPENBLAS_CORETYPE`) numpy's child runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenBlasCore {
    /// OpenBLAS's own choice, except that on a CPU with AVX-512 an AVX2
    /// kernel set (one an `OPENBLAS_CORETYPE` in the environment pins, as
    /// a Zen 5 machine's environment did with `Haswell`, or one OpenBLAS falls
    /// back to on a CPU it does not know) is replaced by its AVX-512
    /// kernels, `SkylakeX`, which run 1.7× faster there: the comparison is
    /// against OpenBLAS at its best on this machine. The label says so.
    Auto,
    /// Whatever OpenBLAS detects, or `OPENBLAS_CORETYPE` in the
    /// environment says.
    Detected,
    /// This `OPENBLAS_CORETYPE`, e.g. `SkylakeX` or `Haswell`.
    Named(String),
}

impl std::str::FromStr for OpenBlasCore {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "auto" => OpenBlasCore::Auto,
            "detected" => OpenBlasCore::Detected,
            name => OpenBlasCore::Named(name.to_string()),
        })
    }
}

/// OpenBLAS kernel sets that use at most AVX2 on x86-64.
const AVX2_CLASS_CORES: &[&str] = &["Haswell", "Zen", "Sandybridge", "Nehalem", "Prescott"];

/// The AVX-512 kernel set `OpenBlasCore::Auto` moves such CPUs to.
const AVX512_CORE: &str = "SkylakeX";

/// Whether this CPU has what OpenBLAS's SkylakeX kernels use (F, DQ, BW
/// and VL: a different set from fastmm's own AVX-512 kernels').
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// log₂ of the cycles OpenBLAS's idle workers spin before sleeping, as
/// `OPENBLAS_THREAD_TIMEOUT` (see `Numpy::spawn`).
const OPENBLAS_THREAD_TIMEOUT: u32 = 20;

/// How long after a numpy product its workers are left to fall asleep:
/// 2^20 cycles is 0.5 ms at 2 GHz; twice that, with margin.
const OPENBLAS_SETTLE: std::time::Duration = std::time::Duration::from_millis(2);

/// A running numpy child for one shape and element type.
pub struct Numpy {
    child: Child,
    reader: BufReader<ChildStdout>,
    /// What numpy runs on, e.g. "numpy openblas 0.3.29 (Haswell, 2 threads)".
    pub label: String,
    /// OpenBLAS's kernel set as threadpoolctl reports it.
    architecture: Option<String>,
}

impl Numpy {
    /// Starts `python` on the embedded script for an m×k by k×n product of
    /// `dtype` (f32 or f64) on `threads` BLAS threads with OpenBLAS's
    /// kernels chosen by `core`; fails with the child's last error line
    /// when numpy is missing.
    pub fn start(
        python: &str,
        shape: (usize, usize, usize),
        dtype: DType,
        threads: usize,
        core: &OpenBlasCore,
    ) -> Result<Numpy> {
        if !matches!(dtype, DType::F32 | DType::F64) {
            bail!("numpy's BLAS multiplies f32 and f64 only, not {dtype}");
        }
        let named = match core {
            OpenBlasCore::Named(name) => Some(name.as_str()),
            _ => None,
        };
        let numpy = Numpy::spawn(python, shape, dtype, threads, named)?;
        if *core != OpenBlasCore::Auto || !has_avx512() {
            return Ok(numpy);
        }
        let Some(chosen) = numpy.architecture.clone() else {
            return Ok(numpy);
        };
        if !AVX2_CLASS_CORES
            .iter()
            .any(|c| c.eq_ignore_ascii_case(&chosen))
        {
            return Ok(numpy);
        }
        drop(numpy);
        let why = match std::env::var("OPENBLAS_CORETYPE") {
            Ok(value) => format!("in place of OPENBLAS_CORETYPE={value}"),
            Err(_) => format!("OpenBLAS chose {chosen} on this AVX-512 CPU"),
        };
        let mut upgraded = Numpy::spawn(python, shape, dtype, threads, Some(AVX512_CORE))?;
        upgraded.label = format!("{}; {why})", upgraded.label.trim_end_matches(')'));
        Ok(upgraded)
    }

    fn spawn(
        python: &str,
        (m, k, n): (usize, usize, usize),
        dtype: DType,
        threads: usize,
        coretype: Option<&str>,
    ) -> Result<Numpy> {
        let mut command = Command::new(python);
        command
            .args([
                "-c",
                SCRIPT,
                &m.to_string(),
                &k.to_string(),
                &n.to_string(),
                dtype.name(),
                &threads.to_string(),
            ])
            // The thread count holds even without threadpoolctl.
            .env("OPENBLAS_NUM_THREADS", threads.to_string())
            .env("OMP_NUM_THREADS", threads.to_string())
            // OpenBLAS's idle workers spin for 2^n cycles before they
            // sleep: 2^28 by default, a tenth of a second that would steal
            // a core from whichever contestant runs next; at the minimum,
            // 2^4, they sleep between the untimed and the timed product
            // and the timed one pays their wake-up, which a numpy user in
            // a loop never does. 2^20 cycles (about 0.3 ms) keeps them
            // awake from one product to the next, and `time_one` then
            // waits for them to fall asleep.
            .env(
                "OPENBLAS_THREAD_TIMEOUT",
                OPENBLAS_THREAD_TIMEOUT.to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(name) = coretype {
            command.env("OPENBLAS_CORETYPE", name);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot run {python}"))?;
        let mut reader = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header.is_empty() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .context("no stderr")?
                .read_to_string(&mut err)?;
            let _ = child.wait();
            bail!("{}", err.lines().last().unwrap_or("numpy exited"));
        }
        let report: serde_json::Value = serde_json::from_str(&header)
            .with_context(|| format!("numpy's child said '{}'", header.trim()))?;
        let blas = report["blas"].get(0);
        let architecture = blas
            .and_then(|b| b["architecture"].as_str())
            .map(str::to_string);
        let label = match blas {
            Some(blas) => format!(
                "numpy {} {} ({}, {} threads)",
                blas["internal_api"].as_str().unwrap_or("?"),
                blas["version"].as_str().unwrap_or("?"),
                architecture.as_deref().unwrap_or("?"),
                blas["num_threads"]
            ),
            None => format!(
                "numpy {} (BLAS unknown: no threadpoolctl)",
                report["numpy"].as_str().unwrap_or("?")
            ),
        };
        Ok(Numpy {
            child,
            reader,
            label,
            architecture,
        })
    }

    /// One timed product (after an untimed one), in milliseconds.
    /// Wakes OpenBLAS with an untimed product, times the next one, and
    /// returns once its workers have stopped spinning (so that they take
    /// no core from the next contestant).
    pub fn time_one(&mut self) -> Result<f64> {
        writeln!(self.child.stdin.as_mut().context("no stdin")?, "time")?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        std::thread::sleep(OPENBLAS_SETTLE);
        line.trim()
            .parse()
            .with_context(|| format!("numpy answered '{}'", line.trim()))
    }
}

impl Drop for Numpy {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
