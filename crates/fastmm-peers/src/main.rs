//! `fastmm-peers`: fastmm's `packed` (or any list of its algorithms, e.g.
//! `--fastmm winograd,strassen,packed`) against the GEMMs a user would reach for
//! instead — OpenBLAS (through numpy, checked with threadpoolctl), the
//! `matrixmultiply` crate (threading feature) and the `gemm` crate
//! (AVX-512 enabled) — on the same machine, in one run, with every
//! contestant using the same number of threads.
//!
//! Rounds are interleaved (each round times every contestant once, numpy
//! included, through a child process that times one product per request) so
//! that the machine's drift hits all of them alike; medians are reported,
//! with fastmm's throughput as a ratio to each peer's, both as the ratio
//! of the medians and as the median of the per-round ratios ("paired"),
//! with the number of rounds fastmm won. Every result is
//! verified. Each timed run directly follows an untimed run of the same
//! contestant: that wakes every core it uses (an idle vCPU can take
//! milliseconds to come back) and outlasts the previous contestant's
//! spinning worker threads.

use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use clap::Parser;
use fastmm::random::{random_matrix, seeded_rng};
use fastmm::system::available_threads;
use fastmm::verify::verify_with_growth;
use fastmm::{
    gemm as fastmm_gemm, Algorithm, BlockSizes, Context, CpuOptions, DType, Element, FastOptions,
    GemmOptions, Matrix, Variant,
};
use fastmm_peers::numpy::{Numpy, OpenBlasCore};

#[derive(Parser)]
#[command(about = "Benchmark fastmm's packed GEMM against OpenBLAS, matrixmultiply and gemm")]
struct Args {
    /// Problems as N (square) or MxKxN, comma separated.
    #[arg(long, default_value = "1024,2048,4096,4096x256x4096,256x4096x256")]
    shapes: String,
    /// Element types: f32, f64 or both.
    #[arg(long, default_value = "f32,f64")]
    dtype: String,
    /// Timed rounds; medians are reported.
    #[arg(long, default_value_t = 11)]
    rounds: usize,
    /// Threads for every contestant (default: all hardware threads).
    #[arg(long)]
    threads: Option<usize>,
    /// Python interpreter with numpy and threadpoolctl; `none` skips OpenBLAS.
    #[arg(long, default_value = "python3")]
    python: String,
    /// OpenBLAS's kernel set: `auto` (its own choice, but its AVX-512
    /// kernels, SkylakeX, where it would run AVX2 kernels on an AVX-512
    /// CPU, e.g. pinned by an `OPENBLAS_CORETYPE` in the environment),
    /// `detected` (its own choice or the environment's), or an
    /// `OPENBLAS_CORETYPE` name.
    #[arg(long, default_value = "auto")]
    openblas_core: OpenBlasCore,
    /// fastmm algorithms to run, comma separated (e.g. `winograd,strassen,packed`);
    /// a fast algorithm may name its variant after a slash
    /// (`winograd/batched`) and its own threshold n₀ after an `@`
    /// (`winograd@1536`, overriding `--threshold`); the ratio column is
    /// relative to the first.
    #[arg(long, default_value = "packed")]
    fastmm: String,
    /// Threshold n₀ of `strassen`/`winograd` (default: auto).
    #[arg(long)]
    threshold: Option<usize>,
    /// Cache blocks of `packed` as MC,KC,NC; several, separated by `;`,
    /// run each fastmm algorithm once per choice, side by side; `default`
    /// names the library's own rule (the default).
    #[arg(long)]
    blocks: Option<String>,
    /// Rust peers to run, comma separated: `matrixmultiply`, `gemm`, or
    /// `none`.
    #[arg(long, default_value = "matrixmultiply,gemm")]
    peers: String,
}

/// Computes C = A·B into its third argument.
type Multiply<T> = Box<dyn Fn(&Matrix<T>, &Matrix<T>, &mut Matrix<T>)>;

struct Contestant<T> {
    name: String,
    run: Multiply<T>,
    /// Allowed growth of the float error bound (fast algorithms).
    growth: f64,
}

trait PeerElement: Element {
    /// matrixmultiply's sgemm/dgemm: C ← αAB + βC with explicit strides.
    ///
    /// # Safety
    /// Pointers and strides describe valid m×k, k×n and m×n matrices.
    #[allow(clippy::too_many_arguments)]
    unsafe fn matrixmultiply(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        b: *const Self,
        c: *mut Self,
    );
}

macro_rules! peer_element {
    ($t:ty, $gemm:path) => {
        impl PeerElement for $t {
            unsafe fn matrixmultiply(
                m: usize,
                k: usize,
                n: usize,
                a: *const $t,
                b: *const $t,
                c: *mut $t,
            ) {
                // SAFETY: forwarded; row-major strides of contiguous matrices.
                unsafe {
                    $gemm(
                        m, k, n, 1.0, a, k as isize, 1, b, n as isize, 1, 0.0, c, n as isize, 1,
                    )
                }
            }
        }
    };
}

peer_element!(f32, matrixmultiply::sgemm);
peer_element!(f64, matrixmultiply::dgemm);

fn contestants<T: PeerElement>(
    args: &Args,
    shape: (usize, usize, usize),
    threads: usize,
) -> Result<Vec<Contestant<T>>> {
    let block_choices: Vec<Option<BlockSizes>> = match &args.blocks {
        None => vec![None],
        Some(list) => list
            .split(';')
            .map(|text| match text.trim() {
                "default" => Ok(None),
                text => Ok(Some(BlockSizes::parse(text)?)),
            })
            .collect::<Result<_>>()?,
    };
    let mut out = Vec::new();
    for entry in args.fastmm.split(',').map(str::trim) {
        let (entry, threshold) = match entry.split_once('@') {
            Some((entry, n0)) => (
                entry,
                Some(
                    n0.parse::<usize>()
                        .with_context(|| format!("threshold '{n0}' of '{entry}'"))?,
                ),
            ),
            None => (entry, args.threshold),
        };
        let (name, variant) = match entry.split_once('/') {
            Some((name, variant)) => (name, Some(variant.parse::<Variant>()?)),
            None => (entry, None),
        };
        let algorithm: Algorithm = name.parse()?;
        for &block_sizes in &block_choices {
            let opts = GemmOptions {
                fast: FastOptions {
                    threshold,
                    variant,
                    ..GemmOptions::new(algorithm).threads(threads).fast
                },
                cpu: CpuOptions {
                    block_sizes,
                    ..GemmOptions::new(algorithm).threads(threads).cpu
                },
                ..GemmOptions::new(algorithm).threads(threads)
            };
            let mut label = match variant {
                Some(variant) => format!("{algorithm}/{variant}"),
                None => algorithm.to_string(),
            };
            if let Some(n0) = threshold.filter(|_| threshold != args.threshold) {
                label = format!("{label}@{n0}");
            }
            if let Some(b) = block_sizes {
                label = format!("{label} blocks {},{},{}", b.mc, b.kc, b.nc);
            }
            let growth = Context::cpu()
                .plan(fastmm::Problem::of::<T>(shape), &opts)?
                .error_growth;
            out.push(Contestant {
                name: format!("fastmm {label}"),
                run: Box::new(move |a, b, c| {
                    fastmm_gemm(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut(), &opts)
                        .expect("valid shapes")
                }),
                growth,
            });
        }
    }
    let wanted: Vec<&str> = args.peers.split(',').map(str::trim).collect();
    for peer in &wanted {
        if !["matrixmultiply", "gemm", "none"].contains(peer) {
            bail!("unknown peer '{peer}' (matrixmultiply, gemm or none)");
        }
    }
    let peers = [
        Contestant {
            name: "matrixmultiply".into(),
            growth: 1.0,
            run: Box::new(|a, b, c| {
                let (m, k, n) = (a.rows(), a.cols(), b.cols());
                // SAFETY: contiguous row-major matrices of the stated shapes.
                unsafe {
                    T::matrixmultiply(
                        m,
                        k,
                        n,
                        a.as_slice().as_ptr(),
                        b.as_slice().as_ptr(),
                        c.as_mut_slice().as_mut_ptr(),
                    )
                }
            }),
        },
        Contestant {
            name: "gemm crate".into(),
            growth: 1.0,
            run: Box::new(move |a, b, c| {
                let (m, k, n) = (a.rows(), a.cols(), b.cols());
                // SAFETY: contiguous row-major matrices: column stride 1, row
                // stride = columns. gemm computes dst ← α·dst + β·lhs·rhs;
                // read_dst = false ignores dst.
                unsafe {
                    gemm::gemm(
                        m,
                        n,
                        k,
                        c.as_mut_slice().as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        a.as_slice().as_ptr(),
                        1,
                        k as isize,
                        b.as_slice().as_ptr(),
                        1,
                        n as isize,
                        T::ZERO,
                        T::ONE,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(threads),
                    )
                }
            }),
        },
    ];
    out.extend(
        peers
            .into_iter()
            .zip(["matrixmultiply", "gemm"])
            .filter_map(|(contestant, key)| wanted.contains(&key).then_some(contestant)),
    );
    Ok(out)
}

fn parse_shape(text: &str) -> Result<(usize, usize, usize)> {
    let parts: Vec<usize> = text
        .split('x')
        .map(|p| {
            p.trim()
                .parse::<usize>()
                .with_context(|| format!("bad shape '{text}'"))
        })
        .collect::<Result<_>>()?;
    match parts[..] {
        [n] => Ok((n, n, n)),
        [m, k, n] => Ok((m, k, n)),
        _ => bail!("shape '{text}' is neither N nor MxKxN"),
    }
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let mid = times.len() / 2;
    if times.len() % 2 == 1 {
        times[mid]
    } else {
        (times[mid - 1] + times[mid]) / 2.0
    }
}

fn bench<T: PeerElement>(args: &Args, shape: (usize, usize, usize), threads: usize) -> Result<()> {
    let (m, k, n) = shape;
    let mut rng = seeded_rng(42);
    let a: Matrix<T> = random_matrix(m, k, &mut rng);
    let b: Matrix<T> = random_matrix(k, n, &mut rng);
    let mut c = Matrix::filled(m, n, T::poison());
    let contestants = contestants::<T>(args, shape, threads)?;
    let mut times = vec![Vec::new(); contestants.len()];
    for contestant in &contestants {
        (contestant.run)(&a, &b, &mut c);
        let verdict = verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), contestant.growth)?;
        if !verdict.ok {
            bail!("{} gave a wrong result: {verdict:?}", contestant.name);
        }
    }
    let mut numpy = match args.python.as_str() {
        "none" => None,
        python => match Numpy::start(python, shape, T::DTYPE, threads, &args.openblas_core) {
            Ok(numpy) => Some((numpy, Vec::new())),
            Err(e) => {
                eprintln!("note: OpenBLAS through numpy skipped: {e:#}");
                None
            }
        },
    };
    for _ in 0..args.rounds {
        if let Some((process, samples)) = numpy.as_mut() {
            samples.push(process.time_one()?);
        }
        for (contestant, samples) in contestants.iter().zip(&mut times) {
            (contestant.run)(&a, &b, &mut c);
            let start = Instant::now();
            (contestant.run)(&a, &b, &mut c);
            samples.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let mut rows: Vec<(String, Vec<f64>)> = contestants
        .iter()
        .map(|contestant| contestant.name.clone())
        .zip(times)
        .collect();
    if let Some((process, samples)) = numpy {
        rows.push((process.label.clone(), samples));
    }
    let flops = 2.0 * m as f64 * k as f64 * n as f64;
    let ours = rows[0].1.clone();
    let ours_ms = median(&mut ours.clone());
    for (name, samples) in &rows {
        let ms = median(&mut samples.clone());
        let paired = paired_speedup(samples, &ours);
        println!(
            "| {m}×{k}×{n} | {} | {name} | {ms:.2} | {:.1} | {:.2}× | {:.2}× | {}/{} |",
            T::DTYPE,
            flops / ms / 1e6,
            ms / ours_ms,
            paired.median,
            paired.faster_rounds,
            paired.rounds,
        );
    }
    Ok(())
}

/// fastmm's speedup over a peer round by round: the peer's time over
/// fastmm's in the same round, so that the machine's drift between rounds
/// cancels.
struct PairedSpeedup {
    /// Median of the per-round ratios.
    median: f64,
    /// Rounds in which fastmm was faster.
    faster_rounds: usize,
    rounds: usize,
}

fn paired_speedup(peer: &[f64], ours: &[f64]) -> PairedSpeedup {
    let mut ratios: Vec<f64> = peer.iter().zip(ours).map(|(p, o)| p / o).collect();
    PairedSpeedup {
        faster_rounds: ratios.iter().filter(|&&r| r > 1.0).count(),
        rounds: ratios.len(),
        median: median(&mut ratios),
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let threads = args.threads.unwrap_or_else(available_threads);
    if std::env::var_os("MATMUL_NUM_THREADS").is_none() {
        // matrixmultiply reads its thread count from the environment once.
        std::env::set_var("MATMUL_NUM_THREADS", threads.to_string());
    }
    println!(
        "fastmm-peers: {} rounds, {threads} threads for every contestant; CPU: {}",
        args.rounds,
        fastmm::system::cpu_model()
    );
    println!(
        "| shape | dtype | contestant | median ms | GFLOP/s | fastmm speedup | paired speedup | fastmm faster in |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for shape in args.shapes.split(',') {
        let shape = parse_shape(shape)?;
        for dtype in args.dtype.split(',') {
            match dtype.trim().parse::<DType>()? {
                DType::F32 => bench::<f32>(&args, shape, threads)?,
                DType::F64 => bench::<f64>(&args, shape, threads)?,
                other => bail!("the peers only multiply f32 and f64, not {other}"),
            }
        }
    }
    Ok(())
}
