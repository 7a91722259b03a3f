//! The library's error type, at the bottom of the layers: it names nothing
//! else in the crate. Every unsupported input is reported here rather than
//! by a panic.

/// Everything that can go wrong in a fastmm call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `A` is m×k and `B` is k'×n with k ≠ k'.
    #[error("cannot multiply A ({}×{}) by B ({}×{}): A has {} columns but B has {} rows", a.0, a.1, b.0, b.1, a.1, b.0)]
    DimensionMismatch {
        /// Shape of A as (rows, columns).
        a: (usize, usize),
        /// Shape of B as (rows, columns).
        b: (usize, usize),
    },

    /// The output view does not have the shape of the product.
    #[error("output C is {}×{} but A·B is {}×{}", got.0, got.1, expected.0, expected.1)]
    OutputShape {
        /// Shape of A·B.
        expected: (usize, usize),
        /// Shape of the C that was passed.
        got: (usize, usize),
    },

    /// A buffer is shorter than the view laid over it needs.
    #[error("a {rows}×{cols} view with strides ({row_stride}, {col_stride}) needs {needed} elements but the buffer has {len}")]
    BufferTooSmall {
        /// Rows of the view.
        rows: usize,
        /// Columns of the view.
        cols: usize,
        /// Distance between consecutive rows, in elements.
        row_stride: usize,
        /// Distance between consecutive columns, in elements.
        col_stride: usize,
        /// Elements the view reaches.
        needed: usize,
        /// Elements the buffer holds.
        len: usize,
    },

    /// A mutable view whose strides would make two elements share memory.
    #[error(
        "a {rows}×{cols} mutable view with strides ({row_stride}, {col_stride}) would alias itself"
    )]
    SelfAliasing {
        /// Rows of the view.
        rows: usize,
        /// Columns of the view.
        cols: usize,
        /// Distance between consecutive rows, in elements.
        row_stride: usize,
        /// Distance between consecutive columns, in elements.
        col_stride: usize,
    },

    /// An index, block or split outside a matrix or view (the `try_`
    /// twins of the functions that panic instead).
    #[error("{0}")]
    OutOfBounds(String),

    /// A dimension product overflowed `usize`.
    #[error("matrix of {rows}×{cols} elements is too large to address")]
    SizeOverflow {
        /// Requested rows.
        rows: usize,
        /// Requested columns.
        cols: usize,
    },

    /// An option value that the algorithm cannot use (tile 0, zero threads, ...).
    #[error("invalid option: {0}")]
    InvalidOption(String),

    /// The algorithm does not support this element type or configuration.
    #[error("{algorithm} does not support {what}")]
    Unsupported {
        /// Name of the algorithm.
        algorithm: &'static str,
        /// What was asked of it.
        what: String,
    },

    /// A name that does not parse as an algorithm.
    #[error("unknown algorithm '{0}' ({1})")]
    UnknownAlgorithm(String, String),

    /// A name that does not parse as an element type.
    #[error("unknown dtype '{0}' (expected one of: f32, f64, i32, i64)")]
    UnknownDType(String),

    /// A GPU was asked for but CUDA (library, driver or device) is missing.
    #[error("CUDA is not available: {0}")]
    CudaUnavailable(String),

    /// A CUDA call, a kernel launch or a kernel failed.
    #[error("CUDA error: {0}")]
    Cuda(String),

    /// Matrix data (the bytes of a file, read or about to be written)
    /// that is malformed or does not fit its format: where (a line or
    /// byte offset, when known) and why.
    #[error("{0}")]
    Malformed(String),

    /// A conversion between element types that would change a value
    /// (see `io::AnyMatrix::to`).
    #[error("element ({row}, {col}) = {value} is not exactly a {to}")]
    Inexact {
        /// Row of the first element that does not fit.
        row: usize,
        /// Its column.
        col: usize,
        /// Its value, as text.
        value: String,
        /// The element type asked for.
        to: String,
    },

    /// A matrix file that cannot be read or written: which file, where in
    /// it (a line or byte offset, when known), and why.
    #[error("{file}: {reason}")]
    File {
        /// The file's path as given.
        file: String,
        /// Where and what, e.g. "line 3: 'x' is not a number".
        reason: String,
    },

    /// The product's [`crate::Interrupt`] was raised; C is unspecified.
    #[error("interrupted")]
    Interrupted,

    /// A processor of a distributed product (a GPU, an MPI rank) failed or
    /// did not finish in time, and the product was abandoned.
    #[error("{processor}: {reason}")]
    Processor {
        /// Which processor ("cuda:1").
        processor: String,
        /// What happened.
        reason: String,
    },

    /// Not enough memory for the result or the workspace, found before
    /// allocating it.
    #[error("out of memory: {what} needs {needed}, {available} available")]
    OutOfMemory {
        /// What was to be allocated.
        what: String,
        /// Its size, as text ("1.5 GiB").
        needed: String,
        /// The memory left, as text.
        available: String,
    },
}
