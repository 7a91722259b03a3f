//! SIGINT and SIGTERM sent to real runs of `multiply` (in and out of
//! core), `bench --out` and `tune`: each exits with 130, leaves no
//! temporary file, and leaves the earlier outputs as they were.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastmm-int-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_fastmm"))
        .current_dir(dir)
        .args(args)
        .env("FASTMM_TUNING", dir.join("tuning.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the fastmm binary runs")
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits (bounded) until a file whose name contains `part` appears in
/// `dir`; its name.
fn wait_for(dir: &Path, part: &str) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.contains(part) {
                return name;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no file with '{part}' in {} after 60 s", dir.display());
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A square f64 .npy of `n` with small integer values.
fn npy(dir: &Path, name: &str, n: usize) {
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({n}, {n}), }}");
    let header = format!("{dict:<117}\n");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for i in 0..n * n {
        bytes.extend_from_slice(&(((i % 13) as f64) - 6.0).to_le_bytes());
    }
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn an_interrupted_out_of_core_multiply_leaves_no_partial_file() {
    for sig in ["INT", "TERM"] {
        let dir = scratch(&format!("ooc-{sig}"));
        npy(&dir, "a.npy", 700);
        std::fs::write(dir.join("c.npy"), "an earlier output").unwrap();
        // The naive product, out of core in small blocks: seconds, with
        // the mapped C under its temporary name all along.
        let child = spawn(
            &dir,
            &[
                "multiply",
                "a.npy",
                "a.npy",
                "-o",
                "c.npy",
                "--out-of-core",
                "--max-memory",
                "4M",
                "--algo",
                "naive",
            ],
        );
        let partial = wait_for(&dir, ".partial");
        assert!(partial.starts_with(".c.npy."), "{partial}");
        signal(&child, sig);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{sig}: {err}");
        assert!(err.contains("removed 1 unfinished file"), "{sig}: {err}");
        assert_eq!(names(&dir), ["a.npy", "c.npy"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("c.npy")).unwrap(),
            "an earlier output"
        );
    }
}

#[test]
fn an_interrupted_in_core_multiply_keeps_the_earlier_output() {
    let dir = scratch("in-core");
    npy(&dir, "a.npy", 900);
    std::fs::write(dir.join("c.csv"), "an earlier output").unwrap();
    let child = spawn(
        &dir,
        &[
            "multiply", "a.npy", "a.npy", "-o", "c.csv", "--algo", "naive",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    signal(&child, "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(names(&dir), ["a.npy", "c.csv"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("c.csv")).unwrap(),
        "an earlier output"
    );
}

#[test]
fn a_twice_interrupted_bench_and_an_interrupted_tune_keep_earlier_files() {
    let dir = scratch("bench");
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("results.csv"), "an earlier sweep").unwrap();
    let mut child = spawn(
        &dir,
        &[
            "bench",
            "--sizes",
            "1024..4096x2",
            "--algo",
            "naive",
            "--reps",
            "1",
            "--out",
            "out",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    // The first signal asks for a clean stop after the current point; a
    // second, before that point ends, quits at once. The second is sent
    // only once the first has been handled: two signals sent back to back
    // can merge into one while the first is still pending, and then the
    // bench would rightly stop cleanly and write its results.
    signal(&child, "TERM");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains("finishing this point") {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
    if seen.contains("finishing this point") {
        signal(&child, "TERM");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(names(&out_dir), ["results.csv"]);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("results.csv")).unwrap(),
        "an earlier sweep"
    );

    std::fs::write(dir.join("tuning.toml"), "# an earlier tuning\n").unwrap();
    let child = spawn(&dir, &["tune", "--quick", "--reps", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(
        std::fs::read_to_string(dir.join("tuning.toml")).unwrap(),
        "# an earlier tuning\n"
    );
    assert!(
        !names(&dir).iter().any(|n| n.contains("partial")),
        "{:?}",
        names(&dir)
    );
}
