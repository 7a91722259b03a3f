//! Python objects as operands: numpy arrays, and anything `numpy.asarray`
//! takes, read in place where the library's strided views can.
//!
//! The boundary normalises once: an array of a supported type in native
//! byte order, whose last two strides are non-negative whole elements and
//! whose data is aligned, is viewed without a copy (C order, Fortran order,
//! slices, transposes and broadcast views alike). Any other layout
//! (negative or odd strides, unaligned or byte-swapped data) is copied
//! into a C-ordered array first.

use fastmm::DType;
use numpy::npyffi::flags::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::type_error;

/// The element types fastmm multiplies, as numpy names them.
pub(crate) const SUPPORTED: &str = "float32, float64, int32 and int64";

/// A numpy array and its element type.
pub(crate) struct Operand<'py> {
    pub(crate) array: Bound<'py, PyUntypedArray>,
    pub(crate) dtype: DType,
}

/// numpy's name of a dtype.
pub(crate) fn numpy_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::I32 => "int32",
        DType::I64 => "int64",
    }
}

/// `obj` as a numpy array: itself, or `numpy.asarray(obj)`.
pub(crate) fn as_array<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        return Ok(array.clone());
    }
    let py = obj.py();
    let array = py.import("numpy")?.getattr("asarray")?.call1((obj,))?;
    Ok(array.cast_into::<PyUntypedArray>()?)
}

/// The fastmm type of an array's elements, if it has one in any byte order,
/// and whether it is already in native order.
pub(crate) fn classify(array: &Bound<'_, PyUntypedArray>) -> Option<(DType, bool)> {
    let descr = array.dtype();
    let dtype = match (descr.kind(), descr.itemsize()) {
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        _ => return None,
    };
    let native = match dtype {
        DType::F32 => descr.is_equiv_to(&numpy::dtype::<f32>(array.py())),
        DType::F64 => descr.is_equiv_to(&numpy::dtype::<f64>(array.py())),
        DType::I32 => descr.is_equiv_to(&numpy::dtype::<i32>(array.py())),
        DType::I64 => descr.is_equiv_to(&numpy::dtype::<i64>(array.py())),
    };
    Some((dtype, native))
}

/// The text numpy prints for an array's dtype.
pub(crate) fn dtype_text(array: &Bound<'_, PyUntypedArray>) -> String {
    array
        .dtype()
        .str()
        .map_or_else(|_| "unknown".into(), |s| s.to_string())
}

/// `obj` as an operand of a supported type; `which` names it in errors.
pub(crate) fn operand<'py>(obj: &Bound<'py, PyAny>, which: &str) -> PyResult<Operand<'py>> {
    let array = as_array(obj)?;
    match classify(&array) {
        Some((dtype, true)) => Ok(Operand { array, dtype }),
        Some((dtype, false)) => Ok(Operand {
            array: converted(&array, dtype)?,
            dtype,
        }),
        None => Err(type_error(format!(
            "fastmm multiplies {SUPPORTED} arrays; {which} is {}",
            dtype_text(&array)
        ))),
    }
}

/// `array` as native-order `dtype` (numpy's `astype`, so integers wrap and
/// floats round as numpy's own casts do).
pub(crate) fn converted<'py>(
    array: &Bound<'py, PyUntypedArray>,
    dtype: DType,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = array.py();
    let target = match dtype {
        DType::F32 => numpy::dtype::<f32>(py),
        DType::F64 => numpy::dtype::<f64>(py),
        DType::I32 => numpy::dtype::<i32>(py),
        DType::I64 => numpy::dtype::<i64>(py),
    };
    Ok(array
        .call_method1("astype", (target,))?
        .cast_into::<PyUntypedArray>()?)
}

/// A C-ordered, aligned copy of `array` (numpy's `ascontiguousarray`).
pub(crate) fn contiguous<'py>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = array.py();
    Ok(py
        .import("numpy")?
        .getattr("ascontiguousarray")?
        .call1((array,))?
        .cast_into::<PyUntypedArray>()?)
}

/// Whether numpy lets this array be written.
pub(crate) fn is_writeable(array: &Bound<'_, PyUntypedArray>) -> bool {
    // SAFETY: `as_array_ptr` points at the live array object that `array`
    // holds a reference to; its flags are read under the GIL.
    unsafe { (*array.as_array_ptr()).fields.flags & NPY_ARRAY_WRITEABLE != 0 }
}

/// An array's memory as the library reads it: a base pointer and, per
/// dimension, its length and stride in bytes (borrowed from the array:
/// nothing is allocated per call).
#[derive(Clone, Copy)]
pub(crate) struct Layout<'a> {
    pub(crate) ptr: *mut u8,
    pub(crate) shape: &'a [usize],
    pub(crate) strides: &'a [isize],
    pub(crate) item: usize,
}

impl<'a> Layout<'a> {
    pub(crate) fn of(array: &'a Bound<'_, PyUntypedArray>) -> Layout<'a> {
        // SAFETY: as in `is_writeable`; `data` is the array's base pointer.
        let ptr = unsafe { (*array.as_array_ptr()).fields.data.cast::<u8>() };
        Layout {
            ptr,
            shape: array.shape(),
            strides: array.strides(),
            item: array.dtype().itemsize(),
        }
    }

    /// The element strides of dimension `d` for the library's views: its
    /// byte stride in whole elements, 0 where the dimension has one
    /// element (any stride reaches it) or the array none; `None` where it
    /// is negative or not a whole number of elements.
    pub(crate) fn element_stride(&self, d: usize) -> Option<usize> {
        if self.shape[d] <= 1 || self.shape.contains(&0) {
            return Some(0);
        }
        let stride = self.strides[d];
        (stride >= 0 && (stride as usize).is_multiple_of(self.item))
            .then(|| stride as usize / self.item)
    }

    /// Whether the last two dimensions (or the one) are views the library
    /// takes, with aligned data.
    pub(crate) fn viewable(&self) -> bool {
        let n = self.shape.len();
        let aligned = (self.ptr as usize).is_multiple_of(self.item);
        aligned && (n.saturating_sub(2)..n).all(|d| self.element_stride(d).is_some())
    }

    /// Every address the array reaches, as a byte range (empty for an
    /// empty array).
    pub(crate) fn span(&self) -> (usize, usize) {
        if self.shape.contains(&0) {
            return (0, 0);
        }
        let (mut low, mut high) = (self.ptr as isize, self.ptr as isize);
        for (&len, &stride) in self.shape.iter().zip(self.strides) {
            let reach = (len as isize - 1) * stride;
            if reach < 0 {
                low += reach;
            } else {
                high += reach;
            }
        }
        (low as usize, high as usize + self.item)
    }

    /// Whether this array and `other` may share memory.
    pub(crate) fn overlaps(&self, other: &Layout<'_>) -> bool {
        let (a, b) = (self.span(), other.span());
        a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
    }

    /// Whether no two elements of the last two dimensions share an address,
    /// by the usual sufficient test (the larger stride steps over the
    /// whole extent of the smaller), and the batch dimensions, if any,
    /// are C-ordered and dense over them.
    pub(crate) fn writable_without_aliasing(&self) -> bool {
        if !self.viewable() {
            return false;
        }
        let n = self.shape.len();
        if n > 2 {
            let mut expected = (self.shape[n - 2] * self.shape[n - 1] * self.item) as isize;
            let dense_matrices = self.strides[n - 1] == self.item as isize
                && self.strides[n - 2] == (self.shape[n - 1] * self.item) as isize;
            if !dense_matrices {
                return false;
            }
            for d in (0..n - 2).rev() {
                if self.shape[d] > 1 && self.strides[d] != expected {
                    return false;
                }
                expected *= self.shape[d] as isize;
            }
            return true;
        }
        let (rows, cols) = match n {
            2 => (self.shape[0], self.shape[1]),
            1 => (1, self.shape[0]),
            _ => (1, 1),
        };
        let (rs, cs) = match n {
            2 => (self.element_stride(0), self.element_stride(1)),
            1 => (Some(0), self.element_stride(0)),
            _ => (Some(0), Some(0)),
        };
        let (Some(rs), Some(cs)) = (rs, cs) else {
            return false;
        };
        match (rows > 1, cols > 1) {
            (false, false) => true,
            (false, true) => cs > 0,
            (true, false) => rs > 0,
            (true, true) => (cs > 0 && rs >= cs * cols) || (rs > 0 && cs >= rs * rows),
        }
    }
}
