//! Delimited text (CSV, TSV, whitespace-separated), read the way numpy's
//! `loadtxt` reads it and written the way numpy prints floats.
//!
//! One row of the matrix per line, every row with the same number of
//! fields. A UTF-8 byte-order mark is skipped, `#` starts a comment that
//! runs to the end of the line, blank lines are skipped, and one trailing
//! delimiter at the end of a line is allowed. Fields are separated by the
//! given delimiter or, by default, by the format's: a comma for CSV when
//! the first row has one, a tab for TSV when it has one, and otherwise any
//! run of spaces and tabs (`np.savetxt`'s default). Floats accept `nan`,
//! `inf` and `-inf` in any case, as numpy writes them.

use super::{with_any, AnyMatrix};
use crate::element::{DType, Element};
use crate::matrix::Matrix;

/// How the fields of a line are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// Any run of spaces and tabs.
    Whitespace,
    /// Exactly this character, with spaces around a field ignored.
    On(char),
}

impl Split {
    /// The split of a file: `given` when the user named one (a space means
    /// any run of whitespace), else `preferred` when the first row holds
    /// it, else whitespace.
    pub(super) fn choose(given: Option<char>, preferred: Option<char>, first_row: &str) -> Split {
        match given {
            Some(' ') => Split::Whitespace,
            Some(c) => Split::On(c),
            None => match preferred {
                Some(c) if first_row.contains(c) => Split::On(c),
                _ => Split::Whitespace,
            },
        }
    }

    /// The fields of one (comment-free, non-blank) line, without one
    /// trailing empty field left by a delimiter at the end of the line.
    fn fields(self, line: &str) -> Vec<&str> {
        match self {
            Split::Whitespace => line.split_whitespace().collect(),
            Split::On(c) => {
                let mut fields: Vec<&str> = line.split(c).map(str::trim).collect();
                if fields.len() > 1 && fields.last() == Some(&"") {
                    fields.pop();
                }
                fields
            }
        }
    }
}

pub(super) fn read(
    bytes: &[u8],
    given: Option<char>,
    preferred: Option<char>,
    dtype: DType,
) -> Result<AnyMatrix, String> {
    match dtype {
        DType::F32 => parse::<f32>(bytes, given, preferred).map(AnyMatrix::F32),
        DType::F64 => parse::<f64>(bytes, given, preferred).map(AnyMatrix::F64),
        DType::I32 => parse::<i32>(bytes, given, preferred).map(AnyMatrix::I32),
        DType::I64 => parse::<i64>(bytes, given, preferred).map(AnyMatrix::I64),
    }
}

/// A number of type T from a field, or why not. Floats take IEEE special
/// values (`nan`, `inf`, `-inf`, `infinity`, any case).
pub(super) fn parse_number<T: Element + std::str::FromStr>(field: &str) -> Result<T, String> {
    field.parse().map_err(|_| {
        if field.is_empty() {
            "an empty field".to_string()
        } else if T::DTYPE.is_integer() && field.parse::<f64>().is_ok() {
            format!(
                "'{field}' is not an {} (out of range or not whole)",
                T::DTYPE
            )
        } else {
            format!("'{field}' is not a number")
        }
    })
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

/// The lines that hold data, numbered from 1, without comments.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines().enumerate().filter_map(|(index, line)| {
        let data = line.split('#').next().unwrap_or("").trim();
        (!data.is_empty()).then_some((index + 1, data))
    })
}

fn parse<T: Element + std::str::FromStr>(
    bytes: &[u8],
    given: Option<char>,
    preferred: Option<char>,
) -> Result<Matrix<T>, String> {
    let text = utf8(bytes)?;
    let mut lines = data_lines(text).peekable();
    let split = match lines.peek() {
        Some(&(_, first)) => Split::choose(given, preferred, first),
        None => return Ok(Matrix::filled(0, 0, T::ZERO)),
    };
    let mut data = Vec::new();
    let mut cols = None;
    let mut rows = 0usize;
    for (number, line) in lines {
        let fields = split.fields(line);
        for (f, field) in fields.iter().enumerate() {
            let value = parse_number::<T>(field)
                .map_err(|e| format!("line {number}, field {}: {e}", f + 1))?;
            data.push(value);
        }
        match cols {
            None => cols = Some(fields.len()),
            Some(expected) if expected != fields.len() => {
                return Err(format!(
                    "line {number}: {} fields, but the first row has {expected}",
                    fields.len()
                ))
            }
            Some(_) => {}
        }
        rows += 1;
    }
    Matrix::from_vec(rows, cols.unwrap_or(0), data).map_err(|e| e.to_string())
}

pub(super) fn write(m: &AnyMatrix, delimiter: char) -> Vec<u8> {
    fn typed<T: Element + std::fmt::LowerExp>(m: &Matrix<T>, delimiter: char) -> Vec<u8> {
        let mut out = String::new();
        for i in 0..m.rows() {
            for j in 0..m.cols() {
                if j > 0 {
                    out.push(delimiter);
                }
                out += &format_number(m.get(i, j));
            }
            out.push('\n');
        }
        out.into_bytes()
    }
    with_any!(m, m => typed(m, delimiter))
}

/// Integers as they are; floats as Python's `repr` and numpy print them:
/// the fewest significant digits that read back to the same value, in
/// positional form for decimal exponents from −4 to 15 (`7.0`, `0.001`)
/// and scientific form otherwise (`1.5e+20`, `1e-05`); `nan`, `inf` and
/// `-inf` for the special values.
pub(super) fn format_number<T: Element + std::fmt::LowerExp>(x: T) -> String {
    if T::DTYPE.is_integer() {
        return x.to_string();
    }
    let value = x.to_f64();
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // `{:e}` prints the shortest digits that round-trip in T itself (f32
    // values get f32's shortest form), as "d.ddde±x".
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("LowerExp always writes an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("LowerExp writes an integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if !(-4..16).contains(&exponent) {
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{exp_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("{sign}0.{zeros}{digits}")
    } else if point as usize >= digits.len() {
        let zeros = "0".repeat(point as usize - digits.len());
        format!("{sign}{digits}{zeros}.0")
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{sign}{whole}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        let cases: [(f64, &str); 16] = [
            (7.0, "7.0"),
            (15.0, "15.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1.5e20, "1.5e+20"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (0.000123, "0.000123"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (x, want) in cases {
            assert_eq!(format_number(x), want, "{x:e}");
            if x.is_finite() {
                assert_eq!(want.parse::<f64>().unwrap().to_bits(), x.to_bits());
            }
        }
        // f32 values print f32's shortest digits, not f64's.
        assert_eq!(format_number(0.1f32), "0.1");
        assert_eq!(format_number(16777216.0f32), "16777216.0");
        assert_eq!(format_number(f32::INFINITY), "inf");
        assert_eq!(format_number(-7i32), "-7");
    }

    #[test]
    fn the_split_follows_the_first_row() {
        assert_eq!(Split::choose(None, Some(','), "1,2"), Split::On(','));
        assert_eq!(Split::choose(None, Some(','), "1 2"), Split::Whitespace);
        assert_eq!(Split::choose(Some(';'), Some(','), "1,2"), Split::On(';'));
        assert_eq!(Split::choose(Some(' '), None, "1 2"), Split::Whitespace);
        assert_eq!(Split::On(',').fields("1, 2,"), vec!["1", "2"]);
        assert_eq!(Split::On(',').fields(","), vec![""]);
        assert_eq!(Split::Whitespace.fields(" 1 \t 2 "), vec!["1", "2"]);
    }
}
