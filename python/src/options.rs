//! What a product runs with, from the Python arguments: the device,
//! opened once per process, and the checked options.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use fastmm::{
    Accuracy, Algorithm, Context, Device, DeviceList, GemmOptions, Machine, Report, Streamed,
    Timing,
};
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

/// The timing of an executed plan as Python reports it: a team's host
/// traffic (what its GPUs' bands moved) as a streamed product's, the
/// share of the time in products being a team's to measure, not ours.
pub(crate) fn timing_of(report: Report) -> Timing {
    let Some(moved) = report
        .communication
        .filter(|_| report.timing.streamed.is_none())
    else {
        return report.timing;
    };
    Timing {
        streamed: Some(Streamed {
            upload_bytes: moved.upload_bytes,
            download_bytes: moved.download_bytes,
            products_fraction: f64::NAN,
            staging_seconds: (
                moved.shares.iter().map(|s| s.staging_ms).sum::<f64>() / 1e3,
                0.0,
            ),
        }),
        ..report.timing
    }
}

/// The machine named `device` (one device, or several GPUs as a team:
/// `"cuda:0,1"`, `"cuda:all"`), opened once per process and kept.
pub(crate) fn machine(py: Python<'_>, device: &str) -> PyResult<Machine> {
    // The default, without parsing: a small product's whole call is a
    // microsecond or two.
    if device == "cpu" {
        return Ok(Context::cpu().into());
    }
    let list: DeviceList = device.parse().map_err(to_py)?;
    if !list.is_team() {
        return context(py, device).map(Machine::from);
    }
    static OPENED: OnceLock<Mutex<HashMap<String, Machine>>> = OnceLock::new();
    let opened = OPENED.get_or_init(Default::default);
    let lock = || {
        opened
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let key = list.to_string();
    if let Some(machine) = lock().get(&key) {
        return Ok(machine.clone());
    }
    let machine = py.detach(|| Machine::open_list(&list)).map_err(to_py)?;
    Ok(lock().entry(key).or_insert(machine).clone())
}

/// The options of `algo`, `threads` and `accuracy`, checked: at least one
/// thread, and no more than the hardware has (more would only
/// oversubscribe it); an accuracy level the library names.
pub(crate) fn options(algo: &str, threads: Option<i64>, accuracy: &str) -> PyResult<GemmOptions> {
    // The defaults without parsing (see `runner`).
    let algorithm: Algorithm = match algo {
        "auto" => Algorithm::Auto,
        _ => algo.parse().map_err(to_py)?,
    };
    let accuracy: Accuracy = match accuracy {
        "native" => Accuracy::Native,
        _ => accuracy.parse().map_err(to_py)?,
    };
    let mut opts = GemmOptions::new(algorithm).accuracy(accuracy);
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
