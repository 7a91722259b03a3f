//! `fastmm exec -- COMMAND [ARGS…]`: runs an unchanged program with
//! libfastmm_blas preloaded, so that its BLAS matrix products (numpy's
//! `a @ b`, a C or Fortran program's `dgemm_`) run on fastmm. The
//! command replaces this process: its exit status is the command's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;

use crate::common::Outcome;

/// The library's file name.
const LIBRARY: &str = "libfastmm_blas.so";

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The library to preload (default: FASTMM_BLAS_LIB, else
    /// libfastmm_blas.so beside this executable, as `cargo build
    /// --release -p fastmm-blas` puts it).
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
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

/// The library `args` name, checked to exist.
fn library(args: &ExecArgs) -> Result<PathBuf> {
    let path = match (&args.library, std::env::var_os("FASTMM_BLAS_LIB")) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) => PathBuf::from(path),
        (None, None) => std::env::current_exe()
            .context("cannot find this executable's directory")?
            .with_file_name(LIBRARY),
    };
    if !path.is_file() {
        bail!(
            "{} does not exist: build it with `cargo build --release -p fastmm-blas`, or name it with --library",
            path.display()
        );
    }
    // The loader resolves a relative LD_PRELOAD entry against the
    // command's directory, not ours.
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// LD_PRELOAD with `library` first, the caller's entries kept after it.
fn preload(library: &Path, existing: Option<OsString>) -> OsString {
    let mut value = OsString::from(library);
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

pub fn run(args: &ExecArgs) -> Result<Outcome> {
    let library = library(args)?;
    if let Some(level) = &args.accuracy {
        level.parse::<fastmm::Accuracy>()?;
    }
    let (program, rest) = args.command.split_first().context("no command given")?;
    let mut command = std::process::Command::new(program);
    command.args(rest).env(
        "LD_PRELOAD",
        preload(&library, std::env::var_os("LD_PRELOAD")),
    );
    if let Some(level) = &args.accuracy {
        command.env("FASTMM_ACCURACY", level);
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
    fn the_library_goes_first_and_the_callers_entries_stay() {
        let lib = Path::new("/x/libfastmm_blas.so");
        assert_eq!(preload(lib, None), OsString::from("/x/libfastmm_blas.so"));
        assert_eq!(
            preload(lib, Some("".into())),
            OsString::from("/x/libfastmm_blas.so")
        );
        assert_eq!(
            preload(lib, Some("/y/a.so".into())),
            OsString::from("/x/libfastmm_blas.so:/y/a.so")
        );
    }
}
