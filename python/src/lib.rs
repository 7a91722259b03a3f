//! `fastmm._native`: the Python bindings' native module. The Python
//! package `fastmm` re-exports these functions with its docstrings and
//! type stubs; `fastmm.multiply_files` is written in Python over them.
//!
//! A front end over the library's public API only: the device and
//! options come from the arguments (`options`), operands are numpy
//! arrays viewed in place (`operand`) or GPU arrays through DLPack
//! (`dlpack`), products follow numpy's `matmul`
//! shapes (`product`), run with the GIL released and stop on Ctrl-C
//! (`release`), and the library's errors become Python's exceptions
//! (`errors`).

/// `$body` with `$t` the Rust type of the fastmm `DType` `$dtype`: the
/// one place a runtime type becomes a type parameter.
macro_rules! for_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            fastmm::DType::F32 => {
                type $t = f32;
                $body
            }
            fastmm::DType::F64 => {
                type $t = f64;
                $body
            }
            fastmm::DType::I32 => {
                type $t = i32;
                $body
            }
            fastmm::DType::I64 => {
                type $t = i64;
                $body
            }
        }
    };
}

mod complex;
mod dlpack;
mod errors;
mod files;
mod operand;
mod options;
mod product;
mod release;
mod tunables;

use fastmm::{Algorithm, DType, Device};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::{to_py, type_error, value_error};
use crate::operand::{numpy_name, operand};
use crate::options::{context, machine, options};
use crate::product::{Request, Shapes};

/// The product's request from the Python arguments.
fn request<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    algo: &str,
    device: &str,
    threads: Option<i64>,
    accuracy: &str,
) -> PyResult<Request<'py>> {
    let opts = options(algo, threads, accuracy)?;
    let a = operand(a, "a")?;
    let b = operand(b, "b")?;
    let ctx = machine(py, device)?;
    Ok(Request { ctx, opts, a, b })
}

/// The matrix product of two arrays, with numpy's `matmul` shapes.
///
/// 2-D operands give the m×n product; a 1-D `a` is a row and a 1-D `b` a
/// column, and the dimension each adds is dropped (two vectors give a
/// scalar); dimensions before the last two are a batch, broadcast as
/// numpy does. Types: float32, float64, int32, int64 (integers wrap as
/// numpy's do); two types promote to the wider float or integer, or to
/// float64 for an integer and a float. Every other type numpy's matmul
/// takes gives numpy's result: bool, the narrower and unsigned integers
/// through the integer products (numpy's wrapped bits), float16, long
/// double, complex and object arrays by numpy's own matmul. C-ordered, Fortran-ordered and
/// strided arrays are read in place; negative or odd strides are copied.
///
/// algo: "auto" (the fastest product that meets `accuracy`, by the
///   measured rules), or any of fastmm.ALGORITHMS.
/// accuracy: "native" (the default: as accurate as the device's own
///   product, numpy's or torch's digits), "bound" (within the classical
///   rounding bound: Strassen's levels, fewer moduli), "tf32" or "bf16"
///   (tensor-core precision), or "bits:N" (the emulated product at N
///   bits); fastmm.plan says what a product gives.
/// device: "cpu", "cuda" or "cuda:N"; or several GPUs, "cuda:0,1" or
///   "cuda:all", over which host arrays stream together; or "mpi" (a
///   package built with MPI, under `mpirun -np P python ...`): every rank
///   calls with the same arrays, the ranks share the product, and rank 0
///   gets it while the others get None; default: the CPU for host
///   arrays, their GPU for GPU arrays.
/// threads: CPU threads, at most the hardware's (default: all).
/// out: an array of the result's shape to write, returned (positional
///   too, as numpy's); another type is cast into it by numpy's
///   "same_kind" rule (a GPU array, of the result's type and C-contiguous
///   in its last two dimensions, for GPU operands).
/// stream: with GPU operands and a GPU `out`, a CUDA stream handle (as
///   torch's `torch.cuda.current_stream().cuda_stream`; 0 is the legacy
///   default stream): the product runs as an operator on that stream
///   would, after the work queued on it and before later work on it, and
///   the call returns once it is queued (products that wait on the host
///   midway, as the emulated product's certificate does, return
///   complete). Operands made on another stream must be ordered before it
///   by the caller, as torch asks of its own operators. Without it, the
///   operands' producers order their current streams' work before the
///   product (DLPack), and the call returns when the product is complete.
///
/// GPU arrays (anything with `__dlpack__` on a CUDA device: torch and
/// CuPy tensors of one type, with numpy's shapes and batches) are
/// multiplied where they are, with no host copy: rows that are contiguous
/// are read in place, transposed views copied once on the device, and a
/// batch is planned once and queued as one batch (one cuBLAS launch where
/// cuBLAS runs it). The result is `out`, or a fastmm.GpuArray on the same
/// GPU, which `torch.from_dlpack` and `cupy.from_dlpack` take without a
/// copy. Host arrays with device="cuda" are copied up and back.
///
/// The GIL is released; Ctrl-C stops a long product between blocks with
/// `out` left as it was. Raises ValueError for shapes, TypeError for
/// types, MemoryError before allocating too much, RuntimeError for a
/// missing GPU.
#[pyfunction]
#[pyo3(signature = (a, b, out = None, *, algo = "auto", device = None, threads = None, accuracy = "native", stream = None))]
#[allow(clippy::too_many_arguments)]
fn matmul<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    algo: &str,
    device: Option<&str>,
    threads: Option<i64>,
    accuracy: &str,
    stream: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(stream) = stream {
        let ordinal = gpu_operands(a, b, device)?;
        let out_gpu = out.and_then(dlpack::cuda_ordinal);
        if ordinal.is_none() || out_gpu.is_none() {
            return Err(value_error(format!(
                "stream={stream} orders a product of GPU operands into a GPU out; \
                 give both, or leave stream out"
            )));
        }
    }
    if needs_numpy_rules(a, b, out) {
        return py
            .import("fastmm._dtypes")?
            .getattr("other_types")?
            .call1((a, b, out, algo, device, threads, accuracy));
    }
    let call = Call {
        out,
        timed: false,
        stream,
    };
    Ok(product_of(py, (a, b), (algo, accuracy), device, threads, call)?.0)
}

/// Whether numpy arrays `a` and `b` (and `out`) need numpy's type rules
/// beyond the native product's (`fastmm._dtypes`): a type it does not take
/// (bool, narrow or unsigned integers, float16, complex, object...), numpy's
/// long long (int64's twin, whose scalars numpy keeps as long long), or an
/// `out` of another type than the product's, which numpy casts.
fn needs_numpy_rules(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyAny>>,
) -> bool {
    use numpy::{PyArrayDescrMethods, PyUntypedArrayMethods};
    let (Ok(a), Ok(b)) = (
        a.cast::<numpy::PyUntypedArray>(),
        b.cast::<numpy::PyUntypedArray>(),
    ) else {
        return false;
    };
    let typed = |x: &Bound<'_, numpy::PyUntypedArray>| {
        operand::classify(x)
            .filter(|_| x.dtype().char() != b'q')
            .map(|(dtype, _)| dtype)
    };
    let (Some(a), Some(b)) = (typed(a), typed(b)) else {
        return true;
    };
    match out.map(|o| o.cast::<numpy::PyUntypedArray>()) {
        Some(Ok(out)) => operand::classify(out).map(|(d, _)| d) != Some(fastmm::io::promote(a, b)),
        _ => false,
    }
}

/// `matmul`, timed: returns (result, timing), the timing a dict of
/// compute_ms (on a GPU the kernels alone, between CUDA events: with host
/// arrays the product then runs once to warm up and several times to
/// time, see the library's `Context::gemm_timed`), upload_ms and
/// download_ms (the host copies; None for host products and GPU arrays),
/// end_to_end_ms, host_copies (whether host arrays went to a GPU and back)
/// and, for products streamed out of core, streamed. On several GPUs
/// (device="cuda:all"), compute_ms is the whole streamed product, copies
/// included, and streamed's products_fraction is None.
#[pyfunction]
#[pyo3(signature = (a, b, *, algo = "auto", device = None, threads = None, accuracy = "native"))]
fn matmul_timed<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    algo: &str,
    device: Option<&str>,
    threads: Option<i64>,
    accuracy: &str,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyDict>)> {
    let call = Call {
        out: None,
        timed: true,
        stream: None,
    };
    let (result, timing) = product_of(py, (a, b), (algo, accuracy), device, threads, call)?;
    let text = serde_json::to_string(&timing).map_err(|e| value_error(e.to_string()))?;
    let dict = from_json(py, &text)?;
    dict.set_item("end_to_end_ms", timing.end_to_end_ms())?;
    dict.set_item(
        "host_copies",
        timing.upload_ms.is_some() || timing.streamed.is_some(),
    )?;
    Ok((result, dict))
}

/// How `matmul` and `matmul_timed` were called beyond the operands: the
/// output, whether to time, and the stream to order a GPU result before.
struct Call<'a, 'py> {
    out: Option<&'a Bound<'py, PyAny>>,
    timed: bool,
    stream: Option<usize>,
}

/// The product for `matmul` and `matmul_timed`: GPU arrays in place, host
/// arrays on the device asked for.
fn product_of<'py>(
    py: Python<'py>,
    (a, b): (&Bound<'py, PyAny>, &Bound<'py, PyAny>),
    (algo, accuracy): (&str, &str),
    device: Option<&str>,
    threads: Option<i64>,
    Call { out, timed, stream }: Call<'_, 'py>,
) -> PyResult<(Bound<'py, PyAny>, fastmm::Timing)> {
    if let Some(ordinal) = gpu_operands(a, b, device)? {
        if let Some(out) = out {
            if dlpack::cuda_ordinal(out) != Some(ordinal) {
                return Err(value_error(format!(
                    "out must be a GPU array on cuda:{ordinal}, where the operands are"
                )));
            }
        }
        let opts = options(algo, threads, accuracy)?;
        let ctx = context(py, &format!("cuda:{ordinal}"))?;
        let completion = match stream {
            Some(stream) => fastmm::GpuCompletion::OnStream(stream),
            None => fastmm::GpuCompletion::Complete,
        };
        return dlpack::matmul(py, &ctx, opts, (a, b), (ordinal, completion), out);
    }
    let request = request(py, a, b, algo, device.unwrap_or("cpu"), threads, accuracy)?;
    product::matmul(py, request, out, timed)
}

/// The GPU both operands live on, when they are GPU arrays (DLPack
/// device kDLCUDA); `None` for host operands. `device`, when given, must
/// name that GPU.
fn gpu_operands(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    device: Option<&str>,
) -> PyResult<Option<usize>> {
    let on_gpu = |x: &Bound<'_, PyAny>| match x.cast::<numpy::PyUntypedArray>() {
        Ok(_) => None,
        Err(_) => dlpack::cuda_ordinal(x),
    };
    let ordinal = match (on_gpu(a), on_gpu(b)) {
        (None, None) => return Ok(None),
        (Some(x), Some(y)) if x == y => x,
        (Some(x), Some(y)) => {
            return Err(value_error(format!(
                "a is on cuda:{x} and b on cuda:{y}: move one to the other's GPU"
            )))
        }
        _ => {
            return Err(value_error(
                "one operand is on a GPU and the other in host memory: move one",
            ))
        }
    };
    if let Some(named) = device {
        let named: Device = named.parse().map_err(to_py)?;
        if named != Device::Cuda(ordinal) {
            return Err(value_error(format!(
                "the operands are on cuda:{ordinal} but device={named} was asked for"
            )));
        }
    }
    Ok(Some(ordinal))
}

/// BLAS's update c ← alpha·(a @ b) + beta·c, in place.
///
/// `c` is an array of the product's type and shape (any layout); with
/// beta = 0 it is never read, so NaN in it does not reach the result.
/// Shapes, types, options and errors as for `matmul`; Ctrl-C leaves `c`
/// as it was.
#[pyfunction]
#[pyo3(signature = (alpha, a, b, beta, c, *, algo = "auto", device = "cpu", threads = None, accuracy = "native"))]
#[allow(clippy::too_many_arguments)]
fn gemm<'py>(
    py: Python<'py>,
    alpha: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    beta: &Bound<'py, PyAny>,
    c: &Bound<'py, PyAny>,
    algo: &str,
    device: &str,
    threads: Option<i64>,
    accuracy: &str,
) -> PyResult<()> {
    let request = request(py, a, b, algo, device, threads, accuracy)?;
    product::gemm(py, alpha, request, beta, c)
}

/// `json.loads(text)`: the library's serialisable reports as dicts.
fn from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    Ok(py
        .import("json")?
        .getattr("loads")?
        .call1((text,))?
        .cast_into::<PyDict>()?)
}

/// A shape given as a tuple or list of ints.
fn shape_of(obj: &Bound<'_, PyAny>) -> Option<Vec<usize>> {
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<pyo3::types::PyList>() {
        obj.extract::<Vec<usize>>().ok()
    } else {
        None
    }
}

/// The element type named by a numpy dtype, a type or a string.
fn dtype_named(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    let descr = py.import("numpy")?.getattr("dtype")?.call1((dtype,))?;
    let probe = py.import("numpy")?.getattr("empty")?.call1(((0,), descr))?;
    let array = probe.cast::<numpy::PyUntypedArray>()?;
    match operand::classify(array) {
        Some((dtype, _)) => Ok(dtype),
        None => Err(type_error(format!(
            "fastmm multiplies {}; not {}",
            operand::SUPPORTED,
            operand::dtype_text(array)
        ))),
    }
}

/// What `matmul(a, b, ...)` would run, without running it: a dict of the
/// algorithm, kernel, threads, recursion (levels, workspace_bytes),
/// error_growth, the accuracy level asked for (accuracy_asked) and given
/// (accuracy) with the precision it carries, the shapes and the type. `a` and `b` are arrays, or
/// shapes as tuples (then `dtype`, default float64, names the type). A
/// batch on a GPU is planned as the strided batch that stacked or
/// broadcast GPU operands run as, whose `auto` has crossovers of its own.
#[pyfunction]
#[pyo3(signature = (a, b, *, algo = "auto", device = "cpu", threads = None, dtype = None, accuracy = "native"))]
#[allow(clippy::too_many_arguments)]
fn plan<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    algo: &str,
    device: &str,
    threads: Option<i64>,
    dtype: Option<&Bound<'py, PyAny>>,
    accuracy: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(algo, threads, accuracy)?;
    let (a_shape, b_shape, promoted) = match (shape_of(a), shape_of(b)) {
        (Some(a), Some(b)) => (a, b, None),
        _ => {
            let (a, b) = (operand(a, "a")?, operand(b, "b")?);
            let promoted = fastmm::io::promote(a.dtype, b.dtype);
            (
                numpy::PyUntypedArrayMethods::shape(&a.array).to_vec(),
                numpy::PyUntypedArrayMethods::shape(&b.array).to_vec(),
                Some(promoted),
            )
        }
    };
    let dtype = match (dtype, promoted) {
        (Some(named), _) => dtype_named(py, named)?,
        (None, Some(promoted)) => promoted,
        (None, None) => DType::F64,
    };
    let shapes = Shapes::of(&a_shape, &b_shape)?;
    let machine = machine(py, device)?;
    let mnk = (shapes.m, shapes.k, shapes.n);
    let count: usize = shapes.batch.iter().product();
    let plan = py
        .detach(|| {
            for_dtype!(dtype, T => machine.plan_batch(fastmm::Problem::of::<T>(mnk), count, &opts))
        })
        .map_err(to_py)?;
    let text = serde_json::to_string(&plan).map_err(|e| value_error(e.to_string()))?;
    let dict = from_json(py, &text)?;
    dict.set_item("shape", mnk)?;
    dict.set_item("batch", shapes.batch.iter().product::<usize>())?;
    dict.set_item("dtype", numpy_name(dtype))?;
    dict.set_item("result_shape", PyTuple::new(py, &shapes.result)?)?;
    dict.set_item("falls_back_to", plan.falls_back_to().map(|a| a.name()))?;
    Ok(dict)
}

/// The machine and what fastmm runs on it: the CPU, its caches and
/// microkernel, the GPUs, the tuning in effect and the version, as a dict.
#[pyfunction]
fn info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let report = py.detach(fastmm::info::report).map_err(to_py)?;
    let text = serde_json::to_string(&report).map_err(|e| value_error(e.to_string()))?;
    let dict = from_json(py, &text)?;
    dict.set_item("version", env!("CARGO_PKG_VERSION"))?;
    Ok(dict)
}

/// Whether `c` is `a @ b` (numpy's shapes, batches included): a dict with
/// ok, method ("full", or "randomized" for large products: sampled rows
/// and columns and Freivalds' test), rel_error and bound_ratio (the
/// worst error as a fraction of the componentwise rounding bound
/// γₖ·|a|·|b|, allowed `growth` times over; integers must match exactly).
#[pyfunction]
#[pyo3(signature = (a, b, c, *, growth = 1.0))]
fn verify<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    c: &Bound<'py, PyAny>,
    growth: f64,
) -> PyResult<Bound<'py, PyDict>> {
    if growth.is_nan() || growth < 1.0 {
        return Err(value_error(format!(
            "growth={growth}: the allowance is a factor of at least 1"
        )));
    }
    let (a, b, c) = (operand(a, "a")?, operand(b, "b")?, operand(c, "c")?);
    let verdict = product::verify(py, a, b, c, growth)?;
    let dict = PyDict::new(py);
    dict.set_item("ok", verdict.ok)?;
    dict.set_item("method", verdict.method.name())?;
    dict.set_item("rel_error", verdict.rel_error)?;
    dict.set_item("bound_ratio", verdict.bound_ratio)?;
    Ok(dict)
}

/// The CPU threads of every product that names none: the process's
/// setting, else `FASTMM_NUM_THREADS`, else `OMP_NUM_THREADS`, else every
/// hardware thread.
#[pyfunction]
fn get_num_threads() -> usize {
    fastmm::num_threads()
}

/// Sets the CPU threads of every later product that names none, for the
/// whole process; `None` returns to the environment's or the built-in
/// choice.
#[pyfunction]
#[pyo3(signature = (threads))]
fn set_num_threads(threads: Option<i64>) -> PyResult<()> {
    let threads = match threads {
        None => None,
        Some(threads) if threads >= 1 => Some(threads as usize),
        Some(threads) => {
            return Err(value_error(format!(
                "threads={threads}: at least 1 is needed"
            )))
        }
    };
    fastmm::set_num_threads(threads).map_err(to_py)
}

/// The thread count, for threadpoolctl's controller (`fastmm._threadpool`),
/// which finds this module among the process's libraries by these
/// symbols and calls them through ctypes, as it calls OpenBLAS's.
#[no_mangle]
pub extern "C" fn fastmm_get_num_threads() -> std::os::raw::c_int {
    fastmm::num_threads().min(std::os::raw::c_int::MAX as usize) as std::os::raw::c_int
}

/// Sets the thread count (see [`fastmm_get_num_threads`]); a count below
/// 1 clears the setting. Returns 0.
#[no_mangle]
pub extern "C" fn fastmm_set_num_threads(threads: std::os::raw::c_int) -> std::os::raw::c_int {
    let threads = usize::try_from(threads).ok().filter(|&t| t >= 1);
    // Cannot fail: only a count of 0 is refused, and it became None.
    let _ = fastmm::set_num_threads(threads);
    0
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(matmul, m)?)?;
    m.add_function(wrap_pyfunction!(options::close_machines, m)?)?;
    m.add_function(wrap_pyfunction!(matmul_timed, m)?)?;
    m.add_function(wrap_pyfunction!(gemm, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(complex::complex_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(files::load, m)?)?;
    m.add_function(wrap_pyfunction!(files::save, m)?)?;
    m.add_function(wrap_pyfunction!(files::multiply_mapped, m)?)?;
    m.add_class::<dlpack::GpuArray>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ALGORITHMS", Algorithm::names())?;
    // Whether device="mpi" is there: the package built with feature mpi.
    m.add("MPI", cfg!(feature = "mpi"))?;
    Ok(())
}
