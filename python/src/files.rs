//! Matrix files: the library's readers and writers (.npy, Matrix Market,
//! CSV/TSV/text, raw) as numpy arrays, and the out-of-core product of
//! mapped .npy files.

use std::path::PathBuf;

use fastmm::io::out_of_core::MappedMatrix;
use fastmm::io::{read_array, write_array, AnyMatrix, Array, Format, ReadOptions};
use fastmm::{DType, Element, Matrix};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{to_py, value_error};
use crate::operand::{contiguous, operand};

/// The format named by `name`, if any.
fn format_named(name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(|n| n.parse::<Format>().map_err(to_py)).transpose()
}

/// A matrix as a numpy array of `ndim` dimensions (0, 1 or 2).
fn to_numpy<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    matrix: Matrix<T>,
    ndim: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, cols) = matrix.shape();
    let flat = PyArray1::from_vec(py, matrix.into_vec());
    let shape: Vec<usize> = match ndim {
        0 => vec![],
        1 => vec![rows * cols],
        _ => vec![rows, cols],
    };
    Ok(flat.reshape(shape)?.into_any())
}

/// A complex matrix as a numpy complex array of `ndim` dimensions, from
/// its interleaved parts viewed as `complex_type`.
fn complex_to_numpy<'py, T: Element + numpy::Element>(
    py: Python<'py>,
    z: fastmm::complex::ComplexMatrix<T>,
    ndim: usize,
    complex_type: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, cols) = z.shape();
    let interleaved: Vec<T> = z.pairs().flat_map(|(re, im)| [re, im]).collect();
    let flat = PyArray1::from_vec(py, interleaved);
    let complex = flat.call_method1("view", (complex_type,))?;
    let shape: Vec<usize> = match ndim {
        0 => vec![],
        1 => vec![rows * cols],
        _ => vec![rows, cols],
    };
    complex.call_method1("reshape", (shape,))
}

/// A matrix file as a numpy array: .npy, Matrix Market (.mtx), CSV/TSV or
/// whitespace-separated text (as numpy's savetxt writes), or raw binary
/// (with `dtype` and `shape`). `format` names one where the extension
/// does not.
#[pyfunction]
#[pyo3(signature = (path, *, dtype = None, format = None, shape = None, delimiter = None))]
pub(crate) fn load<'py>(
    py: Python<'py>,
    path: PathBuf,
    dtype: Option<&str>,
    format: Option<&str>,
    shape: Option<(usize, usize)>,
    delimiter: Option<char>,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = ReadOptions {
        dtype: dtype.map(str::parse::<DType>).transpose().map_err(to_py)?,
        shape,
        delimiter,
        max_bytes: None,
    };
    let format = format_named(format)?;
    let array = py
        .detach(|| read_array(&path, format, &opts))
        .map_err(to_py)?;
    match array.matrix {
        AnyMatrix::F32(m) => to_numpy(py, m, array.ndim),
        AnyMatrix::F64(m) => to_numpy(py, m, array.ndim),
        AnyMatrix::I32(m) => to_numpy(py, m, array.ndim),
        AnyMatrix::I64(m) => to_numpy(py, m, array.ndim),
        AnyMatrix::C64(z) => complex_to_numpy(py, z, array.ndim, "complex64"),
        AnyMatrix::C128(z) => complex_to_numpy(py, z, array.ndim, "complex128"),
    }
}

/// A complex64 or complex128 numpy array as a rows×cols complex matrix;
/// `None` for another type.
fn complex_matrix(
    array: &Bound<'_, PyAny>,
    (rows, cols): (usize, usize),
) -> PyResult<Option<AnyMatrix>> {
    let numpy = array.py().import("numpy")?;
    let dtype = array.getattr("dtype")?;
    let part = match dtype.getattr("name")?.extract::<String>()?.as_str() {
        "complex64" => "float32",
        "complex128" => "float64",
        _ => return Ok(None),
    };
    // The parts interleaved, in C order: the array's own memory when it is
    // C-contiguous, else a copy.
    let parts = numpy
        .call_method1("ascontiguousarray", (array,))?
        .call_method1("reshape", (-1,))?
        .call_method1("view", (part,))?;
    macro_rules! pairs {
        ($t:ty) => {{
            let flat = parts.cast::<numpy::PyArray1<$t>>()?.to_vec()?;
            let pairs = flat.chunks_exact(2).map(|p| (p[0], p[1]));
            fastmm::complex::ComplexMatrix::from_pairs(rows, cols, pairs)
                .map_err(to_py)?
                .into()
        }};
    }
    Ok(Some(match part {
        "float32" => pairs!(f32),
        _ => pairs!(f64),
    }))
}

/// Writes a 0-, 1- or 2-D array to a matrix file of the format its
/// extension (or `format`) names: whole or not at all, through a
/// temporary file renamed into place.
#[pyfunction]
#[pyo3(signature = (path, array, *, format = None))]
pub(crate) fn save(
    py: Python<'_>,
    path: PathBuf,
    array: &Bound<'_, PyAny>,
    format: Option<&str>,
) -> PyResult<()> {
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    let ndim = shape.len();
    if ndim > 2 {
        return Err(value_error(format!(
            "a matrix file holds at most 2 dimensions; the array has {ndim}"
        )));
    }
    let (rows, cols) = match shape[..] {
        [] => (1, 1),
        [n] => (1, n),
        [r, c] => (r, c),
        _ => unreachable!("at most 2 dimensions"),
    };
    let matrix = match complex_matrix(array, (rows, cols))? {
        Some(matrix) => matrix,
        None => real_matrix(array, (rows, cols))?,
    };
    // A 1-D array is a column in the library's files (k×1), as numpy
    // saves and loads it.
    let matrix = match ndim {
        1 => matrix.reshaped(cols, 1).map_err(to_py)?,
        _ => matrix,
    };
    let format = format_named(format)?;
    py.detach(|| write_array(&path, format, &Array { matrix, ndim }))
        .map_err(to_py)
}

/// A real numpy array of a type fastmm multiplies as a rows×cols matrix.
fn real_matrix(array: &Bound<'_, PyAny>, (rows, cols): (usize, usize)) -> PyResult<AnyMatrix> {
    let op = operand(array, "array")?;
    let dense = contiguous(&op.array)?;
    macro_rules! matrix {
        ($t:ty, $variant:ident) => {{
            let typed = dense.cast::<numpy::PyArrayDyn<$t>>()?;
            let data = typed.to_vec().map_err(|e| value_error(e.to_string()))?;
            AnyMatrix::$variant(Matrix::from_vec(rows, cols, data).map_err(to_py)?)
        }};
    }
    Ok(match op.dtype {
        DType::F32 => matrix!(f32, F32),
        DType::F64 => matrix!(f64, F64),
        DType::I32 => matrix!(i32, I32),
        DType::I64 => matrix!(i64, I64),
    })
}

/// The out-of-core product of two 2-D .npy files into a third, C computed
/// block by block within `budget` bytes and written through a map; the
/// report as a dict. Used by `fastmm.multiply_files`.
#[pyfunction]
#[pyo3(signature = (a_path, b_path, out_path, *, algo, device, threads, dtype, check, budget, accuracy = "native"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn multiply_mapped<'py>(
    py: Python<'py>,
    a_path: PathBuf,
    b_path: PathBuf,
    out_path: PathBuf,
    algo: &str,
    device: &str,
    threads: Option<i64>,
    dtype: Option<&str>,
    check: bool,
    budget: u64,
    accuracy: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = crate::options::options(algo, threads, accuracy)?;
    let ctx = crate::options::context(py, device)?;
    let a = MappedMatrix::open(&a_path, None).map_err(to_py)?;
    let b = MappedMatrix::open(&b_path, None).map_err(to_py)?;
    if a.ndim != 2 || b.ndim != 2 {
        return Err(value_error(
            "the out-of-core product maps two 2-D .npy files; vectors are multiplied in memory",
        ));
    }
    let dtype = match dtype {
        Some(d) => d.parse::<DType>().map_err(to_py)?,
        None => fastmm::io::promote(a.dtype, b.dtype),
    };
    // Inputs of another type, byte order or alignment are converted once,
    // in pieces, into scratch files beside the output.
    let scratch = match out_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let report = py
        .detach(|| {
            let a = match a.maps_as(dtype) {
                true => a,
                false => a.converted(dtype, &scratch)?,
            };
            let b = match b.maps_as(dtype) {
                true => b,
                false => b.converted(dtype, &scratch)?,
            };
            for_dtype!(dtype, T => {
                fastmm::io::out_of_core::multiply::<T>(&ctx, &a, &b, &out_path, &opts, budget, check)
            })
        })
        .map_err(to_py)?;
    let dict = PyDict::new(py);
    let (m, k, n) = report.shape;
    dict.set_item("shape", (m, k, n))?;
    dict.set_item("dtype", crate::operand::numpy_name(dtype))?;
    dict.set_item("out_of_core", true)?;
    dict.set_item("blocks", report.blocks)?;
    dict.set_item(
        "block_shape",
        (report.plan.block_rows, report.plan.block_cols),
    )?;
    dict.set_item("seconds", report.seconds)?;
    dict.set_item("multiply_seconds", report.multiply_seconds)?;
    if let Some((ok, rel_error, bound_ratio)) = report.check {
        dict.set_item("ok", ok)?;
        dict.set_item("rel_error", rel_error)?;
        dict.set_item("bound_ratio", bound_ratio)?;
    }
    Ok(dict)
}
