//! Raw binary: rows·cols little-endian elements, row-major, nothing else;
//! the shape and type come from the caller.

use super::{check_declared, with_any, AnyMatrix};
use crate::element::{DType, Element};
use crate::matrix::Matrix;

/// Elements with a fixed little-endian encoding (every [`Element`]).
pub trait LittleEndian: Sized {
    /// Bytes per element.
    const SIZE: usize;
    /// Decodes one element from exactly `SIZE` bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the element's `SIZE` bytes.
    fn to_le(self, out: &mut Vec<u8>);
}

macro_rules! little_endian {
    ($($t:ty),*) => {$(
        impl LittleEndian for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn from_le(bytes: &[u8]) -> Self {
                let mut array = [0u8; std::mem::size_of::<$t>()];
                array.copy_from_slice(bytes);
                <$t>::from_le_bytes(array)
            }
            fn to_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
little_endian!(f32, f64, i32, i64);

pub(super) fn read(
    bytes: &[u8],
    (rows, cols): (usize, usize),
    dtype: DType,
) -> Result<AnyMatrix, String> {
    let size = dtype.size_bytes();
    let elements = check_declared(rows as u64, cols as u64, usize::MAX, 1)?;
    if elements.checked_mul(size) != Some(bytes.len()) {
        return Err(format!(
            "{rows}×{cols} {dtype} needs {} bytes, but the file has {}",
            elements as u128 * size as u128,
            bytes.len()
        ));
    }
    fn typed<T: Element + LittleEndian>(
        bytes: &[u8],
        rows: usize,
        cols: usize,
    ) -> Result<Matrix<T>, String> {
        let data = bytes.chunks_exact(T::SIZE).map(T::from_le).collect();
        Matrix::from_vec(rows, cols, data).map_err(|e| e.to_string())
    }
    match dtype {
        DType::F32 => typed::<f32>(bytes, rows, cols).map(AnyMatrix::F32),
        DType::F64 => typed::<f64>(bytes, rows, cols).map(AnyMatrix::F64),
        DType::I32 => typed::<i32>(bytes, rows, cols).map(AnyMatrix::I32),
        DType::I64 => typed::<i64>(bytes, rows, cols).map(AnyMatrix::I64),
    }
}

pub(super) fn write(m: &AnyMatrix) -> Result<Vec<u8>, String> {
    fn typed<T: Element + LittleEndian>(m: &Matrix<T>) -> Vec<u8> {
        let mut out = Vec::with_capacity(m.as_slice().len() * T::SIZE);
        for &x in m.as_slice() {
            x.to_le(&mut out);
        }
        out
    }
    with_any!(m, m => Ok(typed(m)), _z => Err(format!(
        "a raw file holds a real matrix, not {}: write complex matrices as .npy, .mtx or text",
        m.type_name()
    )))
}
