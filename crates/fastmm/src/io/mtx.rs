//! Matrix Market exchange format: `array` (dense, column-major) and
//! `coordinate` (made dense), fields `real`/`double` (read as f64),
//! `integer` (i64), `pattern` (ones, i64) and `complex` (complex128),
//! symmetries `general`, `symmetric`, `skew-symmetric` and `hermitian`
//! (complex). Written as `array`, `general`.

use super::text::{format_number, parse_number, utf8};
use super::{check_declared, with_any, AnyMatrix};
use crate::complex::ComplexMatrix;
use crate::element::Element;
use crate::matrix::Matrix;

#[derive(Clone, Copy, PartialEq)]
enum Symmetry {
    General,
    Symmetric,
    Skew,
    Hermitian,
}

/// A value of a Matrix Market field: its words on a line, and what the
/// symmetries make of it.
trait Value: Copy {
    /// Words per value.
    const WORDS: usize;
    const ZERO: Self;
    const ONE: Self;
    fn parse(words: &[&str]) -> Result<Self, String>;
    fn add(self, other: Self) -> Self;
    fn neg(self) -> Self;
    /// The complex conjugate (the value itself when real).
    fn conj(self) -> Self;
    /// Whether the value is real (a Hermitian matrix's diagonal is).
    fn is_real(self) -> bool;
}

macro_rules! real_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            const WORDS: usize = 1;
            const ZERO: $t = <$t as Element>::ZERO;
            const ONE: $t = <$t as Element>::ONE;
            fn parse(words: &[&str]) -> Result<$t, String> {
                parse_number::<$t>(words[0])
            }
            fn add(self, other: $t) -> $t {
                Element::add(self, other)
            }
            fn neg(self) -> $t {
                Element::sub(<$t as Element>::ZERO, self)
            }
            fn conj(self) -> $t {
                self
            }
            fn is_real(self) -> bool {
                true
            }
        }
    )*};
}
real_value!(i64, f64);

/// A complex value: (real, imaginary).
#[derive(Clone, Copy)]
struct Pair(f64, f64);

impl Value for Pair {
    const WORDS: usize = 2;
    const ZERO: Pair = Pair(0.0, 0.0);
    const ONE: Pair = Pair(1.0, 0.0);
    fn parse(words: &[&str]) -> Result<Pair, String> {
        Ok(Pair(parse_number(words[0])?, parse_number(words[1])?))
    }
    fn add(self, other: Pair) -> Pair {
        Pair(self.0 + other.0, self.1 + other.1)
    }
    fn neg(self) -> Pair {
        Pair(-self.0, -self.1)
    }
    fn conj(self) -> Pair {
        Pair(self.0, -self.1)
    }
    fn is_real(self) -> bool {
        self.1 == 0.0
    }
}

/// A dense rows×cols matrix being filled, row-major.
struct Dense<V> {
    rows: usize,
    cols: usize,
    data: Vec<V>,
}

impl<T: Element> Dense<T> {
    fn matrix(self) -> Result<Matrix<T>, String> {
        Matrix::from_vec(self.rows, self.cols, self.data).map_err(|e| e.to_string())
    }
}

impl<V: Value> Dense<V> {
    fn get(&self, i: usize, j: usize) -> V {
        self.data[i * self.cols + j]
    }
    fn set(&mut self, i: usize, j: usize, value: V) {
        self.data[i * self.cols + j] = value;
    }
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
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" if coordinate => Field::Integer,
        "complex" => Field::Complex,
        other => {
            return Err(format!(
                "line 1: field '{other}' is not supported (real, integer, complex, pattern)"
            ))
        }
    };
    let pattern = words[3] == "pattern";
    let symmetry = match words[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::Skew,
        "hermitian" if field == Field::Complex => Symmetry::Hermitian,
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
    let header = Header {
        rows,
        cols,
        coordinate,
        pattern,
        symmetry,
        symmetry_name: &words[4],
        size_line,
        entries: dims.get(2).copied().unwrap_or(0),
        file_bytes: bytes.len(),
        max_bytes,
    };
    match field {
        Field::Integer => fill::<i64>(&header, data)?.matrix().map(AnyMatrix::I64),
        Field::Real => fill::<f64>(&header, data)?.matrix().map(AnyMatrix::F64),
        Field::Complex => {
            let dense = fill::<Pair>(&header, data)?;
            ComplexMatrix::from_pairs(
                rows as usize,
                cols as usize,
                dense.data.into_iter().map(|z| (z.0, z.1)),
            )
            .map(AnyMatrix::C128)
            .map_err(|e| e.to_string())
        }
    }
}

/// A Matrix Market field, as read.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    Real,
    Integer,
    Complex,
}

/// What the banner and the size line declare.
struct Header<'a> {
    rows: u64,
    cols: u64,
    coordinate: bool,
    pattern: bool,
    symmetry: Symmetry,
    symmetry_name: &'a str,
    size_line: usize,
    /// Entries of a coordinate file.
    entries: u64,
    file_bytes: usize,
    max_bytes: Option<u64>,
}

/// The dense matrix of the data lines after the size line.
fn fill<'t, V: Value>(
    h: &Header<'_>,
    mut data: impl Iterator<Item = (usize, &'t str)>,
) -> Result<Dense<V>, String> {
    let (rows, cols, size_line) = (h.rows, h.cols, h.size_line);
    let dense = |rows: u64, cols: u64| -> Result<Dense<V>, String> {
        let elements = rows.checked_mul(cols).and_then(|e| usize::try_from(e).ok());
        let budget = h.max_bytes.or_else(crate::system::available_memory_bytes);
        let fits = elements
            .and_then(|e| e.checked_mul(8 * V::WORDS))
            .filter(|&b| budget.is_none_or(|most| (b as u64) <= most));
        fits.ok_or_else(|| {
            format!("line {size_line}: a dense {rows}×{cols} matrix would not fit in the memory available")
        })?;
        Ok(Dense {
            rows: rows as usize,
            cols: cols as usize,
            data: vec![V::ZERO; elements.unwrap_or(0)],
        })
    };
    let (r, c) = (rows as usize, cols as usize);
    let symmetry = h.symmetry;
    if h.coordinate {
        let entries = h.entries;
        let min_bytes = if h.pattern { 4 } else { 4 + 2 * V::WORDS };
        check_declared(entries, 1, h.file_bytes, min_bytes)
            .map_err(|e| format!("line {size_line}: {e}"))?;
        let mut m = dense(rows, cols)?;
        let mut seen = 0u64;
        for (number, line) in data.by_ref() {
            if seen == entries {
                return Err(format!(
                    "line {number}: more than the {entries} entries declared"
                ));
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let need = if h.pattern { 2 } else { 2 + V::WORDS };
            if fields.len() != need {
                return Err(format!(
                    "line {number}: {need} fields expected, found {}",
                    fields.len()
                ));
            }
            let index = |f: &str, limit: u64, what: &str| -> Result<usize, String> {
                match f.parse::<u64>() {
                    Ok(v) if (1..=limit).contains(&v) => Ok(v as usize - 1),
                    _ => Err(format!("line {number}: {what} '{f}' is not in 1..={limit}")),
                }
            };
            let i = index(fields[0], rows, "row")?;
            let j = index(fields[1], cols, "column")?;
            let value = if h.pattern {
                V::ONE
            } else {
                V::parse(&fields[2..]).map_err(|e| format!("line {number}: {e}"))?
            };
            m.set(i, j, m.get(i, j).add(value));
            mirror(&mut m, (symmetry, h.symmetry_name), (i, j), value, number)?;
            seen += 1;
        }
        if seen != entries {
            return Err(format!(
                "truncated: {seen} of the {entries} entries declared"
            ));
        }
        return Ok(m);
    }
    let (n, n_cols) = (u128::from(rows), u128::from(cols));
    let stored = match symmetry {
        Symmetry::General => n * n_cols,
        Symmetry::Symmetric | Symmetry::Hermitian => n * (n + 1) / 2,
        Symmetry::Skew => n * n.saturating_sub(1) / 2,
    };
    // Each word takes at least a digit and a separator.
    let most = h.file_bytes as u128 / (2 * V::WORDS as u128);
    if stored > most {
        return Err(format!(
            "line {size_line}: declares {rows}×{cols} ({stored} values stored), but the file's {} bytes hold at most {most}",
            h.file_bytes
        ));
    }
    let mut m = dense(rows, cols)?;
    // Stored column by column; a symmetric matrix stores the lower
    // triangle (skew: strictly lower) and mirrors it.
    let positions = (0..c).flat_map(|j| {
        let first = match symmetry {
            Symmetry::General => 0,
            Symmetry::Symmetric | Symmetry::Hermitian => j,
            Symmetry::Skew => j + 1,
        };
        (first..r).map(move |i| (i, j))
    });
    let mut words = data
        .by_ref()
        .flat_map(|(number, line)| line.split_whitespace().map(move |w| (number, w)));
    for (count, (i, j)) in positions.enumerate() {
        let mut parts = [""; 2];
        let mut number = 0;
        for part in parts.iter_mut().take(V::WORDS) {
            let Some((line, word)) = words.next() else {
                return Err(format!(
                    "truncated: {count} of the {stored} values declared"
                ));
            };
            (number, *part) = (line, word);
        }
        let value = V::parse(&parts[..V::WORDS]).map_err(|e| format!("line {number}: {e}"))?;
        m.set(i, j, value);
        mirror(&mut m, (symmetry, h.symmetry_name), (i, j), value, number)?;
    }
    if let Some((number, _)) = words.next() {
        return Err(format!(
            "line {number}: more than the {stored} values declared"
        ));
    }
    Ok(m)
}

/// Sets the mirror of (i, j) in a symmetric, skew-symmetric or Hermitian
/// matrix.
fn mirror<V: Value>(
    m: &mut Dense<V>,
    (symmetry, name): (Symmetry, &str),
    (i, j): (usize, usize),
    value: V,
    line: usize,
) -> Result<(), String> {
    if symmetry == Symmetry::General {
        return Ok(());
    }
    if i < j {
        return Err(format!(
            "line {line}: entry ({}, {}) is above the diagonal of a {name} matrix",
            i + 1,
            j + 1
        ));
    }
    match symmetry {
        Symmetry::Skew if i == j => Err(format!(
            "line {line}: a skew-symmetric matrix has no diagonal entry ({}, {})",
            i + 1,
            j + 1
        )),
        Symmetry::Hermitian if i == j && !value.is_real() => Err(format!(
            "line {line}: a hermitian matrix's diagonal entry ({}, {}) is real",
            i + 1,
            j + 1
        )),
        _ if i == j => Ok(()),
        Symmetry::Symmetric => {
            m.set(j, i, m.get(j, i).add(value));
            Ok(())
        }
        Symmetry::Skew => {
            m.set(j, i, m.get(j, i).add(value.neg()));
            Ok(())
        }
        Symmetry::Hermitian => {
            m.set(j, i, m.get(j, i).add(value.conj()));
            Ok(())
        }
        Symmetry::General => Ok(()),
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
    fn complex<T: Element + std::fmt::LowerExp>(z: &ComplexMatrix<T>, name: &str) -> Vec<u8> {
        let (rows, cols) = z.shape();
        let mut out = format!(
            "%%MatrixMarket matrix array complex general\n% written by fastmm ({name})\n{rows} {cols}\n"
        );
        for j in 0..cols {
            for i in 0..rows {
                let (re, im) = z.get(i, j);
                out += &format!("{} {}\n", format_number(re), format_number(im));
            }
        }
        out.into_bytes()
    }
    with_any!(m, m => typed(m), z => complex(z, m.type_name()))
}
