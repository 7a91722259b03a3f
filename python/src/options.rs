//! What a product runs with, from the Python arguments: the device,
//! opened once per process, and the checked options.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use std::sync::Arc;

use fastmm::{
    Accuracy, Algorithm, Clock, Context, Device, DeviceList, Element, Error, Gemm, GemmOptions,
    Plan, Problem, Streamed, Team, Timing,
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

/// Where a product of host arrays runs: one device, or several GPUs as a
/// team (`"cuda:0,1"`, `"cuda:all"`).
#[derive(Clone)]
pub(crate) enum Runner {
    One(Context),
    Team(Arc<Team>),
}

impl Runner {
    /// The context that plans (a team's first GPU's).
    pub(crate) fn context(&self) -> &Context {
        match self {
            Runner::One(ctx) => ctx,
            Runner::Team(team) => team.context(0),
        }
    }

    /// What `problem` runs with `opts` here: the executor's plan, made
    /// once for every matrix of a batch.
    pub(crate) fn plan(&self, problem: Problem, opts: &GemmOptions) -> Result<Plan, Error> {
        match self {
            Runner::One(ctx) => ctx.plan(problem, opts),
            Runner::Team(team) => team.plan(problem, opts),
        }
    }

    /// Runs `plan` on one product: where the time went, by a benchmark's
    /// clock when `timed` (see [`Clock::Benchmark`]). A team's time is its
    /// whole product (streamed through the GPUs: copies included); how
    /// much of it the GPUs spent in products a team does not measure.
    pub(crate) fn execute<T: Element>(
        &self,
        plan: &Plan,
        product: Gemm<'_, T>,
        timed: bool,
    ) -> Result<Timing, Error> {
        let clock = if timed { Clock::Benchmark } else { Clock::Once };
        match self {
            Runner::One(ctx) => Ok(ctx.execute_clocked(plan, product, clock)?.timing),
            Runner::Team(team) => {
                let report = team.execute(plan, product)?;
                let moved = report.communication.unwrap_or_default();
                Ok(Timing {
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
                })
            }
        }
    }
}

/// The device or team named `device`, opened once per process and kept.
pub(crate) fn runner(py: Python<'_>, device: &str) -> PyResult<Runner> {
    // The default, without parsing: a small product's whole call is a
    // microsecond or two.
    if device == "cpu" {
        return Ok(Runner::One(Context::cpu()));
    }
    let list: DeviceList = device.parse().map_err(to_py)?;
    if !list.is_team() {
        return context(py, device).map(Runner::One);
    }
    static OPENED: OnceLock<Mutex<HashMap<String, Arc<Team>>>> = OnceLock::new();
    let opened = OPENED.get_or_init(Default::default);
    let lock = || {
        opened
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let key = list.to_string();
    if let Some(team) = lock().get(&key) {
        return Ok(Runner::Team(Arc::clone(team)));
    }
    let team = py.detach(|| Team::open_list(&list)).map_err(to_py)?;
    Ok(Runner::Team(Arc::clone(
        lock().entry(key).or_insert_with(|| Arc::new(team)),
    )))
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
