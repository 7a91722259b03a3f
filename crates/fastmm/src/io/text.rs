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
//!
//! Complex values are read the way `loadtxt(dtype=complex)` reads them:
//! `1.5+2j`, `(1.5+2e-03j)`, `-2j`, `3` and `savetxt`'s `(1+-2j)`; a file
//! with any `j` in it reads as complex. They are written as Python prints
//! them, `(1.5-2.0j)`.

use super::{with_any, AnyMatrix};
use crate::complex::ComplexMatrix;
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
    if bytes.iter().any(|b| b.eq_ignore_ascii_case(&b'j')) {
        return match dtype {
            DType::F32 => parse::<Complex<f32>>(bytes, given, preferred)
                .and_then(Complex::matrix)
                .map(AnyMatrix::C64),
            DType::F64 => parse::<Complex<f64>>(bytes, given, preferred)
                .and_then(Complex::matrix)
                .map(AnyMatrix::C128),
            integer => Err(format!(
                "the file holds complex values, which cannot be read as {integer}"
            )),
        };
    }
    match dtype {
        DType::F32 => parse_matrix::<f32>(bytes, given, preferred).map(AnyMatrix::F32),
        DType::F64 => parse_matrix::<f64>(bytes, given, preferred).map(AnyMatrix::F64),
        DType::I32 => parse_matrix::<i32>(bytes, given, preferred).map(AnyMatrix::I32),
        DType::I64 => parse_matrix::<i64>(bytes, given, preferred).map(AnyMatrix::I64),
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

/// A value of one field of a text file.
trait Field: Sized {
    fn field(text: &str) -> Result<Self, String>;
}

impl<T: Element + std::str::FromStr> Field for T {
    fn field(text: &str) -> Result<T, String> {
        parse_number(text)
    }
}

/// A complex value of a text file, with the matrix its fields make.
struct Complex<T>(T, T);

impl<T: Element + std::str::FromStr> Complex<T> {
    fn matrix(m: Values<Complex<T>>) -> Result<ComplexMatrix<T>, String> {
        ComplexMatrix::from_pairs(m.rows, m.cols, m.data.into_iter().map(|z| (z.0, z.1)))
            .map_err(|e| e.to_string())
    }
}

impl<T: Element + std::str::FromStr> Field for Complex<T> {
    fn field(text: &str) -> Result<Self, String> {
        parse_complex(text).map(|(re, im)| Complex(re, im))
    }
}

/// A complex number as Python's `complex()` and numpy's `loadtxt` read
/// it: optional parentheses around `re`, `re±imj`, `imj` or `±j`; also
/// `re+-imj`, as `savetxt` writes a negative imaginary part.
pub(super) fn parse_complex<T: Element + std::str::FromStr>(field: &str) -> Result<(T, T), String> {
    let bad = || format!("'{field}' is not a complex number");
    let inner = field.trim();
    let inner = match inner.strip_prefix('(') {
        Some(rest) => rest.strip_suffix(')').ok_or_else(bad)?.trim(),
        None => inner,
    };
    let Some(body) = inner.strip_suffix(['j', 'J']) else {
        return Ok((parse_number(inner)?, T::ZERO));
    };
    let bytes = body.as_bytes();
    // The sign that starts the imaginary part: not the first character and
    // not an exponent's.
    let split = (1..bytes.len())
        .find(|&i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'));
    let (re, im) = match split {
        Some(i) => (parse_number(&body[..i])?, &body[i..]),
        None => (T::ZERO, body),
    };
    let im = im.strip_prefix('+').unwrap_or(im);
    let im = match im {
        "" => T::ONE,
        "-" => T::ZERO.sub(T::ONE),
        digits => parse_number(digits).map_err(|_| bad())?,
    };
    Ok((re, im))
}

/// The values of a text file, row by row.
struct Values<V> {
    rows: usize,
    cols: usize,
    data: Vec<V>,
}

fn parse_matrix<T: Element + std::str::FromStr>(
    bytes: &[u8],
    given: Option<char>,
    preferred: Option<char>,
) -> Result<Matrix<T>, String> {
    let values = parse::<T>(bytes, given, preferred)?;
    Matrix::from_vec(values.rows, values.cols, values.data).map_err(|e| e.to_string())
}

fn parse<V: Field>(
    bytes: &[u8],
    given: Option<char>,
    preferred: Option<char>,
) -> Result<Values<V>, String> {
    let text = utf8(bytes)?;
    let mut lines = data_lines(text).peekable();
    let split = match lines.peek() {
        Some(&(_, first)) => Split::choose(given, preferred, first),
        None => {
            return Ok(Values {
                rows: 0,
                cols: 0,
                data: Vec::new(),
            })
        }
    };
    let mut data = Vec::new();
    let mut cols = None;
    let mut rows = 0usize;
    for (number, line) in lines {
        let fields = split.fields(line);
        for (f, field) in fields.iter().enumerate() {
            let value =
                V::field(field).map_err(|e| format!("line {number}, field {}: {e}", f + 1))?;
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
    Ok(Values {
        rows,
        cols: cols.unwrap_or(0),
        data,
    })
}

pub(super) fn write(m: &AnyMatrix, delimiter: char) -> Vec<u8> {
    fn lines(
        (rows, cols): (usize, usize),
        delimiter: char,
        value: impl Fn(usize, usize) -> String,
    ) -> Vec<u8> {
        let mut out = String::new();
        for i in 0..rows {
            for j in 0..cols {
                if j > 0 {
                    out.push(delimiter);
                }
                out += &value(i, j);
            }
            out.push('\n');
        }
        out.into_bytes()
    }
    with_any!(m,
    m => lines(m.shape(), delimiter, |i, j| format_number(m.get(i, j))),
    z => lines(z.shape(), delimiter, |i, j| {
        let (re, im) = z.get(i, j);
        format_complex(re, im)
    }))
}

/// A complex value as Python prints it: `(1.5-2.0j)`, `(nan+infj)`.
pub(super) fn format_complex<T: Element + std::fmt::LowerExp>(re: T, im: T) -> String {
    let im_text = format_number(im);
    let sign = if im_text.starts_with('-') { "" } else { "+" };
    format!("({}{sign}{im_text}j)", format_number(re))
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
    fn complex_values_read_as_numpy_and_python_write_them() {
        let cases: [(&str, (f64, f64)); 12] = [
            ("(1.5+2j)", (1.5, 2.0)),
            ("1.5-2j", (1.5, -2.0)),
            (
                " (1.000000000000000000e+00+-2.000000000000000000e+00j)",
                (1.0, -2.0),
            ),
            ("(1e-05-3e+02j)", (1e-5, -300.0)),
            ("2j", (0.0, 2.0)),
            ("-2.5e+03j", (0.0, -2500.0)),
            ("-j", (0.0, -1.0)),
            ("1+j", (1.0, 1.0)),
            ("7", (7.0, 0.0)),
            ("(-inf+nanj)", (f64::NEG_INFINITY, f64::NAN)),
            ("(-0.0-0.0j)", (-0.0, -0.0)),
            ("1E+2+3E-1J", (100.0, 0.3)),
        ];
        for (text, (re, im)) in cases {
            let (x, y) = parse_complex::<f64>(text).unwrap();
            assert_eq!(x.to_bits(), re.to_bits(), "{text}");
            assert!(
                y.to_bits() == im.to_bits() || (y.is_nan() && im.is_nan()),
                "{text}"
            );
        }
        for bad in ["(1+2j", "1+2i", "j2", "1+2jj", "", "()"] {
            assert!(parse_complex::<f64>(bad).is_err(), "{bad}");
        }
        assert_eq!(format_complex(1.5, -2.0), "(1.5-2.0j)");
        assert_eq!(format_complex(0.1f32, 3.0), "(0.1+3.0j)");
        assert_eq!(format_complex(f64::NAN, f64::INFINITY), "(nan+infj)");
        for text in [
            "(1.5-2.0j)",
            "(0.1+3.0j)",
            "(-0.0-0.0j)",
            "(1e-300+1.7976931348623157e+308j)",
        ] {
            let (re, im) = parse_complex::<f64>(text).unwrap();
            assert_eq!(format_complex(re, im), text);
        }
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
