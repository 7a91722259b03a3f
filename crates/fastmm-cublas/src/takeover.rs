//! The decision and the product: whether a checked call runs on fastmm's
//! executor, and running it there on the caller's stream. Everything the
//! caller set on its handle is read, never written: the stream (the
//! product is ordered on it), the pointer mode (device scalars stay
//! cuBLAS's: reading them would wait on the stream), the math mode (TF32
//! and the other modes that ask for other arithmetic stay cuBLAS's), and
//! its workspace, which the executor never touches (it keeps its own). A
//! stream that is capturing a graph stays cuBLAS's too: the emulated
//! product waits on the host midway.
//!
//! A call taken over runs only where the executor's plan for it is not
//! cuBLAS's own product (at `auto`, fastmm's fastest product that meets
//! the level: small and skinny products go back to cuBLAS unchanged).

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::sync::{Arc, Mutex, OnceLock};

use fastmm::{
    Algorithm, ComplexForm, Context, DType, Device, Element, Error, GpuCompletion, GpuProduct,
    Problem,
};

use crate::call::{Batch, Call, RawShape};
use crate::real;
use crate::settings;
use crate::types::{self, Handle, Kind, Status};

/// Where a batch's operands are described.
pub enum Source {
    /// Given in the arguments.
    Given(Batch),
    /// Three device arrays of `count` addresses each (A's, B's, C's), read
    /// on the caller's stream once the call is otherwise taken.
    Arrays {
        /// The arrays' device addresses.
        arrays: (u64, u64, u64),
        /// Their length.
        count: i64,
    },
}

/// A GEMM call as the exported name received it.
pub struct Offer {
    /// The caller's handle.
    pub handle: Handle,
    /// The element type.
    pub kind: Kind,
    /// The integer arguments.
    pub shape: RawShape,
    /// The first A, B and C (zero where the batch lists them).
    pub ptrs: (u64, u64, u64),
    /// Where the batch lies.
    pub source: Source,
    /// α and β, as pointers of the handle's pointer mode.
    pub scalars: (*const c_void, *const c_void),
}

/// What became of a call.
pub enum Outcome {
    /// The executor ran it; cuBLAS's status for what happened, and a line
    /// for the log.
    Ran(Status, String),
    /// It goes to cuBLAS, for this reason.
    Declined(String),
}

thread_local! {
    /// Set while this thread runs a product taken over: any cuBLAS call
    /// that reaches this library from inside it goes straight to cuBLAS.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with [`INSIDE`] set.
fn inside<R>(f: impl FnOnce() -> R) -> R {
    INSIDE.with(|flag| flag.set(true));
    let result = f();
    INSIDE.with(|flag| flag.set(false));
    result
}

/// The contexts opened so far, by GPU ordinal (None where opening
/// failed: that is not tried again).
static CONTEXTS: Mutex<Vec<(usize, Option<Arc<Context>>)>> = Mutex::new(Vec::new());

/// The context of GPU `ordinal`, opened once.
fn context(ordinal: usize) -> Result<Arc<Context>, String> {
    let mut opened = CONTEXTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, context)) = opened.iter().find(|(o, _)| *o == ordinal) {
        return context
            .clone()
            .ok_or_else(|| format!("cuda:{ordinal} could not be opened"));
    }
    let context = Context::open(Device::Cuda(ordinal)).map(Arc::new);
    if let Err(e) = &context {
        settings::warn(&format!("cuda:{ordinal}: {e}; its calls stay cuBLAS's"));
    }
    opened.push((ordinal, context.as_ref().ok().cloned()));
    context.map_err(|e| e.to_string())
}

/// The real cuBLAS's `name`, typed as `F` (a function pointer type of the
/// signature cuBLAS gives that name), looked up once through `slot`.
///
/// # Safety
/// `F` is an `unsafe extern "C" fn` type matching `name`'s signature.
pub unsafe fn real_fn<F: Copy>(slot: &'static OnceLock<Option<usize>>, name: &CStr) -> Option<F> {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    // SAFETY: a non-null code address of the named function, whose
    // signature is F's (the caller's contract).
    real::definition(slot, name)
        .map(|address| unsafe { std::mem::transmute_copy::<usize, F>(&address) })
}

/// Reads one integer state of the handle through the real cuBLAS getter
/// `name`.
fn handle_state(
    handle: Handle,
    (slot, name): (&'static OnceLock<Option<usize>>, &CStr),
) -> Result<c_int, String> {
    type Getter = unsafe extern "C" fn(Handle, *mut c_int) -> Status;
    // SAFETY: cublasGetPointerMode_v2 and cublasGetMathMode take a handle
    // and an int out-pointer.
    let getter = unsafe { real_fn::<Getter>(slot, name) }.ok_or("cuBLAS's getters are missing")?;
    let mut value: c_int = 0;
    // SAFETY: the caller's handle and a local out-pointer.
    match unsafe { getter(handle, &mut value) } {
        types::SUCCESS => Ok(value),
        status => Err(format!("{} returned {status}", name.to_string_lossy())),
    }
}

/// The handle's stream (0: the legacy default stream).
fn handle_stream(handle: Handle) -> Result<usize, String> {
    type Getter = unsafe extern "C" fn(Handle, *mut *mut c_void) -> Status;
    static SLOT: OnceLock<Option<usize>> = OnceLock::new();
    // SAFETY: cublasGetStream_v2 takes a handle and a stream out-pointer.
    let getter = unsafe { real_fn::<Getter>(&SLOT, c"cublasGetStream_v2") }
        .ok_or("cublasGetStream_v2 is missing")?;
    let mut stream: *mut c_void = std::ptr::null_mut();
    // SAFETY: the caller's handle and a local out-pointer.
    match unsafe { getter(handle, &mut stream) } {
        types::SUCCESS => Ok(stream as usize),
        status => Err(format!("cublasGetStream_v2 returned {status}")),
    }
}

/// α and β as read from host memory.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalars {
    Real(f64, f64),
    Complex([f64; 2], [f64; 2]),
}

/// Reads α and β of `kind` from host pointers.
///
/// # Safety
/// Both point to a host scalar of `kind`'s type.
unsafe fn scalars(kind: Kind, alpha: *const c_void, beta: *const c_void) -> Scalars {
    // SAFETY: the caller's contract, each pointer read as its type.
    unsafe {
        match kind {
            Kind::S => Scalars::Real(
                f64::from(*alpha.cast::<f32>()),
                f64::from(*beta.cast::<f32>()),
            ),
            Kind::D => Scalars::Real(*alpha.cast::<f64>(), *beta.cast::<f64>()),
            Kind::C => {
                let (a, b) = (*alpha.cast::<[f32; 2]>(), *beta.cast::<[f32; 2]>());
                Scalars::Complex(a.map(f64::from), b.map(f64::from))
            }
            Kind::Z => Scalars::Complex(*alpha.cast::<[f64; 2]>(), *beta.cast::<[f64; 2]>()),
        }
    }
}

/// One call, taken over or declined (see the module's text).
///
/// # Safety
/// The arguments are those of a cuBLAS GEMM call of `kind` made by the
/// program: a live handle, host or device scalars by its pointer mode,
/// and device operands as the shape and batch describe them.
pub unsafe fn take_over(offer: Offer) -> Outcome {
    let settings = settings::get();
    if !settings.enabled {
        return Outcome::Declined("FASTMM_CUBLAS=off".into());
    }
    if INSIDE.with(Cell::get) {
        return Outcome::Declined("called from inside fastmm".into());
    }
    // SAFETY: the caller's contract.
    match unsafe { prepare(offer) } {
        Ok((context, call, scalars, stream, algorithm)) => {
            inside(|| run(&context, &call, scalars, stream, &algorithm, settings.opts))
        }
        Err(reason) => Outcome::Declined(reason),
    }
}

/// What the executor's plan chose for a shape: the key is (GPU, kind,
/// m, n, k, products of a strided batch, whether C is read).
type Shape = (usize, Kind, usize, usize, usize, usize, bool);

/// The plans' choices so far, by shape, so that a program's repeated
/// calls plan once (a small product's call must cost about what cuBLAS's
/// own does): the algorithm's name, None for cuBLAS's own product.
static CHOSEN: Mutex<Vec<(Shape, Option<String>)>> = Mutex::new(Vec::new());

/// The most shapes [`CHOSEN`] keeps (it is searched linearly, and a
/// program calls few shapes often).
const CHOSEN_SHAPES: usize = 64;

/// A call ready to run: its context, checked call, scalars, stream and
/// the plan's algorithm; or why it stays cuBLAS's.
///
/// # Safety
/// As [`take_over`].
unsafe fn prepare(
    Offer {
        handle,
        kind,
        shape,
        ptrs,
        source,
        scalars: (alpha, beta),
    }: Offer,
) -> Result<(Arc<Context>, Call, Scalars, usize, String), String> {
    // The arguments first, as cuBLAS checks them (what it refuses, it
    // reports itself); a batch in device arrays is checked once read.
    let given = match &source {
        Source::Given(batch) => batch.clone(),
        Source::Arrays { .. } => Batch::One,
    };
    let call = Call::check(kind, shape, ptrs, given)?;
    if handle.is_null() || alpha.is_null() || beta.is_null() {
        return Err("a null handle or scalar (cuBLAS refuses it)".into());
    }
    static POINTER_MODE: OnceLock<Option<usize>> = OnceLock::new();
    static MATH_MODE: OnceLock<Option<usize>> = OnceLock::new();
    if handle_state(handle, (&POINTER_MODE, c"cublasGetPointerMode_v2"))?
        != types::POINTER_MODE_HOST
    {
        return Err("α and β in device memory".into());
    }
    let math = handle_state(handle, (&MATH_MODE, c"cublasGetMathMode"))?;
    if !types::math_is_default(math) {
        return Err(format!(
            "the handle's math mode {math} asks for other arithmetic"
        ));
    }
    // SAFETY: host scalars of the kind (the pointer mode, checked).
    let scalars = unsafe { scalars(kind, alpha, beta) };
    if let Scalars::Complex(a, b) = scalars {
        if a != [1.0, 0.0] || b != [0.0, 0.0] {
            return Err("a complex product with α ≠ 1 or β ≠ 0".into());
        }
    }
    let ordinal = Context::current_gpu().ok_or("no CUDA context is current")?;
    let reads_c = matches!(scalars, Scalars::Real(_, beta) if beta != 0.0);
    // A strided batch runs as one, which moves `auto`'s crossovers.
    let strided = match (&call.batch, kind.complex()) {
        (Batch::Strided { count, .. }, false) => *count,
        _ => 1,
    };
    let key: Shape = (ordinal, kind, call.m, call.n, call.k, strided, reads_c);
    let known = {
        let chosen = CHOSEN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        chosen
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.clone())
    };
    if let Some(None) = known {
        return Err(CUBLAS_CHOSEN.into());
    }
    let context = context(ordinal)?;
    let algorithm = match known {
        Some(Some(algorithm)) => algorithm,
        _ => {
            let problem = Problem::new((call.m, call.k, call.n), dtype(kind)).reading_c(reads_c);
            let plan = context
                .plan_gpu_batch(problem, strided, &settings::get().opts)
                .map_err(|e| format!("no plan: {e}"))?;
            let algorithm = (plan.algorithm != Algorithm::Cublas)
                .then(|| format!("{} ({})", plan.algorithm.name(), plan.accuracy));
            let mut chosen = CHOSEN
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if chosen.len() < CHOSEN_SHAPES {
                chosen.push((key, algorithm.clone()));
            }
            algorithm.ok_or(CUBLAS_CHOSEN)?
        }
    };
    let stream = handle_stream(handle)?;
    // SAFETY: the handle's stream, of the current context's GPU.
    if unsafe { context.gpu_stream_is_capturing(stream) }.map_err(|e| e.to_string())? {
        return Err("the stream is capturing a graph".into());
    }
    let call = match source {
        Source::Given(_) => call,
        Source::Arrays { count, .. } if count <= 0 => return Err("an empty batch".into()),
        Source::Arrays { arrays, count } => {
            let count = count as usize;
            let mut words = vec![0u64; 3 * count];
            for (part, array) in words
                .chunks_exact_mut(count)
                .zip([arrays.0, arrays.1, arrays.2])
            {
                // SAFETY: the caller's arrays of `count` device addresses,
                // read after its stream's earlier work.
                unsafe { context.read_gpu_words(array, part, stream) }
                    .map_err(|e| e.to_string())?;
            }
            let (a, rest) = words.split_at(count);
            let (b, c) = rest.split_at(count);
            let batch = Batch::Listed((0..count).map(|i| (a[i], b[i], c[i])).collect());
            Call::check(kind, shape, ptrs, batch)?
        }
    };
    Ok((context, call, scalars, stream, algorithm))
}

/// Why a call the plan gives to cuBLAS stays there.
const CUBLAS_CHOSEN: &str = "cuBLAS's own product is the fastest that meets the level here";

/// The parts' type of a kind.
fn dtype(kind: Kind) -> DType {
    match kind {
        Kind::S | Kind::C => DType::F32,
        Kind::D | Kind::Z => DType::F64,
    }
}

/// Runs a prepared call with the algorithm its plan chose.
fn run(
    context: &Context,
    call: &Call,
    scalars: Scalars,
    stream: usize,
    algorithm: &str,
    opts: fastmm::GemmOptions,
) -> Outcome {
    let products = call.products();
    let completion = GpuCompletion::OnStream(stream);
    // SAFETY: the program's operands on the current GPU, as cuBLAS would
    // read them (the views describe exactly the column-major storage the
    // call names, checked as cuBLAS checks it); the products are ordered
    // on the program's stream, after its earlier work and before its
    // later work, as the cuBLAS call would have been.
    let ran = unsafe {
        match scalars {
            Scalars::Real(alpha, beta) => match call.kind {
                Kind::S => real_batch::<f32>(context, alpha, &products, beta, &opts, completion),
                _ => real_batch::<f64>(context, alpha, &products, beta, &opts, completion),
            },
            Scalars::Complex(..) => {
                let form = ComplexForm::for_level(opts.accuracy);
                match call.kind {
                    Kind::C => {
                        context.gemm_gpu_complex_batch::<f32>(&products, form, &opts, completion)
                    }
                    _ => context.gemm_gpu_complex_batch::<f64>(&products, form, &opts, completion),
                }
            }
        }
    };
    match ran {
        Ok(timing) => {
            // The route as `run` reports it, with the steps' shares of the
            // GPU time.
            let routes = timing
                .emulation
                .map(|t| format!(": {}", t.label()))
                .unwrap_or_default();
            Outcome::Ran(
                types::SUCCESS,
                format!(
                    "fastmm {algorithm}{routes}; {:.3} ms queued",
                    timing.compute_ms
                ),
            )
        }
        Err(e) => {
            let status = match e {
                Error::OutOfMemory { .. } => types::ALLOC_FAILED,
                _ => types::EXECUTION_FAILED,
            };
            settings::warn(&format!("{e}"));
            Outcome::Ran(status, format!("fastmm failed: {e}"))
        }
    }
}

/// [`Context::gemm_gpu_batch`] with α and β as T.
///
/// # Safety
/// As [`Context::gemm_gpu_batch`].
unsafe fn real_batch<T: Element>(
    context: &Context,
    alpha: f64,
    products: &[GpuProduct],
    beta: f64,
    opts: &fastmm::GemmOptions,
    completion: GpuCompletion,
) -> Result<fastmm::Timing, Error> {
    // SAFETY: the caller's contract.
    unsafe {
        context.gemm_gpu_batch::<T>(
            T::from_f64(alpha),
            products,
            T::from_f64(beta),
            opts,
            completion,
        )
    }
}
