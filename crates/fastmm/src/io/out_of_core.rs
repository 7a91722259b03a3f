//! Products larger than the memory budget, on the CPU: seed 003 §2.1's
//! multiplication "by parts". A and B are memory-mapped (.npy or raw), so
//! the operating system pages them in as the product reads them and may
//! evict them; C is computed in blocks of `a` rows (and, when a block row
//! of C would not fit, `b` columns) straight into the output file, which
//! is mapped too, so each block lands in the page cache where the kernel
//! writes it back while the next block computes. What fastmm allocates is
//! the product's packing buffers; the seed's formula for the memory of a
//! block step, (k(a + b) + ab)·sizeof(T), is reported with the plan.
//!
//! The output is a .npy (C order) or raw file written to a temporary name
//! beside the target, flushed to the disk and renamed when complete.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use super::raw::LittleEndian;
use super::{file_error, npy, Format};
use crate::context::Context;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::executor::{Clock, Streamed};
use crate::gemm::{Gemm, Problem};
use crate::matrix::{MatMut, MatRef};
use crate::options::{DeviceKind, GemmOptions, GpuOptions};
use crate::plan::Plan;

/// An input matrix mapped from a file.
pub struct MappedMatrix {
    map: memmap2::Mmap,
    /// Element type of the data.
    pub dtype: DType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored column by column (a Fortran-order .npy).
    pub column_major: bool,
    /// The array's dimensions in its file: 2, or 1 for a .npy vector
    /// (mapped as one column) or 0 for a .npy scalar (1×1).
    pub ndim: usize,
    little_endian: bool,
    offset: usize,
}

/// A .npy or raw matrix file's layout, from its header alone: nothing of
/// its data is mapped until asked for, whole ([`MatrixFile::map`]) or a
/// rectangle's lines ([`MatrixFile::map_part`]).
pub struct MatrixFile {
    file: File,
    path: std::path::PathBuf,
    /// Element type of the data.
    pub dtype: DType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored column by column (a Fortran-order .npy).
    pub column_major: bool,
    /// The array's dimensions in its file (see [`MappedMatrix::ndim`]).
    pub ndim: usize,
    little_endian: bool,
    offset: usize,
}

/// The most bytes of a .npy file mapped to read its header: far above
/// the 64 KiB a version-1 header may take.
const NPY_HEADER_MAP_BYTES: u64 = 1 << 20;

/// Whether `path` is a .npy file of complex elements, from its header:
/// such a matrix is read whole, as the products by parts take real ones.
/// `false` for any other file, or one that cannot be read (its reader
/// says why).
pub fn holds_complex(path: &Path) -> bool {
    use std::io::Read;
    if Format::of_path(path) != Ok(Format::Npy) {
        return false;
    }
    let Ok(file) = File::open(path) else {
        return false;
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut head = Vec::new();
    match file.take(NPY_HEADER_MAP_BYTES).read_to_end(&mut head) {
        Ok(_) => npy::layout(&head, len).is_ok_and(|l| l.complex),
        Err(_) => false,
    }
}

impl MatrixFile {
    /// Reads the layout of a .npy file, or checks a raw file against the
    /// given shape and type.
    pub fn open(path: &Path, raw: Option<((usize, usize), DType)>) -> Result<MatrixFile, Error> {
        let err = |reason: &str| file_error(path, reason);
        let file = File::open(path).map_err(|e| err(&format!("cannot open: {e}")))?;
        let len = file
            .metadata()
            .map_err(|e| err(&format!("cannot read its size: {e}")))?
            .len();
        let (dtype, rows, cols, column_major, little_endian, offset, ndim) =
            match Format::of_path(path)? {
                Format::Npy => {
                    // SAFETY: a read-only, private map of the file's first
                    // bytes (those its header can take); fastmm never writes
                    // its inputs, and another process truncating one while
                    // mapped would fault, as documented for `fastmm multiply`.
                    let head = unsafe {
                        memmap2::MmapOptions::new()
                            .len(len.min(NPY_HEADER_MAP_BYTES) as usize)
                            .map(&file)
                    }
                    .map_err(|e| err(&format!("cannot map: {e}")))?;
                    let l = npy::layout(&head, len).map_err(|e| err(&e))?;
                    if l.complex {
                        return Err(err(
                            "a complex matrix is read whole (the products by parts take real ones)",
                        ));
                    }
                    (
                        l.dtype,
                        l.rows,
                        l.cols,
                        l.fortran,
                        l.little_endian,
                        l.offset,
                        l.ndim,
                    )
                }
                Format::Raw => {
                    let Some(((rows, cols), dtype)) = raw else {
                        return Err(err("a raw file needs its shape and element type"));
                    };
                    let needed = (rows as u128) * (cols as u128) * dtype.size_bytes() as u128;
                    if needed != u128::from(len) {
                        return Err(err(&format!(
                            "{rows}×{cols} {dtype} needs {needed} bytes, but the file has {len}"
                        )));
                    }
                    (dtype, rows, cols, false, true, 0, 2)
                }
                _ => {
                    return Err(err(
                        "an out-of-core product maps its inputs: they must be .npy or raw files",
                    ))
                }
            };
        Ok(MatrixFile {
            file,
            path: path.to_path_buf(),
            dtype,
            rows,
            cols,
            column_major,
            ndim,
            little_endian,
            offset: offset as usize,
        })
    }

    /// The whole file, mapped.
    pub fn map(self) -> Result<MappedMatrix, Error> {
        // SAFETY: read-only and private, as in `open`.
        let map = unsafe { memmap2::Mmap::map(&self.file) }
            .map_err(|e| file_error(&self.path, &format!("cannot map: {e}")))?;
        Ok(MappedMatrix {
            map,
            dtype: self.dtype,
            rows: self.rows,
            cols: self.cols,
            column_major: self.column_major,
            ndim: self.ndim,
            little_endian: self.little_endian,
            offset: self.offset,
        })
    }

    /// Only the lines (rows of a row-major file, columns of a
    /// column-major one) that hold the rectangle `rows` × `cols`, mapped:
    /// what a rank of an MPI job reads of an input for its piece. An
    /// empty rectangle maps nothing.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a rectangle outside the matrix;
    /// [`Error::File`] when the map fails.
    pub fn map_part(&self, rows: Range<usize>, cols: Range<usize>) -> Result<MappedPart, Error> {
        if rows.end > self.rows
            || cols.end > self.cols
            || rows.start > rows.end
            || cols.start > cols.end
        {
            return Err(Error::InvalidOption(format!(
                "rows {rows:?} and columns {cols:?} of a {}×{} matrix",
                self.rows, self.cols
            )));
        }
        let (lines, line_len) = if self.column_major {
            (cols.clone(), self.rows)
        } else {
            (rows.clone(), self.cols)
        };
        let elem = self.dtype.size_bytes();
        let map = if rows.is_empty() || cols.is_empty() {
            None
        } else {
            let start = self.offset as u64 + (lines.start * line_len * elem) as u64;
            let len = lines.len() * line_len * elem;
            // SAFETY: read-only and private, as in `open`; the range lies
            // inside the file (the header's shape was checked against its
            // length).
            let map = unsafe {
                memmap2::MmapOptions::new()
                    .offset(start)
                    .len(len)
                    .map(&self.file)
            }
            .map_err(|e| file_error(&self.path, &format!("cannot map bytes from {start}: {e}")))?;
            Some(map)
        };
        Ok(MappedPart {
            map,
            dtype: self.dtype,
            little_endian: self.little_endian,
            rows: rows.len(),
            cols: cols.len(),
            column_major: self.column_major,
            line_len,
            first: if self.column_major {
                rows.start
            } else {
                cols.start
            },
            file_offset: self.offset + lines.start * line_len * elem,
        })
    }
}

/// A rectangle of a matrix file, mapped by its lines ([`MatrixFile::map_part`]).
pub struct MappedPart {
    map: Option<memmap2::Mmap>,
    dtype: DType,
    little_endian: bool,
    rows: usize,
    cols: usize,
    column_major: bool,
    // Elements per line, and the rectangle's first element in its line.
    line_len: usize,
    first: usize,
    file_offset: usize,
}

impl MappedPart {
    /// Bytes mapped.
    pub fn mapped_bytes(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// A view of the rectangle as T, without copying (the conditions of
    /// [`MappedMatrix::view`]).
    pub fn view<T: Element>(&self) -> Result<MatRef<'_, T>, Error> {
        let Some(map) = &self.map else {
            return MatRef::from_slice(&[], self.rows, self.cols);
        };
        let lines = if self.column_major {
            self.cols
        } else {
            self.rows
        };
        let data: &[T] = typed_data(
            map,
            self.dtype,
            self.little_endian,
            self.file_offset,
            lines * self.line_len,
        )?;
        let data = &data[self.first..];
        if self.column_major {
            MatRef::from_slice_strided(data, self.rows, self.cols, 1, self.line_len)
        } else {
            MatRef::from_slice_strided(data, self.rows, self.cols, self.line_len, 1)
        }
    }
}

/// `len` elements of T at the start of `bytes` (data at byte `at` of its
/// file, for the messages): the type must be T's, stored little-endian
/// and aligned for T; else [`Error::Unsupported`] saying which.
fn typed_data<T: Element>(
    bytes: &[u8],
    dtype: DType,
    little_endian: bool,
    at: usize,
    len: usize,
) -> Result<&[T], Error> {
    let refused = |what: String| Error::Unsupported {
        algorithm: "an out-of-core product",
        what,
    };
    if dtype != T::DTYPE {
        return Err(refused(format!(
            "{dtype} data in a {} product (both operands must have the product's type)",
            T::DTYPE
        )));
    }
    if !little_endian {
        return Err(refused(
            "big-endian data (it maps little-endian data only)".into(),
        ));
    }
    if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
        return Err(refused(format!(
            "data at byte {at}, not aligned for {}",
            T::DTYPE
        )));
    }
    if bytes.len() < len * std::mem::size_of::<T>() {
        return Err(Error::OutOfBounds(format!(
            "{len} elements at byte {at} run past the mapped data"
        )));
    }
    // SAFETY: the slice lies inside `bytes` (checked above), is aligned for
    // T (checked above), and every bit pattern is a valid f32, f64, i32 or
    // i64 (Element is sealed to those).
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), len) })
}

impl MappedMatrix {
    /// Maps a .npy file, or a raw file of the given shape and type.
    pub fn open(path: &Path, raw: Option<((usize, usize), DType)>) -> Result<MappedMatrix, Error> {
        MatrixFile::open(path, raw)?.map()
    }

    /// A view of the mapped data as T, without copying: the type must be
    /// T's, stored little-endian and aligned for T; else
    /// [`Error::Unsupported`] saying which.
    pub fn view<T: Element>(&self) -> Result<MatRef<'_, T>, Error> {
        let data: &[T] = typed_data(
            &self.map[self.offset..],
            self.dtype,
            self.little_endian,
            self.offset,
            self.rows * self.cols,
        )?;
        let (row_stride, col_stride) = if self.column_major {
            (1, self.rows)
        } else {
            (self.cols, 1)
        };
        MatRef::from_slice_strided(data, self.rows, self.cols, row_stride, col_stride)
    }
}

impl MappedMatrix {
    /// Whether [`MappedMatrix::view`] as `dtype` maps the file as it is.
    pub fn maps_as(&self, dtype: DType) -> bool {
        self.dtype == dtype
            && self.little_endian
            && self.map[self.offset..]
                .as_ptr()
                .align_offset(dtype.size_bytes())
                == 0
    }

    /// This matrix as `dtype`, little-endian and aligned, in the same
    /// storage order: converted element by element (exactly, by the rules
    /// of [`super::AnyMatrix::to`]; the error names the first element that
    /// does not fit) into a scratch file in `scratch_dir`, in pieces of a
    /// few MiB, then mapped. The scratch file is removed at once: the map
    /// keeps its pages until dropped, so nothing is left behind. For
    /// inputs of another type, byte order or alignment than the product's.
    pub fn converted(&self, dtype: DType, scratch_dir: &Path) -> Result<MappedMatrix, Error> {
        let name = format!(
            "fastmm-convert.{}",
            SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        // Listed for an interrupt's clean-up, and removed when dropped at
        // the end of this function (the map keeps the pages).
        let scratch = crate::partial::PartialFile::new(&scratch_dir.join(name));
        let path = scratch.path().to_path_buf();
        let err = |reason: String| file_error(&path, &reason);
        let result = (|| -> Result<memmap2::Mmap, Error> {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| err(format!("cannot create a scratch file: {e}")))?;
            let len = self.rows * self.cols;
            let bytes = &self.map[self.offset..self.offset + len * self.dtype.size_bytes()];
            let mut out = Vec::with_capacity(CONVERT_PIECE_ELEMENTS * dtype.size_bytes());
            for (piece, first) in (0..len).step_by(CONVERT_PIECE_ELEMENTS).enumerate() {
                let count = CONVERT_PIECE_ELEMENTS.min(len - first);
                out.clear();
                convert_piece(
                    (self.dtype, self.little_endian),
                    dtype,
                    &bytes[first * self.dtype.size_bytes()..][..count * self.dtype.size_bytes()],
                    &mut out,
                )
                .map_err(|(index, value)| {
                    let at = piece * CONVERT_PIECE_ELEMENTS + index;
                    let (major, minor) = if self.column_major {
                        (at % self.rows.max(1), at / self.rows.max(1))
                    } else {
                        (at / self.cols.max(1), at % self.cols.max(1))
                    };
                    Error::Inexact {
                        row: major,
                        col: minor,
                        value,
                        to: dtype.to_string(),
                    }
                })?;
                file.write_all(&out)
                    .map_err(|e| err(format!("cannot write a scratch file: {e}")))?;
            }
            // SAFETY: the scratch file is private to this process (created
            // new under a unique name) and is never written after this.
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| err(format!("cannot map: {e}")))
        })();
        drop(scratch);
        Ok(MappedMatrix {
            map: result?,
            dtype,
            rows: self.rows,
            cols: self.cols,
            column_major: self.column_major,
            ndim: self.ndim,
            little_endian: true,
            offset: 0,
        })
    }
}

/// Scratch files made by this process so far (for unique names).
static SCRATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Elements converted per piece of [`MappedMatrix::converted`] (4 MiB of
/// f64): bounded memory, and writes large enough to run at disk speed.
const CONVERT_PIECE_ELEMENTS: usize = 1 << 19;

/// Appends the elements of `bytes` (of type `from.0`, little-endian when
/// `from.1`) converted to `to` in little-endian bytes to `out`; or the
/// index and value of the first that does not convert exactly.
fn convert_piece(
    from: (DType, bool),
    to: DType,
    bytes: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), (usize, String)> {
    fn decode<S: LittleEndian>(chunk: &[u8], little: bool) -> S {
        if little {
            S::from_le(chunk)
        } else {
            let mut reversed = [0u8; 8];
            let reversed = &mut reversed[..chunk.len()];
            reversed.copy_from_slice(chunk);
            reversed.reverse();
            S::from_le(reversed)
        }
    }
    fn typed<S, U>(bytes: &[u8], little: bool, out: &mut Vec<u8>) -> Result<(), (usize, String)>
    where
        S: Element + LittleEndian + super::Convert<U>,
        U: Element + LittleEndian,
    {
        for (i, chunk) in bytes.chunks_exact(std::mem::size_of::<S>()).enumerate() {
            let x: S = decode(chunk, little);
            match x.convert() {
                Some(y) => y.to_le(out),
                None => return Err((i, format!("{x}"))),
            }
        }
        Ok(())
    }
    macro_rules! to {
        ($s:ty) => {
            match to {
                DType::F32 => typed::<$s, f32>(bytes, from.1, out),
                DType::F64 => typed::<$s, f64>(bytes, from.1, out),
                DType::I32 => typed::<$s, i32>(bytes, from.1, out),
                DType::I64 => typed::<$s, i64>(bytes, from.1, out),
            }
        };
    }
    match from.0 {
        DType::F32 => to!(f32),
        DType::F64 => to!(f64),
        DType::I32 => to!(i32),
        DType::I64 => to!(i64),
    }
}

/// How an out-of-core product is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocking {
    /// Rows of C per block (a).
    pub block_rows: usize,
    /// Columns of C per block (b).
    pub block_cols: usize,
    /// The seed's memory of one block step, (k(a + b) + ab)·sizeof(T).
    pub seed_formula_bytes: u64,
    /// Bytes of one C block, a·b·sizeof(T): written through the map, so
    /// they are page cache the kernel writes back, not an allocation.
    pub c_block_bytes: u64,
}

impl Blocking {
    /// Blocks of C as large as `budget` bytes allow, whole rows first: a
    /// = rows that fit whole, else one row in blocks of b columns. Half of
    /// the budget is left to the product's packing buffers and the
    /// operating system's pages of A and B. (A second C block, written by
    /// another thread while this one is computed, measured no faster on
    /// two vCPUs.)
    pub fn new((m, k, n): (usize, usize, usize), elem: usize, budget: u64) -> Blocking {
        let for_c = (budget / 2).max(elem as u64);
        let row_bytes = (n.max(1) * elem) as u64;
        let (a, b) = if row_bytes <= for_c {
            (((for_c / row_bytes) as usize).clamp(1, m.max(1)), n)
        } else {
            (1, ((for_c / elem as u64) as usize).clamp(1, n.max(1)))
        };
        let (a64, b64, k64) = (a as u64, b as u64, k as u64);
        Blocking {
            block_rows: a,
            block_cols: b,
            seed_formula_bytes: (k64 * (a64 + b64) + a64 * b64) * elem as u64,
            c_block_bytes: a64 * b64 * elem as u64,
        }
    }

    /// Blocks of C: ⌈m/a⌉·⌈n/b⌉.
    pub fn blocks(&self, m: usize, n: usize) -> usize {
        m.div_ceil(self.block_rows.max(1)) * n.div_ceil(self.block_cols.max(1))
    }
}

/// A block's verification: (ok, relative error, fraction of the bound).
pub type BlockCheck = (bool, f64, f64);

/// What an out-of-core product did.
#[derive(Debug, Clone)]
pub struct FileProduct {
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// The blocking of C in host memory (on a GPU one block, the whole
    /// of C, which the GPU streams in tiles of its own).
    pub plan: Blocking,
    /// Blocks of C computed and written.
    pub blocks: usize,
    /// Seconds from mapping to the renamed output.
    pub seconds: f64,
    /// Seconds of those inside the products.
    pub multiply_seconds: f64,
    /// The worst verification of a block, when asked: (ok, relative
    /// error, fraction of the bound).
    pub check: Option<BlockCheck>,
    /// What each product ran: the whole product's plan (the one whose
    /// allowance the blocks are verified against).
    pub product: Plan,
    /// On a GPU: how A, B and C streamed through it.
    pub streamed: Option<Streamed>,
}

/// C = A·B on `ctx` for mapped A and B of type T, C written straight into
/// the mapped output `c_path` (.npy or raw), verified when `check` with
/// the whole product's allowance; a failed check leaves no output. On the
/// CPU C is computed block by block within `budget` bytes of host memory;
/// on a GPU the whole product streams through the GPU in tiles from the
/// maps (neither input copied whole in host memory).
///
/// # Errors
/// [`Error::DimensionMismatch`] for operands that do not chain; the
/// product's, the verification's and the files' errors.
pub fn multiply<T: Element>(
    ctx: &Context,
    a: &MappedMatrix,
    b: &MappedMatrix,
    c_path: &Path,
    opts: &GemmOptions,
    budget: u64,
    check: bool,
) -> Result<FileProduct, Error> {
    let start = Instant::now();
    let a_view = a.view::<T>()?;
    let b_view = b.view::<T>()?;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        return Err(Error::DimensionMismatch {
            a: (a.rows, a.cols),
            b: (b.rows, b.cols),
        });
    }
    let elem = std::mem::size_of::<T>();
    if ctx.device().kind() == DeviceKind::Cuda {
        // Mapped inputs stream through the GPU in tiles whatever their
        // size, so that neither is copied whole in host memory.
        let opts = GemmOptions {
            gpu: GpuOptions {
                out_of_core: true,
                ..opts.gpu
            },
            ..*opts
        };
        let plan = ctx.plan(Problem::of::<T>((m, k, n)), &opts)?;
        let (report, worst) = write_through_map::<T, _>(c_path, (m, n), |mut c| {
            let product = Gemm::new(a_view, b_view, c.rb_mut());
            let report = ctx.execute_clocked(&plan, product, Clock::Benchmark)?;
            let worst = match check {
                true => {
                    let growth = report.plan.error_growth;
                    let v = crate::verify::verify_with_growth(a_view, b_view, c.rb(), growth)?;
                    Some((v.ok, v.rel_error, v.bound_ratio))
                }
                false => None,
            };
            let keep = worst.is_none_or(|w| w.0);
            Ok(((report, worst), keep))
        })?;
        let whole = Blocking::new((m, k, n), elem, u64::MAX);
        return Ok(FileProduct {
            shape: (m, k, n),
            plan: whole,
            blocks: 1,
            seconds: start.elapsed().as_secs_f64(),
            multiply_seconds: report.timing.compute_ms / 1e3,
            check: worst,
            product: report.plan,
            streamed: report.timing.streamed,
        });
    }
    let product = ctx.plan(Problem::of::<T>((m, k, n)), opts)?;
    let growth = check.then_some(product.error_growth);
    let plan = Blocking::new((m, k, n), elem, budget);
    let (multiply_seconds, worst) = write_through_map::<T, _>(c_path, (m, n), |mut c| {
        let mut multiply_seconds = 0.0;
        let mut worst: Option<BlockCheck> = None;
        for i0 in (0..m).step_by(plan.block_rows.max(1)) {
            let rows = plan.block_rows.min(m - i0);
            for j0 in (0..n).step_by(plan.block_cols.max(1)) {
                let cols = plan.block_cols.min(n - j0);
                let a_block = a_view.submatrix(i0, 0, rows, k);
                let b_block = b_view.submatrix(0, j0, k, cols);
                let mut c_block = c.rb_mut().submatrix(i0, j0, rows, cols);
                let t = Instant::now();
                ctx.gemm(T::ONE, a_block, b_block, T::ZERO, c_block.rb_mut(), opts)?;
                multiply_seconds += t.elapsed().as_secs_f64();
                if let Some(growth) = growth {
                    let v =
                        crate::verify::verify_with_growth(a_block, b_block, c_block.rb(), growth)?;
                    let entry = (v.ok, v.rel_error, v.bound_ratio);
                    // The block nearest its bound (a failure ends the loop).
                    worst = Some(match worst {
                        Some(w) if w.2 >= entry.2 => w,
                        _ => entry,
                    });
                    if !v.ok {
                        return Ok(((multiply_seconds, worst), false));
                    }
                }
            }
        }
        Ok(((multiply_seconds, worst), true))
    })?;
    Ok(FileProduct {
        shape: (m, k, n),
        plan,
        blocks: plan.blocks(m, n),
        seconds: start.elapsed().as_secs_f64(),
        multiply_seconds,
        check: worst,
        product,
        streamed: None,
    })
}

/// Writes an m×n C of T to `c_path` (.npy, C order, or raw) through a
/// memory map: the file is created under a temporary name beside the
/// target, sized, and mapped; `fill` writes C through the view and says
/// whether to keep it; a kept C is flushed to the disk and renamed over
/// `c_path`, anything else (or an error) removes the temporary file. For
/// producers that write C in place, such as the GPU's out-of-core product,
/// so that C never needs a second copy in memory.
pub fn write_through_map<T: Element, R>(
    c_path: &Path,
    (m, n): (usize, usize),
    fill: impl FnOnce(MatMut<'_, T>) -> Result<(R, bool), Error>,
) -> Result<R, Error> {
    if cfg!(target_endian = "big") {
        return Err(file_error(
            c_path,
            "a mapped output is written in the host's byte order, and .npy/raw outputs are little-endian",
        ));
    }
    let header = match Format::of_path(c_path)? {
        Format::Npy => npy::header_bytes(T::DTYPE, m, n),
        Format::Raw => Vec::new(),
        _ => return Err(file_error(c_path, "a mapped output is a .npy or raw file")),
    };
    let elem = std::mem::size_of::<T>();
    let data_bytes = (m as u128) * (n as u128) * elem as u128;
    let total = u64::try_from(header.len() as u128 + data_bytes)
        .map_err(|_| file_error(c_path, "C is larger than a file can be"))?;
    let partial = crate::partial::PartialFile::new(c_path);
    let temporary = partial.path();
    let io = |e: std::io::Error| file_error(c_path, &format!("cannot write: {e}"));
    let result = (|| -> Result<(R, bool), Error> {
        // Read and write: a shared map needs both.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(temporary)
            .map_err(io)?;
        file.write_all(&header).map_err(io)?;
        file.set_len(total).map_err(io)?;
        // SAFETY: the file was just created by this process under a
        // private temporary name and is mapped once, read-write; nothing
        // else writes it while the map lives.
        let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }
            .map_err(|e| file_error(c_path, &format!("cannot map: {e}")))?;
        let bytes = &mut map[header.len()..];
        if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
            return Err(file_error(c_path, "the mapped data is not aligned"));
        }
        // SAFETY: the slice covers the m·n elements after the header
        // (the file was sized to header + m·n·size), is aligned for T
        // (checked above; the .npy header is 64 bytes long), and is
        // borrowed mutably from the map, which outlives the view.
        let data: &mut [T] =
            unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), m * n) };
        let c = MatMut::from_slice(data, m, n)?;
        let outcome = fill(c)?;
        if outcome.1 {
            map.flush().map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        Ok(outcome)
    })();
    // Dropping the partial file uncommitted removes it.
    match result {
        Ok((value, true)) => partial.commit().map(|()| value),
        Ok((value, false)) => Ok(value),
        Err(e) => Err(e),
    }
}
