//! `run --distributed` under `mpirun` (feature `mpi`): the shape matrix
//! on 3 ranks and a cube on 1, 2, 4 and 8 (oversubscribed on a small
//! machine), every type, integers exact and floats within the bound, the
//! words within 1.2× of the lower bound from 4 ranks; a wrong result
//! makes the job fail; ranks given different arguments are refused by
//! name; a rank killed mid-product ends the job within 30 s, named; the
//! grid fits the memory per rank, and a product no grid fits is refused;
//! `multiply --distributed` writes C whole from every rank's blocks (f64
//! and exact i64, k = 0 too), and a failed job leaves no file; Strassen
//! and Winograd across 2, 3 and 4 ranks (CAPS) where the shape aligns,
//! exact for integers, within the per-level bound for floats, with the
//! words CAPS moves, and the classical distribution where it does not;
//! GPU local products refused by name on ranks without a GPU.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

fn mpirun(ranks: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        // Open MPI refuses root (CI containers) unless told, and more
        // ranks than cores unless oversubscribing.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_fastmm"))
        .args(args)
        .output()
        .expect("mpirun runs (Debian: openmpi-bin)")
}

fn records(out: &Output) -> Vec<serde_json::Value> {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    json.as_array().expect("an array of records").clone()
}

#[test]
fn the_shape_matrix_on_three_ranks() {
    for (m, k, n) in [
        (1, 1, 1),
        (2, 3, 5),
        (17, 31, 13),
        (40, 3, 40),
        (3, 40, 3),
        (97, 89, 101),
        (130, 65, 129),
    ] {
        let (m, k, n) = (m.to_string(), k.to_string(), n.to_string());
        let out = mpirun(
            3,
            &[
                "run",
                "--distributed",
                "-m",
                &m,
                "-k",
                &k,
                "-n",
                &n,
                "--algo",
                "packed,naive",
                "--dtype",
                "all",
                "--reps",
                "1",
                "--warmup",
                "0",
                "--json",
            ],
        );
        let records = records(&out);
        assert_eq!(records.len(), 8, "2 algorithms × 4 types for {m}×{k}×{n}");
        for r in &records {
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(r["device"], "mpi:3", "{r}");
            if r["dtype"] == "i32" || r["dtype"] == "i64" {
                assert_eq!(r["rel_error"], 0.0, "{r}");
            }
        }
    }
}

/// Complex products across the ranks: each of the four (or three) real
/// products is the cluster's, planned by its planner; rank 0 verifies C
/// through the real embedding.
#[test]
fn complex_products_across_two_and_three_ranks() {
    for (ranks, accuracy) in [(2, "native"), (3, "bound")] {
        let out = mpirun(
            ranks,
            &[
                "run",
                "--distributed",
                "-m",
                "67",
                "-k",
                "45",
                "-n",
                "89",
                "--algo",
                "packed,strassen",
                "--dtype",
                "c64,c128",
                "--accuracy",
                accuracy,
                "--reps",
                "1",
                "--warmup",
                "0",
                "--json",
            ],
        );
        let records = records(&out);
        assert_eq!(records.len(), 4, "2 algorithms × 2 complex types");
        for r in &records {
            assert_eq!(r["ok"], true, "{r}");
            assert_eq!(r["device"], format!("mpi:{ranks}"), "{r}");
        }
    }
}

/// Strassen and Winograd across the ranks (`--strassen-across`): every
/// type exact or within
/// the bound grown by the levels run, the words (7/4)^L·k·n·(P−1)/P
/// received by every rank; an unaligned shape takes the classical
/// distribution (with Strassen locally).
#[test]
fn strassen_across_two_three_and_four_ranks() {
    for (ranks, (m, k, n), threshold) in [
        (2, (64, 64, 64), "16"),
        (3, (96, 48, 40), "12"),
        (4, (64, 32, 17), "8"),
        (3, (97, 89, 101), "16"),
    ] {
        let records = across_records(ranks, (m, k, n), threshold);
        assert_eq!(records.len(), 8, "2 algorithms × 4 types for {m}×{k}×{n}");
        for r in &records {
            assert_eq!(r["ok"], true, "{r}");
            if r["dtype"] == "i32" || r["dtype"] == "i64" {
                assert_eq!(r["rel_error"], 0.0, "{r}");
            }
            let kernel = r["kernel"].as_str().expect("a kernel column");
            if m % 97 == 0 {
                assert!(kernel.starts_with("distributed"), "{kernel}");
                continue;
            }
            let levels: u32 = kernel
                .split("(CAPS): ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|l| l.parse().ok())
                .unwrap_or_else(|| panic!("no CAPS levels in {kernel}"));
            assert!(levels >= 1, "{kernel}");
            let p = ranks as f64;
            let words = 1.75f64.powi(levels as i32) * (k * n) as f64 * (p - 1.0) / p;
            let got = r["comm_words"].as_f64().expect("words reported");
            if n % (1 << levels) == 0 {
                assert_eq!(got, words, "{kernel}");
            } else {
                // An odd n peels a column at some level: its classical
                // products gather their thin blocks of B too.
                assert!(got > words, "{kernel}");
            }
        }
    }
    // Not asked for: the classical distribution, Strassen locally.
    let out = mpirun(
        2,
        &[
            "run",
            "--distributed",
            "-s",
            "64",
            "--algo",
            "strassen",
            "--threshold",
            "16",
            "--dtype",
            "i64",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--json",
        ],
    );
    let records = records(&out);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["ok"], true);
    let kernel = records[0]["kernel"].as_str().expect("a kernel column");
    assert!(kernel.starts_with("distributed"), "{kernel}");
}

#[test]
fn one_two_four_and_eight_ranks() {
    for ranks in [1, 2, 4, 8] {
        let out = mpirun(
            ranks,
            &[
                "run",
                "--distributed",
                "-s",
                "64",
                "--algo",
                "packed",
                "--dtype",
                "f64,i64",
                "--reps",
                "1",
                "--warmup",
                "0",
                "--json",
            ],
        );
        for r in records(&out) {
            assert_eq!(r["ok"], true, "{r}");
            let words = r["comm_words"].as_u64().expect("words reported");
            assert_eq!(words == 0, ranks == 1, "{r}");
            let kernel = r["kernel"].as_str().unwrap_or_default();
            // A cube on 8 ranks takes the 2×2×2 grid; from 4 ranks the
            // words are within 1.2× of the lower bound (on 2 the bound
            // is loose: every grid of 2 moves n²/2 words to each).
            assert_eq!(ranks == 8, kernel.contains("2×2×2"), "{r}");
            if ranks >= 4 {
                assert!(r["comm_bound_ratio"].as_f64().unwrap() <= 1.2, "{r}");
            }
        }
    }
}

#[test]
fn a_wrong_result_fails_the_job() {
    let out = mpirun(
        3,
        &[
            "run",
            "--distributed",
            "-s",
            "40",
            "--algo",
            "packed",
            "--dtype",
            "i32",
            "--reps",
            "1",
            "--corrupt",
        ],
    );
    assert!(!out.status.success());
}

/// The process of `rank` among the ranks that `mpirun` (process `job`)
/// started (Open MPI puts each rank's number in its environment).
fn pid_of_rank(job: u32, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // /proc/PID/stat: "pid (comm) state ppid …".
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let parent = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if parent != Some(job) {
            continue;
        }
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ.split(|&b| b == 0).any(|var| var == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// The JSON records of `run --distributed --algo strassen,winograd
/// --strassen-across` on `ranks` ranks, every type, once each.
fn across_records(
    ranks: usize,
    (m, k, n): (usize, usize, usize),
    threshold: &str,
) -> Vec<serde_json::Value> {
    let (ms, ks, ns) = (m.to_string(), k.to_string(), n.to_string());
    let out = mpirun(
        ranks,
        &[
            "run",
            "--distributed",
            "-m",
            &ms,
            "-k",
            &ks,
            "-n",
            &ns,
            "--algo",
            "strassen,winograd",
            "--strassen-across",
            "--threshold",
            threshold,
            "--dtype",
            "all",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--json",
        ],
    );
    records(&out)
}

/// Words the busiest of 7 ranks receives in a breadth-first step on
/// (m, k, n): rank r gathers S_r (m/2 × k/2) and T_r (k/2 × n/2) less its
/// own rows, and its rows of the six other Q's (m/2 × n/2 each).
fn breadth_first_words((m, k, n): (usize, usize, usize)) -> f64 {
    let part = |len: usize, r: usize| len * (r + 1) / 7 - len * r / 7;
    let (h, d, w) = (m / 2, k / 2, n / 2);
    (0..7)
        .map(|r| h * d - part(h, r) * d + d * w - part(d, r) * w + 6 * part(h, r) * w)
        .max()
        .unwrap_or(0) as f64
}

/// Words the busiest of 7·q ranks receives in a breadth-first step on
/// (m, k, n) with groups of q: rank r (member j of group g) receives its
/// pieces of S_g and T_g under the group's classical plan but the rows it
/// formed itself, the group product's words, and its rows of every Q
/// but those of its own piece of Q_g.
fn grouped_breadth_first_words((m, k, n): (usize, usize, usize), q: usize) -> f64 {
    use fastmm::distributed::{planner, schedule};
    let ranks = 7 * q;
    let part = |len: usize, r: usize| len * r / ranks..len * (r + 1) / ranks;
    let overlap = |x: &std::ops::Range<usize>, y: &std::ops::Range<usize>| {
        x.end.min(y.end).saturating_sub(x.start.max(y.start))
    };
    let (h, d, w) = (m / 2, k / 2, n / 2);
    let plan = planner::plan((h, d, w), q, None).expect("a group plan");
    let group = schedule::build(&plan);
    let inside = group.received();
    (0..ranks)
        .map(|r| {
            let j = r % q;
            let (ra, rb) = (part(h, r), part(d, r));
            let (pa, pb) = (&group.a.pieces[j], &group.b.pieces[j]);
            let pieces = pa.elements() - overlap(&ra, &pa.rows) * pa.cols.len() + pb.elements()
                - overlap(&rb, &pb.rows) * pb.cols.len();
            let own_q = &group.c.pieces[j];
            let q_rows = 7 * ra.len() * w - overlap(&ra, &own_q.rows) * own_q.cols.len();
            pieces as u128 + inside[j] + q_rows as u128
        })
        .max()
        .unwrap_or(0) as f64
}

#[test]
fn breadth_first_on_seven_and_fourteen_ranks_where_memory_allows() {
    for (m, k, n) in [(64, 32, 18), (98, 44, 202), (2, 2, 2), (97, 44, 20)] {
        let records = across_records(7, (m, k, n), "8");
        assert_eq!(records.len(), 8, "2 algorithms × 4 types for {m}×{k}×{n}");
        for r in &records {
            assert_eq!(r["ok"], true, "{r}");
            if r["dtype"] == "i32" || r["dtype"] == "i64" {
                assert_eq!(r["rel_error"], 0.0, "{r}");
            }
            let kernel = r["kernel"].as_str().expect("a kernel column");
            if m % 2 == 1 {
                // An odd size splits no quadrants.
                assert!(!kernel.contains("breadth-first"), "{kernel}");
                continue;
            }
            assert!(kernel.contains("1 breadth-first level"), "{kernel}");
            let got = r["comm_words"].as_f64().expect("words reported");
            assert_eq!(got, breadth_first_words((m, k, n)), "{kernel}");
        }
    }
    // 14 ranks: a group of 2 per product, classical within it. Words
    // exactly as the group plan hands out the pieces; on a cube, fewer
    // than the classical distribution over the 14 ranks moves.
    for (m, k, n) in [(56usize, 28usize, 30usize), (26, 18, 46), (112, 112, 112)] {
        let records = across_records(14, (m, k, n), "8");
        assert_eq!(records.len(), 8, "2 algorithms × 4 types for {m}×{k}×{n}");
        for r in &records {
            assert_eq!(r["ok"], true, "{r}");
            if r["dtype"] == "i32" || r["dtype"] == "i64" {
                assert_eq!(r["rel_error"], 0.0, "{r}");
            }
            let kernel = r["kernel"].as_str().expect("a kernel column");
            assert!(
                kernel.contains("a product per group of 2 ranks"),
                "{kernel}"
            );
            let got = r["comm_words"].as_f64().expect("words reported");
            assert_eq!(got, grouped_breadth_first_words((m, k, n), 2), "{kernel}");
            if m == k && k == n {
                let classical = fastmm::distributed::planner::plan((m, k, n), 14, None)
                    .expect("a classical plan")
                    .words_per_processor;
                assert!(got < classical as f64, "{got} ≥ {classical}: {kernel}");
            }
        }
    }
    // 112³ f64: the step needs 18816 words (150528 bytes) per rank; with
    // less, depth-first steps run instead.
    for (memory, breadth) in [("150K", true), ("146K", false)] {
        let out = mpirun(
            7,
            &[
                "run",
                "--distributed",
                "-s",
                "112",
                "--algo",
                "strassen",
                "--strassen-across",
                "--threshold",
                "16",
                "--dtype",
                "f64",
                "--memory-per-rank",
                memory,
                "--reps",
                "1",
                "--warmup",
                "0",
                "--json",
            ],
        );
        let records = records(&out);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0]["ok"], true, "{}", records[0]);
        let kernel = records[0]["kernel"].as_str().expect("a kernel column");
        assert_eq!(
            kernel.contains("breadth-first"),
            breadth,
            "{memory}: {kernel}"
        );
        assert!(kernel.contains("(CAPS)"), "{memory}: {kernel}");
    }
}

#[test]
fn a_killed_rank_ends_the_job_within_30_seconds_naming_it() {
    use std::time::{Duration, Instant};
    let job = Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", "4"])
        .arg(env!("CARGO_BIN_EXE_fastmm"))
        // Long enough to be killed mid-product: minutes of naive products.
        .args([
            "run",
            "--distributed",
            "-s",
            "1200",
            "--algo",
            "naive",
            "-d",
            "f64",
            "--reps",
            "200",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun runs (Debian: openmpi-bin)");
    // Whatever happens below, the job does not outlive the test.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut job = Reap(job);
    let found = Instant::now();
    let victim = loop {
        if let Some(pid) = pid_of_rank(job.0.id(), 2) {
            break pid;
        }
        assert!(
            found.elapsed() < Duration::from_secs(30),
            "rank 2 never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Into its products (the inputs take a moment to make).
    std::thread::sleep(Duration::from_secs(2));
    let killed = Instant::now();
    let status = Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = loop {
        if let Some(exit) = job.0.try_wait().expect("the job can be waited for") {
            break exit;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the other ranks still ran 30 s after rank 2 was killed"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!exit.success());
    let mut stderr = String::new();
    use std::io::Read;
    job.0
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut stderr)
        .expect("stderr reads");
    assert!(stderr.contains("rank 2"), "{stderr}");
}

#[test]
fn ranks_given_different_arguments_are_refused_naming_them() {
    // Two app contexts of one job: rank 2 gets another seed.
    let bin = env!("CARGO_BIN_EXE_fastmm");
    let common = [
        "run",
        "--distributed",
        "-s",
        "32",
        "--algo",
        "packed",
        "--reps",
        "1",
    ];
    let out = Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", "2", bin])
        .args(common)
        .args([":", "-np", "1", bin])
        .args(common)
        .args(["--seed", "7"])
        .output()
        .expect("mpirun runs (Debian: openmpi-bin)");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rank(s) 2 differ from rank 0"), "{stderr}");
}

#[test]
fn the_grid_fits_the_memory_per_rank_and_a_product_none_fits_is_refused() {
    // 8×24×32 f64 on 4 ranks. Ample memory: 1×2×2 (112 words received,
    // 528 held per rank). 500 words (4000 bytes): 1×4×1, the fewest words
    // (144) among the grids that fit (it holds 496). 400 words: none fits
    // (496 at best).
    let run = |memory: Option<&str>| {
        let mut args = vec![
            "run",
            "--distributed",
            "-m",
            "8",
            "-k",
            "24",
            "-n",
            "32",
            "--algo",
            "packed",
            "-d",
            "f64",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--json",
        ];
        if let Some(bytes) = memory {
            args.extend(["--memory-per-rank", bytes]);
        }
        mpirun(4, &args)
    };
    let grid_and_words = |memory: Option<&str>| {
        let records = records(&run(memory));
        let r = &records[0];
        assert_eq!(r["ok"], true, "{r}");
        let kernel = r["kernel"].as_str().expect("a kernel column").to_string();
        (kernel, r["comm_words"].as_u64().expect("words"))
    };
    let (ample, words) = grid_and_words(None);
    assert!(ample.starts_with("distributed 1×2×2 "), "{ample}");
    assert_eq!(words, 112);
    let (tight, words) = grid_and_words(Some("4000"));
    assert!(tight.starts_with("distributed 1×4×1 "), "{tight}");
    assert_eq!(words, 144);

    let out = run(Some("3200"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rank 0 of 4 failed"), "{stderr}");
    assert!(
        stderr.contains("8×24×32 product on 4 processors needs 496 words"),
        "{stderr}"
    );
}

/// A GPU algorithm's local products run on each rank's GPU; ranks
/// without one (this machine) fail at once, naming the failed ranks,
/// rather than leaving the others waiting.
#[test]
fn gpu_local_products_on_ranks_without_gpus_fail_naming_the_ranks() {
    let out = mpirun(
        2,
        &[
            "run",
            "--distributed",
            "--algo",
            "cublas",
            "-s",
            "8",
            "--reps",
            "1",
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.contains("CUDA") {
        // A machine with a GPU would run it: nothing to check here.
        return;
    }
    // The ranks agree on the failure before any collective, and each
    // names both (the first to end the job may cut the other's message).
    assert!(stderr.contains("of 2 failed: rank(s) 0, 1"), "{stderr}");
    assert!(stderr.contains("could not open a GPU"), "{stderr}");
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fastmm-mpi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn leftovers(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("the scratch directory lists")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|name| name.contains("partial"))
        .collect()
}

#[test]
fn files_multiplied_across_ranks_land_whole_and_a_failure_leaves_no_file() {
    use fastmm::io::{read_matrix, write_matrix, AnyMatrix, ReadOptions};
    use fastmm::Matrix;
    let dir = scratch("files");
    let path = |name: &str| dir.join(name);
    let run = |ranks: usize, a: &str, b: &str, c: &str| {
        let (a, b, c) = (path(a), path(b), path(c));
        let args = [
            "multiply",
            a.to_str().expect("UTF-8 path"),
            b.to_str().expect("UTF-8 path"),
            "-o",
            c.to_str().expect("UTF-8 path"),
            "--distributed",
            "--algo",
            "packed",
        ];
        mpirun(ranks, &args)
    };
    for (ranks, (m, k, n)) in [
        (3, (37, 23, 41)),
        (4, (90, 30, 70)),
        (4, (1, 1, 1)),
        (3, (5, 64, 3)),
        (2, (3, 0, 4)),
    ] {
        let af = Matrix::<f64>::from_fn(m, k, |i, j| ((i * 7 + j * 3) % 11) as f64 / 8.0 - 0.6);
        let bf = Matrix::<f64>::from_fn(k, n, |i, j| ((i * 5 + j) % 13) as f64 / 4.0 - 1.5);
        let ai = Matrix::<i64>::from_fn(m, k, |i, j| (i as i64 * 31 - j as i64 * 17) % 97);
        let bi = Matrix::<i64>::from_fn(k, n, |i, j| (i as i64 * 13 + j as i64 * 7) % 89 - 40);
        write_matrix(&path("af.npy"), &AnyMatrix::F64(af.clone())).expect("A written");
        write_matrix(&path("bf.npy"), &AnyMatrix::F64(bf.clone())).expect("B written");
        write_matrix(&path("ai.npy"), &AnyMatrix::I64(ai.clone())).expect("A written");
        write_matrix(&path("bi.npy"), &AnyMatrix::I64(bi.clone())).expect("B written");

        let out = run(ranks, "af.npy", "bf.npy", "cf.npy");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        // Each rank maps only the rows of A and B that hold its pieces:
        // fewer than all where the grid splits A's rows (pm > 1) or B's
        // (pm or pk > 1); a split of columns alone maps every row.
        let after = |marker: &str, end: char| -> Option<String> {
            let rest = stderr.split(marker).nth(1)?;
            Some(rest.split(end).next()?.to_string())
        };
        let mapped: u64 = after("mapped at most ", ' ')
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("no mapped bytes in {stderr}"));
        let inputs = ((m * k + k * n) * 8) as u64;
        assert!(mapped <= inputs, "{mapped} of {inputs} bytes: {stderr}");
        if let Some(grid) = after("in a ", ' ') {
            let g: Vec<usize> = grid.split('×').filter_map(|x| x.parse().ok()).collect();
            if g.len() == 3 && (g[0] > 1 || g[2] > 1) {
                assert!(mapped < inputs, "{mapped} of {inputs} bytes: {stderr}");
            }
        }
        let AnyMatrix::F64(c) = read_matrix(&path("cf.npy"), &ReadOptions::new()).expect("C reads")
        else {
            panic!("C is f64");
        };
        let want = fastmm::matmul(&af, &bf).expect("the local product");
        assert_eq!(c.shape(), (m, n));
        for (x, y) in c.as_slice().iter().zip(want.as_slice()) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} against {y}");
        }

        let out = run(ranks, "ai.npy", "bi.npy", "ci.npy");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let c = read_matrix(&path("ci.npy"), &ReadOptions::new()).expect("C reads");
        let want = fastmm::matmul(&ai, &bi).expect("the local product");
        assert_eq!(c, AnyMatrix::I64(want), "{m}×{k}×{n} i64 on {ranks} ranks");
        assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    }

    // B does not chain with A: the job fails, the old C stays as it was,
    // and no temporary file is left.
    let bad = Matrix::<f64>::from_fn(24, 41, |i, j| (i + j) as f64);
    let good = Matrix::<f64>::from_fn(37, 23, |i, j| (i * j) as f64);
    write_matrix(&path("a.npy"), &AnyMatrix::F64(good)).expect("A written");
    write_matrix(&path("bad.npy"), &AnyMatrix::F64(bad)).expect("B written");
    std::fs::write(path("old.npy"), b"the previous C").expect("an old C");
    let out = run(3, "a.npy", "bad.npy", "old.npy");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("A has 23 columns but B has 24 rows"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(path("old.npy")).expect("the old C"),
        b"the previous C"
    );
    assert!(leftovers(&dir).is_empty(), "{:?}", leftovers(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
