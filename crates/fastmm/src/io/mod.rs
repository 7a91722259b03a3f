//! Matrices in files: .npy (numpy), Matrix Market (.mtx), CSV, TSV,
//! whitespace-separated text and raw little-endian binary, read into and
//! written from [`AnyMatrix`].
//!
//! ```no_run
//! use fastmm::io::{read_matrix, write_matrix, ReadOptions};
//! # fn main() -> Result<(), fastmm::Error> {
//! // The format follows the extension; text is read as f64 by default.
//! let a = read_matrix("a.npy".as_ref(), &ReadOptions::default())?;
//! let b = read_matrix("b.csv".as_ref(), &ReadOptions::new().dtype(a.dtype()))?;
//! write_matrix("a.txt".as_ref(), &a)?;
//! # let _ = b;
//! # Ok(())
//! # }
//! ```
//!
//! The format follows the extension ([`Format::of_path`]) or is named
//! ([`Format`] parses "npy", "mtx", "csv", "tsv", "txt" and "raw"). Readers check
//! every size a file declares against the file's length before allocating
//! for it, reject malformed input with an [`Error::File`] naming the file,
//! the line or byte offset and the reason, and never panic. Writers write
//! a temporary file beside the target and rename it when complete, so a
//! half-written matrix never stands under the final name.
//!
//! NaN and ±∞ are values like any other: every reader accepts them (text
//! as `nan`, `inf`, `-inf`, as numpy writes them) and every writer writes
//! them back.
//!
//! A .npy file may hold a vector (1-D): it reads as one column, and
//! [`read_array`] also reports its number of dimensions, so that a caller
//! can follow numpy's `matmul` shapes; [`write_array`] writes a vector or
//! a scalar back as one.
//!
//! Element types: .npy and raw files carry f32, f64, i32 or i64; Matrix
//! Market `real` reads as f64 and `integer` as i64; CSV/TSV read as f64,
//! or as the type asked for in [`ReadOptions::dtype`]. Complex matrices
//! ([`AnyMatrix::C64`], [`AnyMatrix::C128`]) live in .npy files (`c8`,
//! `c16`), Matrix Market `complex` (read as complex128) and text files as
//! numpy's `savetxt` writes them (`(1.5+2e-03j)`; read as complex128, or
//! complex64 when f32 is asked for, whenever a value has an imaginary
//! part); raw files hold real matrices only. [`AnyMatrix::to`]
//! converts between types, refusing any conversion that would change a
//! value except the rounding of an explicit f64 → f32 request.

mod mtx;
pub(crate) mod npy;
pub mod out_of_core;
mod raw;
pub use raw::LittleEndian;
mod text;

use std::path::Path;

use crate::complex::ComplexMatrix;
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
    /// Values separated by spaces or tabs, as `np.savetxt` writes them.
    Text,
    /// Raw little-endian elements, row-major; the shape and type come from
    /// [`ReadOptions`].
    Raw,
}

impl Format {
    /// The format an extension names: .npy, .mtx, .csv, .tsv (or .tab),
    /// .txt (or .dat), .bin or .raw.
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
            Some("txt") | Some("dat") => Ok(Format::Text),
            Some("bin") | Some("raw") => Ok(Format::Raw),
            _ => Err(file_error(
                path,
                "unknown format: the extension must be .npy, .mtx, .csv, .tsv, .txt, .bin or .raw (or name the format)",
            )),
        }
    }

    /// The format `named` when given, else the one `path`'s extension
    /// names.
    pub fn of_path_or(path: &Path, named: Option<Format>) -> Result<Format, Error> {
        named.map_or_else(|| Format::of_path(path), Ok)
    }

    /// Its usual extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Npy => "npy",
            Format::MatrixMarket => "mtx",
            Format::Csv => "csv",
            Format::Tsv => "tsv",
            Format::Text => "txt",
            Format::Raw => "bin",
        }
    }

    /// Whether it is line-oriented text.
    pub fn is_text(self) -> bool {
        !matches!(self, Format::Npy | Format::Raw)
    }
}

impl std::str::FromStr for Format {
    type Err = Error;

    /// A format by name or extension: npy, mtx (or matrix-market), csv,
    /// tsv (or tab), txt (or text, dat), raw (or bin).
    fn from_str(name: &str) -> Result<Format, Error> {
        match name.trim().to_ascii_lowercase().as_str() {
            "npy" => Ok(Format::Npy),
            "mtx" | "matrix-market" => Ok(Format::MatrixMarket),
            "csv" => Ok(Format::Csv),
            "tsv" | "tab" => Ok(Format::Tsv),
            "txt" | "text" | "dat" => Ok(Format::Text),
            "raw" | "bin" => Ok(Format::Raw),
            _ => Err(Error::InvalidOption(format!(
                "unknown format '{name}' (expected npy, mtx, csv, tsv, txt or raw)"
            ))),
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
    /// complex64 elements: f32 real and imaginary parts.
    C64(ComplexMatrix<f32>),
    /// complex128 elements: f64 real and imaginary parts.
    C128(ComplexMatrix<f64>),
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

impl From<ComplexMatrix<f32>> for AnyMatrix {
    fn from(m: ComplexMatrix<f32>) -> AnyMatrix {
        AnyMatrix::C64(m)
    }
}

impl From<ComplexMatrix<f64>> for AnyMatrix {
    fn from(m: ComplexMatrix<f64>) -> AnyMatrix {
        AnyMatrix::C128(m)
    }
}

/// Applies one generic expression to whichever real matrix an
/// [`AnyMatrix`] holds, and another to a complex one.
macro_rules! with_any {
    ($any:expr, $m:ident => $body:expr, $z:ident => $complex:expr) => {
        match $any {
            AnyMatrix::F32($m) => $body,
            AnyMatrix::F64($m) => $body,
            AnyMatrix::I32($m) => $body,
            AnyMatrix::I64($m) => $body,
            AnyMatrix::C64($z) => $complex,
            AnyMatrix::C128($z) => $complex,
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

fn convert_matrix<T: Element + Convert<U>, U: Element>(m: &Matrix<T>) -> Result<Matrix<U>, Error> {
    let mut data = Vec::with_capacity(m.as_slice().len());
    for (i, &x) in m.as_slice().iter().enumerate() {
        match x.convert() {
            Some(y) => data.push(y),
            None => {
                return Err(Error::Inexact {
                    row: i / m.cols().max(1),
                    col: i % m.cols().max(1),
                    value: x.to_string(),
                    to: U::DTYPE.to_string(),
                });
            }
        }
    }
    Matrix::from_vec(m.rows(), m.cols(), data)
}

impl AnyMatrix {
    /// The element type, of the parts for a complex matrix (f32 for
    /// complex64, f64 for complex128): see [`AnyMatrix::is_complex`].
    pub fn dtype(&self) -> DType {
        match self {
            AnyMatrix::F32(_) | AnyMatrix::C64(_) => DType::F32,
            AnyMatrix::F64(_) | AnyMatrix::C128(_) => DType::F64,
            AnyMatrix::I32(_) => DType::I32,
            AnyMatrix::I64(_) => DType::I64,
        }
    }

    /// Whether the elements are complex.
    pub fn is_complex(&self) -> bool {
        matches!(self, AnyMatrix::C64(_) | AnyMatrix::C128(_))
    }

    /// The element type's name: "f32", "f64", "i32", "i64", "c64" or
    /// "c128".
    pub fn type_name(&self) -> &'static str {
        match self {
            AnyMatrix::C64(_) => "c64",
            AnyMatrix::C128(_) => "c128",
            real => real.dtype().name(),
        }
    }

    /// (rows, columns).
    pub fn shape(&self) -> (usize, usize) {
        with_any!(self, m => (m.rows(), m.cols()), z => z.shape())
    }

    /// The same elements in row-major order as a rows×cols matrix (a
    /// column vector as a row, say); [`Error::InvalidOption`] when the
    /// element count differs.
    pub fn reshaped(self, rows: usize, cols: usize) -> Result<AnyMatrix, Error> {
        let (r, c) = self.shape();
        if rows.checked_mul(cols) != Some(r * c) {
            return Err(Error::InvalidOption(format!(
                "a {r}×{c} matrix cannot be reshaped to {rows}×{cols}"
            )));
        }
        fn complex<T: Element>(
            z: ComplexMatrix<T>,
            rows: usize,
            cols: usize,
        ) -> Result<ComplexMatrix<T>, Error> {
            let (re, im) = z.into_parts();
            ComplexMatrix::new(
                Matrix::from_vec(rows, cols, re.into_vec())?,
                Matrix::from_vec(rows, cols, im.into_vec())?,
            )
        }
        Ok(with_any!(self,
            m => Matrix::from_vec(rows, cols, m.into_vec())?.into(),
            z => complex(z, rows, cols)?.into()))
    }

    /// The same matrix as `dtype` (of the parts, for a complex matrix,
    /// which stays complex: f32 gives complex64, f64 complex128; integer
    /// types are refused). Widening is exact; integers become floats only
    /// when every value is exactly representable, floats become integers
    /// only when every value is integral and in range, i64 becomes i32
    /// only in range, and f64 → f32 rounds (asked for explicitly). The
    /// error, [`Error::Inexact`], names the first element that does not
    /// fit.
    pub fn to(&self, dtype: DType) -> Result<AnyMatrix, Error> {
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
        macro_rules! complex {
            ($z:expr) => {
                match dtype {
                    DType::F32 => ComplexMatrix::new(
                        convert_matrix::<_, f32>($z.re())?,
                        convert_matrix::<_, f32>($z.im())?,
                    )
                    .map(AnyMatrix::C64),
                    DType::F64 => ComplexMatrix::new(
                        convert_matrix::<_, f64>($z.re())?,
                        convert_matrix::<_, f64>($z.im())?,
                    )
                    .map(AnyMatrix::C128),
                    integer => Err(Error::InvalidOption(format!(
                        "a complex matrix cannot be converted to {integer}"
                    ))),
                }
            };
        }
        with_any!(self, m => from!(m), z => complex!(z))
    }

    /// The same matrix as complex with parts of `dtype` (f32 or f64): a
    /// real matrix gains zero imaginary parts, exactly as [`AnyMatrix::to`]
    /// converts its values.
    pub fn to_complex(&self, dtype: DType) -> Result<AnyMatrix, Error> {
        if self.is_complex() {
            return self.to(dtype);
        }
        match self.to(dtype)? {
            AnyMatrix::F32(re) => Ok(AnyMatrix::C64(ComplexMatrix::from_real(re)?)),
            AnyMatrix::F64(re) => Ok(AnyMatrix::C128(ComplexMatrix::from_real(re)?)),
            _ => Err(Error::InvalidOption(format!(
                "complex numbers have float parts (f32 or f64), not {dtype}"
            ))),
        }
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

/// How to read a file whose format does not say everything. The default
/// reads every self-describing file; `ReadOptions::new().dtype(..)` and
/// the other setters fill in the rest.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Element type of text files (default f64) and raw files (required).
    pub dtype: Option<DType>,
    /// (rows, columns) of a raw file (required for raw).
    pub shape: Option<(usize, usize)>,
    /// Most bytes a reader may allocate for a matrix whose size the file
    /// does not bound (a Matrix Market `coordinate` file made dense);
    /// default: the memory available now.
    pub max_bytes: Option<u64>,
    /// The field delimiter of a text file; a space means any run of
    /// whitespace. Default: the format's (see the module's notes).
    pub delimiter: Option<char>,
}

impl ReadOptions {
    /// Options that read every self-describing file.
    pub fn new() -> ReadOptions {
        ReadOptions::default()
    }

    /// The element type of text and raw files.
    pub fn dtype(mut self, dtype: DType) -> ReadOptions {
        self.dtype = Some(dtype);
        self
    }

    /// The (rows, columns) of a raw file.
    pub fn shape(mut self, rows: usize, cols: usize) -> ReadOptions {
        self.shape = Some((rows, cols));
        self
    }

    /// The field delimiter of a text file.
    pub fn delimiter(mut self, delimiter: char) -> ReadOptions {
        self.delimiter = Some(delimiter);
        self
    }

    /// The most bytes a reader may allocate for a matrix whose size the
    /// file does not bound.
    pub fn max_bytes(mut self, bytes: u64) -> ReadOptions {
        self.max_bytes = Some(bytes);
        self
    }
}

/// A matrix with the number of dimensions its file gave it: 2 for a
/// matrix, 1 for a .npy vector (held as one column), 0 for a .npy scalar
/// (held as 1×1).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The elements, as a matrix.
    pub matrix: AnyMatrix,
    /// 0, 1 or 2.
    pub ndim: usize,
}

/// Reads a matrix; the format follows the extension. A .npy vector reads
/// as one column; a .npy scalar is refused.
pub fn read_matrix(path: &Path, opts: &ReadOptions) -> Result<AnyMatrix, Error> {
    let array = read_array(path, None, opts)?;
    if array.ndim == 0 {
        return Err(file_error(path, "a scalar (0-D array) is not a matrix"));
    }
    Ok(array.matrix)
}

/// Reads an array of 0 to 2 dimensions in `format`, or the format the
/// extension names when that is `None`.
pub fn read_array(path: &Path, format: Option<Format>, opts: &ReadOptions) -> Result<Array, Error> {
    let format = Format::of_path_or(path, format)?;
    let bytes = std::fs::read(path).map_err(|e| file_error(path, &format!("cannot read: {e}")))?;
    parse_array(format, &bytes, opts).map_err(|e| in_file(path, e))
}

/// Parses a matrix from the bytes of a file in `format` (a .npy vector as
/// one column). The error, [`Error::Malformed`], says where (line or byte
/// offset) and why.
pub fn parse_matrix(format: Format, bytes: &[u8], opts: &ReadOptions) -> Result<AnyMatrix, Error> {
    parse_array(format, bytes, opts).map(|array| array.matrix)
}

/// Parses an array of 0 to 2 dimensions from the bytes of a file in
/// `format` (only .npy holds fewer than 2).
pub fn parse_array(format: Format, bytes: &[u8], opts: &ReadOptions) -> Result<Array, Error> {
    let text_dtype = opts.dtype.unwrap_or(DType::F64);
    let matrix = |m: Result<AnyMatrix, String>| {
        m.map(|matrix| Array { matrix, ndim: 2 })
            .map_err(Error::Malformed)
    };
    match format {
        Format::Npy => npy::read(bytes).map_err(Error::Malformed),
        Format::MatrixMarket => matrix(mtx::read(bytes, opts.max_bytes)),
        Format::Csv => matrix(text::read(bytes, opts.delimiter, Some(','), text_dtype)),
        Format::Tsv => matrix(text::read(bytes, opts.delimiter, Some('\t'), text_dtype)),
        Format::Text => matrix(text::read(bytes, opts.delimiter, None, text_dtype)),
        Format::Raw => match (opts.shape, opts.dtype) {
            (Some(shape), Some(dtype)) => matrix(raw::read(bytes, shape, dtype)),
            _ => Err(Error::Malformed("a raw file needs its shape and element type (fastmm multiply: --shape-a/--shape-b and --input-dtype)".to_string())),
        },
    }
}

/// Writes a matrix in the format the extension names, whole: to a
/// temporary file in the same directory, renamed over `path` when
/// complete.
pub fn write_matrix(path: &Path, m: &AnyMatrix) -> Result<(), Error> {
    write_bytes(
        path,
        &encode_matrix(Format::of_path(path)?, m).map_err(|e| in_file(path, e))?,
    )
}

/// Writes an array as [`write_matrix`] does, in `format` or the one the
/// extension names. A .npy file keeps its dimensions (a vector of
/// `array.ndim == 1` as shape (n,), a 1×1 matrix of `ndim == 0` as a
/// scalar); other formats hold it as the matrix it is.
pub fn write_array(path: &Path, format: Option<Format>, array: &Array) -> Result<(), Error> {
    let format = Format::of_path_or(path, format)?;
    write_bytes(
        path,
        &encode_array(format, array).map_err(|e| in_file(path, e))?,
    )
}

/// The bytes of an array's file in `format` (see [`write_array`]).
pub fn encode_array(format: Format, array: &Array) -> Result<Vec<u8>, Error> {
    match format {
        Format::Npy => npy::write(&array.matrix, array.ndim).map_err(Error::Malformed),
        _ => encode_matrix(format, &array.matrix),
    }
}

/// `bytes` under `path`, whole or not at all (see [`crate::partial`]).
fn write_bytes(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    crate::partial::write_whole(path, bytes)
}

/// The bytes of a file holding `m` in `format` (raw: row-major,
/// little-endian, no header; text: one row per line, floats in their
/// shortest round-trip form).
pub fn encode_matrix(format: Format, m: &AnyMatrix) -> Result<Vec<u8>, Error> {
    match format {
        Format::Npy => npy::write(m, 2).map_err(Error::Malformed),
        Format::MatrixMarket => Ok(mtx::write(m)),
        Format::Csv => Ok(text::write(m, ',')),
        Format::Tsv => Ok(text::write(m, '\t')),
        Format::Text => Ok(text::write(m, ' ')),
        Format::Raw => raw::write(m).map_err(Error::Malformed),
    }
}

/// An error about data, placed in the file it came from or went to.
fn in_file(path: &Path, error: Error) -> Error {
    match error {
        Error::Malformed(reason) => file_error(path, &reason),
        other => file_error(path, &other.to_string()),
    }
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
