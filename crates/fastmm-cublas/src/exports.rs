//! The exported cuBLAS names: each reads its arguments into a
//! [`RawShape`] and a batch, offers the call to [`crate::takeover`], and hands
//! it to the real cuBLAS unchanged where it is declined. Every name in
//! both API widths (`int` and the `_64` names' `int64_t`).

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::call::{Batch, RawShape};
use crate::settings;
use crate::takeover::{real_fn, take_over, Offer, Outcome, Source};
use crate::types::{self, Handle, Kind, Status};

/// GEMM calls fastmm ran, and calls handed to cuBLAS.
static TAKEN: AtomicU64 = AtomicU64::new(0);
static DECLINED: AtomicU64 = AtomicU64::new(0);

/// The GEMM calls of this process that fastmm has run (for
/// `fastmm.cublas_status()` and other front ends that ask whether a
/// program's products reach fastmm).
#[no_mangle]
pub extern "C" fn fastmm_cublas_taken() -> u64 {
    TAKEN.load(Ordering::Relaxed)
}

/// The GEMM calls of this process that went to cuBLAS unchanged.
#[no_mangle]
pub extern "C" fn fastmm_cublas_declined() -> u64 {
    DECLINED.load(Ordering::Relaxed)
}

/// Calls per (name, what ran): the summary printed at exit.
static SUMMARY: Mutex<Vec<(&'static str, String, u64)>> = Mutex::new(Vec::new());

/// Prints the summary to the log.
extern "C" fn print_summary() {
    let summary = SUMMARY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let total: u64 = summary.iter().map(|(_, _, n)| n).sum();
    settings::get().log(&format!("summary: {total} GEMM calls"));
    for (name, what, count) in summary.iter() {
        settings::get().log(&format!("  {count:>8} × {name}: {what}"));
    }
}

unsafe extern "C" {
    fn atexit(f: extern "C" fn()) -> c_int;
}

/// Logs a call and counts it for the summary (registered at exit on the
/// first call), where a log was asked for.
fn record(name: &'static str, shape: &RawShape, what: &str, key: &str) {
    let settings = settings::get();
    if !settings.logs() {
        return;
    }
    let (m, n, k) = shape.mnk;
    settings.log(&format!(
        "{name} {}{} m={m} n={n} k={k}: {what}",
        op(shape.ops.0),
        op(shape.ops.1)
    ));
    let mut summary = SUMMARY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if summary.is_empty() {
        // SAFETY: registers a plain function with no arguments.
        unsafe { atexit(print_summary) };
    }
    match summary.iter_mut().find(|(n, w, _)| *n == name && w == key) {
        Some(entry) => entry.2 += 1,
        None => summary.push((name, key.to_string(), 1)),
    }
}

fn op(raw: c_int) -> char {
    match raw {
        0 => 'N',
        1 => 'T',
        2 => 'C',
        _ => '?',
    }
}

/// The call offered (where there is an offer: an `Ex` call of mixed or
/// reduced types has none), then passed to `real` where declined.
///
/// # Safety
/// As [`take_over`]'s; `real` makes the same call to the real cuBLAS.
unsafe fn dispatch(
    name: &'static str,
    (shape, offer): (RawShape, Option<Offer>),
    real: impl FnOnce() -> Option<Status>,
) -> Status {
    let outcome = match offer {
        // SAFETY: the caller's contract.
        Some(offer) => unsafe { take_over(offer) },
        None => Outcome::Declined("mixed, reduced or fast-compute types".into()),
    };
    match outcome {
        Outcome::Ran(status, line) => {
            TAKEN.fetch_add(1, Ordering::Relaxed);
            let key = line
                .split([':', ';'])
                .next()
                .unwrap_or_default()
                .to_string();
            record(name, &shape, &line, &key);
            status
        }
        Outcome::Declined(reason) => {
            DECLINED.fetch_add(1, Ordering::Relaxed);
            record(name, &shape, &format!("cuBLAS: {reason}"), "cuBLAS");
            real().unwrap_or_else(|| {
                settings::warn(&format!("{name}: no cuBLAS found to run it"));
                types::NOT_INITIALIZED
            })
        }
    }
}

/// A call's integer arguments, in either API width.
fn raw<I: Into<i64>>(ops: (c_int, c_int), [m, n, k, lda, ldb, ldc]: [I; 6]) -> RawShape {
    RawShape {
        ops,
        mnk: (m.into(), n.into(), k.into()),
        lds: (lda.into(), ldb.into(), ldc.into()),
    }
}

/// A strided batch of `count` products (none where the count is negative,
/// which the check then declines).
fn strided<I: TryInto<usize>>(count: I, strides: (i64, i64, i64)) -> Batch {
    Batch::Strided {
        count: count.try_into().unwrap_or(0),
        strides,
    }
}

/// An offer of a call of `kind`, its shape kept apart for the log.
fn offer(
    handle: Handle,
    kind: Option<Kind>,
    shape: RawShape,
    (ptrs, source): ((u64, u64, u64), Source),
    scalars: (*const c_void, *const c_void),
) -> (RawShape, Option<Offer>) {
    let offer = kind.map(|kind| Offer {
        handle,
        kind,
        shape,
        ptrs,
        source,
        scalars,
    });
    (shape, offer)
}

/// One exported name: its signature, its description and how its
/// arguments become an offer; the real cuBLAS's definition of the same
/// name gets the call, unchanged, where it is declined.
macro_rules! interpose {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),* $(,)?) => $offer:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// cuBLAS's contract for this function.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> Status {
            type F = unsafe extern "C" fn($($ty),*) -> Status;
            static SLOT: OnceLock<Option<usize>> = OnceLock::new();
            const NAME: &CStr =
                match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(name) => name,
                    Err(_) => panic!("a name without NUL"),
                };
            // SAFETY: the program's call, passed on to the real cuBLAS as
            // it was made (F is that name's signature).
            let pass = || unsafe { real_fn::<F>(&SLOT, NAME).map(|f| f($($arg),*)) };
            // SAFETY: the program's call, offered and else passed on.
            unsafe { dispatch(stringify!($name), $offer, pass) }
        }
    };
}

/// `cublas?gemm_v2`: one product of a type.
macro_rules! gemm {
    ($name:ident, $int:ty, $elem:ty, $kind:expr) => {
        interpose! {
            /// cuBLAS's GEMM of this type, taken over where fastmm is
            /// faster at the same accuracy, else cuBLAS's own.
            $name(
                handle: Handle, transa: c_int, transb: c_int, m: $int, n: $int, k: $int,
                alpha: *const $elem, a: *const $elem, lda: $int, b: *const $elem, ldb: $int,
                beta: *const $elem, c: *mut $elem, ldc: $int,
            ) => offer(
                handle,
                Some($kind),
                raw((transa, transb), [m, n, k, lda, ldb, ldc]),
                ((a as u64, b as u64, c as u64), Source::Given(Batch::One)),
                (alpha.cast(), beta.cast()),
            )
        }
    };
}

/// `cublas?gemmStridedBatched`.
macro_rules! gemm_strided {
    ($name:ident, $int:ty, $elem:ty, $kind:expr) => {
        interpose! {
            /// cuBLAS's strided-batch GEMM of this type, taken over where
            /// fastmm is faster at the same accuracy, else cuBLAS's own.
            $name(
                handle: Handle, transa: c_int, transb: c_int, m: $int, n: $int, k: $int,
                alpha: *const $elem, a: *const $elem, lda: $int, stride_a: i64,
                b: *const $elem, ldb: $int, stride_b: i64, beta: *const $elem, c: *mut $elem,
                ldc: $int, stride_c: i64, count: $int,
            ) => offer(
                handle,
                Some($kind),
                raw((transa, transb), [m, n, k, lda, ldb, ldc]),
                (
                    (a as u64, b as u64, c as u64),
                    Source::Given(strided(count, (stride_a, stride_b, stride_c))),
                ),
                (alpha.cast(), beta.cast()),
            )
        }
    };
}

/// `cublasGemmEx`: taken over where the three types and the compute type
/// are one type's own product ([`Kind::of_ex`]).
macro_rules! gemm_ex {
    ($name:ident, $int:ty) => {
        interpose! {
            /// cuBLAS's typed-by-argument GEMM, taken over for a type's
            /// own product where fastmm is faster at the same accuracy,
            /// else cuBLAS's own.
            $name(
                handle: Handle, transa: c_int, transb: c_int, m: $int, n: $int, k: $int,
                alpha: *const c_void, a: *const c_void, a_type: c_int, lda: $int,
                b: *const c_void, b_type: c_int, ldb: $int, beta: *const c_void,
                c: *mut c_void, c_type: c_int, ldc: $int, compute: c_int, algo: c_int,
            ) => offer(
                handle,
                Kind::of_ex([a_type, b_type, c_type], compute),
                raw((transa, transb), [m, n, k, lda, ldb, ldc]),
                ((a as u64, b as u64, c as u64), Source::Given(Batch::One)),
                (alpha, beta),
            )
        }
    };
}

/// `cublasGemmStridedBatchedEx`.
macro_rules! gemm_strided_ex {
    ($name:ident, $int:ty) => {
        interpose! {
            /// cuBLAS's typed-by-argument strided-batch GEMM, taken over
            /// for a type's own product where fastmm is faster at the
            /// same accuracy, else cuBLAS's own.
            $name(
                handle: Handle, transa: c_int, transb: c_int, m: $int, n: $int, k: $int,
                alpha: *const c_void, a: *const c_void, a_type: c_int, lda: $int,
                stride_a: i64, b: *const c_void, b_type: c_int, ldb: $int, stride_b: i64,
                beta: *const c_void, c: *mut c_void, c_type: c_int, ldc: $int, stride_c: i64,
                count: $int, compute: c_int, algo: c_int,
            ) => offer(
                handle,
                Kind::of_ex([a_type, b_type, c_type], compute),
                raw((transa, transb), [m, n, k, lda, ldb, ldc]),
                (
                    (a as u64, b as u64, c as u64),
                    Source::Given(strided(count, (stride_a, stride_b, stride_c))),
                ),
                (alpha, beta),
            )
        }
    };
}

/// `cublasGemmBatchedEx`: the operands' addresses in device arrays, read
/// on the caller's stream once the call is otherwise taken.
macro_rules! gemm_batched_ex {
    ($name:ident, $int:ty) => {
        interpose! {
            /// cuBLAS's typed-by-argument GEMM over arrays of device
            /// pointers, taken over for a type's own product where
            /// fastmm is faster at the same accuracy, else cuBLAS's own.
            $name(
                handle: Handle, transa: c_int, transb: c_int, m: $int, n: $int, k: $int,
                alpha: *const c_void, a: *const *const c_void, a_type: c_int, lda: $int,
                b: *const *const c_void, b_type: c_int, ldb: $int, beta: *const c_void,
                c: *const *mut c_void, c_type: c_int, ldc: $int, count: $int, compute: c_int,
                algo: c_int,
            ) => offer(
                handle,
                Kind::of_ex([a_type, b_type, c_type], compute),
                raw((transa, transb), [m, n, k, lda, ldb, ldc]),
                (
                    (0, 0, 0),
                    Source::Arrays {
                        arrays: (a as u64, b as u64, c as u64),
                        count: count.into(),
                    },
                ),
                (alpha, beta),
            )
        }
    };
}

gemm!(cublasSgemm_v2, c_int, f32, Kind::S);
gemm!(cublasDgemm_v2, c_int, f64, Kind::D);
gemm!(cublasCgemm_v2, c_int, [f32; 2], Kind::C);
gemm!(cublasZgemm_v2, c_int, [f64; 2], Kind::Z);
gemm!(cublasSgemm_v2_64, i64, f32, Kind::S);
gemm!(cublasDgemm_v2_64, i64, f64, Kind::D);
gemm!(cublasCgemm_v2_64, i64, [f32; 2], Kind::C);
gemm!(cublasZgemm_v2_64, i64, [f64; 2], Kind::Z);
gemm_strided!(cublasSgemmStridedBatched, c_int, f32, Kind::S);
gemm_strided!(cublasDgemmStridedBatched, c_int, f64, Kind::D);
gemm_strided!(cublasCgemmStridedBatched, c_int, [f32; 2], Kind::C);
gemm_strided!(cublasZgemmStridedBatched, c_int, [f64; 2], Kind::Z);
gemm_strided!(cublasSgemmStridedBatched_64, i64, f32, Kind::S);
gemm_strided!(cublasDgemmStridedBatched_64, i64, f64, Kind::D);
gemm_strided!(cublasCgemmStridedBatched_64, i64, [f32; 2], Kind::C);
gemm_strided!(cublasZgemmStridedBatched_64, i64, [f64; 2], Kind::Z);
gemm_ex!(cublasGemmEx, c_int);
gemm_ex!(cublasGemmEx_64, i64);
gemm_strided_ex!(cublasGemmStridedBatchedEx, c_int);
gemm_strided_ex!(cublasGemmStridedBatchedEx_64, i64);
gemm_batched_ex!(cublasGemmBatchedEx, c_int);
gemm_batched_ex!(cublasGemmBatchedEx_64, i64);
