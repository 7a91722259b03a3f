//! What a product runs with, from the Python arguments: the device,
//! opened once per process, and the checked options.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use fastmm::{Algorithm, Context, Device, GemmOptions};
use pyo3::prelude::*;

use crate::errors::{to_py, value_error};

/// The device named `device`, opened once per process and kept: opening a
/// GPU costs tens to hundreds of milliseconds. (The library's contexts are
/// values; this cache is the front end's, as the command line holds one.)
pub(crate) fn context(py: Python<'_>, device: &str) -> PyResult<Context> {
    let device: Device = device.parse().map_err(to_py)?;
    if device == Device::Cpu {
        return Ok(Context::cpu());
    }
    static OPENED: OnceLock<Mutex<HashMap<Device, Context>>> = OnceLock::new();
    let opened = OPENED.get_or_init(Default::default);
    let lock = || {
        opened
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some(ctx) = lock().get(&device) {
        return Ok(ctx.clone());
    }
    let ctx = py.detach(|| Context::open(device)).map_err(to_py)?;
    Ok(lock().entry(device).or_insert(ctx).clone())
}

/// The options of `algo` and `threads`, checked: at least one thread, and
/// no more than the hardware has (more would only oversubscribe it).
pub(crate) fn options(algo: &str, threads: Option<i64>) -> PyResult<GemmOptions> {
    let algorithm: Algorithm = algo.parse().map_err(to_py)?;
    let mut opts = GemmOptions::new(algorithm);
    if let Some(threads) = threads {
        let hardware = fastmm::system::available_threads();
        if threads < 1 {
            return Err(value_error(format!(
                "threads={threads}: at least 1 is needed"
            )));
        }
        if threads as u64 > hardware as u64 {
            return Err(value_error(format!(
                "threads={threads} exceeds the {hardware} hardware threads of this machine"
            )));
        }
        opts = opts.threads(threads as usize);
    }
    Ok(opts)
}
