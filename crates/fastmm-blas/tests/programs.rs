//! Unchanged programs linked against `libfastmm_blas`: a C program
//! (CBLAS row-major, the Fortran symbol column-major, NaN in C under
//! β = 0) and a Fortran program (DGEMM, ZGEMM with a conjugate
//! transpose), compiled with the system's `cc` and `gfortran` and run
//! against the library this test was built with. A compiler that is not
//! installed skips its program, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory holding the built `libfastmm_blas.so` (beside this
/// test's executable).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe.parent().expect("the deps directory").to_path_buf();
    assert!(
        dir.join("libfastmm_blas.so").exists(),
        "libfastmm_blas.so is not beside {}",
        exe.display()
    );
    dir
}

/// Compiles `source` with `compiler` against the library (or, with
/// `-shared` among `extra`, into a library of its own) at a fresh path;
/// `None` where the compiler is missing.
fn build(compiler: &str, source: &str, extra: &[&str]) -> Option<PathBuf> {
    if Command::new(compiler).arg("--version").output().is_err() {
        eprintln!("{compiler} is not installed: {source} skipped");
        return None;
    }
    let lib = library_dir();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(source);
    let out = std::env::temp_dir().join(format!("fastmm-blas-{}-{source}", std::process::id()));
    let mut command = Command::new(compiler);
    command.arg(&src).arg("-o").arg(&out);
    if !extra.contains(&"-shared") {
        command
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lfastmm_blas");
    }
    let built = command.args(extra).output().expect("the compiler runs");
    assert!(
        built.status.success(),
        "{compiler} {source}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    Some(out)
}

/// Compiles `source` with `compiler` against the library and runs it,
/// which must succeed: its standard output; `None` where the compiler is
/// missing.
fn build_and_run(compiler: &str, source: &str, extra: &[&str]) -> Option<String> {
    let out = build(compiler, source, extra)?;
    let ran = Command::new(&out).output().expect("the program runs");
    let _ = std::fs::remove_file(&out);
    let text = String::from_utf8_lossy(&ran.stdout).to_string();
    assert!(
        ran.status.success(),
        "{source}: {text}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    Some(text)
}

/// The BLAS routines the library does not compute reach the library it
/// forwards them to (`FASTMM_BLAS_FALLBACK`, here a stand-in BLAS) with
/// their arguments intact — pointers, integers and floats by value, float
/// and complex returns; one that no library defines ends the program with
/// its name.
#[test]
fn other_routines_are_forwarded_to_the_fallback() {
    let Some(fallback) = build("cc", "fallback.c", &["-shared", "-fPIC"]) else {
        return;
    };
    let Some(program) = build("cc", "forward.c", &["-lm"]) else {
        return;
    };
    let run = |args: &[&str], fallback: &Path| {
        Command::new(&program)
            .args(args)
            .env("FASTMM_BLAS_FALLBACK", fallback)
            .output()
            .expect("the program runs")
    };
    let ran = run(&[], &fallback);
    let text = String::from_utf8_lossy(&ran.stdout).to_string();
    assert!(
        ran.status.success() && text.starts_with("ok"),
        "{text}{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // With no BLAS on the default paths, exactly the stand-in's five
    // routines are found; with one, at least they.
    let count: usize = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    assert!(count >= 5, "{text}");
    // dscal_ is in no library when the fallback lacks it and no BLAS is
    // installed where Debian puts one: the process ends naming it.
    let installed = fastmm_blas::forward::DEFAULT_FALLBACKS
        .iter()
        .any(|path| Path::new(path).exists());
    if !installed {
        let ran = run(&["missing"], &fallback);
        let err = String::from_utf8_lossy(&ran.stderr);
        assert!(!ran.status.success(), "{err}");
        assert!(
            err.contains("dscal_") && err.contains("FASTMM_BLAS_FALLBACK"),
            "{err}"
        );
        assert!(!String::from_utf8_lossy(&ran.stdout).contains("returned"));
    }
    // A fallback that is this library, or another copy of it (under
    // cargo's LD_LIBRARY_PATH the program loads target/release's copy
    // while this path names deps's), is passed over rather than jumped
    // into forever: the program ends, on the next library or naming the
    // routine.
    let own = library_dir().join("libfastmm_blas.so");
    let ran = Command::new("timeout")
        .arg("60")
        .arg(&program)
        .env("FASTMM_BLAS_FALLBACK", &own)
        .output()
        .expect("the program runs");
    assert_ne!(ran.status.code(), Some(124), "the program hung");
    let text = String::from_utf8_lossy(&ran.stdout);
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(
        text.starts_with("ok") || err.contains("ddot_"),
        "{text}{err}"
    );
    // A fallback that cannot be opened is reported, not fatal by itself.
    let ran = run(&[], Path::new("/nonexistent/libblas.so.3"));
    let err = String::from_utf8_lossy(&ran.stderr);
    assert!(err.contains("cannot be opened"), "{err}");
    let _ = std::fs::remove_file(&program);
    let _ = std::fs::remove_file(&fallback);
}

#[test]
fn a_c_program_runs_on_the_library() {
    if let Some(text) = build_and_run("cc", "gemm.c", &["-lm"]) {
        assert!(text.starts_with("ok"), "{text}");
    }
}

#[test]
fn a_fortran_program_runs_on_the_library() {
    if let Some(text) = build_and_run("gfortran", "gemm.f90", &[]) {
        assert!(text.starts_with("ok"), "{text}");
    }
}
