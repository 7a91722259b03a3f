//! Tensor-memory-accelerator descriptors (sm_90+): the driver's encoding
//! of a 2-D byte matrix in global memory and the box a copy moves, passed
//! to a kernel by value.

use cudarc::driver::sys::{
    self, CUdeviceptr, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::DeviceRepr;

use crate::cuda::runtime::cuda_err;
use crate::error::Error;

/// A CUtensorMap as a kernel parameter: the driver's 128 opaque bytes,
/// 64-byte aligned as the kernels declare it (`__grid_constant__`).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct TensorMap([u64; 16]);

// SAFETY: plain bytes, of the size and alignment of the kernels'
// `TensorMap` parameter, copied into the launch's parameter space.
unsafe impl DeviceRepr for TensorMap {}

impl TensorMap {
    /// `rows` rows of `cols` bytes at `ptr`, rows `ld` bytes apart, copied
    /// in boxes of `box_rows` rows of 128 bytes with 128-byte swizzling;
    /// a box past the matrix's edge reads zeros there.
    ///
    /// Refused (an error) where the driver would refuse it: `ptr` and `ld`
    /// not multiples of 16, extents beyond the descriptor's fields, or a
    /// box of more than 256 rows.
    pub(crate) fn bytes_128b_swizzled(
        ptr: CUdeviceptr,
        (rows, cols, ld): (usize, usize, usize),
        box_rows: u32,
    ) -> Result<TensorMap, Error> {
        if !ptr.is_multiple_of(16)
            || !ld.is_multiple_of(16)
            || ld >= 1 << 40
            || !(1..=256).contains(&box_rows)
        {
            return Err(Error::Cuda(format!(
                "a tensor map needs 16-byte aligned rows and at most 256 rows a box (address {ptr:#x}, ld {ld}, box {box_rows})"
            )));
        }
        let dims = [cols.max(1) as u64, rows.max(1) as u64];
        if dims.iter().any(|&d| d > u64::from(u32::MAX)) {
            return Err(Error::Cuda(format!(
                "a tensor map of {rows} x {cols} bytes exceeds its fields"
            )));
        }
        let strides = [ld as u64];
        let boxes = [128u32, box_rows];
        let steps = [1u32, 1];
        let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
        // SAFETY: the driver writes the 128-byte map; every array holds the
        // rank's entries (strides: rank - 1), each value checked above
        // against the driver's limits.
        unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
                2,
                ptr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                steps.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }
        .result()
        .map_err(|e| cuda_err("cannot encode a tensor map", e))?;
        // SAFETY: initialised by the successful call above.
        let map = unsafe { map.assume_init() };
        Ok(TensorMap(map.opaque))
    }
}
