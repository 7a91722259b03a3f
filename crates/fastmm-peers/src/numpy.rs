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

/// A running numpy child for one shape and element type.
pub struct Numpy {
    child: Child,
    reader: BufReader<ChildStdout>,
    /// What numpy runs on, e.g. "numpy openblas 0.3.29 (Haswell, 2 threads)".
    pub label: String,
}

impl Numpy {
    /// Starts `python` on the embedded script for an m×k by k×n product of
    /// `dtype` (f32 or f64) on `threads` BLAS threads; fails with the
    /// child's last error line when numpy is missing.
    pub fn start(
        python: &str,
        (m, k, n): (usize, usize, usize),
        dtype: DType,
        threads: usize,
    ) -> Result<Numpy> {
        if !matches!(dtype, DType::F32 | DType::F64) {
            bail!("numpy's BLAS multiplies f32 and f64 only, not {dtype}");
        }
        let mut child = Command::new(python)
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
            // OpenBLAS workers otherwise spin for a long time after each
            // product, stealing a core from whichever contestant runs next.
            .env("OPENBLAS_THREAD_TIMEOUT", "4")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
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
        let label = match report["blas"].get(0) {
            Some(blas) => format!(
                "numpy {} {} ({}, {} threads)",
                blas["internal_api"].as_str().unwrap_or("?"),
                blas["version"].as_str().unwrap_or("?"),
                blas["architecture"].as_str().unwrap_or("?"),
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
        })
    }

    /// One timed product (after an untimed one), in milliseconds.
    pub fn time_one(&mut self) -> Result<f64> {
        writeln!(self.child.stdin.as_mut().context("no stdin")?, "time")?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
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
