//! What the interposer does, read once from the environment at its first
//! call:
//!
//! * `FASTMM_CUBLAS`: `off` (or `0`) hands every call to cuBLAS (the
//!   log still says so); default on;
//! * `FASTMM_ACCURACY`: the accuracy level of the products taken over
//!   (default `native`: the digits of the call it replaces);
//! * `FASTMM_CUBLAS_ALGO`: the algorithm (default `auto`: fastmm's
//!   fastest product that meets the level, which may be cuBLAS's own, in
//!   which case the call goes to cuBLAS unchanged);
//! * `FASTMM_CUBLAS_LOG`: a line per call and a summary at exit, on
//!   stderr (`1` or `stderr`) or appended to the file it names.
//!
//! A value that does not parse is reported once on stderr and its
//! default used.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

use fastmm::GemmOptions;

/// The settings of this process.
pub struct Settings {
    /// Whether calls may be taken over at all.
    pub enabled: bool,
    /// The options of the products taken over.
    pub opts: GemmOptions,
    /// Where the log goes, if anywhere.
    log: Option<Mutex<Box<dyn Write + Send>>>,
}

/// The settings, read on the first call.
pub fn get() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| from_values(&|name| std::env::var(name).ok()))
}

/// The settings from `var` (the environment, or a test's table).
pub fn from_values(var: &dyn Fn(&str) -> Option<String>) -> Settings {
    let enabled = !matches!(
        var("FASTMM_CUBLAS").as_deref().map(str::trim),
        Some("off" | "0" | "false" | "no")
    );
    let opts = fastmm::config::front_end_options(var, "FASTMM_CUBLAS_ALGO", &warn);
    let log: Option<Box<dyn Write + Send>> = match var("FASTMM_CUBLAS_LOG").as_deref() {
        None | Some("" | "0") => None,
        Some("1" | "stderr") => Some(Box::new(std::io::stderr())),
        Some(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            Ok(file) => Some(Box::new(file)),
            Err(e) => {
                warn(&format!("FASTMM_CUBLAS_LOG={path}: {e}; logging to stderr"));
                Some(Box::new(std::io::stderr()))
            }
        },
    };
    Settings {
        enabled,
        opts,
        log: log.map(Mutex::new),
    }
}

impl Settings {
    /// Whether a log was asked for.
    pub fn logs(&self) -> bool {
        self.log.is_some()
    }

    /// One line to the log, if any (a failed write is not the caller's
    /// problem).
    pub fn log(&self, line: &str) {
        if let Some(log) = &self.log {
            let mut out = log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = writeln!(out, "fastmm cublas: {line}");
            let _ = out.flush();
        }
    }
}

/// One line on stderr.
pub(crate) fn warn(text: &str) {
    eprintln!("fastmm cublas: {text}");
}
