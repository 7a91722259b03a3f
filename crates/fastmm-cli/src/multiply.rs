//! `fastmm multiply A B -o C`: the product of the user's own matrices,
//! read from and written to .npy, Matrix Market, CSV/TSV or raw files
//! (see `fastmm::io`), optionally verified.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use fastmm::io::{promote, read_matrix, write_matrix, AnyMatrix, ReadOptions};
use fastmm::system::format_bytes;
use fastmm::{Algorithm, DType, Element, GemmOptions, Matrix};

use crate::run::Outcome;

#[derive(Args, Debug)]
pub struct MultiplyArgs {
    /// A (m×k): .npy, .mtx, .csv, .tsv, or raw .bin/.raw (with --shape-a).
    a: PathBuf,
    /// B (k×n), in any of the same formats.
    b: PathBuf,
    /// Where to write C = A·B; the extension picks the format. Written to
    /// a temporary file beside it and renamed when complete.
    #[arg(short = 'o', long, value_name = "C")]
    output: PathBuf,
    /// Element type of the product. Default: A's and B's common type — the
    /// same type; the wider of two floats or two integers; f64 for an
    /// integer and a float. A conversion that would change a value is an
    /// error, except rounding on an explicit f64 → f32.
    #[arg(short = 'd', long)]
    dtype: Option<String>,
    /// Element type of CSV/TSV inputs (default f64) and of raw inputs
    /// (required for them).
    #[arg(long, value_name = "DTYPE")]
    input_dtype: Option<String>,
    /// Shape of a raw A, e.g. 1000x700.
    #[arg(long, value_name = "MxK")]
    shape_a: Option<String>,
    /// Shape of a raw B.
    #[arg(long, value_name = "KxN")]
    shape_b: Option<String>,
    /// Algorithm, as for `run` (a GPU algorithm runs on the GPU).
    #[arg(short = 'a', long, default_value = "packed")]
    algo: String,
    /// Threads for the threaded CPU algorithms.
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Verify C (a full check for small products, else the randomized
    /// one) before writing it; a wrong C is not written.
    #[arg(long)]
    check: bool,
}

fn parse_shape(text: &str) -> Result<(usize, usize)> {
    let parts: Vec<&str> = text.split(['x', 'X', ',']).collect();
    match parts[..] {
        [r, c] => Ok((r.trim().parse()?, c.trim().parse()?)),
        _ => bail!("shape '{text}' is not ROWSxCOLS"),
    }
}

/// Whether two paths name the same file (when the second exists).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

pub fn run(args: &MultiplyArgs) -> Result<Outcome> {
    for input in [&args.a, &args.b] {
        if same_file(input, &args.output) {
            bail!(
                "{}: the output would replace an input; inputs are never modified",
                args.output.display()
            );
        }
    }
    let input_dtype = args
        .input_dtype
        .as_deref()
        .map(str::parse::<DType>)
        .transpose()?;
    let read = |path: &Path, shape: &Option<String>| -> Result<AnyMatrix> {
        let opts = ReadOptions {
            dtype: input_dtype,
            shape: shape.as_deref().map(parse_shape).transpose()?,
            max_bytes: None,
        };
        Ok(read_matrix(path, &opts)?)
    };
    let start = Instant::now();
    let a = read(&args.a, &args.shape_a)?;
    let b = read(&args.b, &args.shape_b)?;
    let read_ms = start.elapsed().as_secs_f64() * 1e3;
    let dtype = match &args.dtype {
        Some(d) => d.parse::<DType>()?,
        None => promote(a.dtype(), b.dtype()),
    };
    let convert = |m: AnyMatrix, path: &Path| -> Result<AnyMatrix> {
        if m.dtype() == dtype {
            return Ok(m);
        }
        m.to(dtype)
            .map_err(|e| anyhow::anyhow!("{}: as {dtype}: {e}", path.display()))
    };
    let a = convert(a, &args.a)?;
    let b = convert(b, &args.b)?;
    let ((m, k), (k2, n)) = (a.shape(), b.shape());
    if k != k2 {
        bail!(
            "cannot multiply A ({m}×{k}, {}) by B ({k2}×{n}, {}): A has {k} columns but B has {k2} rows",
            args.a.display(),
            args.b.display()
        );
    }
    let opts = GemmOptions {
        algorithm: args.algo.parse::<Algorithm>()?,
        threads: args.threads,
        ..Default::default()
    };
    opts.validate()?;
    let (c, multiply_ms, verdict) = match (&a, &b) {
        (AnyMatrix::F32(a), AnyMatrix::F32(b)) => multiply(a, b, &opts, args.check)?,
        (AnyMatrix::F64(a), AnyMatrix::F64(b)) => multiply(a, b, &opts, args.check)?,
        (AnyMatrix::I32(a), AnyMatrix::I32(b)) => multiply(a, b, &opts, args.check)?,
        (AnyMatrix::I64(a), AnyMatrix::I64(b)) => multiply(a, b, &opts, args.check)?,
        _ => unreachable!("both operands were converted to {dtype}"),
    };
    if let Some((ok, line)) = &verdict {
        if !ok {
            eprintln!("check: {line}");
            bail!(
                "C failed verification; {} was not written",
                args.output.display()
            );
        }
    }
    let start = Instant::now();
    write_matrix(&args.output, &c)?;
    let write_ms = start.elapsed().as_secs_f64() * 1e3;
    let bytes = std::fs::metadata(&args.output).map_or(0, |m| m.len());
    let flops = 2.0 * m as f64 * k as f64 * n as f64;
    println!(
        "C = A·B: A {m}×{k} ({}), B {k}×{n} ({}), {dtype}, {}: {multiply_ms:.3} ms, {:.2} GFLOP/s; read {read_ms:.1} ms, wrote {} ({}) in {write_ms:.1} ms{}",
        args.a.display(),
        args.b.display(),
        opts.algorithm,
        flops / (multiply_ms * 1e6),
        args.output.display(),
        format_bytes(bytes.into()),
        verdict.map_or(String::new(), |(_, line)| format!("; check: {line}"))
    );
    Ok(Outcome::AllCorrect)
}

/// A verification's verdict and its one-line report.
type Verdict = Option<(bool, String)>;

/// C = A·B timed, and its verification when asked: (C, ms, verdict).
fn multiply<T: Element>(
    a: &Matrix<T>,
    b: &Matrix<T>,
    opts: &GemmOptions,
    check: bool,
) -> Result<(AnyMatrix, f64, Verdict)>
where
    AnyMatrix: From<Matrix<T>>,
{
    let start = Instant::now();
    let c = fastmm::matmul_with(a.as_ref(), b.as_ref(), opts).context("the product failed")?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let verdict = if check {
        let growth = crate::run::error_growth_of::<T>(opts, (a.rows(), a.cols(), b.cols()));
        let v = fastmm::verify::verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)?;
        Some((
            v.ok,
            format!(
                "{} {}, relative error {:.2e}, {:.2e} of the bound",
                v.method.name(),
                if v.ok { "ok" } else { "WRONG" },
                v.rel_error,
                v.bound_ratio
            ),
        ))
    } else {
        None
    };
    Ok((AnyMatrix::from(c), ms, verdict))
}
