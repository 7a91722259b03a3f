//! `run --distributed` under `mpirun` (feature `mpi`): the shape matrix
//! on 3 ranks and a cube on 1, 2, 4 and 8 (oversubscribed on a small
//! machine), every type, integers exact and floats within the bound, the
//! words within 1.2× of the lower bound from 4 ranks; a wrong result
//! makes the job fail; ranks given different arguments are refused by
//! name; a rank killed mid-product ends the job within 30 s, named; the
//! grid fits the memory per rank, and a product no grid fits is refused.
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
