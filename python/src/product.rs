//! `matmul` and `gemm` over numpy arrays: numpy's shapes (1-D operands,
//! broadcast batches), the output written whole or not at all, and the
//! library's product on each matrix of the batch.

use fastmm::{
    Clock, DType, Element, Error, Executor, Gemm, GemmOptions, Machine, MatMut, MatRef, Plan,
    Timing, Verdict,
};
use numpy::{IxDyn, PyArray, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyTuple};

use crate::errors::{to_py, type_error, value_error};
use crate::operand::{contiguous, converted, is_writeable, numpy_name, Layout, Operand};
use crate::options::timing_of;
use crate::release::{released, Wait};
use crate::tunables::{GIL_HELD_MNK, LONG_PRODUCT_MNK, MEMORY_CHECK_BYTES};

/// What `a @ b` is, in numpy's rules: a 1-D `a` is a row (1×k) and a 1-D
/// `b` a column (k×1), the dimension each adds dropped from the result;
/// dimensions before the last two are a batch, broadcast.
pub(crate) struct Shapes {
    pub(crate) batch: Vec<usize>,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    a_vector: bool,
    b_vector: bool,
    pub(crate) result: Vec<usize>,
}

impl Shapes {
    pub(crate) fn of(a: &[usize], b: &[usize]) -> PyResult<Shapes> {
        for (shape, which) in [(a, 0), (b, 1)] {
            if shape.is_empty() {
                return Err(value_error(format!(
                    "matmul: input operand {which} is a scalar (0-D); a product needs 1-D or more"
                )));
            }
        }
        let (a_vector, b_vector) = (a.len() == 1, b.len() == 1);
        let (m, k) = match a_vector {
            true => (1, a[0]),
            false => (a[a.len() - 2], a[a.len() - 1]),
        };
        let (k2, n) = match b_vector {
            true => (b[0], 1),
            false => (b[b.len() - 2], b[b.len() - 1]),
        };
        if k != k2 {
            return Err(to_py(Error::DimensionMismatch {
                a: (m, k),
                b: (k2, n),
            }));
        }
        let a_batch = &a[..a.len().saturating_sub(2)];
        let b_batch = &b[..b.len().saturating_sub(2)];
        let rank = a_batch.len().max(b_batch.len());
        let mut batch = Vec::with_capacity(rank);
        for d in 0..rank {
            let dim = |shape: &[usize]| (d + shape.len()).checked_sub(rank).map_or(1, |i| shape[i]);
            let (x, y) = (dim(a_batch), dim(b_batch));
            batch.push(match (x, y) {
                _ if x == y => x,
                (1, _) => y,
                (_, 1) => x,
                _ => {
                    return Err(value_error(format!(
                        "matmul: the batch dimensions {a_batch:?} of a and {b_batch:?} of b do not broadcast"
                    )))
                }
            });
        }
        let mut result = batch.clone();
        if !a_vector {
            result.push(m);
        }
        if !b_vector {
            result.push(n);
        }
        Ok(Shapes {
            batch,
            m,
            k,
            n,
            a_vector,
            b_vector,
            result,
        })
    }

    /// Multiply-adds of the whole batch.
    pub(crate) fn work(&self) -> u128 {
        self.batch.iter().map(|&d| d as u128).product::<u128>()
            * self.m as u128
            * self.k as u128
            * self.n as u128
    }

    /// Whether the result is a scalar (two vectors).
    pub(crate) fn is_scalar(&self) -> bool {
        self.result.is_empty()
    }
}

/// One matrix of an array: a byte pointer and element strides.
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub(crate) ptr: *mut u8,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) row_stride: usize,
    pub(crate) col_stride: usize,
}

impl View {
    /// The view, read as T.
    ///
    /// # Safety
    /// It lies inside a live array of T that nothing writes meanwhile, with
    /// non-negative whole-element strides and aligned data.
    unsafe fn read<'a, T: Element>(self) -> MatRef<'a, T> {
        // SAFETY: the caller's contract is the view's.
        unsafe {
            MatRef::from_raw_parts(
                self.ptr.cast::<T>().cast_const(),
                self.rows,
                self.cols,
                self.row_stride,
                self.col_stride,
            )
        }
    }

    /// The view, written as T.
    ///
    /// # Safety
    /// As [`View::read`], and no two of its elements share an address and
    /// nothing else reads or writes it meanwhile.
    unsafe fn write<'a, T: Element>(self) -> MatMut<'a, T> {
        // SAFETY: the caller's contract is the view's.
        unsafe {
            MatMut::from_raw_parts(
                self.ptr.cast::<T>(),
                self.rows,
                self.cols,
                self.row_stride,
                self.col_stride,
            )
        }
    }
}

/// One product of the batch.
#[derive(Clone, Copy)]
pub(crate) struct Job {
    pub(crate) a: View,
    pub(crate) b: View,
    pub(crate) c: View,
}

// SAFETY: a Job only names memory of arrays the caller keeps alive, and
// the caller keeps other Rust code from writing them during the products
// (`c` is written by its job alone: the output arrays are checked not to
// alias themselves or the operands).
unsafe impl Send for Job {}
// SAFETY: as above; `&Job` gives only the addresses.
unsafe impl Sync for Job {}

/// The byte offset of batch index `index` in an array whose first
/// `batch_dims` dimensions are the batch, right-aligned with `batch`
/// (missing or length-1 dimensions broadcast).
fn batch_offset(layout: &Layout<'_>, batch_dims: usize, batch: &[usize], index: &[usize]) -> isize {
    let skip = batch.len() - batch_dims;
    (0..batch_dims)
        .filter(|&d| layout.shape[d] > 1)
        .map(|d| index[skip + d] as isize * layout.strides[d])
        .sum()
}

/// The matrix views of a, b and c for each product of the batch (the
/// arrays in host or GPU memory: the addresses are computed, not read).
pub(crate) fn jobs(a: &Layout<'_>, b: &Layout<'_>, c: &Layout<'_>, s: &Shapes) -> Vec<Job> {
    let stride = |l: &Layout<'_>, d: usize| l.element_stride(d).expect("viewable layouts");
    let a_dims = a.shape.len();
    let b_dims = b.shape.len();
    let c_dims = c.shape.len();
    let view = |ptr, (rows, cols), (row_stride, col_stride)| View {
        ptr,
        rows,
        cols,
        row_stride,
        col_stride,
    };
    let a_view = |ptr| match s.a_vector {
        true => view(ptr, (1, s.k), (0, stride(a, 0))),
        false => view(
            ptr,
            (s.m, s.k),
            (stride(a, a_dims - 2), stride(a, a_dims - 1)),
        ),
    };
    let b_view = |ptr| match s.b_vector {
        true => view(ptr, (s.k, 1), (stride(b, 0), 0)),
        false => view(
            ptr,
            (s.k, s.n),
            (stride(b, b_dims - 2), stride(b, b_dims - 1)),
        ),
    };
    let c_view = |ptr| {
        let strides = match (s.a_vector, s.b_vector) {
            (false, false) => (stride(c, c_dims - 2), stride(c, c_dims - 1)),
            (true, false) => (0, stride(c, c_dims - 1)),
            (false, true) => (stride(c, c_dims - 1), 0),
            (true, true) => (0, 0),
        };
        view(ptr, (s.m, s.n), strides)
    };
    let count: usize = s.batch.iter().product();
    let mut index = vec![0usize; s.batch.len()];
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let offset = |l: &Layout<'_>, matrix_dims: usize| {
            batch_offset(l, l.shape.len() - matrix_dims, &s.batch, &index)
        };
        // Each offset is a sum of in-range indices times the array's own
        // strides, so it stays inside the array's memory; the wrapping
        // form because a GPU array's address is no host allocation.
        let (pa, pb, pc) = (
            a.ptr
                .wrapping_offset(offset(a, if s.a_vector { 1 } else { 2 })),
            b.ptr
                .wrapping_offset(offset(b, if s.b_vector { 1 } else { 2 })),
            c.ptr.wrapping_offset(offset(c, c_dims - s.batch.len())),
        );
        out.push(Job {
            a: a_view(pa),
            b: b_view(pb),
            c: c_view(pc),
        });
        // The next batch index, last dimension fastest.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < s.batch[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// Runs every job: C ← α·A·B + β·C, planned once and executed per job;
/// timed by a benchmark's clock (the sum of the jobs' timings) when
/// `timed`.
fn run_jobs<T: Element>(
    ctx: &Machine,
    opts: &GemmOptions,
    (alpha, beta): (T, T),
    jobs: &[Job],
    timed: bool,
) -> Result<Timing, Error> {
    let mut total = Timing::default();
    // One plan for every matrix of the batch: they share a shape.
    let mut plan: Option<Plan> = None;
    for job in jobs {
        // SAFETY: the views lie inside live arrays of T (checked viewable:
        // non-negative whole-element strides, aligned), the inputs are
        // only read, and each output matrix is written by this job alone
        // and overlaps no input (see `Job`).
        let (a, b, c) = unsafe { (job.a.read::<T>(), job.b.read::<T>(), job.c.write::<T>()) };
        let product = Gemm {
            alpha,
            a,
            b,
            beta,
            c,
        };
        let plan = match &mut plan {
            Some(plan) => plan,
            none => none.insert(ctx.plan(product.problem(), opts)?),
        };
        let clock = if timed { Clock::Benchmark } else { Clock::Once };
        let t = timing_of(ctx.execute_clocked(plan, product, clock)?);
        if !timed {
            continue;
        }
        let add = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (None, None) => None,
            _ => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
        };
        total = Timing {
            compute_ms: total.compute_ms + t.compute_ms,
            upload_ms: add(total.upload_ms, t.upload_ms),
            download_ms: add(total.download_ms, t.download_ms),
            streamed: t.streamed.or(total.streamed),
            emulation: fastmm::emulation::Tally::merged(total.emulation, t.emulation),
        };
    }
    Ok(total)
}

/// How the caller waits for a product of `work` multiply-adds on `ctx`.
fn wait_for(ctx: &Machine, work: u128) -> Wait {
    let on_cpu = ctx.cpu_only();
    if ctx.bound_to_its_thread() {
        Wait::Released
    } else if work > LONG_PRODUCT_MNK {
        Wait::Interruptible
    } else if on_cpu && work <= GIL_HELD_MNK {
        Wait::Holding
    } else {
        Wait::Released
    }
}

/// Python numbers as the scalars of each type.
pub(crate) trait Scalar: Element + numpy::Element {
    fn from_python(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Self>;
}

macro_rules! float_scalar {
    ($t:ty) => {
        impl Scalar for $t {
            fn from_python(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
                value
                    .extract::<f64>()
                    .map(|x| x as $t)
                    .map_err(|_| type_error(format!("{name} must be a real number")))
            }
        }
    };
}
float_scalar!(f32);
float_scalar!(f64);

macro_rules! int_scalar {
    ($t:ty) => {
        impl Scalar for $t {
            fn from_python(value: &Bound<'_, PyAny>, name: &str) -> PyResult<Self> {
                let wide = value.extract::<i64>().map_err(|_| {
                    type_error(format!(
                        "{name} must be an integer for {} arrays",
                        stringify!($t)
                    ))
                })?;
                <$t>::try_from(wide).map_err(|_| {
                    value_error(format!("{name} = {wide} does not fit {}", stringify!($t)))
                })
            }
        }
    };
}
int_scalar!(i32);
int_scalar!(i64);

/// A new, uninitialised C-ordered array; large ones only after checking
/// the memory is there.
fn new_array<'py, T: Scalar>(
    py: Python<'py>,
    shape: &[usize],
    what: impl Fn() -> String,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let elements = shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    let bytes = elements
        .and_then(|e| e.checked_mul(std::mem::size_of::<T>() as u128))
        .ok_or_else(|| {
            to_py(Error::SizeOverflow {
                rows: shape.iter().rev().skip(1).product(),
                cols: shape.last().copied().unwrap_or(1),
            })
        })?;
    if bytes > MEMORY_CHECK_BYTES {
        fastmm::system::check_allocation(&what(), bytes).map_err(to_py)?;
    }
    // SAFETY: the array is fully written (β = 0 never reads C) before any
    // Python code sees it; on an error it is dropped unread.
    let array = unsafe { PyArray::<T, IxDyn>::new(py, shape, false) };
    Ok(array.into_any().cast_into::<PyUntypedArray>()?)
}

/// `target[...] = source`, numpy's assignment (any layout).
fn assign(target: &Bound<'_, PyAny>, source: &Bound<'_, PyAny>) -> PyResult<()> {
    let ellipsis = target.py().Ellipsis();
    target.set_item(ellipsis, source)
}

/// An operand in `dtype` and a layout the library views.
fn prepared<'py>(op: Operand<'py>, dtype: DType) -> PyResult<Bound<'py, PyUntypedArray>> {
    let array = match op.dtype == dtype {
        true => op.array,
        false => converted(&op.array, dtype)?,
    };
    match Layout::of(&array).viewable() {
        true => Ok(array),
        false => contiguous(&array),
    }
}

/// The product as asked: the operands, the product's device and options.
pub(crate) struct Request<'py> {
    pub(crate) ctx: Machine,
    pub(crate) opts: GemmOptions,
    pub(crate) a: Operand<'py>,
    pub(crate) b: Operand<'py>,
}

/// `a @ b` into a new array or into `out`, and its timing when `timed`.
pub(crate) fn matmul<'py>(
    py: Python<'py>,
    request: Request<'py>,
    out: Option<&Bound<'py, PyAny>>,
    timed: bool,
) -> PyResult<(Bound<'py, PyAny>, Timing)> {
    let dtype = fastmm::io::promote(request.a.dtype, request.b.dtype);
    for_dtype!(dtype, T => matmul_typed::<T>(py, request, out, timed))
}

/// A shape as Python writes a tuple: (), (3,), (2, 3).
pub(crate) fn tuple_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An `out` or `c` argument checked against the result: an ndarray of the
/// result's type and shape that numpy lets us write.
fn checked_output<'py>(
    target: &Bound<'py, PyAny>,
    dtype: DType,
    shape: &[usize],
    name: &str,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let array = target.cast::<PyUntypedArray>().map_err(|_| {
        type_error(format!(
            "{name} must be a numpy array (it is written in place)"
        ))
    })?;
    let ok_type = crate::operand::classify(array) == Some((dtype, true));
    if !ok_type {
        return Err(type_error(format!(
            "{name} is {} but the product is {}",
            crate::operand::dtype_text(array),
            numpy_name(dtype)
        )));
    }
    if array.shape() != shape {
        return Err(value_error(format!(
            "non-broadcastable output operand with shape {} doesn't match the broadcast shape {} ({name})",
            tuple_text(array.shape()),
            tuple_text(shape)
        )));
    }
    if !is_writeable(array) {
        return Err(value_error(format!("{name} is read-only")));
    }
    Ok(array.clone())
}

fn matmul_typed<'py, T: Scalar>(
    py: Python<'py>,
    request: Request<'py>,
    out: Option<&Bound<'py, PyAny>>,
    timed: bool,
) -> PyResult<(Bound<'py, PyAny>, Timing)> {
    let Request { ctx, opts, a, b } = request;
    let a = prepared(a, T::DTYPE)?;
    let b = prepared(b, T::DTYPE)?;
    let shapes = Shapes::of(a.shape(), b.shape())?;
    let long = shapes.work() > LONG_PRODUCT_MNK;
    let (a_layout, b_layout) = (Layout::of(&a), Layout::of(&b));
    // Named only when the memory check runs: formatting it on every call
    // cost a tenth of a 16³ product's call.
    let what = || format!("the {:?} {} result", shapes.result, numpy_name(T::DTYPE));
    // Where the product is written: a new array, `out` itself, or a
    // temporary copied into `out` once complete (a long product, which
    // Ctrl-C may stop half-way, and an `out` that aliases itself or the
    // operands).
    let (result, target) = match out {
        None => {
            let result = new_array::<T>(py, &shapes.result, what)?;
            (result.clone(), result)
        }
        Some(out) => {
            let out = checked_output(out, T::DTYPE, &shapes.result, "out")?;
            let layout = Layout::of(&out);
            let direct = !long
                && layout.writable_without_aliasing()
                && !layout.overlaps(&a_layout)
                && !layout.overlaps(&b_layout);
            match direct {
                true => (out.clone(), out),
                false => (out, new_array::<T>(py, &shapes.result, what)?),
            }
        }
    };
    let jobs = jobs(&a_layout, &b_layout, &Layout::of(&target), &shapes);
    let timing = released(py, wait_for(&ctx, shapes.work()), |stop| {
        let opts = match stop {
            Some(stop) => opts.interrupt(stop),
            None => opts,
        };
        run_jobs::<T>(&ctx, &opts, (T::ONE, T::ZERO), &jobs, timed)
    })?;
    if !ctx.holds_results() {
        // An MPI job's product comes back on rank 0; the other ranks'
        // arrays were not written.
        return Ok((py.None().into_bound(py), timing));
    }
    if !target.is(&result) {
        assign(result.as_any(), target.as_any())?;
    }
    if shapes.is_scalar() && out.is_none() {
        // numpy returns a scalar for two vectors.
        return Ok((result.as_any().get_item(PyTuple::empty(py))?, timing));
    }
    Ok((result.into_any(), timing))
}

/// C ← α·A·B + β·C in place, for C of the type A·B promotes to.
pub(crate) fn gemm<'py>(
    py: Python<'py>,
    alpha: &Bound<'py, PyAny>,
    request: Request<'py>,
    beta: &Bound<'py, PyAny>,
    c: &Bound<'py, PyAny>,
) -> PyResult<()> {
    let dtype = fastmm::io::promote(request.a.dtype, request.b.dtype);
    for_dtype!(dtype, T => gemm_typed::<T>(
        py,
        T::from_python(alpha, "alpha")?,
        request,
        T::from_python(beta, "beta")?,
        c,
    ))
}

fn gemm_typed<'py, T: Scalar>(
    py: Python<'py>,
    alpha: T,
    request: Request<'py>,
    beta: T,
    c: &Bound<'py, PyAny>,
) -> PyResult<()> {
    let Request { ctx, opts, a, b } = request;
    let a = prepared(a, T::DTYPE)?;
    let b = prepared(b, T::DTYPE)?;
    let shapes = Shapes::of(a.shape(), b.shape())?;
    let c = checked_output(c, T::DTYPE, &shapes.result, "c")?;
    let long = shapes.work() > LONG_PRODUCT_MNK;
    let (a_layout, b_layout, c_layout) = (Layout::of(&a), Layout::of(&b), Layout::of(&c));
    let direct = !long
        && c_layout.writable_without_aliasing()
        && !c_layout.overlaps(&a_layout)
        && !c_layout.overlaps(&b_layout);
    let target = match direct {
        true => c.clone(),
        // A C-ordered copy of C, so that β·C is read from it.
        false => {
            let bytes = c.len() as u128 * std::mem::size_of::<T>() as u128;
            if bytes > MEMORY_CHECK_BYTES {
                fastmm::system::check_allocation("a copy of c", bytes).map_err(to_py)?;
            }
            py.import("numpy")?
                .getattr("array")?
                .call((c.as_any(),), Some(&[("order", "C")].into_py_dict(py)?))?
                .cast_into::<PyUntypedArray>()?
        }
    };
    let jobs = jobs(&a_layout, &b_layout, &Layout::of(&target), &shapes);
    released(py, wait_for(&ctx, shapes.work()), |stop| {
        let opts = match stop {
            Some(stop) => opts.interrupt(stop),
            None => opts,
        };
        run_jobs::<T>(&ctx, &opts, (alpha, beta), &jobs, false)
    })?;
    if !target.is(&c) && ctx.holds_results() {
        assign(c.as_any(), target.as_any())?;
    }
    Ok(())
}

/// Checks `c = a @ b` (every matrix of a batch) within `growth` times the
/// classical rounding bound; the verdict of the worst matrix.
pub(crate) fn verify<'py>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    c: Operand<'py>,
    growth: f64,
) -> PyResult<Verdict> {
    let dtype = fastmm::io::promote(a.dtype, b.dtype);
    if c.dtype != dtype {
        return Err(type_error(format!(
            "c is {} but a @ b is {}",
            numpy_name(c.dtype),
            numpy_name(dtype)
        )));
    }
    for_dtype!(dtype, T => verify_typed::<T>(py, a, b, c, growth))
}

fn verify_typed<'py, T: Scalar>(
    py: Python<'py>,
    a: Operand<'py>,
    b: Operand<'py>,
    c: Operand<'py>,
    growth: f64,
) -> PyResult<Verdict> {
    let a = prepared(a, T::DTYPE)?;
    let b = prepared(b, T::DTYPE)?;
    let c = prepared(c, T::DTYPE)?;
    let shapes = Shapes::of(a.shape(), b.shape())?;
    if c.shape() != shapes.result.as_slice() {
        return Err(value_error(format!(
            "c has shape {:?} but a @ b has shape {:?}",
            c.shape(),
            shapes.result
        )));
    }
    let jobs = jobs(&Layout::of(&a), &Layout::of(&b), &Layout::of(&c), &shapes);
    let verdicts = py.detach(|| {
        jobs.iter()
            .map(|job| {
                // SAFETY: as in `run_jobs`; here every view is only read.
                let (a, b, c) =
                    unsafe { (job.a.read::<T>(), job.b.read::<T>(), job.c.read::<T>()) };
                fastmm::verify::verify_with_growth(a, b, c, growth)
            })
            .collect::<Result<Vec<_>, Error>>()
    });
    let verdicts = verdicts.map_err(to_py)?;
    let worst = verdicts.iter().copied().reduce(|x, y| {
        if y.bound_ratio > x.bound_ratio || !y.ok {
            y
        } else {
            x
        }
    });
    Ok(worst.unwrap_or(Verdict {
        method: fastmm::CheckMethod::Full,
        rel_error: 0.0,
        bound_ratio: 0.0,
        ok: true,
    }))
}
