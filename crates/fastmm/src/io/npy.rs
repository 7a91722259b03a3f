//! .npy files through `npyz`: arrays of up to 2 dimensions (a 1-D array
//! reads as one column, a 0-D one as 1×1) of f4, f8, i4 or i8 in either
//! byte order, C or Fortran order; written little-endian in C order.

use npyz::{NpyFile, Order, TypeChar, WriterBuilder};

use super::{with_any, AnyMatrix, Array};
use crate::element::Element;
use crate::matrix::Matrix;

/// Checks the magic, the version and the header length against the file
/// before `npyz` reads the header (it allocates the length it is given:
/// a 4 GiB length field in 100 bytes of file ran the fuzzer out of
/// memory).
pub(super) fn check_preamble(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return Err("offset 0: not a .npy file (no \\x93NUMPY magic)".to_string());
    }
    let (length, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => {
            let field = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (usize::try_from(field).unwrap_or(usize::MAX), 12)
        }
        2 | 3 => return Err("offset 8: the file ends inside the header length".to_string()),
        other => {
            return Err(format!(
                "offset 6: .npy format version {other} is not supported"
            ))
        }
    };
    if length > bytes.len() - start {
        return Err(format!(
            "offset 8: the header declares {length} bytes, but {} follow",
            bytes.len() - start
        ));
    }
    Ok(())
}

/// Where and how a .npy file stores its matrix.
pub(super) struct Layout {
    pub dtype: crate::element::DType,
    pub rows: usize,
    pub cols: usize,
    /// The array's dimensions: 2, 1 (a vector, as one column) or 0.
    pub ndim: usize,
    /// Stored column by column.
    pub fortran: bool,
    pub little_endian: bool,
    /// Byte offset of the data.
    pub offset: u64,
}

/// Parses the preamble and header in `head` (at least those bytes of the
/// file) and checks that the file's `file_len` bytes are exactly the
/// header plus the data it declares, before anything is allocated for it.
fn parse_header(head: &[u8], file_len: u64) -> Result<(Layout, npyz::NpyHeader), String> {
    check_preamble(head)?;
    let mut rest = head;
    let header = npyz::NpyHeader::from_reader(&mut rest)
        .map_err(|e| format!("offset 0: not a .npy file: {e}"))?;
    let offset = (head.len() - rest.len()) as u64;
    let file = NpyFile::with_header(header.clone(), rest);
    let (rows, cols, ndim) = match *file.shape() {
        [rows, cols] => (rows, cols, 2),
        [len] => (len, 1, 1),
        [] => (1, 1, 0),
        ref other => {
            return Err(format!(
                "offset 0: a matrix is 2-D, but this array has {} dimensions",
                other.len()
            ))
        }
    };
    let npyz::DType::Plain(ty) = file.dtype() else {
        return Err("offset 0: structured arrays are not matrices".to_string());
    };
    let dtype = match (ty.type_char(), ty.num_bytes()) {
        (TypeChar::Float, Some(4)) => crate::element::DType::F32,
        (TypeChar::Float, Some(8)) => crate::element::DType::F64,
        (TypeChar::Int, Some(4)) => crate::element::DType::I32,
        (TypeChar::Int, Some(8)) => crate::element::DType::I64,
        _ => return Err(format!("offset 0: dtype {ty} is not f4, f8, i4 or i8")),
    };
    let declared = u128::from(rows) * u128::from(cols) * dtype.size_bytes() as u128;
    let data_len = file_len.saturating_sub(offset);
    let addressable = usize::try_from(u128::from(rows) * u128::from(cols)).is_ok();
    if declared != u128::from(data_len) || !addressable {
        return Err(format!(
            "offset {offset}: the header declares {rows}×{cols} {dtype} ({declared} bytes of data) but {data_len} bytes follow it"
        ));
    }
    let layout = Layout {
        dtype,
        rows: rows as usize,
        cols: cols as usize,
        ndim,
        fortran: file.order() == Order::Fortran,
        little_endian: ty.endianness() != npyz::Endianness::Big,
        offset,
    };
    Ok((layout, header))
}

/// The layout of a mapped .npy file (see [`parse_header`]).
pub(super) fn layout(head: &[u8], file_len: u64) -> Result<Layout, String> {
    parse_header(head, file_len).map(|(layout, _)| layout)
}

pub(super) fn read(bytes: &[u8]) -> Result<Array, String> {
    let (l, header) = parse_header(bytes, bytes.len() as u64)?;
    let file = NpyFile::with_header(header, &bytes[l.offset as usize..]);
    let (rows, cols, fortran) = (l.rows, l.cols, l.fortran);
    let matrix = match l.dtype {
        crate::element::DType::F32 => typed::<f32>(file, rows, cols, fortran).map(AnyMatrix::F32),
        crate::element::DType::F64 => typed::<f64>(file, rows, cols, fortran).map(AnyMatrix::F64),
        crate::element::DType::I32 => typed::<i32>(file, rows, cols, fortran).map(AnyMatrix::I32),
        crate::element::DType::I64 => typed::<i64>(file, rows, cols, fortran).map(AnyMatrix::I64),
    }?;
    Ok(Array {
        matrix,
        ndim: l.ndim,
    })
}

/// Reads the (already length-checked) data, turning Fortran order into
/// the row-major layout of [`Matrix`].
fn typed<T: Element + npyz::Deserialize>(
    file: NpyFile<&[u8]>,
    rows: usize,
    cols: usize,
    fortran: bool,
) -> Result<Matrix<T>, String> {
    let data: Vec<T> = file.into_vec().map_err(|e| format!("data: {e}"))?;
    if fortran {
        // Stored column by column: element (i, j) is at j·rows + i.
        Ok(Matrix::from_fn(rows, cols, |i, j| data[j * rows + i]))
    } else {
        Matrix::from_vec(rows, cols, data).map_err(|e| e.to_string())
    }
}

/// The file of `m` as an array of `ndim` dimensions: 2, 1 (a vector: m
/// has one row or one column) or 0 (a scalar: m is 1×1).
pub(super) fn write(m: &AnyMatrix, ndim: usize) -> Result<Vec<u8>, String> {
    let (rows, cols) = m.shape();
    let shape: Vec<u64> = match ndim {
        2 => vec![rows as u64, cols as u64],
        1 if rows == 1 || cols == 1 => vec![(rows * cols) as u64],
        0 if (rows, cols) == (1, 1) => vec![],
        _ => {
            return Err(format!(
                "a {rows}×{cols} matrix cannot be written as a {ndim}-D array"
            ))
        }
    };
    fn typed<T: Element + npyz::AutoSerialize>(
        m: &Matrix<T>,
        shape: &[u64],
    ) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| e.to_string())?;
        writer
            .extend(m.as_slice().iter().copied())
            .map_err(|e| e.to_string())?;
        writer.finish().map_err(|e| e.to_string())?;
        Ok(out)
    }
    with_any!(m, m => typed(m, &shape))
}

/// The preamble and header of a C-order, little-endian .npy file of a
/// rows×cols matrix of `dtype` (format 1.0, padded to 64 bytes), for
/// writers that stream the data after it.
pub(crate) fn header_bytes(dtype: crate::element::DType, rows: usize, cols: usize) -> Vec<u8> {
    let descr = match dtype {
        crate::element::DType::F32 => "<f4",
        crate::element::DType::F64 => "<f8",
        crate::element::DType::I32 => "<i4",
        crate::element::DType::I64 => "<i8",
    };
    let dict =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + length (2) + dict + padding + '\n'.
    let unpadded = 10 + dict.len() + 1;
    let padded = unpadded.div_ceil(64) * 64;
    let mut header = dict.into_bytes();
    header.resize(padded - 10 - 1, b' ');
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    out
}
