//! `fastmm selftest`: every algorithm of a device over the shape matrix,
//! each output pre-filled with poison (NaN for floats), each result checked;
//! on a GPU also every memory kind and the host↔device round trips. This is
//! how GPU correctness is proven on a GPU machine (CI has none).

use anyhow::{bail, Result};
use clap::Args;
use fastmm::cuda::gemm::{FastConfig, FastSchedule};
use fastmm::cuda::{round_trip, FastKernel, Gpu, GpuMemory, GpuPrecision};
use fastmm::random::{random_matrix, seeded_rng};
use fastmm::strassen::{error_growth, workspace};
use fastmm::verify::verify_with_growth;
use fastmm::{
    gemm, Algorithm, DType, Device, Element, GemmOptions, MatMut, MatRef, Matrix, Scheme, Variant,
};

#[derive(Args, Debug)]
pub struct SelftestArgs {
    /// cpu, cuda or all.
    #[arg(long, default_value = "cpu")]
    device: String,
}

/// (m, k, n): empty-adjacent, tiny, primes, rectangles, 32 ± 1 around the
/// GPU tile and the CPU microkernel edges, and deep narrow products.
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 7, 1),
    (2, 3, 5),
    (13, 1, 11),
    (31, 32, 33),
    (32, 32, 32),
    (33, 31, 65),
    (97, 89, 101),
    (64, 300, 17),
    (130, 65, 129),
    // Deep and narrow: cuda-fast splits k (k slices of 552 and of 1032).
    (33, 1100, 47),
    (130, 2049, 5),
    // cuda-fast's interior path (whole 128×256, 256×128 and 128×128
    // tiles, 16-byte rows) with a partial last k step, and with split-K.
    (264, 148, 264),
    (264, 2056, 264),
];

/// Threshold n₀ of `strassen`/`winograd` in the selftest: the shapes from
/// 31 up recurse one to three levels, odd sizes peeled.
const SELFTEST_STRASSEN_THRESHOLD: usize = 16;

struct Row {
    what: String,
    passed: usize,
    failed: Vec<String>,
}

pub fn run(args: &SelftestArgs) -> Result<bool> {
    let devices: Vec<Device> = match args.device.to_ascii_lowercase().as_str() {
        "cpu" => vec![Device::Cpu],
        "cuda" => vec![Device::Cuda],
        "all" => vec![Device::Cpu, Device::Cuda],
        other => bail!("unknown device '{other}' (expected cpu, cuda or all)"),
    };
    let mut rows = Vec::new();
    for device in devices {
        let memories: Vec<Option<GpuMemory>> = if device == Device::Cuda {
            let gpu = Gpu::default_gpu()?;
            let info = gpu.info();
            println!(
                "GPU: {} ({}, {} SMs, {} MiB, driver {})",
                info.name,
                gpu.arch(),
                info.multiprocessors,
                info.total_memory >> 20,
                info.driver_version
            );
            rows.extend(round_trips(gpu));
            GpuMemory::ALL.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        for algorithm in Algorithm::all_on(device) {
            for (label, opts) in option_sets(algorithm, &memories) {
                for dtype in DType::ALL {
                    // `--tile` of the type's default micro-tile repeats
                    // the plain cuda-fast row.
                    let default_tile = fastmm::cuda::gemm::simt_micro_tiles(dtype)[0];
                    if opts.algorithm == Algorithm::CudaFast && opts.tile == Some(default_tile) {
                        continue;
                    }
                    rows.extend(check_dtype(dtype, &label, &opts, SHAPES));
                }
            }
        }
        if device == Device::Cuda {
            rows.extend(schedule_checks(Gpu::default_gpu()?)?);
            rows.extend(out_of_core_checks(Gpu::default_gpu()?));
        }
    }
    println!("{:<52} {:>6} {:>6}  verdict", "check", "passed", "failed");
    let mut all_ok = true;
    for row in &rows {
        let ok = row.failed.is_empty();
        all_ok &= ok;
        println!(
            "{:<52} {:>6} {:>6}  {}",
            row.what,
            row.passed,
            row.failed.len(),
            if ok { "ok" } else { "FAIL" }
        );
        for failure in &row.failed {
            println!("    {failure}");
        }
    }
    println!(
        "selftest: {} checks, {}",
        rows.iter()
            .map(|r| r.passed + r.failed.len())
            .sum::<usize>(),
        if all_ok { "all passed" } else { "FAILURES" }
    );
    Ok(all_ok)
}

fn check_dtype(
    dtype: DType,
    label: &str,
    opts: &GemmOptions,
    shapes: &[(usize, usize, usize)],
) -> Option<Row> {
    match dtype {
        DType::F32 => check_algorithm::<f32>(label, opts, shapes),
        DType::F64 => check_algorithm::<f64>(label, opts, shapes),
        DType::I32 => check_algorithm::<i32>(label, opts, shapes),
        DType::I64 => check_algorithm::<i64>(label, opts, shapes),
    }
}

/// cuda-fast's schedules for the last waves of tiles, for every kernel
/// that may run them, on shapes sized to this GPU's SMs so that they
/// happen: the wave-tail split (the last, nearly empty wave run as a
/// split-K product) on operands whose rows are not 16-byte aligned (the
/// ring kernel) or with the tensor-core kernel, and stream-K (the last
/// waves shared out by k steps) on aligned ones. Two tile columns (the
/// last partial, and for the wave tail n odd), k = 1100 (a partial last k
/// step), and the fewest tile rows (the last partial) from half a wave of
/// resident blocks up that give the schedule. A shape that does not get it
/// fails the row rather than passing untested.
fn schedule_checks(gpu: &Gpu) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for dtype in DType::ALL {
        let simt =
            fastmm::cuda::gemm::simt_micro_tiles(dtype).map(|tm| (FastKernel::Simt, Some(tm)));
        let mma = (dtype == DType::F64).then_some((FastKernel::Mma, None));
        for (family, tile) in simt.into_iter().chain(mma) {
            let opts = GemmOptions {
                cuda_kernel: Some(family),
                tile,
                ..GemmOptions::new(Algorithm::CudaFast)
            };
            // One candidate each (the tile is given), whatever the shape.
            let config = FastConfig::resolve(&opts, dtype, gpu, (1, 1))?;
            let (tile_rows, tile_cols) = config.block_shape();
            let resident = gpu.info().multiprocessors * config.blocks_per_sm();
            let lanes = 16 / dtype.size_bytes();
            let mut kinds = vec![("wave tail", 2 * tile_cols - 3)];
            if config.stream_key().is_some() {
                kinds.push(("stream-K", 2 * tile_cols - lanes));
            }
            for (kind, n) in kinds {
                let k = 1100;
                let aligned = fastmm::cuda::gemm::contiguous_rows_aligned(dtype, k, n);
                let shape = (resident / 2 + 1..2 * resident)
                    .map(|tiles_m| (tiles_m * tile_rows - 5, k, n))
                    .find(|&dims| {
                        matches!(
                            (kind, config.schedule(gpu, dims, aligned)),
                            ("wave tail", Ok(FastSchedule::WaveTail(_)))
                                | ("stream-K", Ok(FastSchedule::StreamK(_)))
                        )
                    });
                let label = match tile {
                    Some(tm) => format!("cuda-fast {family} tile {tm} {kind}"),
                    None => format!("cuda-fast {family} {kind}"),
                };
                match shape {
                    Some(shape) => rows.extend(check_dtype(
                        dtype,
                        &format!("{label} {}×{}×{}", shape.0, shape.1, shape.2),
                        &opts,
                        &[shape],
                    )),
                    None => rows.push(Row {
                        what: format!("{label} {dtype}"),
                        passed: 0,
                        failed: vec![format!("no shape found with a {kind} schedule")],
                    }),
                }
            }
        }
    }
    Ok(rows)
}

/// The GPU's out-of-core product under every kind of schedule, built by
/// hand on the shape matrix (tiles of about a third of m and half of n):
/// one step; all of B resident; A resident in fewer slots than panels;
/// k split in three and accumulated; one buffer each. Each over NaN with
/// β = 0, and exactly on small integers with α = 2, β = −3; for cuBLAS
/// and cuda-fast, and for Strassen and Winograd per tile (recursing from
/// 16). Then the planner itself through `gemm`, with a budget of a third
/// of A, B and C.
fn out_of_core_checks(gpu: &Gpu) -> Vec<Row> {
    let mut rows = Vec::new();
    // Strassen and Winograd per tile, recursing on these small tiles.
    for algorithm in [Algorithm::CudaStrassen, Algorithm::CudaWinograd] {
        let opts = GemmOptions {
            threshold: Some(SELFTEST_STRASSEN_THRESHOLD),
            ..GemmOptions::new(algorithm)
        };
        for dtype in DType::ALL {
            rows.extend(match dtype {
                DType::F32 => planned_checks::<f32>(gpu, &opts),
                DType::F64 => planned_checks::<f64>(gpu, &opts),
                DType::I32 => planned_checks::<i32>(gpu, &opts),
                DType::I64 => planned_checks::<i64>(gpu, &opts),
            });
        }
    }
    for algorithm in [Algorithm::Cublas, Algorithm::CudaFast] {
        let opts = GemmOptions::new(algorithm);
        for dtype in DType::ALL {
            let row = match dtype {
                DType::F32 => planned_checks::<f32>(gpu, &opts),
                DType::F64 => planned_checks::<f64>(gpu, &opts),
                DType::I32 => planned_checks::<i32>(gpu, &opts),
                DType::I64 => planned_checks::<i64>(gpu, &opts),
            };
            rows.extend(row);
            let shape = (1100, 900, 1300);
            let (m, k, n) = shape;
            let bytes = ((m * k + k * n + m * n) * dtype.size_bytes()) as u64;
            let budgeted = GemmOptions {
                gpu_max_memory: Some(bytes / 3),
                ..opts
            };
            rows.extend(check_dtype(
                dtype,
                &format!("{algorithm} out of core, a third of the bytes"),
                &budgeted,
                &[shape],
            ));
        }
    }
    rows
}

/// The hand-built schedules of [`out_of_core_checks`] for one type.
fn planned_checks<T: Element>(gpu: &Gpu, opts: &GemmOptions) -> Option<Row> {
    use fastmm::cuda::out_of_core::{multiply_planned, plan::Slots, Plan, Resident};
    if opts.algorithm == Algorithm::Cublas && T::DTYPE.is_integer() {
        return None;
    }
    let mut row = Row {
        what: format!("{} out of core, planned {}", opts.algorithm, T::DTYPE),
        passed: 0,
        failed: Vec::new(),
    };
    let elem = std::mem::size_of::<T>();
    let mut rng = seeded_rng(13);
    for &(m, k, n) in SHAPES {
        let (rows, cols) = (m.div_ceil(3), n.div_ceil(2));
        let whole = Plan::one_step((m, k, n), elem);
        let tiled = |resident, depth, slots| Plan {
            tile_rows: rows,
            tile_cols: cols,
            depth,
            resident,
            slots,
            ..whole
        };
        let plans = [
            ("one step", whole),
            (
                "B resident",
                tiled(Resident::B, k, Slots { a: 2, b: 2, c: 2 }),
            ),
            (
                "A resident in 2 slots",
                tiled(Resident::A, k, Slots { a: 2, b: 2, c: 2 }),
            ),
            (
                "k in 3 slices",
                tiled(Resident::B, k.div_ceil(3), Slots { a: 2, b: 2, c: 2 }),
            ),
            (
                "one buffer each",
                tiled(Resident::B, k, Slots { a: 1, b: 1, c: 1 }),
            ),
        ];
        // A fast algorithm's tiles recurse at most as deep as the whole.
        let growth = Scheme::of(opts.algorithm).map_or(1.0, |scheme| {
            error_growth(scheme, workspace::<T>(scheme, (m, k, n), true, opts).levels)
        });
        for (what, plan) in plans {
            check_shape::<T>(
                &mut row,
                (m, k, n),
                what,
                growth,
                &mut rng,
                |alpha, a, b, beta, c| {
                    multiply_planned(gpu, plan, alpha, a, b, beta, c, opts).map(|_| ())
                },
            );
        }
    }
    Some(row)
}

fn round_trips(gpu: &Gpu) -> Vec<Row> {
    let mut rows = Vec::new();
    for memory in GpuMemory::ALL {
        for pinned in [false, true] {
            let host = if pinned { "pinned" } else { "pageable" };
            let mut row = Row {
                what: format!("round trip {host} host↔{memory}"),
                passed: 0,
                failed: Vec::new(),
            };
            let mut rng = seeded_rng(7);
            for &(m, _, n) in SHAPES {
                let a: Matrix<f64> = random_matrix(m, n, &mut rng);
                match round_trip(gpu, memory, a.as_ref(), pinned) {
                    Ok(back) if back == a => row.passed += 1,
                    Ok(_) => row.failed.push(format!("{m}×{n}: data changed")),
                    Err(e) => row.failed.push(format!("{m}×{n}: {e}")),
                }
                // A transposed (strided) view arrives in row-major order too.
                match round_trip(gpu, memory, a.as_ref().t(), pinned) {
                    Ok(back) if back == Matrix::from_view(a.as_ref().t()) => row.passed += 1,
                    Ok(_) => row.failed.push(format!("{n}×{m} transposed: data changed")),
                    Err(e) => row.failed.push(format!("{n}×{m} transposed: {e}")),
                }
            }
            rows.push(row);
        }
    }
    rows
}

/// Small integers: every product and sum is exact in f32 and f64 too, so
/// the α/β check compares exactly against the CPU naive product.
fn small_int_matrix<T: Element>(rows: usize, cols: usize, salt: usize) -> Matrix<T> {
    Matrix::from_fn(rows, cols, |i, j| {
        T::from_i64(((i * 7 + j * 3 + salt) % 9) as i64 - 4)
    })
}

/// The option sets each algorithm is checked under, with their labels:
/// every memory kind for the classical GPU algorithms; every memory
/// schedule (and on the GPU a second base) for the fast ones.
fn option_sets(algorithm: Algorithm, memories: &[Option<GpuMemory>]) -> Vec<(String, GemmOptions)> {
    let plain = GemmOptions {
        // Low enough that Strassen/Winograd recurse on the larger shapes.
        threshold: Some(SELFTEST_STRASSEN_THRESHOLD),
        ..GemmOptions::new(algorithm)
    };
    if Scheme::of(algorithm).is_none() {
        let pinned = (algorithm.device() == Device::Cuda).then(|| {
            (
                format!("{algorithm} device pinned"),
                GemmOptions {
                    gpu_pinned: true,
                    ..plain
                },
            )
        });
        let precisions = GpuPrecision::ALL
            .into_iter()
            .filter(|&p| algorithm == Algorithm::Cublas && p != GpuPrecision::Fp32)
            .map(|precision| {
                (
                    format!("{algorithm} {precision}"),
                    GemmOptions {
                        gpu_precision: Some(precision),
                        ..plain
                    },
                )
            });
        // cuda-fast: each kernel family forced (mma runs f64 only), and the
        // SIMT kernel's other micro-tiles (TM = 16 for 4-byte types, 8 for
        // 8-byte ones, which the shape rule picks for f64 only above these
        // sizes; each type skips the TMs it is not built with).
        let families = [
            (FastKernel::Simt, None),
            (FastKernel::Simt, Some(8)),
            (FastKernel::Simt, Some(16)),
            (FastKernel::Mma, None),
        ]
        .into_iter()
        .filter(|_| algorithm == Algorithm::CudaFast)
        .map(|(family, tile)| {
            let label = match tile {
                Some(tm) => format!("{algorithm} {family} tile {tm}"),
                None => format!("{algorithm} {family}"),
            };
            (
                label,
                GemmOptions {
                    cuda_kernel: Some(family),
                    tile,
                    ..plain
                },
            )
        });
        return memories
            .iter()
            .map(|&memory| {
                let label = match memory {
                    Some(memory) => format!("{algorithm} {memory}"),
                    None => algorithm.to_string(),
                };
                (
                    label,
                    GemmOptions {
                        gpu_memory: memory,
                        ..plain
                    },
                )
            })
            .chain(pinned)
            .chain(precisions)
            .chain(families)
            .collect();
    }
    let variants = [
        Variant::Temporaries,
        Variant::Frugal,
        Variant::Batched,
        Variant::Fused,
    ];
    let mut sets: Vec<(String, GemmOptions)> = variants
        .into_iter()
        .map(|variant| (format!("{algorithm} {variant}"), plain.variant(variant)))
        .collect();
    if algorithm.device() == Device::Cuda {
        sets.push((
            format!("{algorithm} frugal base cuda-naive"),
            plain.variant(Variant::Frugal).base(Algorithm::CudaNaive),
        ));
    }
    sets
}

/// One shape of a row: C ← A·B with β = 0 over poison (C must be written
/// everywhere and never read), verified within `growth` of the classical
/// bound; then C ← 2·A·B − 3·C on small integers, compared bit for bit
/// with the naive product.
fn check_shape<T: Element>(
    row: &mut Row,
    (m, k, n): (usize, usize, usize),
    what: &str,
    growth: f64,
    rng: &mut fastmm::random::SeededRng,
    multiply: impl Fn(T, MatRef<'_, T>, MatRef<'_, T>, T, MatMut<'_, T>) -> Result<(), fastmm::Error>,
) {
    let label = format!(
        "{m}×{k}×{n}{}{what}",
        if what.is_empty() { "" } else { " " }
    );
    let a: Matrix<T> = random_matrix(m, k, rng);
    let b: Matrix<T> = random_matrix(k, n, rng);
    let mut c = Matrix::filled(m, n, T::poison());
    let outcome = multiply(T::ONE, a.as_ref(), b.as_ref(), T::ZERO, c.as_mut())
        .map_err(|e| e.to_string())
        .and_then(|()| {
            verify_with_growth(a.as_ref(), b.as_ref(), c.as_ref(), growth)
                .map_err(|e| e.to_string())
        });
    match outcome {
        Ok(verdict) if verdict.ok => row.passed += 1,
        Ok(verdict) => row.failed.push(format!(
            "{label} β=0: relative error {:.2e} ({:.2}× its bound)",
            verdict.rel_error, verdict.bound_ratio
        )),
        Err(e) => row.failed.push(format!("{label} β=0: {e}")),
    }
    let a: Matrix<T> = small_int_matrix(m, k, 1);
    let b: Matrix<T> = small_int_matrix(k, n, 2);
    let c0: Matrix<T> = small_int_matrix(m, n, 3);
    let (alpha, beta) = (T::from_i64(2), T::from_i64(-3));
    let mut expected = c0.clone();
    let mut c = c0;
    let outcome = gemm(
        alpha,
        a.as_ref(),
        b.as_ref(),
        beta,
        expected.as_mut(),
        &GemmOptions::new(Algorithm::Naive),
    )
    .and_then(|()| multiply(alpha, a.as_ref(), b.as_ref(), beta, c.as_mut()));
    match outcome {
        Ok(()) if c == expected => row.passed += 1,
        Ok(()) => row
            .failed
            .push(format!("{label} α=2 β=-3: differs from the naive product")),
        Err(e) => row.failed.push(format!("{label} α=2 β=-3: {e}")),
    }
}

fn check_algorithm<T: Element>(
    label: &str,
    opts: &GemmOptions,
    shapes: &[(usize, usize, usize)],
) -> Option<Row> {
    let cublas_base = opts.algorithm == Algorithm::Cublas || opts.base == Some(Algorithm::Cublas);
    if cublas_base && T::DTYPE.is_integer() {
        return None;
    }
    let precision = opts.gpu_precision.unwrap_or_default();
    if precision != GpuPrecision::Fp32 && T::DTYPE != DType::F32 {
        return None;
    }
    if opts.cuda_kernel == Some(FastKernel::Mma) && T::DTYPE != DType::F64 {
        return None;
    }
    if opts.algorithm == Algorithm::CudaFast {
        if let Some(tm) = opts.tile {
            if !fastmm::cuda::gemm::simt_micro_tiles(T::DTYPE).contains(&tm) {
                return None;
            }
        }
    }
    let opts = *opts;
    let mut row = Row {
        what: format!("{label} {}", T::DTYPE),
        passed: 0,
        failed: Vec::new(),
    };
    let mut rng = seeded_rng(11);
    for &(m, k, n) in shapes {
        // Fast algorithms may exceed the classical float bound by their
        // per-level growth factor, reduced-precision modes by the ratio of
        // unit roundoffs.
        let growth = Scheme::of(opts.algorithm).map_or(1.0, |scheme| {
            error_growth(
                scheme,
                workspace::<T>(scheme, (m, k, n), true, &opts).levels,
            )
        }) * precision.error_growth();
        check_shape::<T>(
            &mut row,
            (m, k, n),
            "",
            growth,
            &mut rng,
            |alpha, a, b, beta, c| gemm(alpha, a, b, beta, c, &opts),
        );
    }
    Some(row)
}
