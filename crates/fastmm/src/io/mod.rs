//! Matrices in files: .npy (numpy), Matrix Market (.mtx), CSV, TSV and raw
//! little-endian binary, read into and written from [`AnyMatrix`].
//!
//! The format follows the extension ([`Format::of_path`]). Readers check
//! every size a file declares against the file's length before allocating
//! for it, reject malformed input with an [`Error::File`] naming the file,
//! the line or byte offset and the reason, and never panic. Writers write
//! a temporary file beside the target and rename it when complete, so a
//! half-written matrix never stands under the final name.
//!
//! Element types: .npy and raw files carry f32, f64, i32 or i64; Matrix
//! Market `real` reads as f64 and `integer` as i64; CSV/TSV read as f64,
//! or as the type asked for in [`ReadOptions::dtype`]. [`AnyMatrix::to`]
//! converts between types, refusing any conversion that would change a
//! value except the rounding of an explicit f64 → f32 request.

mod mtx;
mod npy;
pub mod out_of_core;
mod raw;
pub use raw::LittleEndian;
mod text;

use std::path::{Path, PathBuf};

use crate::element::{DType, Element};
use crate::error::Error;
use crate::matrix::Matrix;

/// A file format for matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// numpy's .npy, C or Fortran order, little- or big-endian.
    Npy,
    /// Matrix Market: dense `array`, or `coordinate` made dense.
    MatrixMarket,
    /// Comma-separated values, one row of the matrix per line.
    Csv,
    /// Tab-separated values.
    Tsv,
    /// Raw little-endian elements, row-major; the shape and type come from
    /// [`ReadOptions`].
    Raw,
}

impl Format {
    /// The format an extension names: .npy, .mtx, .csv, .tsv (or .tab),
    /// .bin or .raw.
    pub fn of_path(path: &Path) -> Result<Format, Error> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("npy") => Ok(Format::Npy),
            Some("mtx") => Ok(Format::MatrixMarket),
            Some("csv") => Ok(Format::Csv),
            Some("tsv") | Some("tab") => Ok(Format::Tsv),
            Some("bin") | Some("raw") => Ok(Format::Raw),
            _ => Err(file_error(
                path,
                "unknown format: the extension must be .npy, .mtx, .csv, .tsv, .bin or .raw",
            )),
        }
    }
}

/// A matrix of any of the supported element types.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyMatrix {
    /// f32 elements.
    F32(Matrix<f32>),
    /// f64 elements.
    F64(Matrix<f64>),
    /// i32 elements.
    I32(Matrix<i32>),
    /// i64 elements.
    I64(Matrix<i64>),
}

macro_rules! from_matrix {
    ($($t:ty => $variant:ident),*) => {$(
        impl From<Matrix<$t>> for AnyMatrix {
            fn from(m: Matrix<$t>) -> AnyMatrix {
                AnyMatrix::$variant(m)
            }
        }
    )*};
}
from_matrix!(f32 => F32, f64 => F64, i32 => I32, i64 => I64);

/// Applies one generic expression to whichever matrix an [`AnyMatrix`] holds.
macro_rules! with_any {
    ($any:expr, $m:ident => $body:expr) => {
        match $any {
            AnyMatrix::F32($m) => $body,
            AnyMatrix::F64($m) => $body,
            AnyMatrix::I32($m) => $body,
            AnyMatrix::I64($m) => $body,
        }
    };
}
pub(crate) use with_any;

/// Converts a value of one element type to another, or says why not.
pub(crate) trait Convert<U> {
    fn convert(self) -> Option<U>;
}

macro_rules! exact_int_to_float {
    ($from:ty => $($to:ty),*) => {$(
        impl Convert<$to> for $from {
            fn convert(self) -> Option<$to> {
                let x = self as $to;
                // Exact when the float holds the integer (always up to
                // 2^24 for f32 and 2^53 for f64); i128 cannot saturate.
                ((x as i128) == self as i128).then_some(x)
            }
        }
    )*};
}
exact_int_to_float!(i32 => f32, f64);
exact_int_to_float!(i64 => f32, f64);

macro_rules! integral_float_to_int {
    ($from:ty => $($to:ty),*) => {$(
        impl Convert<$to> for $from {
            fn convert(self) -> Option<$to> {
                let in_range = self >= <$to>::MIN as $from && self <= <$to>::MAX as $from;
                (self.fract() == 0.0 && in_range).then_some(self as $to)
            }
        }
    )*};
}
integral_float_to_int!(f32 => i32, i64);
integral_float_to_int!(f64 => i32, i64);

macro_rules! identity {
    ($($t:ty),*) => {$(
        impl Convert<$t> for $t {
            fn convert(self) -> Option<$t> {
                Some(self)
            }
        }
    )*};
}
identity!(f32, f64, i32, i64);

impl Convert<f32> for f64 {
    fn convert(self) -> Option<f32> {
        // Narrowing floats rounds: only ever on an explicit request.
        Some(self as f32)
    }
}
impl Convert<f64> for f32 {
    fn convert(self) -> Option<f64> {
        Some(f64::from(self))
    }
}
impl Convert<i64> for i32 {
    fn convert(self) -> Option<i64> {
        Some(i64::from(self))
    }
}
impl Convert<i32> for i64 {
    fn convert(self) -> Option<i32> {
        i32::try_from(self).ok()
    }
}

fn convert_matrix<T: Element + Convert<U>, U: Element>(m: &Matrix<T>) -> Result<Matrix<U>, String> {
    let mut data = Vec::with_capacity(m.as_slice().len());
    for (i, &x) in m.as_slice().iter().enumerate() {
        match x.convert() {
            Some(y) => data.push(y),
            None => {
                let (row, col) = (i / m.cols().max(1), i % m.cols().max(1));
                return Err(format!(
                    "element ({row}, {col}) = {x} is not exactly a {}",
                    U::DTYPE
                ));
            }
        }
    }
    Matrix::from_vec(m.rows(), m.cols(), data).map_err(|e| e.to_string())
}

impl AnyMatrix {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            AnyMatrix::F32(_) => DType::F32,
            AnyMatrix::F64(_) => DType::F64,
            AnyMatrix::I32(_) => DType::I32,
            AnyMatrix::I64(_) => DType::I64,
        }
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        with_any!(self, m => (m.rows(), m.cols()))
    }

    /// The same matrix as `dtype`. Widening is exact; integers become
    /// floats only when every value is exactly representable, floats
    /// become integers only when every value is integral and in range,
    /// i64 becomes i32 only in range, and f64 → f32 rounds (asked for
    /// explicitly). The error names the first element that does not fit.
    pub fn to(&self, dtype: DType) -> Result<AnyMatrix, String> {
        macro_rules! from {
            ($m:expr) => {
                match dtype {
                    DType::F32 => convert_matrix::<_, f32>($m).map(AnyMatrix::F32),
                    DType::F64 => convert_matrix::<_, f64>($m).map(AnyMatrix::F64),
                    DType::I32 => convert_matrix::<_, i32>($m).map(AnyMatrix::I32),
                    DType::I64 => convert_matrix::<_, i64>($m).map(AnyMatrix::I64),
                }
            };
        }
        with_any!(self, m => from!(m))
    }
}

/// The type two operands are multiplied in when none is asked for: the
/// same type; the wider of two floats or of two integers; f64 for an
/// integer and a float (checked exact by [`AnyMatrix::to`]).
pub fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    match (a, b) {
        (x, y) if x == y => x,
        (F32, F64) | (F64, F32) => F64,
        (I32, I64) | (I64, I32) => I64,
        _ => F64,
    }
}

/// How to read a file whose format does not say everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Element type of CSV/TSV (default f64) and raw files (required).
    pub dtype: Option<DType>,
    /// (rows, columns) of a raw file (required for raw).
    pub shape: Option<(usize, usize)>,
    /// Most bytes a reader may allocate for a matrix whose size the file
    /// does not bound (a Matrix Market `coordinate` file made dense);
    /// default: the memory available now.
    pub max_bytes: Option<u64>,
}

/// Reads a matrix; the format follows the extension.
pub fn read_matrix(path: &Path, opts: &ReadOptions) -> Result<AnyMatrix, Error> {
    let format = Format::of_path(path)?;
    let bytes = std::fs::read(path).map_err(|e| file_error(path, &format!("cannot read: {e}")))?;
    parse_matrix(format, &bytes, opts).map_err(|reason| file_error(path, &reason))
}

/// Parses a matrix from the bytes of a file in `format`; the error says
/// where (line or byte offset) and why.
pub fn parse_matrix(format: Format, bytes: &[u8], opts: &ReadOptions) -> Result<AnyMatrix, String> {
    match format {
        Format::Npy => npy::read(bytes),
        Format::MatrixMarket => mtx::read(bytes, opts.max_bytes),
        Format::Csv => text::read(bytes, b',', opts.dtype.unwrap_or(DType::F64)),
        Format::Tsv => text::read(bytes, b'\t', opts.dtype.unwrap_or(DType::F64)),
        Format::Raw => match (opts.shape, opts.dtype) {
            (Some(shape), Some(dtype)) => raw::read(bytes, shape, dtype),
            _ => Err("a raw file needs its shape and element type (fastmm multiply: --shape-a/--shape-b and --input-dtype)".to_string()),
        },
    }
}

/// Writes a matrix in the format the extension names, whole: to a
/// temporary file in the same directory, renamed over `path` when
/// complete.
pub fn write_matrix(path: &Path, m: &AnyMatrix) -> Result<(), Error> {
    let format = Format::of_path(path)?;
    let bytes = encode_matrix(format, m).map_err(|reason| file_error(path, &reason))?;
    let temporary = temporary_path(path);
    // Flushed to the disk before the rename, so that after a crash the
    // final name holds the whole matrix or the old file, never a hole.
    let written = std::fs::File::create(&temporary)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, &bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        file_error(path, &format!("cannot write: {e}"))
    })
}

/// The bytes of a file holding `m` in `format` (raw: row-major,
/// little-endian, no header).
pub fn encode_matrix(format: Format, m: &AnyMatrix) -> Result<Vec<u8>, String> {
    match format {
        Format::Npy => npy::write(m),
        Format::MatrixMarket => Ok(mtx::write(m)),
        Format::Csv => Ok(text::write(m, b',')),
        Format::Tsv => Ok(text::write(m, b'\t')),
        Format::Raw => Ok(raw::write(m)),
    }
}

/// A hidden name beside `path`, unique to this process.
pub(crate) fn temporary_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or("matrix".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

pub(crate) fn file_error(path: &Path, reason: &str) -> Error {
    Error::File {
        file: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// Refuses a declared element count that the data cannot hold: `bytes`
/// of input with at least `min_bytes_per_element` each.
pub(crate) fn check_declared(
    rows: u64,
    cols: u64,
    bytes: usize,
    min_bytes_per_element: usize,
) -> Result<usize, String> {
    let elements = rows
        .checked_mul(cols)
        .filter(|&e| usize::try_from(e).is_ok())
        .ok_or_else(|| format!("declares {rows}×{cols} elements, too many to address"))?;
    let most = bytes / min_bytes_per_element.max(1);
    if elements as u128 > most as u128 {
        return Err(format!(
            "declares {rows}×{cols} = {elements} elements, but its {bytes} bytes hold at most {most}"
        ));
    }
    Ok(elements as usize)
}

#[cfg(test)]
mod tests;
