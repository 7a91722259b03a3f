//! The `fastmm` binary as a user runs it: tables, JSON, printing, exit codes
//! and one-line errors for every kind of bad input.

use std::process::{Command, Output};

/// Whether a GPU can be opened here (CI has none).
fn gpu_present() -> bool {
    fastmm::Context::open(fastmm::Device::Cuda(0)).is_ok()
}

fn fastmm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args(args)
        .output()
        .expect("the fastmm binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn json_has_a_verified_record_per_algorithm_and_dtype() {
    let out = fastmm(&[
        "run", "--size", "96", "--algo", "all", "--dtype", "all", "--json", "--reps", "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let records = records.as_array().expect("a JSON array");
    // 8 CPU algorithms × 4 types (emulated takes integers through byte
    // planes).
    assert_eq!(records.len(), 8 * 4);
    for field in [
        "algorithm",
        "device",
        "dtype",
        "m",
        "k",
        "n",
        "threads",
        "median_ms",
        "gflops",
        "rel_error",
        "ok",
        "extra_bytes",
    ] {
        assert!(
            records.iter().all(|r| r.get(field).is_some()),
            "field {field} missing"
        );
    }
    assert!(records
        .iter()
        .all(|r| r["ok"] == true && r["device"] == "cpu" && r["m"] == 96));
    for dtype in ["f32", "f64", "i32", "i64"] {
        let algos: Vec<&str> = records
            .iter()
            .filter(|r| r["dtype"] == dtype)
            .map(|r| r["algorithm"].as_str().unwrap())
            .collect();
        let want = vec![
            "naive", "ikj", "tiled", "parallel", "packed", "strassen", "winograd", "emulated",
        ];
        assert_eq!(algos, want, "{dtype}");
    }
    let parallel = records
        .iter()
        .find(|r| r["algorithm"] == "parallel")
        .unwrap();
    assert!(parallel["gflops"].as_f64().unwrap() > 0.0);
    assert_eq!(
        records[0]["speedup"], 1.0,
        "speedup is relative to the first algorithm"
    );
}

#[test]
fn table_lists_each_algorithm_with_a_verdict() {
    let out = fastmm(&[
        "run",
        "-m",
        "40",
        "-k",
        "17",
        "-n",
        "33",
        "--algo",
        "ikj,naive",
        "--tile",
        "8",
        "--threads",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("A 40×17, B 17×33"), "{text}");
    assert!(
        text.contains("GFLOP/s") && text.contains("speedup"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.ends_with(" ok")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(
        rows[0].starts_with("ikj") && rows[1].starts_with("naive"),
        "listed order is kept: {text}"
    );
}

#[test]
fn print_shows_small_matrices_and_seed_is_reproducible() {
    let run = |seed: &str| {
        stdout(&fastmm(&[
            "run", "--size", "3", "--algo", "naive", "--dtype", "i32", "--print", "--seed", seed,
        ]))
    };
    let first = run("7");
    assert!(
        first.contains("A (i32):")
            && first.contains("B (i32):")
            && first.contains("C = A·B (naive, i32):")
    );
    let matrices = |text: &str| {
        text.lines()
            .take_while(|l| !l.starts_with("fastmm run"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        matrices(&first),
        matrices(&run("7")),
        "same seed, same matrices"
    );
    assert_ne!(
        matrices(&first),
        matrices(&run("8")),
        "another seed, other matrices"
    );
    let big = stdout(&fastmm(&[
        "run", "--size", "9", "--algo", "naive", "--print",
    ]));
    assert!(
        !big.contains("A (f32):"),
        "matrices above 8×8 are not printed"
    );
}

#[test]
fn packed_reports_and_obeys_the_forced_kernel() {
    let run = |env: Option<&str>, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fastmm"));
        cmd.args(["run", "--size", "70", "--algo", "packed", "--json"])
            .args(extra);
        match env {
            Some(kernel) => cmd.env("FASTMM_CPU_KERNEL", kernel),
            None => cmd.env_remove("FASTMM_CPU_KERNEL"),
        };
        cmd.output().unwrap()
    };
    let out = run(Some("generic"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        records[0]["kernel"]
            .as_str()
            .unwrap()
            .starts_with("generic"),
        "{records}"
    );
    assert_eq!(records[0]["ok"], true);

    let out = run(None, &["--cpu-kernel", "generic", "--blocks", "8,16,32"]);
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(records[0]["kernel"], "generic 8/16/32", "{records}");

    for (env, args, expected) in [
        (Some("sse9"), &[][..], "FASTMM_CPU_KERNEL"),
        (
            None,
            &["--cpu-kernel", "sse9"][..],
            "unknown CPU kernel 'sse9'",
        ),
        (None, &["--blocks", "1,2"][..], "MC,KC,NC"),
    ] {
        let out = run(env, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with("error:")
                && err.contains(expected)
                && err.trim_end().lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn a_wrong_result_fails_the_run() {
    let out = fastmm(&["run", "--size", "20", "--algo", "tiled", "--corrupt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("WRONG"));
    assert!(stderr(&out).contains("failed verification"));
}

#[test]
fn bad_input_is_one_line_and_a_nonzero_exit() {
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--algo", "fastest"], "unknown algorithm 'fastest'"),
        (&["run", "--dtype", "f16"], "unknown dtype 'f16'"),
        (&["run", "--size", "0"], "must be at least 1"),
        (&["run", "-n", "0"], "size n must be at least 1"),
        (&["run", "--size", "3000000"], "memory"),
        (&["run", "--size", "100000000000"], "needs"),
        (&["run", "--tile", "0"], "tile size must be at least 1"),
        (
            &["run", "--threads", "0"],
            "thread count must be at least 1",
        ),
        (&["run", "--reps", "0"], "--reps must be at least 1"),
        // Entries of 10^±30 overflow f32's products: no verdict could be
        // trusted, so nothing runs.
        (
            &["run", "-s", "64", "-d", "f32", "--decades", "30"],
            "--decades 30 overflows f32",
        ),
        (
            &["run", "-s", "64", "-d", "c64", "--decades", "19"],
            "overflows f32",
        ),
        (
            &["run", "--algo", "strassen", "--threshold", "1"],
            "threshold must be at least 2",
        ),
        (
            &["run", "--algo", "strassen", "--threshold", "big"],
            "neither a size nor 'auto'",
        ),
        (&["run", "--variant", "lazy"], "unknown variant 'lazy'"),
        (
            &["run", "--algo", "strassen", "--base", "winograd"],
            "must be a classical algorithm",
        ),
        (
            &["run", "--variant", "fused", "--base", "naive"],
            "base must be packed",
        ),
        (&["run", "--size", "ten"], "invalid value 'ten'"),
        (&["multiply-everything"], "error"),
        // A missing argument is named.
        (&["multiply", "a.npy", "b.npy"], "--output <C>"),
        (&["run", "--algo"], "--algo"),
    ];
    for (args, expected) in cases {
        let out = fastmm(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// A fast algorithm that applies no level says which product ran instead
/// and claims no speedup; the table's columns stay aligned whatever the
/// labels' lengths; an absurd thread count is capped with a note.
#[test]
fn fallbacks_say_what_ran_and_columns_stay_aligned() {
    let out = fastmm(&[
        "run",
        "-s",
        "64",
        "--algo",
        "naive,packed,strassen",
        "-r",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().skip(1).collect();
    let strassen = lines.iter().find(|l| l.starts_with("strassen")).unwrap();
    assert!(strassen.contains("= packed: no level below"), "{text}");
    assert!(strassen.contains("  = packed  "), "{text}");
    // Every left-aligned column starts where its header does, after the
    // two spaces that separate columns, however long the kernel labels.
    let header: Vec<char> = lines[0].chars().collect();
    for column in ["dtype", "check", "verdict"] {
        let at = lines[0][..lines[0].find(column).unwrap()].chars().count();
        for line in &lines[1..] {
            let chars: Vec<char> = line.chars().collect();
            assert_eq!(&chars[at - 2..at], [' ', ' '], "{column}: {text}");
            assert_ne!(chars[at], ' ', "{column}: {text}");
        }
        assert_eq!(header[at - 1], ' ');
    }
    let json = fastmm(&["run", "-s", "64", "--algo", "strassen", "-r", "1", "--json"]);
    let records: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(records[0]["runs_as"], "packed");
    let capped = fastmm(&[
        "run",
        "-s",
        "64",
        "--algo",
        "packed",
        "-r",
        "1",
        "--threads",
        "100000",
    ]);
    assert!(capped.status.success(), "{}", stderr(&capped));
    assert!(
        stderr(&capped).contains("more than the"),
        "{}",
        stderr(&capped)
    );
}

#[test]
fn strassen_and_winograd_report_levels_and_workspace() {
    let out = fastmm(&[
        "run",
        "--size",
        "100",
        "--algo",
        "strassen,winograd",
        "--dtype",
        "i64,f64",
        "--threshold",
        "16",
        "--variant",
        "temporaries",
        "--json",
        "--reps",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 4);
    for r in records {
        assert_eq!(r["ok"], true, "{r}");
        // 100 → 50 → 25 → 12: three levels with n0 = 16 (the f64 default
        // depth allows three too).
        assert_eq!(r["levels"], 3, "{r}");
        assert!(r["extra_bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(
            r["kernel"]
                .as_str()
                .unwrap()
                .starts_with("temporaries n0=16"),
            "{r}"
        );
    }
    let ints: Vec<_> = records.iter().filter(|r| r["dtype"] == "i64").collect();
    assert!(ints.iter().all(|r| r["rel_error"] == 0.0));
    // `auto` (the default) runs batched on the CPU when its temporaries
    // fit in half the available memory (a few KiB here); frugal and
    // batched are accepted and exact, and the label names what ran.
    let auto_runs = if fastmm::system::available_memory_bytes().is_some() {
        "batched"
    } else {
        "frugal"
    };
    for (variant, shown) in [
        ("auto", auto_runs),
        ("frugal", "frugal"),
        ("batched", "batched"),
    ] {
        let out = fastmm(&[
            "run",
            "--size",
            "67",
            "--algo",
            "winograd",
            "--dtype",
            "i32",
            "--threshold",
            "8",
            "--variant",
            variant,
            "--json",
            "--reps",
            "1",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let record = &records[0];
        assert_eq!(record["ok"], true, "{record}");
        assert_eq!(record["rel_error"], 0.0, "{record}");
        let kernel = record["kernel"].as_str().unwrap();
        assert!(kernel.starts_with(&format!("{shown} n0=8")), "{kernel}");
    }
}

/// The CPU self-test of the algorithms asked for: their rows, every check
/// passed, and none of the others (the algorithms themselves are checked
/// over the shape matrix in the library's tests; the whole CPU self-test,
/// two minutes on two cores, is the user's to run).
#[test]
fn selftest_on_the_cpu_checks_the_algorithms_asked_for() {
    let out = fastmm(&["selftest", "--device", "cpu", "--algo", "naive,packed"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    for row in ["naive i64", "packed f32", "packed i64"] {
        assert!(text.contains(row), "{row}: {text}");
    }
    for other in ["strassen", "winograd", "emulated", "tiled", "ikj"] {
        assert!(!text.contains(other), "{other}: {text}");
    }
    assert!(text.contains("all passed"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
}

/// Without a CUDA driver (CI): a GPU device or algorithm names what is
/// missing; `auto` keeps the algorithms that run on the CPU there; an
/// algorithm asked of a device it does not run on is refused by name.
#[test]
fn without_a_gpu_cuda_is_a_clear_error_and_auto_stays_on_the_cpu() {
    if gpu_present() {
        eprintln!("skipped: a CUDA driver is present (scripts/gpu-check.sh covers the GPU)");
        return;
    }
    for args in [
        &["run", "--size", "8", "--device", "cuda"][..],
        &["run", "--size", "8", "--algo", "cuda-tiled"][..],
        &["run", "--size", "8", "--algo", "packed,strassen@cuda:0"][..],
        &["selftest", "--device", "cuda"][..],
    ] {
        let out = fastmm(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&out).contains("libcuda"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = fastmm(&["run", "--size", "8", "--device", "cuda", "--algo", "packed"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("packed does not run on cuda:0"),
        "{}",
        stderr(&out)
    );
    let out = fastmm(&[
        "run", "--size", "8", "--device", "auto", "--algo", "all", "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(records
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["device"] == "cpu"));
}

/// Device lists: a duplicate or malformed ordinal is a usage error naming
/// it, on every command that takes one; without a driver, a team is the
/// same clear error as one GPU.
#[test]
fn device_lists_are_checked_before_anything_runs() {
    for args in [
        &["run", "--size", "8", "--device", "cuda:0,0"][..],
        &["selftest", "--device", "cuda:1,x"][..],
        &["bench", "--sizes", "8", "--device", "cuda:2,2"][..],
        &["run", "--size", "8", "--algo", "cublas@cuda:0,0"][..],
    ] {
        let out = fastmm(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let text = stderr(&out);
        assert!(
            text.contains("twice")
                || text.contains("not a GPU ordinal")
                || text.contains("names no algorithm")
                || text.contains("unknown"),
            "{args:?}: {text}"
        );
    }
    if !gpu_present() {
        for args in [
            &["run", "--size", "8", "--device", "cuda:all"][..],
            &["selftest", "--device", "cuda:0,1"][..],
        ] {
            let out = fastmm(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            assert!(
                stderr(&out).contains("libcuda"),
                "{args:?}: {}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn info_reports_the_cpu_kernels_blocks_and_auto_rules() {
    let out = fastmm(&["info", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["cpu"]["threads"].as_u64().unwrap() >= 1, "{report}");
    let kernels = report["cpu"]["kernels"].as_array().unwrap();
    // The generic twin runs everywhere.
    assert!(
        kernels.iter().any(|k| k[0] == "generic" && k[1] == true),
        "{report}"
    );
    let packed = report["packed"].as_array().unwrap();
    assert_eq!(packed.len(), 4);
    for choice in packed {
        for key in ["mr", "nr"] {
            assert!(choice[key].as_u64().unwrap() >= 1, "{choice}");
        }
        for key in ["blocks", "blocks_large_c"] {
            let blocks = choice[key].as_array().unwrap();
            assert_eq!(blocks.len(), 3, "{choice}");
            assert!(blocks.iter().all(|b| b.as_u64().unwrap() >= 1), "{choice}");
        }
    }
    let rules = report["strassen_auto"].as_array().unwrap();
    assert!(rules
        .iter()
        .any(|r| r["device"] == "cpu" && r["dtype"] == "f64" && r["threshold"] == 2048));
    // Without a GPU the report says why instead of failing.
    if !gpu_present() {
        assert_eq!(report["gpus"].as_array().unwrap().len(), 0);
        assert!(report["gpu_unavailable"]
            .as_str()
            .unwrap()
            .contains("libcuda"));
    }

    // A forced kernel is named as forced, in the text report too.
    let out = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args(["info"])
        .env("FASTMM_CPU_KERNEL", "generic")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("packed uses: generic (forced by FASTMM_CPU_KERNEL=generic)"),
        "{text}"
    );
    assert!(
        text.contains("MC/KC/NC") && text.contains("tuning:"),
        "{text}"
    );
}

#[test]
fn bench_sweeps_sizes_and_threads_into_table_csv_and_json() {
    let dir = std::env::temp_dir().join(format!("fastmm-bench-test-{}", std::process::id()));
    let out = fastmm(&[
        "bench",
        "--sizes",
        "16..32x2,20",
        "--thread-counts",
        "1,2",
        "--algo",
        "naive,packed",
        "--dtype",
        "i32",
        "--reps",
        "1",
        "--peers",
        "none",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(table.starts_with("fastmm bench: baseline naive"), "{table}");
    assert!(
        table.contains("\n| m | k | n | dtype | threads |"),
        "{table}"
    );
    // 3 sizes × (2 thread counts for packed + 1 for naive, which has no
    // threads to sweep).
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    for field in ["date", "machine", "command", "baseline", "skipped"] {
        assert!(!report[field].is_null(), "{field}: {report}");
    }
    let points = report["points"].as_array().unwrap();
    assert_eq!(points.len(), 9);
    for p in points {
        assert_eq!(p["ok"], true, "{p}");
        assert_eq!(p["rel_error"], 0.0, "{p}");
        if p["algorithm"] == "naive" {
            assert_eq!(p["speedup_vs_baseline"], 1.0, "{p}");
            assert!(p["settings"].get("threads").is_none(), "{p}");
        }
        // packed on one thread is its own reference: efficiency 1.
        if p["algorithm"] == "packed" && p["settings"]["threads"] == "1" {
            assert_eq!(p["efficiency"], 1.0, "{p}");
            assert_eq!(p["efficiency_per"], "threads", "{p}");
        }
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 10, "{csv}");
    assert!(csv.starts_with("m,k,n,dtype,threads,algorithm"), "{csv}");
    assert_eq!(
        std::fs::read_to_string(dir.join("results.md")).unwrap(),
        table
    );
    for figure in [
        "time-vs-size",
        "gflops-vs-size",
        "speedup-vs-size",
        "speedup-vs-threads",
        "efficiency-vs-threads",
    ] {
        let png = std::fs::read(dir.join(format!("{figure}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{figure}");
        let svg = std::fs::read_to_string(dir.join(format!("{figure}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("packed"), "{figure}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    let bad = fastmm(&["bench", "--sizes", "8..64x1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("must start at 1 or more and grow"),
        "{}",
        stderr(&bad)
    );
    let typo = fastmm(&["bench", "--sizes", "8", "--variants", "frugal,lazy"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        stderr(&typo).contains("variant 'lazy'"),
        "{}",
        stderr(&typo)
    );
}

#[test]
fn bench_skips_unsupported_points_with_the_reason() {
    let out = fastmm(&[
        "bench",
        "--sizes",
        "24,3x5x7",
        "--algo",
        "strassen,packed",
        "--bases",
        "packed,cuda-tiled,naive",
        "--threshold",
        "8",
        "--reps",
        "1",
        "--peers",
        "none",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // strassen: 2 bases that work × 2 shapes; packed once per shape.
    assert_eq!(text.matches("| yes |").count(), 6, "{text}");
    assert_eq!(text.matches("skipped: strassen").count(), 2, "{text}");
    assert!(
        text.contains("must run on the CPU too, not cuda-tiled"),
        "{text}"
    );
}

#[test]
fn a_missing_peer_is_a_note_not_a_failure() {
    let out = fastmm(&[
        "bench",
        "--sizes",
        "32",
        "--algo",
        "packed",
        "--reps",
        "1",
        "--peers",
        "openblas",
        "--python",
        "/nonexistent/python3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("| packed |"), "{text}");
    assert!(
        text.contains("skipped: openblas f32 32×32×32: cannot run /nonexistent/python3"),
        "{text}"
    );
    let gpu_peer = fastmm(&[
        "bench", "--sizes", "32", "--algo", "packed", "--reps", "1", "--peers", "cublas",
    ]);
    assert!(gpu_peer.status.success(), "{}", stderr(&gpu_peer));
}

#[test]
fn every_cpu_suite_runs_quick_and_draws_its_figures() {
    let list = fastmm(&["bench", "--list-suites"]);
    assert!(list.status.success());
    let listing = stdout(&list);
    let cpu_suites: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("| cpu |"))
        .map(|l| l.split('|').nth(1).unwrap().trim())
        .collect();
    assert!(cpu_suites.len() >= 6, "{listing}");
    for suite in cpu_suites {
        let dir = std::env::temp_dir().join(format!("fastmm-suite-{suite}-{}", std::process::id()));
        let out = fastmm(&[
            "bench",
            "--suite",
            suite,
            "--quick",
            "--peers",
            "none",
            "--out",
            dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{suite}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(
            !text.contains("| NO |") && !text.contains("skipped"),
            "{suite}: {text}"
        );
        let figures = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "png")
            })
            .count();
        assert!(figures >= 1, "{suite} drew no figure");
        let _ = std::fs::remove_dir_all(&dir);
    }
    // A GPU suite on a machine without one is an input error, not a crash.
    if !listing.contains("| cuda |") {
        panic!("no GPU suite listed: {listing}");
    }
    let gpu = fastmm(&["bench", "--suite", "seed-004-tiles", "--quick"]);
    if !gpu.status.success() {
        assert_eq!(gpu.status.code(), Some(2));
        assert!(stderr(&gpu).contains("runs on a GPU"), "{}", stderr(&gpu));
    }
    let unknown = fastmm(&["bench", "--suite", "seed-999"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("seed-002-ladder"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn ctrl_c_stops_a_bench_and_keeps_the_points_measured() {
    let dir = std::env::temp_dir().join(format!("fastmm-bench-int-{}", std::process::id()));
    // Naive up to 4096 would take minutes; the interrupt lands early on.
    let child = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args([
            "bench",
            "--sizes",
            "32..4096x2",
            "--algo",
            "naive",
            "--reps",
            "1",
        ])
        .arg("--out")
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("interrupted: kept the"),
        "{}",
        stderr(&out)
    );
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let rows = csv.lines().count() - 1;
    assert!((1..8).contains(&rows), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn fastmm_tuned(tuning: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args(args)
        .env("FASTMM_TUNING", tuning)
        .output()
        .expect("the fastmm binary runs")
}

#[test]
fn tune_saves_a_file_that_auto_then_uses() {
    let dir = std::env::temp_dir().join(format!("fastmm-tune-{}", std::process::id()));
    let file = dir.join("nested").join("tuning.toml");
    let out = fastmm(&[
        "tune",
        "--quick",
        "--reps",
        "1",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    for step in [
        "| threads |",
        "| tile (tiled) |",
        "| blocks f32",
        "| blocks f64",
        "| strassen f64 |",
    ] {
        assert!(report.contains(step), "{step}: {report}");
    }
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(
        saved.contains("[cpu.f64]") && saved.contains("blocks = ["),
        "{saved}"
    );
    // --quick sizes never move the crossovers.
    assert!(!saved.contains("strassen_threshold"), "{saved}");
    assert!(!saved.contains("parallel_from"), "{saved}");
    let info = stdout(&fastmm_tuned(&file, &["info"]));
    assert!(info.contains("CPU section applies"), "{info}");

    // A file written by hand: its values show in what `run` reports.
    let json = |out: &Output| -> serde_json::Value {
        assert!(out.status.success(), "{}", stderr(out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let model = json(&fastmm_tuned(&file, &["info", "--json"]))["cpu"]["model"]
        .as_str()
        .unwrap()
        .to_string();
    // The kernel's name, from a size it runs.
    let kernel = json(&fastmm(&[
        "run", "--algo", "packed", "--size", "64", "--json",
    ]))[0]["kernel"]
        .as_str()
        .unwrap()
        .split(' ')
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let hand = dir.join("hand.toml");
    // MC = 24 and NC = 96 are whole micro-panels of every kernel (MR 4–12,
    // NR 8–48), so the blocks `run` reports are the file's, unrounded.
    std::fs::write(
        &hand,
        format!(
            "[cpu]\nmodel = \"{model}\"\nthreads = 1\ntile = 48\n\n[cpu.f32]\nkernel = \"{kernel}\"\nblocks = [24, 64, 96]\nstrassen_threshold = 100\nstrassen_start = 150\nparallel_from = 300\n"
        ),
    )
    .unwrap();
    let records = json(&fastmm_tuned(
        &hand,
        &[
            "run",
            "--algo",
            "packed,tiled,strassen",
            "--size",
            "200",
            "--json",
        ],
    ));
    // Tuned blocks apply where `tune` measures them, to a C larger than
    // L2 (1500² f32 is 9 MB); a C of 160 KB keeps the analytical ones.
    assert!(
        !records[0]["kernel"]
            .as_str()
            .unwrap()
            .ends_with(" 24/64/96"),
        "{records}"
    );
    let large = json(&fastmm_tuned(
        &hand,
        &[
            "run", "--algo", "packed", "--size", "1500", "--reps", "1", "--json",
        ],
    ));
    assert!(
        large[0]["kernel"].as_str().unwrap().ends_with(" 24/64/96"),
        "{large}"
    );
    assert_eq!(records[0]["threads"], 1, "{records}");
    let packed_f32 = json(&fastmm_tuned(&hand, &["info", "--json"]))["packed"][0].clone();
    assert_eq!(packed_f32["dtype"], "f32", "{packed_f32}");
    assert_eq!(packed_f32["parallel_from"], 300, "{packed_f32}");
    assert_eq!(records[1]["tile"], 48, "{records}");
    assert!(
        records[2]["kernel"]
            .as_str()
            .unwrap()
            .contains("n0=100 from 150"),
        "{records}"
    );
    // 200 ≥ 150 starts; 100 ≥ 100 recurses once more.
    assert_eq!(records[2]["levels"], 2, "{records}");
    // Explicit options still win over the file.
    let explicit = json(&fastmm_tuned(
        &hand,
        &[
            "run",
            "--algo",
            "packed",
            "--size",
            "128",
            "--threads",
            "2",
            "--parallel-from",
            "100",
            "--blocks",
            "48,128,192",
            "--json",
        ],
    ));
    assert!(
        explicit[0]["kernel"]
            .as_str()
            .unwrap()
            .ends_with(" 48/128/192"),
        "{explicit}"
    );
    assert_eq!(explicit[0]["threads"], 2, "{explicit}");

    // Another CPU's section changes nothing here.
    let other = dir.join("other.toml");
    std::fs::write(&other, "[cpu]\nmodel = \"Another CPU\"\nthreads = 1\n").unwrap();
    let info = stdout(&fastmm_tuned(&other, &["info"]));
    assert!(
        info.contains("CPU section is for Another CPU (ignored)"),
        "{info}"
    );
    let untouched = json(&fastmm_tuned(
        &other,
        // 256³: above the size from which the team runs.
        &["run", "--algo", "packed", "--size", "256", "--json"],
    ));
    assert_ne!(untouched[0]["threads"], 1, "{untouched}");

    // A broken file stops the commands that measure, with the reason.
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "[cpu]\nmodel = \"x\"\nthreds = 2\n").unwrap();
    let refused = fastmm_tuned(&broken, &["run", "--size", "8"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("broken.toml"),
        "{}",
        stderr(&refused)
    );
    assert!(
        stderr(&refused).contains("FASTMM_TUNING=off"),
        "{}",
        stderr(&refused)
    );
    let shown = stdout(&fastmm_tuned(&broken, &["info"]));
    assert!(shown.contains("unusable"), "{shown}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multiply_reads_every_format_and_writes_a_verified_product() {
    use fastmm::io::{read_matrix, write_matrix, AnyMatrix, ReadOptions};
    use fastmm::Matrix;
    let dir = std::env::temp_dir().join(format!("fastmm-multiply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = Matrix::from_fn(37, 29, |i, j| ((i * 7 + j * 3) % 11) as i64 - 5);
    let b = Matrix::from_fn(29, 41, |i, j| ((i * 5 + j) % 13) as i64 - 6);
    let expected = AnyMatrix::I64(fastmm::matmul(&a, &b).unwrap());
    let a_any = AnyMatrix::I64(a);
    let b_any = AnyMatrix::I64(b);
    let path = |name: &str| dir.join(name);
    for ext in ["npy", "mtx", "csv", "tsv", "bin"] {
        write_matrix(
            &path(&format!("a.{ext}")),
            &a_any.to(fastmm::DType::I32).unwrap(),
        )
        .unwrap();
        write_matrix(&path(&format!("b.{ext}")), &b_any).unwrap();
    }
    let as_str = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    // (A, B, options, the type C is computed and written in).
    for (a_file, b_file, extra, c_dtype) in [
        ("a.npy", "b.mtx", vec![], fastmm::DType::I64),
        (
            "a.csv",
            "b.tsv",
            vec!["--input-dtype", "i64"],
            fastmm::DType::I64,
        ),
        (
            "a.bin",
            "b.npy",
            vec!["--input-dtype", "i32", "--shape-a", "37x29"],
            fastmm::DType::I64,
        ),
        // Matrix Market integers × CSV (f64 by default): f64.
        (
            "a.mtx",
            "b.csv",
            vec!["--algo", "winograd"],
            fastmm::DType::F64,
        ),
    ] {
        for out in ["c.npy", "c.mtx", "c.csv", "c.tsv", "c.bin"] {
            let mut args = vec![
                "multiply".to_string(),
                as_str(path(a_file)),
                as_str(path(b_file)),
                "-o".into(),
                as_str(path(out)),
                "--check".into(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let run = fastmm(&argv);
            assert!(
                run.status.success(),
                "{a_file} {b_file} {out}: {}",
                stderr(&run)
            );
            assert!(stdout(&run).contains("check: full ok"), "{}", stdout(&run));
            let opts = ReadOptions::new().dtype(c_dtype).shape(37, 41);
            let c = read_matrix(&path(out), &opts)
                .unwrap()
                .to(fastmm::DType::I64)
                .unwrap();
            assert_eq!(c, expected, "{a_file} × {b_file} → {out}");
        }
    }
    // Promotion: i32 × f64 multiplies in f64; --dtype f32 rounds on request.
    write_matrix(&path("bf.npy"), &b_any.to(fastmm::DType::F64).unwrap()).unwrap();
    let mixed = fastmm(&[
        "multiply",
        &as_str(path("a.npy")),
        &as_str(path("bf.npy")),
        "-o",
        &as_str(path("m.npy")),
    ]);
    assert!(
        stdout(&mixed).contains(", f64, packed"),
        "{}",
        stdout(&mixed)
    );
    let single = fastmm(&[
        "multiply",
        &as_str(path("a.npy")),
        &as_str(path("bf.npy")),
        "-o",
        &as_str(path("s.npy")),
        "--dtype",
        "f32",
    ]);
    assert!(
        stdout(&single).contains(", f32, packed"),
        "{}",
        stdout(&single)
    );

    // Errors: one line, exit 2, the file named, and no C left behind.
    let failing = |args: &[&str], needle: &str| {
        let out = fastmm(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    };
    std::fs::write(path("bad.csv"), "1,2\n3,oops\n").unwrap();
    failing(
        &[
            "multiply",
            &as_str(path("bad.csv")),
            &as_str(path("b.npy")),
            "-o",
            &as_str(path("x.npy")),
        ],
        "bad.csv: line 2, field 2: 'oops' is not a number",
    );
    failing(
        &[
            "multiply",
            &as_str(path("a.npy")),
            &as_str(path("a.npy")),
            "-o",
            &as_str(path("x.npy")),
        ],
        "A has 29 columns but B has 37 rows",
    );
    failing(
        &[
            "multiply",
            &as_str(path("a.npy")),
            &as_str(path("b.npy")),
            "-o",
            &as_str(path("b.npy")),
        ],
        "inputs are never modified",
    );
    failing(
        &[
            "multiply",
            &as_str(path("a.bin")),
            &as_str(path("b.npy")),
            "-o",
            &as_str(path("x.npy")),
        ],
        "a raw file needs its shape",
    );
    failing(
        &[
            "multiply",
            &as_str(path("a.npy")),
            &as_str(path("b.npy")),
            "-o",
            &as_str(path("x.xlsx")),
        ],
        "unknown format",
    );
    assert!(!path("x.npy").exists() && !path("x.xlsx").exists());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn multiply_out_of_core_blocks_c_within_the_budget() {
    use fastmm::io::{read_matrix, write_matrix, AnyMatrix, ReadOptions};
    use fastmm::Matrix;
    let dir = std::env::temp_dir().join(format!("fastmm-ooc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let a = Matrix::from_fn(53, 31, |i, j| ((i * 7 + j * 3) % 17) as f64 - 8.0);
    let b = Matrix::from_fn(31, 47, |i, j| ((i * 5 + j) % 13) as f64 * 0.5 - 3.0);
    let expected = fastmm::matmul(&a, &b).unwrap();
    write_matrix(dir.join("a.npy").as_path(), &AnyMatrix::F64(a.clone())).unwrap();
    write_matrix(dir.join("b.bin").as_path(), &AnyMatrix::F64(b.clone())).unwrap();
    // Budgets: whole rows of C in blocks (8 KiB), and less than one row,
    // so C is cut into column blocks too (300 bytes).
    for (budget, out) in [("8K", "c.npy"), ("300", "c.bin")] {
        let run = fastmm(&[
            "multiply",
            &path("a.npy"),
            &path("b.bin"),
            "--shape-b",
            "31x47",
            "--input-dtype",
            "f64",
            "-o",
            &path(out),
            "--max-memory",
            budget,
            "--check",
        ]);
        assert!(run.status.success(), "{budget}: {}", stderr(&run));
        let text = stdout(&run);
        assert!(
            text.contains("out of core") && text.contains("check of every block: ok"),
            "{text}"
        );
        let opts = ReadOptions::new().dtype(fastmm::DType::F64).shape(53, 47);
        let c = read_matrix(&dir.join(out), &opts).unwrap();
        let AnyMatrix::F64(c) = c else { panic!("f64") };
        for i in 0..53 {
            for j in 0..47 {
                assert!(
                    (c.get(i, j) - expected.get(i, j)).abs() < 1e-9,
                    "{budget} ({i}, {j})"
                );
            }
        }
    }
    // A Fortran-order .npy (written here by hand) maps as a column-major
    // view.
    let header = "{'descr': '<f8', 'fortran_order': True, 'shape': (31, 47), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    for j in 0..47 {
        for i in 0..31 {
            bytes.extend_from_slice(&b.get(i, j).to_le_bytes());
        }
    }
    std::fs::write(dir.join("bf.npy"), &bytes).unwrap();
    let fortran = fastmm(&[
        "multiply",
        &path("a.npy"),
        &path("bf.npy"),
        "-o",
        &path("x.npy"),
        "--out-of-core",
    ]);
    assert!(fortran.status.success(), "{}", stderr(&fortran));
    let AnyMatrix::F64(x) = read_matrix(&dir.join("x.npy"), &ReadOptions::default()).unwrap()
    else {
        panic!("f64")
    };
    assert!(x
        .as_slice()
        .iter()
        .zip(expected.as_slice())
        .all(|(x, e)| (x - e).abs() < 1e-9));
    // Text inputs cannot be mapped; mixed types are refused out of core.
    write_matrix(dir.join("a.csv").as_path(), &AnyMatrix::F64(a.clone())).unwrap();
    let text = fastmm(&[
        "multiply",
        &path("a.csv"),
        &path("b.bin"),
        "-o",
        &path("y.npy"),
        "--out-of-core",
    ]);
    assert_eq!(text.status.code(), Some(2));
    assert!(
        stderr(&text).contains("must be .npy or raw files"),
        "{}",
        stderr(&text)
    );
    write_matrix(
        dir.join("bi.npy").as_path(),
        &AnyMatrix::I32(Matrix::from_fn(31, 2, |i, _| i as i32)),
    )
    .unwrap();
    // Mixed types: the i32 B is converted to f64 in a scratch file (which
    // is gone afterwards) and the product is exact.
    let mixed = fastmm(&[
        "multiply",
        &path("a.npy"),
        &path("bi.npy"),
        "-o",
        &path("z.npy"),
        "--out-of-core",
        "--check",
    ]);
    assert!(mixed.status.success(), "{}", stderr(&mixed));
    assert!(stderr(&mixed).contains("converted to little-endian f64"));
    let AnyMatrix::F64(z) = read_matrix(&dir.join("z.npy"), &ReadOptions::default()).unwrap()
    else {
        panic!("f64")
    };
    for i in 0..53 {
        for j in 0..2 {
            let want: f64 = (0..31).map(|p| a.get(i, p) * p as f64).sum();
            assert_eq!(z.get(i, j), want, "({i}, {j})");
        }
    }
    // A big-endian A is converted too; an f64 that is not an integer
    // cannot become an i64, and the error names the element.
    let header = "{'descr': '>f8', 'fortran_order': False, 'shape': (53, 31), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<117}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    for x in a.as_slice() {
        bytes.extend_from_slice(&x.to_be_bytes());
    }
    std::fs::write(dir.join("abig.npy"), &bytes).unwrap();
    let big = fastmm(&[
        "multiply",
        &path("abig.npy"),
        &path("bf.npy"),
        "-o",
        &path("w.npy"),
        "--out-of-core",
    ]);
    assert!(big.status.success(), "{}", stderr(&big));
    let AnyMatrix::F64(w) = read_matrix(&dir.join("w.npy"), &ReadOptions::default()).unwrap()
    else {
        panic!("f64")
    };
    assert!(w
        .as_slice()
        .iter()
        .zip(expected.as_slice())
        .all(|(w, e)| (w - e).abs() < 1e-9));
    let inexact = fastmm(&[
        "multiply",
        &path("b.bin"),
        &path("bi.npy"),
        "--shape-a",
        "31x47",
        "--input-dtype",
        "f64",
        "-o",
        &path("v.npy"),
        "--out-of-core",
        "--dtype",
        "i64",
    ]);
    assert_eq!(inexact.status.code(), Some(2), "{}", stderr(&inexact));
    assert!(
        stderr(&inexact).contains("is not exactly a i64"),
        "{}",
        stderr(&inexact)
    );
    assert!(!dir.join("v.npy").exists());
    let scratch: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("fastmm-convert"))
        .collect();
    assert!(scratch.is_empty(), "{scratch:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `emulated` runs on the CPU (its reference twins) for floats and
/// integers and reports its route in the kernel column; integers are
/// exact.
#[test]
fn emulated_reports_its_route_for_floats_and_integers() {
    let out = fastmm(&[
        "run", "-m", "37", "-k", "211", "-n", "19", "--algo", "emulated", "--dtype", "all",
        "--json", "--reps", "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 4);
    for r in records {
        assert_eq!(r["ok"], true);
        let kernel = r["kernel"].as_str().unwrap();
        assert!(
            kernel.contains("moduli") && kernel.contains("bits"),
            "{kernel}"
        );
        if r["dtype"] == "i32" || r["dtype"] == "i64" {
            assert!(kernel.starts_with("byte planes"), "{kernel}");
            assert_eq!(r["rel_error"], 0.0, "{r}");
        } else {
            assert!(kernel.starts_with("Ozaki"), "{kernel}");
        }
    }
}

#[test]
fn accuracy_levels_are_asked_for_reported_and_audited() {
    // `run` says the level each product gives, and the one asked where a
    // named algorithm gives a looser one.
    let out = fastmm(&[
        "run",
        "-s",
        "64",
        "--algo",
        "packed,naive,auto",
        "--accuracy",
        "native",
        "--json",
        "--reps",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let given: Vec<(&str, &str)> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["algorithm"].as_str().unwrap(),
                r["accuracy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        given,
        [("packed", "native"), ("naive", "bound"), ("auto", "native")]
    );
    let table = fastmm(&["run", "-s", "64", "--algo", "naive", "--reps", "1"]);
    assert!(
        stdout(&table).contains("bound (asked native)"),
        "{}",
        stdout(&table)
    );
    // The audit: every product on every class, judged; exit 0 when met.
    let out = fastmm(&[
        "accuracy",
        "--shapes",
        "9x64x7",
        "--classes",
        "uniform,cancellation",
        "--products",
        "packed,emulated:native,emulated:bits:12,auto:bound",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    for needle in ["emulated:native", "bits:12", "cancellation", "×native"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(!text.contains("FAILED"), "{text}");
    let bad = fastmm(&["run", "-s", "8", "--accuracy", "exact"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("unknown accuracy 'exact'"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn complex_types_run_as_real_products_and_are_verified() {
    // The shape matrix around the microkernel's and the recursion's
    // edges, both forms; every record checked through the real embedding.
    for (m, k, n) in [
        (1, 1, 1),
        (7, 9, 47),
        (49, 1, 17),
        (97, 89, 101),
        (130, 65, 129),
    ] {
        for accuracy in ["native", "bound"] {
            let (m, k, n) = (m.to_string(), k.to_string(), n.to_string());
            let out = fastmm(&[
                "run",
                "-m",
                &m,
                "-k",
                &k,
                "-n",
                &n,
                "--dtype",
                "c64,c128,f64",
                "--algo",
                "packed,strassen,winograd,naive",
                "--accuracy",
                accuracy,
                "--json",
                "--reps",
                "1",
                "--warmup",
                "0",
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let records = records.as_array().unwrap();
            assert_eq!(records.len(), 4 * 3, "{m}×{k}×{n}");
            for r in records {
                assert_eq!(r["ok"], true, "{r}");
                if r["dtype"] == "c64" || r["dtype"] == "c128" {
                    let form = if accuracy == "native" { "4m" } else { "3m" };
                    assert!(r["kernel"].as_str().unwrap().starts_with(form), "{r}");
                }
            }
            let c128 = records.iter().find(|r| r["dtype"] == "c128").unwrap();
            assert!(c128["rel_error"].as_f64().unwrap() < 1e-12, "{c128}");
        }
    }
    // A spoiled element fails the run.
    let out = fastmm(&[
        "run",
        "-s",
        "40",
        "--dtype",
        "c128",
        "--algo",
        "packed",
        "--corrupt",
    ]);
    assert!(!out.status.success());
    assert!(stdout(&out).contains("WRONG"), "{}", stdout(&out));
}

/// `fastmm exec` runs the command with the library first in LD_PRELOAD
/// (the caller's entries after it) and the accuracy level set; it
/// refuses a missing library and an unknown level before running
/// anything. (libm stands in for libfastmm_blas: preloading it changes
/// nothing.)
#[test]
fn exec_preloads_the_library_for_an_unchanged_command() {
    let Some(lib) = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib64/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).is_file()) else {
        eprintln!("no libm found where expected: the preload itself is not exercised");
        return;
    };
    let canonical = std::fs::canonicalize(lib).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args(["exec", "--library", lib, "--accuracy", "bits:30", "--"])
        .args([
            "sh",
            "-c",
            "printf '%s|%s' \"$LD_PRELOAD\" \"$FASTMM_ACCURACY\"; exit 3",
        ])
        .env("LD_PRELOAD", "")
        .output()
        .unwrap();
    // The command's own exit status.
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{}|bits:30", canonical.display()));
    let missing = fastmm(&[
        "exec",
        "--library",
        "/nonexistent/libfastmm_blas.so",
        "--",
        "true",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("/nonexistent/libfastmm_blas.so does not exist"),
        "{}",
        stderr(&missing)
    );
    let level = fastmm(&[
        "exec",
        "--library",
        lib,
        "--accuracy",
        "perfect",
        "--",
        "true",
    ]);
    assert_eq!(level.status.code(), Some(2), "{}", stderr(&level));
    // With --cublas the interposer follows the BLAS library; --no-blas
    // leaves the interposer alone; neither preloads nothing and says so.
    let both = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args([
            "exec",
            "--library",
            lib,
            "--cublas",
            "--cublas-library",
            lib,
            "--",
        ])
        .args(["sh", "-c", "printf '%s' \"$LD_PRELOAD\""])
        .env("LD_PRELOAD", "/y/a.so")
        .output()
        .unwrap();
    let c = canonical.display();
    assert_eq!(
        stdout(&both),
        format!("{c}:{c}:/y/a.so"),
        "{}",
        stderr(&both)
    );
    let only = Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .args([
            "exec",
            "--no-blas",
            "--cublas",
            "--cublas-library",
            lib,
            "--",
        ])
        .args(["sh", "-c", "printf '%s' \"$LD_PRELOAD\""])
        .env("LD_PRELOAD", "")
        .output()
        .unwrap();
    assert_eq!(stdout(&only), format!("{c}"), "{}", stderr(&only));
    let nothing = fastmm(&["exec", "--no-blas", "--", "true"]);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(
        stderr(&nothing).contains("preloads nothing"),
        "{}",
        stderr(&nothing)
    );
    let missing = fastmm(&[
        "exec",
        "--no-blas",
        "--cublas",
        "--cublas-library",
        "/nonexistent/libfastmm_cublas.so",
        "--",
        "true",
    ]);
    assert!(
        stderr(&missing).contains("cargo build --release -p fastmm-cublas"),
        "{}",
        stderr(&missing)
    );
}
