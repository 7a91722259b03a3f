//! GPU arrays through DLPack: operands that live on a GPU (anything with
//! `__dlpack__`, such as torch and CuPy tensors) are multiplied in place,
//! and the result is a [`GpuArray`] that `torch.from_dlpack` and
//! `cupy.from_dlpack` take without a copy.
//!
//! Stream semantics follow the protocol: each operand is asked for with
//! `__dlpack__(stream=S)`, S the stream fastmm's products run on, so its
//! producer orders its pending work before them; the product is complete
//! when `matmul` returns, so the result is ready on any stream.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use fastmm::{Context, DType, Element, GemmOptions, GpuBuffer, GpuMatrix};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::IntoPyDict;

use crate::errors::{to_py, type_error, value_error};
use crate::operand::numpy_name;
use crate::release::{released, Wait};

/// DLPack's device type of CUDA memory (kDLCUDA).
const DL_CUDA: i32 = 2;
/// DLPack's type codes (kDLInt, kDLFloat).
const DL_INT: u8 = 0;
const DL_FLOAT: u8 = 2;
const CAPSULE: &CStr = c"dltensor";

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// The DLPack device of `obj`, if it has one: (device type, ordinal).
pub(crate) fn device_of(obj: &Bound<'_, PyAny>) -> Option<(i32, i32)> {
    obj.call_method0("__dlpack_device__")
        .and_then(|d| d.extract::<(i32, i32)>())
        .ok()
}

/// Whether `obj` lives in CUDA memory (and on which GPU).
pub(crate) fn cuda_ordinal(obj: &Bound<'_, PyAny>) -> Option<usize> {
    match device_of(obj) {
        Some((DL_CUDA, id)) if id >= 0 => Some(id as usize),
        _ => None,
    }
}

fn dtype_of(dtype: DlDataType) -> Option<DType> {
    match (dtype.code, dtype.bits, dtype.lanes) {
        (DL_FLOAT, 32, 1) => Some(DType::F32),
        (DL_FLOAT, 64, 1) => Some(DType::F64),
        (DL_INT, 32, 1) => Some(DType::I32),
        (DL_INT, 64, 1) => Some(DType::I64),
        _ => None,
    }
}

fn dl_dtype(dtype: DType) -> DlDataType {
    let (code, bits) = match dtype {
        DType::F32 => (DL_FLOAT, 32),
        DType::F64 => (DL_FLOAT, 64),
        DType::I32 => (DL_INT, 32),
        DType::I64 => (DL_INT, 64),
    };
    DlDataType {
        code,
        bits,
        lanes: 1,
    }
}

/// A GPU operand: its row-major view, type and the capsule that keeps
/// its producer's tensor description alive while it is used.
struct GpuOperand<'py> {
    matrix: GpuMatrix,
    dtype: DType,
    _capsule: Bound<'py, PyAny>,
}

/// `obj` as a row-major matrix in the memory of GPU `ordinal`. A tensor
/// in another layout is made contiguous on its own device first (its
/// `contiguous()` method, as torch has, or `cupy.ascontiguousarray`).
fn gpu_operand<'py>(
    obj: &Bound<'py, PyAny>,
    which: &str,
    ordinal: usize,
    stream: usize,
) -> PyResult<GpuOperand<'py>> {
    for attempt in 0..2 {
        let capsule = obj_or_contiguous(obj, attempt)?.call_method(
            "__dlpack__",
            (),
            Some(&[("stream", stream)].into_py_dict(obj.py())?),
        )?;
        // SAFETY: a capsule named "dltensor" holds a DLManagedTensor (the
        // DLPack protocol), alive as long as the capsule is not consumed;
        // we only read it while holding the capsule.
        let (tensor, dims, strides) = unsafe {
            let pointer = pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE.as_ptr());
            if pointer.is_null() {
                return Err(PyErr::fetch(obj.py()));
            }
            let managed = &*(pointer as *const DlManagedTensor);
            let t = &managed.dl_tensor;
            let ndim = t.ndim.max(0) as usize;
            let dims = std::slice::from_raw_parts(t.shape, ndim).to_vec();
            let strides = match t.strides.is_null() {
                true => None,
                false => Some(std::slice::from_raw_parts(t.strides, ndim).to_vec()),
            };
            (
                (t.data as u64 + t.byte_offset, t.device, t.dtype),
                dims,
                strides,
            )
        };
        let (data, device, dl_type) = tensor;
        if device.device_type != DL_CUDA || device.device_id as usize != ordinal {
            return Err(value_error(format!(
                "{which} is on DLPack device {:?}, not cuda:{ordinal}",
                (device.device_type, device.device_id)
            )));
        }
        let dtype = dtype_of(dl_type).ok_or_else(|| {
            type_error(format!(
                "fastmm multiplies float32, float64, int32 and int64 GPU arrays; {which} has DLPack type code {} of {} bits",
                dl_type.code, dl_type.bits
            ))
        })?;
        if dims.len() != 2 {
            return Err(value_error(format!(
                "GPU operands are 2-D matrices; {which} has {} dimensions",
                dims.len()
            )));
        }
        let (rows, cols) = (dims[0] as usize, dims[1] as usize);
        let (row_stride, col_stride) = match &strides {
            None => (cols as i64, 1),
            Some(s) => (s[0], s[1]),
        };
        let row_major = (col_stride == 1 || cols <= 1) && (row_stride >= cols as i64 || rows <= 1);
        if row_major {
            let item = u64::from(dl_type.bits / 8);
            if data % item != 0 {
                return Err(value_error(format!("{which}'s data is not aligned")));
            }
            return Ok(GpuOperand {
                matrix: GpuMatrix {
                    ptr: data,
                    rows,
                    cols,
                    ld: (row_stride.max(cols as i64)) as usize,
                },
                dtype,
                _capsule: capsule,
            });
        }
    }
    Err(type_error(format!(
        "{which} is not row-major (C-contiguous) and has no contiguous() to make it so"
    )))
}

/// `obj` on the first attempt; a contiguous copy of it, on its device, on
/// the second.
fn obj_or_contiguous<'py>(obj: &Bound<'py, PyAny>, attempt: usize) -> PyResult<Bound<'py, PyAny>> {
    if attempt == 0 {
        return Ok(obj.clone());
    }
    if let Ok(contiguous) = obj.call_method0("contiguous") {
        return Ok(contiguous);
    }
    let cupy = obj.py().import("cupy")?;
    cupy.getattr("ascontiguousarray")?.call1((obj,))
}

/// A matrix in GPU memory that fastmm computed: hand it to
/// `torch.from_dlpack` or `cupy.from_dlpack` (no copy is made).
#[pyclass(module = "fastmm", frozen)]
pub(crate) struct GpuArray {
    buffer: Arc<GpuBuffer>,
}

#[pymethods]
impl GpuArray {
    /// (rows, columns).
    #[getter]
    fn shape(&self) -> (usize, usize) {
        let m = self.buffer.matrix();
        (m.rows, m.cols)
    }

    /// The element type, as numpy names it.
    #[getter]
    fn dtype(&self) -> &'static str {
        numpy_name(self.buffer.dtype())
    }

    /// "cuda:N".
    #[getter]
    fn device(&self) -> String {
        format!("cuda:{}", self.buffer.ordinal())
    }

    /// DLPack's device of the data: (kDLCUDA, ordinal).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (DL_CUDA, self.buffer.ordinal() as i32)
    }

    /// A DLPack capsule of the data. The product completed before the
    /// array was returned, so it is ready on every stream.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version);
        if dl_device.is_some_and(|d| d != self.__dlpack_device__()) {
            return Err(PyBufferError::new_err(
                "fastmm's GPU arrays are exported on their own device only",
            ));
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "fastmm's GPU arrays are exported without a copy",
            ));
        }
        export(py, Arc::clone(&self.buffer))
    }

    fn __repr__(&self) -> String {
        let (rows, cols) = self.shape();
        format!(
            "fastmm.GpuArray(shape=({rows}, {cols}), dtype={}, device={})",
            self.dtype(),
            self.device()
        )
    }
}

/// What a capsule's DLManagedTensor owns: the buffer, and the shape and
/// strides its DLTensor points at.
struct Export {
    _buffer: Arc<GpuBuffer>,
    shape: [i64; 2],
    strides: [i64; 2],
}

unsafe extern "C" fn delete_export(managed: *mut DlManagedTensor) {
    // SAFETY: `managed` and its context were made by `export` with
    // Box::into_raw, and DLPack calls the deleter once.
    unsafe {
        drop(Box::from_raw((*managed).manager_ctx as *mut Export));
        drop(Box::from_raw(managed));
    }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: a capsule still named "dltensor" was never consumed, so its
    // tensor is still ours to delete; a consumer renames it and deletes it
    // itself.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, CAPSULE.as_ptr()) == 1 {
            let managed =
                pyo3::ffi::PyCapsule_GetPointer(capsule, CAPSULE.as_ptr()) as *mut DlManagedTensor;
            if let Some(delete) = (*managed).deleter {
                delete(managed);
            }
        }
    }
}

/// A "dltensor" capsule sharing `buffer`.
fn export<'py>(py: Python<'py>, buffer: Arc<GpuBuffer>) -> PyResult<Bound<'py, PyAny>> {
    let m = buffer.matrix();
    let mut context = Box::new(Export {
        shape: [m.rows as i64, m.cols as i64],
        strides: [m.ld as i64, 1],
        _buffer: Arc::clone(&buffer),
    });
    let managed = Box::new(DlManagedTensor {
        dl_tensor: DlTensor {
            data: m.ptr as *mut c_void,
            device: DlDevice {
                device_type: DL_CUDA,
                device_id: buffer.ordinal() as i32,
            },
            ndim: 2,
            dtype: dl_dtype(buffer.dtype()),
            shape: context.shape.as_mut_ptr(),
            strides: context.strides.as_mut_ptr(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_export),
    });
    let managed = Box::into_raw(managed);
    // SAFETY: `managed` is a live, uniquely owned allocation; the context
    // box moves into it (its shape and strides arrays do not move: they
    // are inside the boxed Export).
    unsafe { (*managed).manager_ctx = Box::into_raw(context) as *mut c_void };
    // SAFETY: the name is a 'static C string; on failure the tensor is
    // deleted here, since no capsule owns it.
    let capsule = unsafe {
        pyo3::ffi::PyCapsule_New(
            managed as *mut c_void,
            CAPSULE.as_ptr(),
            Some(capsule_destructor),
        )
    };
    if capsule.is_null() {
        // SAFETY: as in `delete_export`; no capsule holds `managed`.
        unsafe { delete_export(managed) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: PyCapsule_New returned a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// `a @ b` for GPU operands on GPU `ordinal`: the product in place, the
/// result a new [`GpuArray`].
pub(crate) fn matmul<'py>(
    py: Python<'py>,
    ctx: &Context,
    opts: GemmOptions,
    (a, b): (&Bound<'py, PyAny>, &Bound<'py, PyAny>),
    ordinal: usize,
) -> PyResult<(Bound<'py, PyAny>, fastmm::Timing)> {
    let stream = match ctx.gpu_stream_handle().map_err(to_py)? {
        // DLPack spells the legacy default stream 1 (0 is ambiguous).
        0 => 1,
        handle => handle,
    };
    let a = gpu_operand(a, "a", ordinal, stream)?;
    let b = gpu_operand(b, "b", ordinal, stream)?;
    if a.dtype != b.dtype {
        return Err(type_error(format!(
            "GPU operands of two types ({} and {}) are not converted; convert one on its device",
            numpy_name(a.dtype),
            numpy_name(b.dtype)
        )));
    }
    let (am, bm) = (a.matrix, b.matrix);
    let (out, timing) = for_dtype!(a.dtype, T => {
        let out = ctx.alloc_gpu::<T>(am.rows, bm.cols).map_err(to_py)?;
        let cm = out.matrix();
        let timing = released(py, Wait::Released, |_| {
            // SAFETY: A and B are the producers' GPU memory of this type on
            // this GPU (checked above), kept alive by their capsules and
            // ordered before our stream by DLPack; C is our own new buffer,
            // apart from both.
            unsafe { ctx.gemm_gpu::<T>(T::ONE, am, bm, T::ZERO, cm, &opts) }
        })?;
        (out, timing)
    });
    let array = Bound::new(
        py,
        GpuArray {
            buffer: Arc::new(out),
        },
    )?;
    Ok((array.into_any(), timing))
}
