//! `fastmm multiply A B -o C`: the product of the user's own matrices,
//! read from and written to .npy, Matrix Market, CSV/TSV/text or raw
//! files, or stdin and stdout (see `fastmm::io`), optionally verified.
//! Shapes follow numpy's `matmul`: a 1-D A is a row, a 1-D B a column,
//! and the dimension they add is dropped from C.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fastmm::complex::ComplexMatrix;
use fastmm::io::{
    encode_array, parse_array, promote, read_array, write_array, AnyMatrix, Array, Format,
    ReadOptions,
};
use fastmm::system::format_bytes;
use fastmm::{
    Algorithm, Context, DType, Element, Executor, Gemm, GemmOptions, GpuOptions, Machine, Matrix,
    Problem,
};

use crate::common::{parse_bytes, AlgoArgs, Outcome, Target};

#[derive(Args, Debug)]
pub struct MultiplyArgs {
    /// A (m×k, or a 1-D .npy of k): .npy, .mtx, .csv, .tsv, .txt, or raw
    /// .bin/.raw (with --shape-a); `-` reads stdin (with --format).
    a: PathBuf,
    /// B (k×n, or a 1-D .npy of k), in any of the same formats.
    b: PathBuf,
    /// Where to write C = A·B; the extension picks the format. Written to
    /// a temporary file beside it and renamed when complete; `-` writes
    /// stdout (with --output-format) and the report goes to stderr.
    #[arg(short = 'o', long, value_name = "C")]
    output: PathBuf,
    /// Format of stdin (`-`) and of inputs whose extension names none:
    /// npy, mtx, csv, tsv, txt (whitespace-separated) or raw.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// Format of stdout (`-o -`) or of an output whose extension names
    /// none.
    #[arg(long, value_name = "FORMAT")]
    output_format: Option<String>,
    /// Field delimiter of text inputs, e.g. ';' (a space means any run of
    /// whitespace). Default: a comma for .csv and a tab for .tsv when the
    /// first row holds one, else whitespace, as np.loadtxt.
    #[arg(long, value_name = "CHAR")]
    delimiter: Option<char>,
    /// Element type of the product: f32, f64, i32, i64, or complex c64 or
    /// c128. Default: A's and B's common type — the same type; the wider
    /// of two floats or two integers; f64 for an integer and a float;
    /// complex when either is, with parts of that common type (c128 for
    /// integer parts). A conversion that would change a value is an
    /// error, except rounding on an explicit f64 → f32 (c128 → c64).
    /// Complex products are four real products at `native` accuracy and
    /// three (3M) at the relaxed levels.
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
    /// Algorithm, as for `run` (NAME or NAME@DEVICE): auto is Winograd
    /// where its measured crossover gives a level, else the device's
    /// classical product.
    #[arg(short = 'a', long, default_value = "auto")]
    algo: String,
    /// Verify C (a full check for small products, else the randomized
    /// one) before writing it; a wrong C is not written.
    #[arg(long)]
    check: bool,
    /// Memory budget, e.g. 512M or 8G (default: the memory available).
    /// When A, B and C together exceed it, .npy/raw inputs are multiplied
    /// out of core: mapped, with C computed and written in blocks.
    #[arg(long, value_name = "BYTES")]
    max_memory: Option<String>,
    /// Under `mpirun -np P`: the product across the P ranks. A and B are
    /// .npy (or raw) files every rank can read, of one type; each rank
    /// reads only its pieces and writes its blocks of C into one file,
    /// which rank 0 checks and renames into place once every rank has
    /// written its part. Needs a build with the `mpi` feature.
    #[arg(long)]
    distributed: bool,
    #[command(flatten)]
    options: AlgoArgs,
}

impl MultiplyArgs {
    /// Whether `--device` or `--algo` names several GPUs.
    fn names_team(&self) -> Result<bool> {
        let target = Target::parse(self.algo.trim(), self.options.placement()?)?;
        Ok(target.team.is_some())
    }

    /// The machine the product runs on (the device or the team of GPUs
    /// `--device` or `--algo` names) and its options.
    fn machine(&self) -> Result<(Machine, GemmOptions)> {
        let target = Target::parse(self.algo.trim(), self.options.placement()?)?;
        let list = target.list();
        let machine = Machine::open_list(&list).with_context(|| format!("cannot open {list}"))?;
        Ok((machine, self.options_of(&target)?))
    }

    /// The product's device and options, as given.
    fn product(&self) -> Result<(Context, GemmOptions)> {
        let target = Target::parse(self.algo.trim(), self.options.placement()?)?;
        let ctx = Context::open(target.device)
            .with_context(|| format!("cannot open {}", target.device))?;
        Ok((ctx, self.options_of(&target)?))
    }

    /// The options of `target`'s product, as given.
    fn options_of(&self, target: &Target) -> Result<GemmOptions> {
        Ok(GemmOptions {
            algorithm: target.algorithm,
            gpu: GpuOptions {
                out_of_core: self.options.out_of_core,
                ..self.options.options()?.gpu
            },
            ..self.options.options()?
        })
    }
}

/// Whether a path is `-`, stdin or stdout.
fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

impl MultiplyArgs {
    /// The format of an input or (`output`) the output: its extension's,
    /// else the one named; `-` needs one named.
    fn format_of(&self, path: &Path, output: bool) -> Result<Format> {
        let (named, flag) = match output {
            false => (&self.format, "--format"),
            true => (&self.output_format, "--output-format"),
        };
        if !is_stdio(path) {
            if let Ok(format) = Format::of_path(path) {
                return Ok(format);
            }
        }
        match named {
            Some(name) => Ok(name.parse::<Format>()?),
            None if is_stdio(path) => bail!(
                "{} has no extension to say its format: name it with {flag} (npy, mtx, csv, tsv, txt or raw)",
                if output { "stdout (-o -)" } else { "stdin (-)" }
            ),
            None => Ok(Format::of_path(path)?),
        }
    }

    /// Whether the operands and the output are files an out-of-core
    /// product can map.
    fn mappable(&self) -> bool {
        // Mapped files are opened by their extension.
        let mappable = |path: &Path| {
            !is_stdio(path) && matches!(Format::of_path(path), Ok(Format::Npy | Format::Raw))
        };
        mappable(&self.a) && mappable(&self.b) && mappable(&self.output)
    }
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
    if args.distributed {
        return distributed(args);
    }
    if is_stdio(&args.a) && is_stdio(&args.b) {
        bail!("A and B cannot both be read from stdin (-)");
    }
    let output_format = args.format_of(&args.output, true)?;
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
    let budget = match &args.max_memory {
        Some(text) => parse_bytes(text)?,
        None => fastmm::system::available_memory_bytes().unwrap_or(u64::MAX),
    };
    let team = args.names_team()?;
    if team && args.options.out_of_core {
        bail!("--out-of-core streams through one device; on several GPUs, C = A·B of files in memory streams through all of them without it");
    }
    // Complex matrices are multiplied in memory, as real products of their
    // parts.
    let complex = args
        .dtype
        .as_deref()
        .is_some_and(|d| parse_type(d).is_ok_and(|(_, complex)| complex))
        || [&args.a, &args.b]
            .iter()
            .any(|path| fastmm::io::out_of_core::holds_complex(path));
    if complex && args.options.out_of_core {
        bail!("--out-of-core multiplies real matrices; complex ones are multiplied in memory");
    }
    if args.mappable() && !team && !complex {
        if let Some(outcome) = out_of_core(args, input_dtype, budget)? {
            return Ok(outcome);
        }
    } else if args.options.out_of_core {
        bail!("--out-of-core maps its inputs and streams C: A, B and C must be .npy or raw files, not stdin or stdout");
    }
    let read = |path: &Path, shape: &Option<String>| -> Result<Array> {
        let opts = ReadOptions {
            dtype: input_dtype,
            shape: shape.as_deref().map(parse_shape).transpose()?,
            delimiter: args.delimiter,
            max_bytes: None,
        };
        let format = args.format_of(path, false)?;
        if !is_stdio(path) {
            return Ok(read_array(path, Some(format), &opts)?);
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .context("cannot read stdin")?;
        parse_array(format, &bytes, &opts).map_err(|e| anyhow::anyhow!("stdin: {e}"))
    };
    let start = Instant::now();
    let a = read(&args.a, &args.shape_a)?;
    let b = read(&args.b, &args.shape_b)?;
    let read_ms = start.elapsed().as_secs_f64() * 1e3;
    // numpy's matmul shapes: a vector A is a row (1×k), a vector B a
    // column (k×1), and C drops the dimension each added.
    for (array, which, path) in [(&a, "A", &args.a), (&b, "B", &args.b)] {
        if array.ndim == 0 {
            bail!(
                "{} ({which}) is a scalar (a 0-D array); a product needs 1-D or 2-D operands, as numpy's matmul",
                path.display()
            );
        }
    }
    let c_ndim = usize::from(a.ndim == 2) + usize::from(b.ndim == 2);
    let a = match a.ndim {
        1 => {
            let k = a.matrix.shape().0;
            a.matrix.reshaped(1, k)?
        }
        _ => a.matrix,
    };
    let b = b.matrix;
    let (dtype, complex) = match &args.dtype {
        Some(d) => parse_type(d)?,
        None => match promote(a.dtype(), b.dtype()) {
            integer if integer.is_integer() && (a.is_complex() || b.is_complex()) => {
                (DType::F64, true)
            }
            common => (common, a.is_complex() || b.is_complex()),
        },
    };
    let type_name = match (complex, dtype) {
        (true, DType::F32) => "c64".to_string(),
        (true, _) => "c128".to_string(),
        (false, real) => real.to_string(),
    };
    let convert = |m: AnyMatrix, path: &Path| -> Result<AnyMatrix> {
        if m.dtype() == dtype && m.is_complex() == complex {
            return Ok(m);
        }
        match complex {
            true => m.to_complex(dtype),
            false if m.is_complex() => bail!(
                "{} holds complex values; multiply them as c64 or c128",
                path.display()
            ),
            false => m.to(dtype),
        }
        .map_err(|e| anyhow::anyhow!("{}: as {type_name}: {e}", path.display()))
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
    let (machine, opts) = args.machine()?;
    let engine = &machine;
    let (c, multiply_ms, verdict, algorithm) = match (&a, &b) {
        (AnyMatrix::F32(a), AnyMatrix::F32(b)) => multiply(engine, a, b, &opts, args.check)?,
        (AnyMatrix::F64(a), AnyMatrix::F64(b)) => multiply(engine, a, b, &opts, args.check)?,
        (AnyMatrix::I32(a), AnyMatrix::I32(b)) => multiply(engine, a, b, &opts, args.check)?,
        (AnyMatrix::I64(a), AnyMatrix::I64(b)) => multiply(engine, a, b, &opts, args.check)?,
        (AnyMatrix::C64(a), AnyMatrix::C64(b)) => {
            multiply_complex(engine, a, b, &opts, args.check)?
        }
        (AnyMatrix::C128(a), AnyMatrix::C128(b)) => {
            multiply_complex(engine, a, b, &opts, args.check)?
        }
        _ => bail!("A and B were not converted to one type ({type_name})"),
    };
    let on = machine.name();
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
    let c = Array {
        matrix: c,
        ndim: c_ndim,
    };
    let bytes = if is_stdio(&args.output) {
        let encoded = encode_array(output_format, &c)?;
        let mut stdout = std::io::stdout().lock();
        std::io::Write::write_all(&mut stdout, &encoded)
            .and_then(|()| std::io::Write::flush(&mut stdout))
            .context("cannot write stdout")?;
        encoded.len() as u64
    } else {
        write_array(&args.output, Some(output_format), &c)?;
        std::fs::metadata(&args.output).map_or(0, |m| m.len())
    };
    let write_ms = start.elapsed().as_secs_f64() * 1e3;
    // A complex multiply-add is four real multiplications and four
    // additions (LAPACK's count for zgemm), whatever form ran.
    let flops = if complex { 8.0 } else { 2.0 } * m as f64 * k as f64 * n as f64;
    // The report goes where C does not.
    let report = |line: String| match is_stdio(&args.output) {
        true => eprintln!("{line}"),
        false => println!("{line}"),
    };
    report(format!(
        "C = A·B: A {m}×{k} ({}), B {k}×{n} ({}), {type_name}, {} on {}: {multiply_ms:.3} ms, {:.2} GFLOP/s{}; read {read_ms:.1} ms, wrote {} ({}) in {write_ms:.1} ms{}",
        args.a.display(),
        args.b.display(),
        algorithm,
        on,
        flops / (multiply_ms * 1e6),
        // One product, timed from the host: on a GPU it includes the
        // copies and, in a fresh process, compiling or loading kernels.
        if !machine.gpus().is_empty() {
            " (wall time with host↔device copies and kernel loading)"
        } else {
            ""
        },
        match is_stdio(&args.output) {
            true => "stdout".into(),
            false => args.output.display().to_string(),
        },
        format_bytes(bytes.into()),
        verdict.map_or(String::new(), |(_, line)| format!("; check: {line}"))
    ));
    Ok(Outcome::AllCorrect)
}

/// An element type as `--dtype` names it: (the real type, or the parts'
/// type, and whether it is complex).
fn parse_type(text: &str) -> Result<(DType, bool)> {
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "c64" | "complex64" => (DType::F32, true),
        "c128" | "complex128" => (DType::F64, true),
        real => (real.parse::<DType>()?, false),
    })
}

/// A verification's verdict and its one-line report.
type Verdict = Option<(bool, String)>;

/// C = A·B timed, and its verification when asked: (C, ms, verdict, the
/// algorithm that ran).
fn multiply<T: Element>(
    x: &impl Executor,
    a: &Matrix<T>,
    b: &Matrix<T>,
    opts: &GemmOptions,
    check: bool,
) -> Result<(AnyMatrix, f64, Verdict, Algorithm)>
where
    AnyMatrix: From<Matrix<T>>,
{
    let plan = x.plan(Problem::of::<T>((a.rows(), a.cols(), b.cols())), opts)?;
    let mut c = Matrix::try_zeros(a.rows(), b.cols())?;
    let start = Instant::now();
    let report = x
        .execute(&plan, Gemm::new(a.as_ref(), b.as_ref(), c.as_mut()))
        .context("the product failed")?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let asked = plan.algorithm;
    let plan = report.plan;
    if plan.algorithm != asked {
        eprintln!(
            "note: A or B holds NaN or ∞, so {asked} runs its classical base, {}: its sums would turn ∞ into NaN where numpy's product has none",
            plan.algorithm
        );
    }
    let growth = plan.error_growth;
    let verdict = if check {
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
    Ok((AnyMatrix::from(c), ms, verdict, plan.algorithm))
}

/// The complex C = A·B timed, and its verification when asked: four real
/// products at `native` accuracy, three (3M) at the relaxed levels, each
/// planned by the executor as a real product of T.
fn multiply_complex<T: Element>(
    x: &impl Executor,
    a: &ComplexMatrix<T>,
    b: &ComplexMatrix<T>,
    opts: &GemmOptions,
    check: bool,
) -> Result<(AnyMatrix, f64, Verdict, Algorithm)>
where
    AnyMatrix: From<ComplexMatrix<T>>,
{
    let form = fastmm::complex::ComplexForm::for_level(opts.accuracy);
    let (m, n) = (a.shape().0, b.shape().1);
    let mut c = ComplexMatrix::try_zeros(m, n)?;
    let start = Instant::now();
    let reports =
        fastmm::complex::multiply(x, a.as_split(), b.as_split(), c.as_split_mut(), form, opts)
            .context("the complex product failed")?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let plan = &reports[0].plan;
    let verdict = match check {
        true => {
            let v = fastmm::complex::verify(a, b, &c, plan.error_growth, form)?;
            Some((
                v.ok,
                format!(
                    "{} {} ({} complex form), relative error {:.2e}, {:.2e} of the bound",
                    v.method.name(),
                    if v.ok { "ok" } else { "WRONG" },
                    form.name(),
                    v.rel_error,
                    v.bound_ratio
                ),
            ))
        }
        false => None,
    };
    Ok((AnyMatrix::from(c), ms, verdict, plan.algorithm))
}

/// The product out of core when it is asked for or A, B and C exceed the
/// budget; `None` when it fits in memory and was not asked for.
fn out_of_core(
    args: &MultiplyArgs,
    input_dtype: Option<DType>,
    budget: u64,
) -> Result<Option<Outcome>> {
    use fastmm::io::out_of_core::MappedMatrix;
    let raw = |shape: &Option<String>| -> Result<Option<((usize, usize), DType)>> {
        Ok(match (shape, input_dtype) {
            (Some(s), Some(d)) => Some((parse_shape(s)?, d)),
            _ => None,
        })
    };
    let a = MappedMatrix::open(&args.a, raw(&args.shape_a)?)?;
    let b = MappedMatrix::open(&args.b, raw(&args.shape_b)?)?;
    if a.ndim != 2 || b.ndim != 2 {
        if args.options.out_of_core {
            bail!(
                "--out-of-core multiplies matrices: a 1-D or 0-D operand is multiplied in memory"
            );
        }
        return Ok(None);
    }
    let dtype = match &args.dtype {
        Some(d) => d.parse::<DType>()?,
        None => promote(a.dtype, b.dtype),
    };
    let (m, k, n) = (a.rows as u128, a.cols as u128, b.cols as u128);
    let total = (m * k + k * n + m * n) * dtype.size_bytes() as u128;
    if !args.options.out_of_core && total <= u128::from(budget) {
        return Ok(None);
    }
    let (ctx, opts) = args.product()?;
    // An input of another type, byte order or alignment is converted
    // once, in pieces, into a scratch file beside the output (removed at
    // once; its map keeps the pages).
    let scratch = match args.output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let convert = |m: MappedMatrix, which: &str, path: &Path| -> Result<MappedMatrix> {
        if m.maps_as(dtype) {
            return Ok(m);
        }
        let start = Instant::now();
        let converted = m
            .converted(dtype, &scratch)
            .map_err(|e| anyhow::anyhow!("{} ({which}) as {dtype}: {e}", path.display()))?;
        eprintln!(
            "note: {which} ({}, {}) converted to little-endian {dtype} in a scratch file in {:.3} s",
            path.display(),
            m.dtype,
            start.elapsed().as_secs_f64()
        );
        Ok(converted)
    };
    let a = convert(a, "A", &args.a)?;
    let b = convert(b, "B", &args.b)?;
    use fastmm::io::out_of_core::multiply as mapped;
    let (c, check) = (&args.output, args.check);
    let report = match dtype {
        DType::F32 => mapped::<f32>(&ctx, &a, &b, c, &opts, budget, check),
        DType::F64 => mapped::<f64>(&ctx, &a, &b, c, &opts, budget, check),
        DType::I32 => mapped::<i32>(&ctx, &a, &b, c, &opts, budget, check),
        DType::I64 => mapped::<i64>(&ctx, &a, &b, c, &opts, budget, check),
    }?;
    let blocking = report.plan;
    let plan = &report.product;
    let flops = 2.0 * (m * k * n) as f64;
    let how = match &report.streamed {
        // A GPU streamed the whole product in tiles from the maps.
        Some(s) => format!(
            "on {}, {}; host memory budget {}, inputs mapped; {} up, {} down; products {:.1}% of the time",
            plan.device,
            plan.label(),
            format_bytes(budget.into()),
            format_bytes(s.upload_bytes.into()),
            format_bytes(s.download_bytes.into()),
            100.0 * s.products_fraction
        ),
        None => format!(
            "budget {} for {} of A, B and C: C in {} blocks of {}×{} ({} each, written through a map; the seed's (k(a+b)+ab)·size = {})",
            format_bytes(budget.into()),
            format_bytes(total),
            report.blocks,
            blocking.block_rows,
            blocking.block_cols,
            format_bytes(blocking.c_block_bytes.into()),
            format_bytes(blocking.seed_formula_bytes.into()),
        ),
    };
    let failed = report.check.is_some_and(|c| !c.0);
    println!(
        "C = A·B out of core: A {m}×{k} ({}), B {k}×{n} ({}), {dtype}, {}; {how}; {:.3} s, {:.2} GFLOP/s ({:.2} in the products); {}{}",
        args.a.display(),
        args.b.display(),
        plan.algorithm,
        report.seconds,
        flops / report.seconds / 1e9,
        flops / report.multiply_seconds / 1e9,
        match failed {
            true => "not written".to_string(),
            false => format!("wrote {}", args.output.display()),
        },
        report.check.map_or(String::new(), |(ok, err, bound)| format!(
            "; check of every block: {}, worst relative error {err:.2e}, {bound:.2e} of the bound",
            if ok { "ok" } else { "WRONG" }
        ))
    );
    if failed {
        bail!(
            "a block of C failed verification; {} was not written",
            args.output.display()
        );
    }
    Ok(Some(Outcome::AllCorrect))
}

#[cfg(not(feature = "mpi"))]
fn distributed(_: &MultiplyArgs) -> Result<Outcome> {
    bail!("--distributed runs under MPI: build with `cargo build --release --features mpi` (see the README's cluster section)")
}

/// `multiply --distributed`: C = A·B of files across the MPI job's ranks;
/// rank 0 reports. A rank that fails names itself and aborts the job, so
/// none waits for it; rank 0's temporary C goes with its interrupt
/// handler, and nothing is left under C's name.
#[cfg(feature = "mpi")]
fn distributed(args: &MultiplyArgs) -> Result<Outcome> {
    if [&args.a, &args.b, &args.output]
        .into_iter()
        .any(|p| is_stdio(p))
    {
        bail!("--distributed reads and writes files that every rank sees, not stdin or stdout");
    }
    let raw = match (&args.shape_a, &args.shape_b) {
        (Some(sa), Some(sb)) => {
            let dtype: DType = args
                .input_dtype
                .as_deref()
                .context("raw inputs need --input-dtype")?
                .parse()?;
            Some([(parse_shape(sa)?, dtype), (parse_shape(sb)?, dtype)])
        }
        (None, None) => None,
        _ => bail!("--distributed takes raw inputs with both --shape-a and --shape-b"),
    };
    let (_, opts) = args.product()?;
    let cluster = fastmm::Cluster::init()?;
    let start = Instant::now();
    match cluster.multiply_files(&args.a, &args.b, &args.output, raw, &opts) {
        Ok(report) => {
            if cluster.rank() == 0 {
                let (m, k, n) = report.shape;
                let (pm, pn, pk) = report.product.grid;
                eprintln!(
                    "fastmm: C = A·B ({m}×{k} · {k}×{n}, {}) across {} ranks in a {pm}×{pn}×{pk} grid: \
                     product {:.1} ms, {} words received per rank, {:.1} s with the files \
                     (each rank mapped at most {} bytes of the inputs for its pieces); \
                     checked ({:.2e} of the bound); wrote {}",
                    report.dtype,
                    report.product.processors,
                    report.product.compute_ms,
                    report.product.moved.words_per_processor,
                    start.elapsed().as_secs_f64(),
                    report.mapped_bytes_per_rank,
                    report.bound_ratio,
                    args.output.display()
                );
            }
            Ok(Outcome::AllCorrect)
        }
        Err(e) => {
            crate::common::rank_failed(cluster.rank(), cluster.size(), &e);
            cluster.abort(1)
        }
    }
}
