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

use fastmm::{Context, DType, Element, GemmOptions, GpuBuffer, GpuMatrix, GpuProduct};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::types::IntoPyDict;

use crate::errors::{to_py, type_error, value_error};
use crate::operand::{numpy_name, Layout};
use crate::product::{jobs, tuple_text, Shapes, View};
use crate::release::{released, Wait};

/// DLPack's device type of CUDA memory (kDLCUDA).
const DL_CUDA: i32 = 2;
/// DLPack's type codes (kDLInt, kDLFloat, kDLComplex).
const DL_INT: u8 = 0;
const DL_FLOAT: u8 = 2;
const DL_COMPLEX: u8 = 5;
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

/// An element type of GPU arrays: a real type, or a complex one whose
/// parts are of a float type (complex64: f32, complex128: f64), stored
/// interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Elem {
    part: DType,
    complex: bool,
}

impl Elem {
    const fn real(part: DType) -> Elem {
        Elem {
            part,
            complex: false,
        }
    }

    /// Bytes of one element (both parts of a complex one).
    fn size_bytes(self) -> usize {
        self.part.size_bytes() * if self.complex { 2 } else { 1 }
    }

    /// numpy's name of the type.
    fn name(self) -> &'static str {
        match (self.complex, self.part) {
            (false, part) => numpy_name(part),
            (true, DType::F32) => "complex64",
            (true, _) => "complex128",
        }
    }
}

fn dtype_of(dtype: DlDataType) -> Option<Elem> {
    let complex = |part| Elem {
        part,
        complex: true,
    };
    match (dtype.code, dtype.bits, dtype.lanes) {
        (DL_FLOAT, 32, 1) => Some(Elem::real(DType::F32)),
        (DL_FLOAT, 64, 1) => Some(Elem::real(DType::F64)),
        (DL_INT, 32, 1) => Some(Elem::real(DType::I32)),
        (DL_INT, 64, 1) => Some(Elem::real(DType::I64)),
        (DL_COMPLEX, 64, 1) => Some(complex(DType::F32)),
        (DL_COMPLEX, 128, 1) => Some(complex(DType::F64)),
        _ => None,
    }
}

fn dl_dtype(elem: Elem) -> DlDataType {
    let code = match (elem.complex, elem.part) {
        (true, _) => DL_COMPLEX,
        (false, DType::F32 | DType::F64) => DL_FLOAT,
        (false, DType::I32 | DType::I64) => DL_INT,
    };
    DlDataType {
        code,
        bits: 8 * elem.size_bytes() as u8,
        lanes: 1,
    }
}

/// A tensor in GPU memory as DLPack describes it: address, dimensions,
/// strides in bytes and type, with the capsule that keeps its producer's
/// description alive while it is used.
struct GpuTensor<'py> {
    data: u64,
    dims: Vec<usize>,
    strides: Vec<isize>,
    dtype: Elem,
    _capsule: Bound<'py, PyAny>,
}

impl GpuTensor<'_> {
    /// Its memory as the batch walk reads it (addresses, never read here).
    fn layout(&self) -> Layout<'_> {
        Layout {
            ptr: self.data as usize as *mut u8,
            shape: &self.dims,
            strides: &self.strides,
            item: self.dtype.size_bytes(),
        }
    }

    /// Every byte address it reaches, as a range (empty when it is).
    fn span(&self) -> (u64, u64) {
        let (start, end) = self.layout().span();
        (start as u64, end as u64)
    }
}

/// `obj`'s DLPack description, asked for on `stream` (so that its
/// producer orders its pending work before that stream's; −1, DLPack's
/// "no ordering", where the caller orders it), in the memory of GPU
/// `ordinal`.
fn gpu_tensor<'py>(
    obj: &Bound<'py, PyAny>,
    which: &str,
    ordinal: usize,
    stream: isize,
) -> PyResult<GpuTensor<'py>> {
    let capsule = obj.call_method(
        "__dlpack__",
        (),
        Some(&[("stream", stream)].into_py_dict(obj.py())?),
    )?;
    // SAFETY: a capsule named "dltensor" holds a DLManagedTensor (the
    // DLPack protocol), alive as long as the capsule is not consumed; we
    // only read it while holding the capsule.
    let (data, device, dl_type, dims, strides) = unsafe {
        let pointer = pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), CAPSULE.as_ptr());
        if pointer.is_null() {
            return Err(PyErr::fetch(obj.py()));
        }
        let managed = &*(pointer as *const DlManagedTensor);
        let t = &managed.dl_tensor;
        let ndim = t.ndim.max(0) as usize;
        let dims = match ndim {
            0 => Vec::new(),
            _ => std::slice::from_raw_parts(t.shape, ndim).to_vec(),
        };
        let strides = match t.strides.is_null() || ndim == 0 {
            true => None,
            false => Some(std::slice::from_raw_parts(t.strides, ndim).to_vec()),
        };
        (
            t.data as u64 + t.byte_offset,
            t.device,
            t.dtype,
            dims,
            strides,
        )
    };
    if device.device_type != DL_CUDA || device.device_id as usize != ordinal {
        return Err(value_error(format!(
            "{which} is on DLPack device {:?}, not cuda:{ordinal}",
            (device.device_type, device.device_id)
        )));
    }
    let dtype = dtype_of(dl_type).ok_or_else(|| {
        type_error(format!(
            "fastmm multiplies float32, float64, int32, int64, complex64 and complex128 GPU arrays; {which} has DLPack type code {} of {} bits",
            dl_type.code, dl_type.bits
        ))
    })?;
    let item = dtype.size_bytes();
    if data % item as u64 != 0 {
        return Err(value_error(format!("{which}'s data is not aligned")));
    }
    let dims: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
    // DLPack's strides are in elements; absent, the tensor is C-ordered.
    let strides: Vec<isize> = match strides {
        Some(s) => s.iter().map(|&x| x as isize * item as isize).collect(),
        None => c_ordered(&dims, item),
    };
    Ok(GpuTensor {
        data,
        dims,
        strides,
        dtype,
        _capsule: capsule,
    })
}

/// A matrix of the batch walk as the library takes GPU matrices: rows
/// contiguous (unit column stride) at a non-negative distance of at least
/// a row, or columns contiguous likewise (a transposed view, such as
/// torch's `w.mT`); `None` otherwise (overlapping or doubly strided lines).
fn gpu_matrix(view: View) -> Option<GpuMatrix> {
    let (rows, cols) = (view.rows, view.cols);
    let row_major = (cols <= 1 || view.col_stride == 1).then_some(match rows <= 1 {
        true => cols,
        false => view.row_stride,
    });
    if let Some(ld) = row_major.filter(|&ld| ld >= cols) {
        return Some(GpuMatrix::row_major(
            view.ptr as usize as u64,
            (rows, cols),
            ld,
        ));
    }
    let column_major = (rows <= 1 || view.row_stride == 1).then_some(match cols <= 1 {
        true => rows,
        false => view.col_stride,
    });
    column_major.filter(|&ld| ld >= rows).map(|ld| GpuMatrix {
        ptr: view.ptr as usize as u64,
        rows,
        cols,
        ld,
        transposed: true,
    })
}

/// Whether every view is one the library takes.
fn all_viewable(views: impl Iterator<Item = View>) -> bool {
    views.into_iter().all(|v| gpu_matrix(v).is_some())
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
    /// Complex elements: the buffer holds their parts interleaved, two
    /// per element.
    complex: bool,
    /// numpy's shape of the result: the buffer's rows are the batch's
    /// matrices' rows, one after another.
    dims: Vec<usize>,
}

impl GpuArray {
    /// Its element type.
    fn elem(&self) -> Elem {
        Elem {
            part: self.buffer.dtype(),
            complex: self.complex,
        }
    }
}

#[pymethods]
impl GpuArray {
    /// The shape, as numpy's matmul gives it (batch dimensions first).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        pyo3::types::PyTuple::new(py, &self.dims)
    }

    /// The element type, as numpy names it.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.elem().name()
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
        export(py, Arc::clone(&self.buffer), self.elem(), &self.dims)
    }

    fn __repr__(&self) -> String {
        format!(
            "fastmm.GpuArray(shape={:?}, dtype={}, device={})",
            self.dims,
            self.dtype(),
            self.device()
        )
    }
}

/// What a capsule's DLManagedTensor owns: the buffer, and the shape and
/// strides its DLTensor points at.
struct Export {
    _buffer: Arc<GpuBuffer>,
    shape: Vec<i64>,
    strides: Vec<i64>,
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

/// A "dltensor" capsule sharing `buffer`, C-ordered with shape `dims` of
/// elements of type `elem`.
fn export<'py>(
    py: Python<'py>,
    buffer: Arc<GpuBuffer>,
    elem: Elem,
    dims: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let m = buffer.matrix();
    let mut strides = vec![1i64; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1].max(1) as i64;
    }
    let mut context = Box::new(Export {
        shape: dims.iter().map(|&d| d as i64).collect(),
        strides,
        _buffer: Arc::clone(&buffer),
    });
    let managed = Box::new(DlManagedTensor {
        dl_tensor: DlTensor {
            data: m.ptr as *mut c_void,
            device: DlDevice {
                device_type: DL_CUDA,
                device_id: buffer.ordinal() as i32,
            },
            ndim: dims.len() as i32,
            dtype: dl_dtype(elem),
            shape: context.shape.as_mut_ptr(),
            strides: context.strides.as_mut_ptr(),
            byte_offset: 0,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_export),
    });
    let managed = Box::into_raw(managed);
    // SAFETY: `managed` is a live, uniquely owned allocation; the context
    // box moves into it (its shape and strides vectors' heap buffers do
    // not move).
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

/// `tensor` (`obj`'s) when the library takes its matrices in place, or a
/// contiguous copy of `obj` on its own device when it does not (a view
/// strided in both directions): `viewable` says which, for a candidate.
fn in_place_or_copy<'py>(
    (obj, tensor): (&Bound<'py, PyAny>, GpuTensor<'py>),
    which: &str,
    (ordinal, stream): (usize, isize),
    viewable: impl Fn(&GpuTensor<'py>) -> bool,
) -> PyResult<GpuTensor<'py>> {
    if viewable(&tensor) {
        return Ok(tensor);
    }
    let copy = gpu_tensor(&obj_or_contiguous(obj, 1)?, which, ordinal, stream)?;
    match viewable(&copy) {
        true => Ok(copy),
        false => Err(type_error(format!(
            "{which}'s matrices are neither row- nor column-contiguous, and it has no contiguous() to make them so"
        ))),
    }
}

/// `a @ b` for GPU operands on GPU `ordinal`, with numpy's shapes (1-D
/// operands, broadcast batches): the products in place, planned once and
/// queued as one batch, into `out` (a GPU tensor of the result's type and
/// shape, written in place) or a new [`GpuArray`]. Row-major matrices and
/// transposed views (column-major) are read in place; others (strided in
/// both directions) are copied once on their device. A transposed `out`
/// is written as the row-major Cᵀ = Bᵀ·Aᵀ.
pub(crate) fn matmul<'py>(
    py: Python<'py>,
    ctx: &Context,
    opts: GemmOptions,
    (a, b): (&Bound<'py, PyAny>, &Bound<'py, PyAny>),
    (ordinal, completion): (usize, fastmm::GpuCompletion),
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, fastmm::Timing)> {
    let stream = match (completion, ctx.gpu_stream_handle().map_err(to_py)?) {
        // The call runs on the caller's stream, after its work: the
        // producers need not order theirs.
        (fastmm::GpuCompletion::OnStream(_), _) => -1,
        // DLPack spells the legacy default stream 1 (0 is ambiguous).
        (_, 0) => 1,
        (_, handle) => handle as isize,
    };
    let at = (ordinal, stream);
    let first_a = gpu_tensor(a, "a", ordinal, stream)?;
    let first_b = gpu_tensor(b, "b", ordinal, stream)?;
    if first_a.dtype != first_b.dtype {
        return Err(type_error(format!(
            "GPU operands of two types ({} and {}) are not converted; convert one on its device",
            first_a.dtype.name(),
            first_b.dtype.name()
        )));
    }
    let dtype = first_a.dtype;
    let shapes = Shapes::of(&first_a.dims, &first_b.dims)?;
    let result_dims = shapes.result.clone();
    // The walk of the batch needs a C layout to compute a's and b's views
    // against; a placeholder C-ordered result serves until C is known.
    let placeholder_strides = c_ordered(&result_dims, dtype.size_bytes());
    let placeholder = Layout {
        ptr: std::ptr::null_mut(),
        shape: &result_dims,
        strides: &placeholder_strides,
        item: dtype.size_bytes(),
    };
    if shapes.k == 0 && shapes.m * shapes.n > 0 && shapes.batch.iter().all(|&d| d > 0) {
        return Err(value_error(
            "an empty inner dimension (k = 0) on GPU operands: the product is zeros, which fastmm does not fill on a GPU",
        ));
    }
    let a = in_place_or_copy((a, first_a), "a", at, |t| {
        all_viewable(
            jobs(&t.layout(), &first_b.layout(), &placeholder, &shapes)
                .into_iter()
                .map(|j| j.a),
        )
    })?;
    let b = in_place_or_copy((b, first_b), "b", at, |t| {
        all_viewable(
            jobs(&a.layout(), &t.layout(), &placeholder, &shapes)
                .into_iter()
                .map(|j| j.b),
        )
    })?;
    let (target, result) = match out {
        Some(out) => {
            let c = gpu_tensor(out, "out", ordinal, stream)?;
            if c.dtype != dtype {
                return Err(type_error(format!(
                    "out is {} but the product is {}",
                    c.dtype.name(),
                    dtype.name()
                )));
            }
            if c.dims != result_dims {
                return Err(value_error(format!(
                    "non-broadcastable output operand with shape {} doesn't match the broadcast shape {} (out)",
                    tuple_text(&c.dims),
                    tuple_text(&result_dims)
                )));
            }
            for (input, name) in [(&a, "a"), (&b, "b")] {
                let ((x0, x1), (y0, y1)) = (c.span(), input.span());
                if x0 < x1 && y0 < y1 && x0 < y1 && y0 < x1 {
                    return Err(value_error(format!(
                        "out shares memory with {name}; give a separate output"
                    )));
                }
            }
            (c, out.clone())
        }
        None => {
            let count: usize = shapes.batch.iter().product();
            // A complex result's parts interleaved: twice the columns.
            let parts = if dtype.complex { 2 } else { 1 };
            let buffer = Arc::new(for_dtype!(dtype.part, T => ctx
                .alloc_gpu::<T>(count * shapes.m, parts * shapes.n)
                .map_err(to_py)?));
            let tensor = GpuTensor {
                data: buffer.matrix().ptr,
                dims: result_dims.clone(),
                strides: c_ordered(&result_dims, dtype.size_bytes()),
                dtype,
                _capsule: py.None().into_bound(py),
            };
            let array = GpuArray {
                buffer,
                complex: dtype.complex,
                dims: result_dims.clone(),
            };
            (tensor, Bound::new(py, array)?.into_any())
        }
    };
    let walk = jobs(&a.layout(), &b.layout(), &target.layout(), &shapes);
    let mut products = Vec::with_capacity(walk.len());
    for job in &walk {
        let (Some(am), Some(bm)) = (gpu_matrix(job.a), gpu_matrix(job.b)) else {
            return Err(type_error(
                "an operand's matrices are neither row- nor column-contiguous after a copy",
            ));
        };
        let cm = gpu_matrix(job.c).ok_or_else(|| {
            value_error(
                "out's matrices must be row- or column-contiguous in their last two dimensions",
            )
        })?;
        products.push(GpuProduct {
            a: am,
            b: bm,
            c: cm,
        });
    }
    // Complex operands take the complex product's form of the level: the
    // classical one at `native`, 3M at the relaxed levels (cuBLAS's
    // cgemm/zgemm and their 3M forms, or fastmm's real products of the
    // parts split on the device, by the algorithm).
    let form = fastmm::ComplexForm::for_level(opts.accuracy);
    let timing = for_dtype!(dtype.part, T => released(py, Wait::Released, |_| {
        // SAFETY: A and B are the producers' GPU memory of this type on
        // this GPU (checked above), kept alive by their capsules and
        // ordered before our stream by DLPack; each C is out's memory
        // (likewise, and checked apart from A and B) or our new buffer.
        // With GpuCompletion::OnStream, the products follow the work on
        // the caller's stream and precede its later work, so its allocator
        // reuses the tensors only after them.
        unsafe {
            match dtype.complex {
                false => ctx.gemm_gpu_batch::<T>(T::ONE, &products, T::ZERO, &opts, completion),
                true => ctx.gemm_gpu_complex_batch::<T>(&products, form, &opts, completion),
            }
        }
    })?);
    Ok((result, timing))
}

/// The byte strides of a C-ordered array of `dims`.
fn c_ordered(dims: &[usize], item: usize) -> Vec<isize> {
    let mut strides = vec![0isize; dims.len()];
    let mut next = item as isize;
    for d in (0..dims.len()).rev() {
        strides[d] = next;
        next *= dims[d].max(1) as isize;
    }
    strides
}
