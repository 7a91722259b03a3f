//! The library's errors as the Python exceptions a numpy user expects.

use fastmm::Error;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::PyErr;

/// The exception for `error`, carrying the library's message:
///
/// * shapes, views and option values: `ValueError`;
/// * a type or algorithm the device does not run: `TypeError`;
/// * memory: `MemoryError`;
/// * a missing GPU or CUDA library, a CUDA failure or a failed device of a
///   team: `RuntimeError`;
/// * files: `OSError`;
/// * an interrupt: `KeyboardInterrupt`.
pub(crate) fn to_py(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::DimensionMismatch { .. }
        | Error::OutputShape { .. }
        | Error::BufferTooSmall { .. }
        | Error::SelfAliasing { .. }
        | Error::OutOfBounds(_)
        | Error::InvalidOption(_)
        | Error::UnknownAlgorithm(..)
        | Error::Malformed(_)
        | Error::Inexact { .. } => PyValueError::new_err(message),
        Error::Unsupported { .. } | Error::UnknownDType(_) => PyTypeError::new_err(message),
        Error::SizeOverflow { .. } | Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        Error::CudaUnavailable(_) | Error::Cuda(_) | Error::Processor { .. } => {
            PyRuntimeError::new_err(message)
        }
        Error::File { .. } => PyOSError::new_err(message),
        Error::Interrupted => PyKeyboardInterrupt::new_err(message),
    }
}

/// `ValueError(message)`.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// `TypeError(message)`.
pub(crate) fn type_error(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}
