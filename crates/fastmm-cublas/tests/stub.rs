//! The interposer in an unchanged C program where no GPU takes a call over:
//! a stand-in cuBLAS (`tests/programs/cublas_stub.c`) records what each
//! call received, and the program's output must be the same with and
//! without `libfastmm_cublas.so` preloaded — every argument passed on
//! intact, cuBLAS's statuses returned as they are — while the log says
//! why each call stayed cuBLAS's. Compiled with the system's `cc`; a
//! missing compiler skips the test, saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The directory holding the built `libfastmm_cublas.so`.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let lib = exe
        .parent()
        .expect("the deps directory")
        .join("libfastmm_cublas.so");
    assert!(
        lib.exists(),
        "libfastmm_cublas.so is not beside {}",
        exe.display()
    );
    lib
}

/// The stand-in cuBLAS and the program linked against it, in a fresh
/// directory; None where `cc` is missing.
fn build() -> Option<PathBuf> {
    if Command::new("cc").arg("--version").output().is_err() {
        eprintln!("cc is not installed: the interposer's program test skipped");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("fastmm-cublas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let cc = |args: &[&str]| {
        let out = Command::new("cc")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("cc runs");
        assert!(
            out.status.success(),
            "cc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let stub = src.join("cublas_stub.c");
    let caller = src.join("caller.c");
    cc(&[
        "-shared",
        "-fPIC",
        "-Wl,-soname,libcublas.so.13",
        stub.to_str().unwrap(),
        "-o",
        "libcublas.so.13",
    ]);
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    cc(&[
        caller.to_str().unwrap(),
        "-o",
        "caller",
        "-L.",
        "-l:libcublas.so.13",
        &rpath,
    ]);
    Some(dir)
}

fn run(dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(dir.join("caller"));
    // The test's own environment may name a real cuBLAS or a log.
    for name in [
        "FASTMM_CUBLAS",
        "FASTMM_CUBLAS_LOG",
        "FASTMM_CUBLAS_REAL",
        "LD_PRELOAD",
    ] {
        command.env_remove(name);
    }
    let out = command
        .envs(env.iter().copied())
        .output()
        .expect("the program runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn calls_reach_cublas_intact_where_none_is_taken_over() {
    let Some(dir) = build() else {
        return;
    };
    let lib = library();
    let plain = run(&dir, &[]);
    let preload = lib.to_str().unwrap();
    let interposed = run(
        &dir,
        &[("LD_PRELOAD", preload), ("FASTMM_CUBLAS_LOG", "stderr")],
    );
    let off = run(
        &dir,
        &[
            ("LD_PRELOAD", preload),
            ("FASTMM_CUBLAS", "off"),
            ("FASTMM_CUBLAS_LOG", "1"),
        ],
    );
    let text = |o: &Output| String::from_utf8_lossy(&o.stdout).to_string();
    let lines: Vec<String> = text(&plain).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 17, "{}", text(&plain));
    // cuBLAS's refusal reaches the program as cuBLAS's status.
    assert!(lines[4].starts_with("7 cublasDgemm_v2 ") && lines[4].contains("mnk=-1,5,3"));
    assert!(lines
        .iter()
        .enumerate()
        .all(|(i, l)| i == 4 || l.starts_with("0 ")));
    assert!(lines[8].contains("mnk=70000000000,5,3"), "{}", lines[8]);
    assert!(lines[10].contains("ops=2,0") && lines[10].contains("alpha=0.5 beta=0 alpha.im=2"));
    assert!(lines[11].contains("strides=21,0,35 count=3"));
    assert!(
        lines[16].contains("a=0/7 b=32768/3 c=65536/7")
            && lines[16].contains("count=2 compute=70 algo=-1 a1=800 b1=33568 c1=66336")
    );
    // Preloaded: the same calls with the same arguments and statuses.
    assert_eq!(text(&interposed), text(&plain));
    assert_eq!(text(&off), text(&plain));
    let log = String::from_utf8_lossy(&interposed.stderr);
    for reason in [
        "cublasDgemm_v2 NN m=-1 n=5 k=3: cuBLAS: a negative dimension",
        "cublasDgemm_v2 NN m=7 n=5 k=3: cuBLAS: a leading dimension too small",
        "cublasDgemm_v2 NN m=0 n=5 k=3: cuBLAS: an empty product",
        "cublasZgemm_v2 CN m=4 n=4 k=4: cuBLAS: a conjugate transposition",
        "cublasDgemmStridedBatched NN m=7 n=5 k=3: cuBLAS: outputs that overlap",
        "cublasGemmEx NN m=7 n=5 k=3: cuBLAS: mixed, reduced or fast-compute types",
        "summary: 17 GEMM calls",
        "counts: taken 0 declined 17",
    ] {
        assert!(log.contains(reason), "{reason:?} not in the log:\n{log}");
    }
    // Where a call is otherwise one to take, no GPU has a context here.
    assert!(
        log.contains("cublasSgemm_v2 NN m=7 n=5 k=3: cuBLAS: no CUDA context is current"),
        "{log}"
    );
    assert!(String::from_utf8_lossy(&off.stderr).contains("cuBLAS: FASTMM_CUBLAS=off"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every name the interposer intercepts is exported, in both API widths.
#[test]
fn the_intercepted_names_are_exported() {
    let Ok(out) = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library())
        .output()
    else {
        eprintln!("nm is not installed: the export check skipped");
        return;
    };
    let symbols = String::from_utf8_lossy(&out.stdout);
    let mut names = Vec::new();
    for t in ["S", "D", "C", "Z"] {
        names.push(format!("cublas{t}gemm_v2"));
        names.push(format!("cublas{t}gemmStridedBatched"));
    }
    names.extend(
        [
            "cublasGemmEx",
            "cublasGemmStridedBatchedEx",
            "cublasGemmBatchedEx",
        ]
        .map(String::from),
    );
    for name in names.clone() {
        names.push(match name.strip_suffix("_v2") {
            Some(_) => format!("{name}_64"),
            None => format!("{name}_64"),
        });
    }
    for name in &names {
        assert!(
            symbols.lines().any(|l| l.ends_with(&format!(" T {name}"))),
            "{name} is not exported"
        );
    }
    assert_eq!(names.len(), 22);
}
