//! .npy files through `npyz`: arrays of up to 2 dimensions (a 1-D array
//! reads as one column, a 0-D one as 1×1) of f4, f8, i4 or i8, or complex
//! c8 and c16 (interleaved real and imaginary parts), in either byte
//! order, C or Fortran order; written little-endian in C order.

use npyz::{NpyFile, Order, TypeChar, WriterBuilder};

use super::{with_any, AnyMatrix, Array};
use crate::complex::ComplexMatrix;
use crate::element::{DType, Element};
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
    /// The element type; of each part, for a complex array.
    pub dtype: crate::element::DType,
    /// Complex elements: pairs of `dtype` (real, imaginary).
    pub complex: bool,
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
    let (dtype, complex) = match (ty.type_char(), ty.num_bytes()) {
        (TypeChar::Float, Some(4)) => (DType::F32, false),
        (TypeChar::Float, Some(8)) => (DType::F64, false),
        (TypeChar::Int, Some(4)) => (DType::I32, false),
        (TypeChar::Int, Some(8)) => (DType::I64, false),
        (TypeChar::Complex, Some(8)) => (DType::F32, true),
        (TypeChar::Complex, Some(16)) => (DType::F64, true),
        _ => {
            return Err(format!(
                "offset 0: dtype {ty} is not f4, f8, i4, i8, c8 or c16"
            ))
        }
    };
    let element_bytes = dtype.size_bytes() * if complex { 2 } else { 1 };
    let declared = u128::from(rows) * u128::from(cols) * element_bytes as u128;
    let data_len = file_len.saturating_sub(offset);
    let addressable = usize::try_from(u128::from(rows) * u128::from(cols)).is_ok();
    if declared != u128::from(data_len) || !addressable {
        return Err(format!(
            "offset {offset}: the header declares {rows}×{cols} {} ({declared} bytes of data) but {data_len} bytes follow it",
            if complex { ty.to_string() } else { dtype.to_string() }
        ));
    }
    let layout = Layout {
        dtype,
        complex,
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
    if l.complex {
        let data = &bytes[l.offset as usize..];
        let matrix = match l.dtype {
            DType::F32 => pairs::<f32>(data, &l).map(AnyMatrix::C64),
            _ => pairs::<f64>(data, &l).map(AnyMatrix::C128),
        }?;
        return Ok(Array {
            matrix,
            ndim: l.ndim,
        });
    }
    let matrix = match l.dtype {
        DType::F32 => typed::<f32>(file, rows, cols, fortran).map(AnyMatrix::F32),
        DType::F64 => typed::<f64>(file, rows, cols, fortran).map(AnyMatrix::F64),
        DType::I32 => typed::<i32>(file, rows, cols, fortran).map(AnyMatrix::I32),
        DType::I64 => typed::<i64>(file, rows, cols, fortran).map(AnyMatrix::I64),
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

/// The (already length-checked) interleaved complex data of a .npy file,
/// in its byte order, Fortran order made row-major.
fn pairs<T: Element + super::LittleEndian>(
    data: &[u8],
    l: &Layout,
) -> Result<ComplexMatrix<T>, String> {
    let value = |bytes: &[u8]| match l.little_endian {
        true => T::from_le(bytes),
        false => {
            let mut flipped = bytes.to_vec();
            flipped.reverse();
            T::from_le(&flipped)
        }
    };
    let stored: Vec<(T, T)> = data
        .chunks_exact(2 * T::SIZE)
        .map(|pair| (value(&pair[..T::SIZE]), value(&pair[T::SIZE..])))
        .collect();
    let (rows, cols) = (l.rows, l.cols);
    let z = if l.fortran {
        ComplexMatrix::from_pairs(
            rows,
            cols,
            (0..rows * cols).map(|x| stored[(x % cols) * rows + x / cols]),
        )
    } else {
        ComplexMatrix::from_pairs(rows, cols, stored)
    };
    z.map_err(|e| e.to_string())
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
    fn complex<T: Element + super::LittleEndian>(
        z: &ComplexMatrix<T>,
        shape: &[u64],
    ) -> Result<Vec<u8>, String> {
        let descr = if T::DTYPE == DType::F32 {
            "<c8"
        } else {
            "<c16"
        };
        let mut out = header(descr, shape);
        out.reserve(2 * T::SIZE * shape.iter().product::<u64>() as usize);
        for (re, im) in z.pairs() {
            re.to_le(&mut out);
            im.to_le(&mut out);
        }
        Ok(out)
    }
    with_any!(m, m => typed(m, &shape), z => complex(z, &shape))
}

/// The preamble and header of a C-order, little-endian .npy file of a
/// rows×cols matrix of `dtype` (format 1.0, padded to 64 bytes), for
/// writers that stream the data after it.
pub(crate) fn header_bytes(dtype: crate::element::DType, rows: usize, cols: usize) -> Vec<u8> {
    let descr = match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
    };
    header(descr, &[rows as u64, cols as u64])
}

/// The preamble and header of a C-order .npy file of `descr` elements and
/// this shape (format 1.0, padded to 64 bytes).
fn header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let dims = match shape {
        [len] => format!("({len},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
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
