//! `fastmm exec -- COMMAND [ARGS…]`: runs an unchanged program with
//! libfastmm_blas preloaded, so that its BLAS matrix products (numpy's
//! `a @ b`, a C or Fortran program's `dgemm_`) run on fastmm; with
//! `--cublas`, libfastmm_cublas too, so that its cuBLAS GEMM calls
//! (torch's, CuPy's) run on fastmm where that is faster at the same
//! accuracy. The command replaces this process: its exit status is the
//! command's. The BLAS it shadows (numpy's OpenBLAS, which still serves
//! LAPACK and the other routines) is told to let its idle threads sleep,
//! unless the caller says otherwise (`OPENBLAS_THREAD_TIMEOUT`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;

use crate::common::Outcome;

/// The BLAS library's file name.
const LIBRARY: &str = "libfastmm_blas.so";
/// The cuBLAS interposer's file name.
const INTERPOSER: &str = "libfastmm_cublas.so";

/// What the shadowed OpenBLAS is told where the library is preloaded and
/// the caller has not set it: its idle threads sleep at once instead of
/// spinning for 2^28 cycles after they start and after each routine of
/// theirs. Those spinning threads took the CPU that fastmm's team needs:
/// numpy's wheel starts them at import (a 64³ complex128 `a @ b` took
/// 21 µs in the first 50 ms, 12 µs after), and after each LAPACK routine
/// (a 1000² `a @ b` right after `np.linalg.solve` 11.4–13.0 ms, 9.0–9.3
/// with them asleep; the solve itself took as long either way).
const OPENBLAS_QUIET: (&str, &str) = ("OPENBLAS_THREAD_TIMEOUT", "4");

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The library to preload (default: FASTMM_BLAS_LIB, else
    /// libfastmm_blas.so beside this executable, as `cargo build
    /// --release -p fastmm-blas` puts it).
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// Also preload the cuBLAS interposer, so that the program's cuBLAS
    /// GEMM calls run on fastmm where its plan is faster.
    #[arg(long)]
    cublas: bool,
    /// The interposer to preload with --cublas (default:
    /// FASTMM_CUBLAS_LIB, else libfastmm_cublas.so beside this
    /// executable, as `cargo build --release -p fastmm-cublas` puts it).
    #[arg(long, value_name = "PATH")]
    cublas_library: Option<PathBuf>,
    /// Leave the program's BLAS as it is (with --cublas: the GPU's
    /// products only).
    #[arg(long)]
    no_blas: bool,
    /// The accuracy level of the products (FASTMM_ACCURACY for the
    /// library; default: native).
    #[arg(long, value_name = "LEVEL")]
    accuracy: Option<String>,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// The library `named` (else the environment's `variable`, else `file`
/// beside this executable), checked to exist; `package` builds it.
fn library(named: Option<&PathBuf>, variable: &str, file: &str, package: &str) -> Result<PathBuf> {
    let path = match (named, std::env::var_os(variable)) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) => PathBuf::from(path),
        (None, None) => std::env::current_exe()
            .context("cannot find this executable's directory")?
            .with_file_name(file),
    };
    if !path.is_file() {
        bail!(
            "{} does not exist: build it with `cargo build --release -p {package}`, or name it",
            path.display()
        );
    }
    // The loader resolves a relative LD_PRELOAD entry against the
    // command's directory, not ours.
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// The libraries `args` preload, in order.
fn libraries(args: &ExecArgs) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    if !args.no_blas {
        found.push(library(
            args.library.as_ref(),
            "FASTMM_BLAS_LIB",
            LIBRARY,
            "fastmm-blas",
        )?);
    }
    if args.cublas {
        found.push(library(
            args.cublas_library.as_ref(),
            "FASTMM_CUBLAS_LIB",
            INTERPOSER,
            "fastmm-cublas",
        )?);
    }
    if found.is_empty() {
        bail!("--no-blas without --cublas preloads nothing");
    }
    Ok(found)
}

/// LD_PRELOAD with `libraries` first, the caller's entries kept after
/// them.
fn preload(libraries: &[PathBuf], existing: Option<OsString>) -> OsString {
    let mut value = OsString::new();
    for (i, library) in libraries.iter().enumerate() {
        if i > 0 {
            value.push(":");
        }
        value.push(library);
    }
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// [`OPENBLAS_QUIET`] where the BLAS library is preloaded and the
/// caller's environment (`existing`) does not set it.
fn quiet_openblas(
    args: &ExecArgs,
    existing: Option<OsString>,
) -> Option<(&'static str, &'static str)> {
    (!args.no_blas && existing.is_none()).then_some(OPENBLAS_QUIET)
}

pub fn run(args: &ExecArgs) -> Result<Outcome> {
    let libraries = libraries(args)?;
    if let Some(level) = &args.accuracy {
        level.parse::<fastmm::Accuracy>()?;
    }
    let (program, rest) = args.command.split_first().context("no command given")?;
    let mut command = std::process::Command::new(program);
    command.args(rest).env(
        "LD_PRELOAD",
        preload(&libraries, std::env::var_os("LD_PRELOAD")),
    );
    if let Some(level) = &args.accuracy {
        command.env("FASTMM_ACCURACY", level);
    }
    if let Some((name, value)) = quiet_openblas(args, std::env::var_os(OPENBLAS_QUIET.0)) {
        command.env(name, value);
    }
    use std::os::unix::process::CommandExt as _;
    // Returns only when the command could not be started.
    let e = command.exec();
    bail!("cannot run {}: {e}", Path::new(program).display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shadowed_openblas_is_quieted_unless_the_caller_chose() {
        let args = |extra: &[&str]| {
            use clap::Parser as _;
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                exec: ExecArgs,
            }
            let words = ["fastmm"].iter().chain(extra).chain(&["--", "true"]);
            Cli::parse_from(words).exec
        };
        let plain = args(&[]);
        assert_eq!(quiet_openblas(&plain, None), Some(OPENBLAS_QUIET));
        assert_eq!(quiet_openblas(&plain, Some("30".into())), None);
        let gpu_only = args(&["--cublas", "--no-blas"]);
        assert_eq!(quiet_openblas(&gpu_only, None), None);
    }

    #[test]
    fn the_libraries_go_first_and_the_callers_entries_stay() {
        let lib = [PathBuf::from("/x/libfastmm_blas.so")];
        assert_eq!(preload(&lib, None), OsString::from("/x/libfastmm_blas.so"));
        assert_eq!(
            preload(&lib, Some("".into())),
            OsString::from("/x/libfastmm_blas.so")
        );
        assert_eq!(
            preload(&lib, Some("/y/a.so".into())),
            OsString::from("/x/libfastmm_blas.so:/y/a.so")
        );
        let both = [lib[0].clone(), PathBuf::from("/x/libfastmm_cublas.so")];
        assert_eq!(
            preload(&both, Some("/y/a.so".into())),
            OsString::from("/x/libfastmm_blas.so:/x/libfastmm_cublas.so:/y/a.so")
        );
    }
}
