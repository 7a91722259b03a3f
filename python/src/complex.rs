//! `matmul` of complex numpy arrays (complex64, complex128): numpy's
//! interleaved storage read and written in place as split real planes
//! (the real parts at the element's address, the imaginary parts one real
//! further, both with twice the strides), each matrix of the batch one
//! library complex product (`fastmm::complex`) of real products.

use fastmm::complex::{ComplexForm, SplitMut, SplitRef};
use fastmm::{Element, Error, GemmOptions, Machine, MatMut, MatRef};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{type_error, value_error};
use crate::operand::Layout;
use crate::options::{machine, options};
use crate::product::{jobs, Shapes, View};
use crate::release::{released, Wait};

/// The real planes of one complex view: (real, imaginary) as views of T,
/// the real type of the complex one.
///
/// # Safety
/// `view` lies inside a live aligned array of complex T (pairs of T) that
/// nothing writes meanwhile, with non-negative whole-element strides.
unsafe fn planes<'a, T: Element>(view: View) -> (MatRef<'a, T>, MatRef<'a, T>) {
    let re = view.ptr.cast::<T>().cast_const();
    let (rs, cs) = (2 * view.row_stride, 2 * view.col_stride);
    // SAFETY: the caller's contract; the imaginary part of each element is
    // the T after its real part, inside the same element.
    unsafe {
        (
            MatRef::from_raw_parts(re, view.rows, view.cols, rs, cs),
            MatRef::from_raw_parts(re.add(1), view.rows, view.cols, rs, cs),
        )
    }
}

/// C = A·B for complex `a` and `b` of one complex type, into `c`, a new
/// C-ordered complex array of the result's shape and type (made by the
/// caller, `fastmm._dtypes`); `accuracy` "native" takes the classical form
/// (four real products), a relaxed level Gauss's three.
#[pyfunction]
#[pyo3(signature = (a, b, c, *, algo = "auto", device = "cpu", threads = None, accuracy = "native"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn complex_matmul<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyUntypedArray>,
    b: &Bound<'py, PyUntypedArray>,
    c: &Bound<'py, PyUntypedArray>,
    algo: &str,
    device: &str,
    threads: Option<i64>,
    accuracy: &str,
) -> PyResult<Option<&'static str>> {
    let opts = options(algo, threads, accuracy)?;
    let form = ComplexForm::for_level(opts.accuracy);
    let kind = |x: &Bound<'py, PyUntypedArray>| (x.dtype().kind(), x.dtype().itemsize());
    let item = match (kind(a), kind(b), kind(c)) {
        (x, y, z) if x == y && y == z && x.0 == b'c' && (x.1 == 8 || x.1 == 16) => x.1,
        _ => {
            return Err(type_error(
                "complex_matmul takes complex64 or complex128 arrays of one type",
            ))
        }
    };
    let (a_layout, b_layout, c_layout) = (Layout::of(a), Layout::of(b), Layout::of(c));
    for (layout, name) in [(&a_layout, "a"), (&b_layout, "b"), (&c_layout, "c")] {
        let dims = layout.shape.len();
        let ok = (layout.ptr as usize).is_multiple_of(item / 2)
            && (0..dims).all(|d| layout.element_stride(d).is_some());
        if !ok {
            return Err(value_error(format!(
                "{name} must have aligned data and non-negative strides of whole elements"
            )));
        }
    }
    let shapes = Shapes::of(a.shape(), b.shape())?;
    if c.shape() != shapes.result.as_slice() {
        return Err(value_error("c must have the product's shape"));
    }
    let walk = jobs(&a_layout, &b_layout, &c_layout, &shapes);
    let ctx = machine(py, device)?;
    // An MPI job's product comes back on rank 0 alone.
    let holds = ctx.holds_results();
    let run = move |_| -> Result<(), Error> {
        for job in &walk {
            let views = [job.a, job.b, job.c];
            match item {
                8 => product::<f32>(&ctx, views, form, &opts)?,
                _ => product::<f64>(&ctx, views, form, &opts)?,
            }
        }
        Ok(())
    };
    released(py, Wait::Released, run)?;
    Ok(holds.then(|| form.name()))
}

/// One complex product of the batch on the caller's executor.
fn product<T: Element>(
    ctx: &Machine,
    [a, b, c]: [View; 3],
    form: ComplexForm,
    opts: &GemmOptions,
) -> Result<(), Error> {
    // SAFETY: the views lie inside live complex arrays of T's pairs that
    // the caller checked (aligned, non-negative whole-element strides);
    // a and b are only read; c is the caller's new array, apart from both,
    // whose real and imaginary planes are disjoint (alternate T's) and
    // written by this product alone.
    let (a, b, c) = unsafe {
        let (ar, ai) = planes::<T>(a);
        let (br, bi) = planes::<T>(b);
        let re = c.ptr.cast::<T>();
        let (rs, cs) = (2 * c.row_stride, 2 * c.col_stride);
        (
            SplitRef { re: ar, im: ai },
            SplitRef { re: br, im: bi },
            SplitMut {
                re: MatMut::from_raw_parts(re, c.rows, c.cols, rs, cs),
                im: MatMut::from_raw_parts(re.add(1), c.rows, c.cols, rs, cs),
            },
        )
    };
    // Through `gemm` (α = 1, β = 0): small products take the executor's
    // one-pass path, the others `multiply`'s real products.
    let (zero, one) = ([T::ZERO; 2], [T::ONE, T::ZERO]);
    fastmm::complex::gemm(ctx, one, a, b, zero, c, form, opts)
}
