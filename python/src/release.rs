//! Running library work with the GIL released, and Ctrl-C.
//!
//! Every product runs with the GIL released, so other Python threads go on
//! meanwhile. Python handles SIGINT only on its main thread, between
//! bytecodes, so a long product runs on a helper thread while the calling
//! thread waits in short slices and asks Python for pending signals in
//! between; on Ctrl-C it raises the product's [`Interrupt`], which the
//! library checks between blocks, waits for the helper to stop, and
//! raises `KeyboardInterrupt`. Short products run on the calling thread:
//! a thread costs tens of microseconds, and they end before a user could
//! press a key. The tiniest keep the GIL, as numpy's own small loops do:
//! releasing and taking it back cost as much as the product itself.

use std::sync::{Condvar, Mutex};

use fastmm::{Error, Interrupt};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors::to_py;
use crate::tunables::SIGNAL_POLL;

thread_local! {
    /// The interrupt of the products this thread waits for: one flag per
    /// thread, made once, so that Ctrl-C stops the main thread's product
    /// and no other thread's.
    static STOP: Interrupt = Interrupt::leak();
}

/// Runs `work` with the GIL released. When `long`, on a helper thread that
/// Ctrl-C (or any signal whose handler raises) interrupts; `work` receives
/// the interrupt to put in its options.
/// How a product's caller waits for it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// On the calling thread, GIL held: products of a microsecond or so.
    Holding,
    /// On the calling thread, GIL released.
    Released,
    /// On a helper thread, GIL released, Ctrl-C checked meanwhile.
    Interruptible,
}

pub(crate) fn released<R, F>(py: Python<'_>, wait: Wait, work: F) -> PyResult<R>
where
    R: Send,
    F: FnOnce(Option<Interrupt>) -> Result<R, Error> + Send,
{
    match wait {
        Wait::Holding => return work(None).map_err(to_py),
        Wait::Released => return py.detach(|| work(None)).map_err(to_py),
        Wait::Interruptible => {}
    }
    let stop = STOP.with(|stop| *stop);
    stop.clear();
    let done = (Mutex::new(false), Condvar::new());
    std::thread::scope(|scope| {
        let helper = scope.spawn(|| {
            // Set even when `work` panics, so that the wait below ends.
            struct Finished<'a>(&'a (Mutex<bool>, Condvar));
            impl Drop for Finished<'_> {
                fn drop(&mut self) {
                    let (flag, ready) = self.0;
                    *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
                    ready.notify_all();
                }
            }
            let _finished = Finished(&done);
            work(Some(stop))
        });
        let mut interrupted = None;
        loop {
            let finished = py.detach(|| {
                let (flag, ready) = &done;
                let guard = flag.lock().unwrap_or_else(|p| p.into_inner());
                let (guard, _) = ready
                    .wait_timeout_while(guard, SIGNAL_POLL, |finished| !*finished)
                    .unwrap_or_else(|p| p.into_inner());
                *guard
            });
            if finished {
                break;
            }
            if let Err(signal) = py.check_signals() {
                // Stop the product at its next check, then wait for it:
                // its threads read the caller's arrays.
                stop.raise();
                interrupted = Some(signal);
                break;
            }
        }
        let outcome = py.detach(|| helper.join());
        match (interrupted, outcome) {
            (Some(signal), _) => Err(signal),
            (None, Ok(result)) => result.map_err(to_py),
            (None, Err(_)) => Err(PyRuntimeError::new_err(
                "the product panicked; this is a fastmm bug, please report it",
            )),
        }
    })
}
