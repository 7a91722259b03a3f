//! `fastmm accuracy`: the accuracy audit on one device. Every product
//! asked for, on every input class, its errors against the exact product
//! beside the device's native product's, judged by the level it gives.

use anyhow::{bail, Result};
use clap::Args;
use fastmm::accuracy::InputClass;
use fastmm::audit::{audit, audit_complex, Row};
use fastmm::{
    Accuracy, Algorithm, Context, DType, Device, DeviceKind, Element, GemmOptions, GpuPrecision,
};

use crate::common::{parse_dtypes, write_stdout, Outcome};

#[derive(Args, Debug, Clone)]
pub struct AccuracyArgs {
    /// The device: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Element types: a comma list of f32, f64, c64 and c128 (complex:
    /// four real products at `native`, 3M at the relaxed levels; integers
    /// are exact at every level, and are audited too if named).
    #[arg(short = 'd', long, default_value = "f32,f64")]
    dtype: String,
    /// Shapes: a comma list of N (square) or MxKxN.
    #[arg(long, default_value = "128x256x128,128x4096x128")]
    shapes: String,
    /// Input classes: a comma list of uniform, wide, scaled,
    /// cancellation, integer, huge-column, or `all`.
    #[arg(long, default_value = "all")]
    classes: String,
    /// Products: a comma list of ALGO or ALGO:LEVEL (LEVEL as
    /// --accuracy: native, bound, tf32, bf16, bits:N; cublas:tf32 and
    /// cublas:bf16 run cuBLAS in that mode). Default: auto at each level,
    /// the emulated product at native and bound, and the device's other
    /// products.
    #[arg(long)]
    products: Option<String>,
    /// Measure the errors over at most this many rows of C (evenly
    /// spaced): the exact reference costs a double-f64 dot product per
    /// element.
    #[arg(long, default_value_t = 128)]
    sample_rows: usize,
    /// strassen/winograd recurse while m, k and n are all at least this
    /// (default: their measured crossover, which small audits stay below).
    #[arg(long, value_name = "N0")]
    threshold: Option<usize>,
    /// Seed of the inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print one JSON array of rows instead of a table.
    #[arg(long)]
    json: bool,
}

/// The products audited by default on devices of `kind`.
fn default_products(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Cpu => {
            "auto:native,auto:bound,packed,naive,winograd,emulated:native,emulated:bound"
        }
        DeviceKind::Cuda => {
            "auto:native,auto:bound,auto:tf32,cublas,cublas:tf32,cublas:bf16,cuda-fast,winograd,emulated:native,emulated:bound"
        }
    }
}

/// `ALGO[:LEVEL]` as options.
fn parse_product(text: &str) -> Result<GemmOptions> {
    let (name, level) = match text.trim().split_once(':') {
        Some((name, level)) => (name, Some(level)),
        None => (text.trim(), None),
    };
    let algorithm: Algorithm = name.parse()?;
    let accuracy: Accuracy = level.map_or(Ok(Accuracy::Native), str::parse)?;
    let mut opts = GemmOptions::new(algorithm).accuracy(accuracy);
    if algorithm == Algorithm::Cublas {
        opts.gpu.precision = Some(match accuracy {
            Accuracy::Tf32 => GpuPrecision::Tf32,
            Accuracy::Bf16 => GpuPrecision::Bf16,
            _ => GpuPrecision::Fp32,
        });
    }
    opts.validate()?;
    Ok(opts)
}

/// "MxKxN" or "N".
fn parse_shape(text: &str) -> Result<(usize, usize, usize)> {
    let dims: Vec<usize> = text
        .trim()
        .split('x')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("shape '{text}' is neither N nor MxKxN"))?;
    match dims[..] {
        [n] => Ok((n, n, n)),
        [m, k, n] => Ok((m, k, n)),
        _ => bail!("shape '{text}' is neither N nor MxKxN"),
    }
}

pub fn run(args: &AccuracyArgs) -> Result<Outcome> {
    let device: Device = args.device.parse()?;
    let ctx = Context::open(device)?;
    let classes: Vec<InputClass> = if args.classes.trim().eq_ignore_ascii_case("all") {
        InputClass::ALL.to_vec()
    } else {
        args.classes
            .split(',')
            .map(str::parse)
            .collect::<Result<_, _>>()?
    };
    let products: Vec<GemmOptions> = args
        .products
        .as_deref()
        .unwrap_or(default_products(device.kind()))
        .split(',')
        .map(parse_product)
        .map(|opts| {
            opts.map(|o| match args.threshold {
                Some(n0) if o.algorithm.is_fast() => o.threshold(n0),
                _ => o,
            })
        })
        .collect::<Result<_>>()?;
    let shapes: Vec<(usize, usize, usize)> = args
        .shapes
        .split(',')
        .map(parse_shape)
        .collect::<Result<_>>()?;
    let mut rows = Vec::new();
    for name in args.dtype.split(',').map(str::trim) {
        let complex = match name.to_ascii_lowercase().as_str() {
            "c64" | "complex64" => Some(DType::F32),
            "c128" | "complex128" => Some(DType::F64),
            _ => None,
        };
        for &shape in &shapes {
            if let Some(part) = complex {
                let runs = products_for(part, &products);
                let (seed, sample) = (args.seed, args.sample_rows);
                rows.extend(match part {
                    DType::F32 => audit_complex::<f32>(&ctx, shape, &classes, &runs, seed, sample)?,
                    _ => audit_complex::<f64>(&ctx, shape, &classes, &runs, seed, sample)?,
                });
                continue;
            }
            for dtype in parse_dtypes(name)? {
                rows.extend(match dtype {
                    DType::F32 => audit_of::<f32>(&ctx, args, shape, &classes, &products)?,
                    DType::F64 => audit_of::<f64>(&ctx, args, shape, &classes, &products)?,
                    DType::I32 => audit_of::<i32>(&ctx, args, shape, &classes, &products)?,
                    DType::I64 => audit_of::<i64>(&ctx, args, shape, &classes, &products)?,
                });
            }
        }
    }
    if args.json {
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(&rows)?))?;
    } else {
        print_table(&ctx, &rows)?;
    }
    Ok(Outcome::of_failures(rows.iter().filter(|r| !r.ok).count()))
}

/// The audit of one type and shape, with the products this device runs
/// for T (cuBLAS has no integer product; integers skip it).
fn audit_of<T: Element>(
    ctx: &Context,
    args: &AccuracyArgs,
    shape: (usize, usize, usize),
    classes: &[InputClass],
    products: &[GemmOptions],
) -> Result<Vec<Row>> {
    let runs = products_for(T::DTYPE, products);
    Ok(audit::<T>(
        ctx,
        shape,
        classes,
        &runs,
        args.seed,
        args.sample_rows,
    )?)
}

/// The products this device runs for `dtype` (cuBLAS has no integer
/// product, and its 16-bit modes take f32).
fn products_for(dtype: DType, products: &[GemmOptions]) -> Vec<GemmOptions> {
    products
        .iter()
        .copied()
        .filter(|o| o.algorithm.supports(dtype))
        .filter(|o| {
            matches!(o.gpu.precision, None | Some(GpuPrecision::Fp32)) || dtype == DType::F32
        })
        .filter(|o| !(dtype.is_integer() && matches!(o.accuracy, Accuracy::Bits(_))))
        .collect()
}

fn print_table(ctx: &Context, rows: &[Row]) -> Result<()> {
    let mut out = format!(
        "fastmm accuracy on {}: errors against the exact product (double-f64), beside the native product's\n",
        ctx.describe()
    );
    out += "rel = ‖Ĉ−C‖_F/‖C‖_F, max = max |Ĉ−C|/(|A||B|); ×native = the larger ratio; native: at most 2×\n";
    let header = [
        "dtype",
        "m×k×n",
        "class",
        "product",
        "gives",
        "rel",
        "max",
        "×native",
        "ms",
        "verdict",
        "precision",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                match (r.form, r.dtype) {
                    (None, dtype) => dtype.to_string(),
                    (Some(_), DType::F32) => "c64".to_string(),
                    (Some(_), _) => "c128".to_string(),
                },
                format!("{}×{}×{}", r.shape.0, r.shape.1, r.shape.2),
                r.class.to_string(),
                r.label.clone(),
                r.given.to_string(),
                format!("{:.2e}", r.errors.relative_frobenius),
                format!("{:.2e}", r.errors.max_scaled),
                format!("{:.2}", r.ratio),
                format!("{:.2}", r.ms),
                match &r.why {
                    None => "ok".to_string(),
                    Some(why) => format!("FAILED: {why}"),
                },
                r.precision.clone(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |row: Vec<String>| -> String {
        let padded: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!(
                    "{c}{}",
                    " ".repeat(widths[i].saturating_sub(c.chars().count()))
                )
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    out += &line(header.iter().map(|h| h.to_string()).collect());
    for row in cells {
        out += &line(row);
    }
    write_stdout(&out)
}
