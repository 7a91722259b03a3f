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
    let mpi = device.trim().eq_ignore_ascii_case("mpi");
    if mpi && !cfg!(feature = "mpi") {
        return Err(value_error(
            "device=\"mpi\" needs a fastmm built with MPI (maturin build --features mpi, \
             against an MPI library)",
        ));
    }
    let list: Option<DeviceList> = match mpi {
        true => None,
        false => Some(device.parse().map_err(to_py)?),
    };
    if list.as_ref().is_some_and(|list| !list.is_team()) {
        return context(py, device).map(Machine::from);
    }
    let key = list.as_ref().map_or("mpi".into(), DeviceList::to_string);
    if let Some(machine) = opened().get(&key) {
        return Ok(machine.clone());
    }
    // The job's communicators stay on the thread that joined it, this one
    // (detaching from the interpreter does not change threads).
    let machine = py
        .detach(|| match &list {
            Some(list) => Machine::open_list(list),
            None => Machine::open("mpi"),
        })
        .map_err(to_py)?;
    Ok(opened().entry(key).or_insert(machine).clone())
}

/// The teams and the MPI job opened so far, by name: opened once per
/// process (MPI may be started only once), then shared.
fn opened() -> std::sync::MutexGuard<'static, HashMap<String, Machine>> {
    static OPENED: OnceLock<Mutex<HashMap<String, Machine>>> = OnceLock::new();
    OPENED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Closes the teams and the MPI job opened so far: registered with
/// `atexit`, so that the interpreter's main thread, which joined the job,
/// ends MPI as its rules ask (a rank that exits without it fails the
/// whole `mpirun`).
#[pyfunction]
pub(crate) fn close_machines() {
    let machines: Vec<Machine> = opened().drain().map(|(_, m)| m).collect();
    drop(machines);
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
