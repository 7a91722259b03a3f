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

/// Compiles `source` with `compiler` against the library and runs it;
/// `None` where the compiler is missing.
fn build_and_run(compiler: &str, source: &str, extra: &[&str]) -> Option<String> {
    if Command::new(compiler).arg("--version").output().is_err() {
        eprintln!("{compiler} is not installed: {source} skipped");
        return None;
    }
    let lib = library_dir();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(source);
    let out = std::env::temp_dir().join(format!("fastmm-blas-{source}-{}", std::process::id()));
    let built = Command::new(compiler)
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lfastmm_blas")
        .args(extra)
        .output()
        .expect("the compiler runs");
    assert!(
        built.status.success(),
        "{compiler} {source}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
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
