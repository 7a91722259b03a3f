//! CSV and TSV: one row of the matrix per line, fields separated by a
//! comma or a tab (spaces around a field are ignored), every line with
//! the same number of fields. Only finite numbers: "nan", "inf" and
//! anything that does not parse are errors naming the line and field.

use super::{with_any, AnyMatrix};
use crate::element::{DType, Element};
use crate::matrix::Matrix;

pub(super) fn read(bytes: &[u8], delimiter: u8, dtype: DType) -> Result<AnyMatrix, String> {
    match dtype {
        DType::F32 => parse::<f32>(bytes, delimiter).map(AnyMatrix::F32),
        DType::F64 => parse::<f64>(bytes, delimiter).map(AnyMatrix::F64),
        DType::I32 => parse::<i32>(bytes, delimiter).map(AnyMatrix::I32),
        DType::I64 => parse::<i64>(bytes, delimiter).map(AnyMatrix::I64),
    }
}

/// A number of type T from a field, or why not.
pub(super) fn parse_number<T: Element + std::str::FromStr>(field: &str) -> Result<T, String> {
    let value: T = field.parse().map_err(|_| {
        if T::DTYPE.is_integer() && field.parse::<f64>().is_ok() {
            format!(
                "'{field}' is not an {} (out of range or not whole)",
                T::DTYPE
            )
        } else {
            format!("'{field}' is not a number")
        }
    })?;
    if !T::DTYPE.is_integer() && !value.to_f64().is_finite() {
        return Err(format!("'{field}' is not a finite number"));
    }
    Ok(value)
}

/// The bytes as text, or the line where they stop being UTF-8.
pub(super) fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        format!("line {line}: not UTF-8 text")
    })
}

fn parse<T: Element + std::str::FromStr>(bytes: &[u8], delimiter: u8) -> Result<Matrix<T>, String> {
    let text = utf8(bytes)?;
    let mut data = Vec::new();
    let mut cols = None;
    let mut rows = 0usize;
    let mut blank_from = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            blank_from.get_or_insert(number);
            continue;
        }
        if let Some(blank) = blank_from {
            return Err(format!("line {blank}: a blank line inside the matrix"));
        }
        let mut fields = 0usize;
        for (f, field) in line.split(delimiter as char).enumerate() {
            let value = parse_number::<T>(field.trim())
                .map_err(|e| format!("line {number}, field {}: {e}", f + 1))?;
            data.push(value);
            fields += 1;
        }
        match cols {
            None => cols = Some(fields),
            Some(expected) if expected != fields => {
                return Err(format!(
                    "line {number}: {fields} fields, but line 1 has {expected}"
                ))
            }
            Some(_) => {}
        }
        rows += 1;
    }
    Matrix::from_vec(rows, cols.unwrap_or(0), data).map_err(|e| e.to_string())
}

pub(super) fn write(m: &AnyMatrix, delimiter: u8) -> Vec<u8> {
    fn typed<T: Element + std::fmt::LowerExp>(m: &Matrix<T>, delimiter: u8) -> Vec<u8> {
        let mut out = String::new();
        for i in 0..m.rows() {
            for j in 0..m.cols() {
                if j > 0 {
                    out.push(delimiter as char);
                }
                out += &format_number(m.get(i, j));
            }
            out.push('\n');
        }
        out.into_bytes()
    }
    with_any!(m, m => typed(m, delimiter))
}

/// Integers as they are; floats in the shortest form that reads back to
/// the same value (Rust's `{:e}` is exact and round-trips).
pub(super) fn format_number<T: Element + std::fmt::LowerExp>(x: T) -> String {
    if T::DTYPE.is_integer() {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}
