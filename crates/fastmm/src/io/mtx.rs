//! Matrix Market exchange format: `array` (dense, column-major) and
//! `coordinate` (made dense), fields `real`/`double` (read as f64),
//! `integer` (i64) and `pattern` (ones, i64), symmetries `general`,
//! `symmetric` and `skew-symmetric`. Written as `array`, `general`.

use super::text::{format_number, parse_number, utf8};
use super::{check_declared, with_any, AnyMatrix};
use crate::element::Element;
use crate::matrix::Matrix;

#[derive(Clone, Copy, PartialEq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
}

pub(super) fn read(bytes: &[u8], max_bytes: Option<u64>) -> Result<AnyMatrix, String> {
    let text = utf8(bytes)?;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, banner) = lines
        .next()
        .ok_or("line 1: empty file, no %%MatrixMarket header")?;
    let words: Vec<String> = banner
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.len() != 5 || words[0] != "%%matrixmarket" || words[1] != "matrix" {
        return Err(format!(
            "line 1: expected '%%MatrixMarket matrix <array|coordinate> <field> <symmetry>', found '{banner}'"
        ));
    }
    let coordinate = match words[2].as_str() {
        "array" => false,
        "coordinate" => true,
        other => {
            return Err(format!(
                "line 1: format '{other}' is neither array nor coordinate"
            ))
        }
    };
    let integer = match words[3].as_str() {
        "real" | "double" => false,
        "integer" => true,
        "pattern" if coordinate => true,
        other => {
            return Err(format!(
                "line 1: field '{other}' is not supported (real, integer, pattern)"
            ))
        }
    };
    let pattern = words[3] == "pattern";
    let symmetry = match words[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        other => return Err(format!("line 1: symmetry '{other}' is not supported")),
    };
    // Data lines, comments skipped.
    let mut data = lines.filter(|(_, l)| !l.trim_start().starts_with('%') && !l.trim().is_empty());
    let (size_line, size) = data.next().ok_or("no size line after the header")?;
    let dims: Vec<u64> = size
        .split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .map_err(|_| format!("line {size_line}: '{w}' is not a size"))
        })
        .collect::<Result<_, _>>()?;
    let expected_fields = if coordinate { 3 } else { 2 };
    if dims.len() != expected_fields {
        return Err(format!(
            "line {size_line}: the size line needs {expected_fields} numbers, found {}",
            dims.len()
        ));
    }
    let (rows, cols) = (dims[0], dims[1]);
    if symmetry != Symmetry::General && rows != cols {
        return Err(format!(
            "line {size_line}: a {} matrix must be square, not {rows}×{cols}",
            words[4]
        ));
    }
    let dense = |rows: u64, cols: u64| -> Result<usize, String> {
        let elements = rows.checked_mul(cols).and_then(|e| usize::try_from(e).ok());
        let budget = max_bytes.or_else(crate::system::available_memory_bytes);
        let fits = elements
            .and_then(|e| e.checked_mul(8))
            .filter(|&b| budget.is_none_or(|most| (b as u64) <= most));
        fits.ok_or_else(|| {
            format!("line {size_line}: a dense {rows}×{cols} matrix would not fit in the memory available")
        })?;
        Ok(elements.unwrap_or(0))
    };
    macro_rules! build {
        ($t:ty, $variant:ident) => {{
            let (r, c) = (rows as usize, cols as usize);
            let m: Matrix<$t> = if coordinate {
                let entries = dims[2];
                let min_bytes = if pattern { 4 } else { 6 };
                check_declared(entries, 1, bytes.len(), min_bytes)
                    .map_err(|e| format!("line {size_line}: {e}"))?;
                dense(rows, cols)?;
                let mut m = Matrix::<$t>::try_filled(r, c, <$t>::ZERO).map_err(|e| e.to_string())?;
                let mut seen = 0u64;
                for (number, line) in data.by_ref() {
                    if seen == entries {
                        return Err(format!("line {number}: more than the {entries} entries declared"));
                    }
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let need = if pattern { 2 } else { 3 };
                    if fields.len() != need {
                        return Err(format!("line {number}: {need} fields expected, found {}", fields.len()));
                    }
                    let index = |f: &str, limit: u64, what: &str| -> Result<usize, String> {
                        match f.parse::<u64>() {
                            Ok(v) if (1..=limit).contains(&v) => Ok(v as usize - 1),
                            _ => Err(format!("line {number}: {what} '{f}' is not in 1..={limit}")),
                        }
                    };
                    let i = index(fields[0], rows, "row")?;
                    let j = index(fields[1], cols, "column")?;
                    let value: $t = if pattern {
                        <$t>::ONE
                    } else {
                        parse_number::<$t>(fields[2]).map_err(|e| format!("line {number}: {e}"))?
                    };
                    m.set(i, j, m.get(i, j).add(value));
                    mirror(&mut m, symmetry, i, j, value, number)?;
                    seen += 1;
                }
                if seen != entries {
                    return Err(format!("truncated: {seen} of the {entries} entries declared"));
                }
                m
            } else {
                let (n, n_cols) = (u128::from(rows), u128::from(cols));
                let stored = match symmetry {
                    Symmetry::General => n * n_cols,
                    Symmetry::Symmetric => n * (n + 1) / 2,
                    Symmetry::Skew => n * n.saturating_sub(1) / 2,
                };
                // Each value takes at least a digit and a separator.
                if stored > bytes.len() as u128 / 2 {
                    return Err(format!(
                        "line {size_line}: declares {rows}×{cols} ({stored} values stored), but the file's {} bytes hold at most {}",
                        bytes.len(),
                        bytes.len() / 2
                    ));
                }
                dense(rows, cols)?;
                let mut m = Matrix::<$t>::try_filled(r, c, <$t>::ZERO).map_err(|e| e.to_string())?;
                // Stored column by column; a symmetric matrix stores the
                // lower triangle (skew: strictly lower) and mirrors it.
                let positions = (0..c).flat_map(|j| {
                    let first = match symmetry {
                        Symmetry::General => 0,
                        Symmetry::Symmetric => j,
                        Symmetry::Skew => j + 1,
                    };
                    (first..r).map(move |i| (i, j))
                });
                let mut values = data.by_ref().flat_map(|(number, line)| {
                    line.split_whitespace().map(move |w| (number, w))
                });
                for (count, (i, j)) in positions.enumerate() {
                    let Some((number, word)) = values.next() else {
                        return Err(format!("truncated: {count} of the {stored} values declared"));
                    };
                    let value = parse_number::<$t>(word).map_err(|e| format!("line {number}: {e}"))?;
                    m.set(i, j, value);
                    mirror(&mut m, symmetry, i, j, value, number)?;
                }
                if let Some((number, _)) = values.next() {
                    return Err(format!("line {number}: more than the {stored} values declared"));
                }
                m
            };
            Ok(AnyMatrix::$variant(m))
        }};
    }
    if integer {
        build!(i64, I64)
    } else {
        build!(f64, F64)
    }
}

/// Sets the mirror of (i, j) in a symmetric or skew-symmetric matrix.
fn mirror<T: Element>(
    m: &mut Matrix<T>,
    symmetry: Symmetry,
    i: usize,
    j: usize,
    value: T,
    line: usize,
) -> Result<(), String> {
    match symmetry {
        Symmetry::General => Ok(()),
        _ if i < j => Err(format!(
            "line {line}: entry ({}, {}) is above the diagonal of a {} matrix",
            i + 1,
            j + 1,
            if symmetry == Symmetry::Skew {
                "skew-symmetric"
            } else {
                "symmetric"
            }
        )),
        Symmetry::Symmetric if i != j => {
            m.set(j, i, m.get(j, i).add(value));
            Ok(())
        }
        Symmetry::Skew if i == j => Err(format!(
            "line {line}: a skew-symmetric matrix has no diagonal entry ({}, {})",
            i + 1,
            j + 1
        )),
        Symmetry::Skew => {
            m.set(j, i, m.get(j, i).sub(value));
            Ok(())
        }
        Symmetry::Symmetric => Ok(()),
    }
}

pub(super) fn write(m: &AnyMatrix) -> Vec<u8> {
    fn typed<T: Element + std::fmt::LowerExp>(m: &Matrix<T>) -> Vec<u8> {
        let field = if T::DTYPE.is_integer() {
            "integer"
        } else {
            "real"
        };
        let mut out = format!(
            "%%MatrixMarket matrix array {field} general\n% written by fastmm ({})\n{} {}\n",
            T::DTYPE,
            m.rows(),
            m.cols()
        );
        for j in 0..m.cols() {
            for i in 0..m.rows() {
                out += &format_number(m.get(i, j));
                out.push('\n');
            }
        }
        out.into_bytes()
    }
    with_any!(m, m => typed(m))
}
