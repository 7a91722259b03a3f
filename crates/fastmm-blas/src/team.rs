//! The process's one team of threads. Preloaded or linked, this library's
//! symbols are global, so it offers its team to the other copies of
//! fastmm in the process (the Python module carries one), which find it
//! by name ([`fastmm::shared_team::SYMBOL`]) and run their parallel
//! regions on it: numpy's products and `fastmm.matmul`'s then share one
//! set of threads instead of two teams spinning against each other.

use std::ffi::{c_int, c_void};

/// Runs `job(data, m)` for every member m of `members` on this library's
/// team; 1 when it ran, 0 (nothing run) where the team is busy or its
/// threads cannot start. The job must not unwind (the callers' callbacks
/// catch their panics).
#[unsafe(no_mangle)]
pub extern "C" fn fastmm_shared_team_v1(
    members: usize,
    job: extern "C" fn(*mut c_void, usize),
    data: *mut c_void,
) -> c_int {
    /// The caller's data, shared by the members as the caller shares it.
    struct Data(*mut c_void);
    // SAFETY: the protocol hands `data` to every member at once, as the
    // caller's own team would; the caller's job is what synchronises it.
    unsafe impl Sync for Data {}
    impl Data {
        fn get(&self) -> *mut c_void {
            self.0
        }
    }
    let data = Data(data);
    // Through `get`, so that the closure holds the Sync wrapper rather
    // than the raw pointer.
    let each = |m: usize| job(data.get(), m);
    match fastmm::run_on_own_team(members, &each) {
        Some(_) => 1,
        None => 0,
    }
}

/// The library's thread count, for threadpoolctl: the controller the
/// `fastmm` Python package registers finds this library among the
/// process's (preloaded, linked, or as `libblas.so.3`) by this symbol and
/// its twin, as it finds the package's own module.
#[unsafe(no_mangle)]
pub extern "C" fn fastmm_get_num_threads() -> c_int {
    c_int::try_from(fastmm::num_threads()).unwrap_or(c_int::MAX)
}

/// Sets the library's thread count (a count below 1 clears it); 0.
#[unsafe(no_mangle)]
pub extern "C" fn fastmm_set_num_threads(threads: c_int) -> c_int {
    let threads = usize::try_from(threads).ok().filter(|&t| t >= 1);
    // Only a count of 0 is refused, and it became None.
    let _ = fastmm::set_num_threads(threads);
    0
}
