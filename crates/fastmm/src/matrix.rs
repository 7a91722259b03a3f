//! Owned matrices and strided views.
//!
//! [`Matrix`] owns row-major storage. [`MatRef`] and [`MatMut`] are borrowed
//! views with a row stride and a column stride (both in elements, both
//! non-negative), so a quadrant, a tile or a transpose is a view and never a
//! copy. `MatMut` is guaranteed not to alias itself: every constructor checks
//! that distinct (i, j) map to distinct addresses.

use std::fmt;
use std::marker::PhantomData;

use crate::element::Element;
use crate::error::Error;

/// Storage of at least this many bytes asks Linux for transparent huge
/// pages, as numpy does for its arrays: with THP in `madvise` mode (the
/// common default) a large matrix otherwise lives on 4 KiB pages, and the
/// tiles of C the kernels update, eight rows each in a different page,
/// miss the TLB on every row.
const HUGE_STORAGE_BYTES: usize = 4 << 20;

/// Transparent huge pages' size on x86-64 and most aarch64 kernels.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Advises the kernel to back the whole huge pages inside `bytes` bytes
/// from `start` with huge pages once first touched; nothing anywhere
/// else, or where the advice is declined.
pub(crate) fn advise_huge_pages(start: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        let start = start as usize;
        let (first, last) = (
            start.next_multiple_of(HUGE_PAGE),
            (start + bytes) / HUGE_PAGE * HUGE_PAGE,
        );
        if last > first {
            // SAFETY: [first, last) lies inside the caller's allocation
            // and is page-aligned; madvise changes only how its pages are
            // backed, never their contents.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    last - first,
                    libc::MADV_HUGEPAGE,
                )
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// [`advise_huge_pages`] over a large vector's allocation, before it is
/// filled.
/// Elements a thread writes at a time when a matrix is filled in
/// parallel (512 KiB of f64: long enough to stream, many per thread).
const FILL_CHUNK: usize = 1 << 16;

/// Fills of fewer elements stay on the calling thread (the pool's
/// dispatch costs more than they do).
const PARALLEL_FILL_MIN: usize = 4 * FILL_CHUNK;

fn advise_huge_storage<T>(data: &mut Vec<T>) {
    let bytes = data.capacity() * std::mem::size_of::<T>();
    if bytes >= HUGE_STORAGE_BYTES {
        advise_huge_pages(data.as_mut_ptr().cast(), bytes);
    }
}

/// Number of elements a rows×cols view with these strides reaches, i.e. one
/// past its last element; `None` when that does not fit in `usize`.
fn extent(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1)
        .checked_mul(row_stride)?
        .checked_add((cols - 1).checked_mul(col_stride)?)?
        .checked_add(1)
}

/// Whether a view's layout maps distinct indices to distinct offsets. The
/// test is the usual sufficient one: the larger stride must step over the
/// whole extent of the other dimension.
fn is_injective(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> bool {
    if rows <= 1 && cols <= 1 {
        return true;
    }
    if rows <= 1 {
        return col_stride > 0;
    }
    if cols <= 1 {
        return row_stride > 0;
    }
    let ((inner_stride, inner_len), outer_stride) = if row_stride >= col_stride {
        ((col_stride, cols), row_stride)
    } else {
        ((row_stride, rows), col_stride)
    };
    inner_stride > 0
        && inner_stride
            .checked_mul(inner_len)
            .is_some_and(|span| outer_stride >= span)
}

fn check_layout(
    len: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Result<(), Error> {
    let too_small = |needed| Error::BufferTooSmall {
        rows,
        cols,
        row_stride,
        col_stride,
        needed,
        len,
    };
    match extent(rows, cols, row_stride, col_stride) {
        None => Err(Error::SizeOverflow { rows, cols }),
        Some(needed) if needed > len => Err(too_small(needed)),
        Some(_) => Ok(()),
    }
}

/// [`Error::OutOfBounds`] unless (i, j) lies inside `shape`.
fn check_index(i: usize, j: usize, (rows, cols): (usize, usize)) -> Result<(), Error> {
    if i < rows && j < cols {
        Ok(())
    } else {
        Err(Error::OutOfBounds(format!(
            "index ({i}, {j}) out of bounds for a {rows}×{cols} matrix"
        )))
    }
}

/// [`Error::OutOfBounds`] unless the `size` block at `at` lies inside
/// `shape`.
fn check_block(
    (row, col): (usize, usize),
    (rows, cols): (usize, usize),
    shape: (usize, usize),
) -> Result<(), Error> {
    let inside = row.checked_add(rows).is_some_and(|e| e <= shape.0)
        && col.checked_add(cols).is_some_and(|e| e <= shape.1);
    if inside {
        Ok(())
    } else {
        Err(Error::OutOfBounds(format!(
            "a {rows}×{cols} block at ({row}, {col}) exceeds a {}×{} matrix",
            shape.0, shape.1
        )))
    }
}

/// An owned, contiguous, row-major matrix.
#[derive(Clone, PartialEq)]
pub struct Matrix<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
}

impl<T: Element> Matrix<T> {
    /// A rows×cols matrix of zeros.
    ///
    /// # Panics
    /// If rows·cols overflows `usize` (as `vec![0; n]` would);
    /// [`Matrix::try_zeros`] returns an error instead.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self::filled(rows, cols, T::ZERO)
    }

    /// Like [`Matrix::zeros`], with overflow reported as an error.
    pub fn try_zeros(rows: usize, cols: usize) -> Result<Self, Error> {
        Self::try_filled(rows, cols, T::ZERO)
    }

    /// A rows×cols matrix with every element equal to `value`.
    ///
    /// # Panics
    /// If rows·cols overflows `usize`; [`Matrix::try_filled`] returns an
    /// error instead.
    pub fn filled(rows: usize, cols: usize, value: T) -> Self {
        Self::try_filled(rows, cols, value).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Matrix::filled`], with overflow reported as an error. Large
    /// matrices of a value other than zero are filled on every thread (a
    /// poisoned 32768² f64 output is 8 GiB).
    pub fn try_filled(rows: usize, cols: usize, value: T) -> Result<Self, Error> {
        let len = rows
            .checked_mul(cols)
            .ok_or(Error::SizeOverflow { rows, cols })?;
        if value != T::ZERO && len >= PARALLEL_FILL_MIN {
            return Self::try_from_chunks(rows, cols, |_, chunk| chunk.fill(value));
        }
        // Zeros come from calloc, whose large blocks are fresh pages not
        // yet touched, so the advice still applies to them.
        let mut data = vec![value; len];
        advise_huge_storage(&mut data);
        Ok(Matrix { data, rows, cols })
    }

    /// A rows×cols matrix written on every thread: `fill(start, chunk)`
    /// writes the row-major elements start..start + chunk.len(). The
    /// chunks are disjoint, cover the matrix and run in any order, so
    /// `fill` must make each element from its index alone.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`] when rows·cols overflows `usize`.
    pub fn try_from_chunks(
        rows: usize,
        cols: usize,
        fill: impl Fn(usize, &mut [T]) + Sync,
    ) -> Result<Self, Error> {
        use rayon::prelude::*;
        let len = rows
            .checked_mul(cols)
            .ok_or(Error::SizeOverflow { rows, cols })?;
        // Fresh zeroed pages (calloc), each first touched by the thread
        // that fills it.
        let mut data = vec![T::ZERO; len];
        advise_huge_storage(&mut data);
        data.par_chunks_mut(FILL_CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| fill(c * FILL_CHUNK, chunk));
        Ok(Matrix { data, rows, cols })
    }

    /// Every element set to `value`, on every thread where the matrix is
    /// large.
    pub fn fill(&mut self, value: T) {
        use rayon::prelude::*;
        if self.data.len() < PARALLEL_FILL_MIN {
            self.data.fill(value);
            return;
        }
        self.data
            .par_chunks_mut(FILL_CHUNK)
            .for_each(|chunk| chunk.fill(value));
    }

    /// Takes ownership of row-major `data`, which must hold exactly rows·cols elements.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<T>) -> Result<Self, Error> {
        let len = rows
            .checked_mul(cols)
            .ok_or(Error::SizeOverflow { rows, cols })?;
        if data.len() != len {
            return Err(Error::BufferTooSmall {
                rows,
                cols,
                row_stride: cols,
                col_stride: 1,
                needed: len,
                len: data.len(),
            });
        }
        Ok(Matrix { data, rows, cols })
    }

    /// Builds a matrix element by element: `M[i][j] = f(i, j)`.
    ///
    /// # Panics
    /// If rows·cols overflows `usize`; [`Matrix::try_from_fn`] returns an
    /// error instead.
    pub fn from_fn(rows: usize, cols: usize, f: impl FnMut(usize, usize) -> T) -> Self {
        Self::try_from_fn(rows, cols, f).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Matrix::from_fn`], with overflow reported as an error.
    pub fn try_from_fn(
        rows: usize,
        cols: usize,
        mut f: impl FnMut(usize, usize) -> T,
    ) -> Result<Self, Error> {
        let len = rows
            .checked_mul(cols)
            .ok_or(Error::SizeOverflow { rows, cols })?;
        let mut data = Vec::with_capacity(len);
        advise_huge_storage(&mut data);
        for i in 0..rows {
            for j in 0..cols {
                data.push(f(i, j));
            }
        }
        Ok(Matrix { data, rows, cols })
    }

    /// Copies any view into a new row-major matrix.
    ///
    /// # Panics
    /// If the view's rows·cols overflows `usize` (a view with zero
    /// strides can be that large); [`Matrix::try_from_view`] returns an
    /// error instead.
    pub fn from_view(view: MatRef<'_, T>) -> Self {
        Self::try_from_view(view).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Matrix::from_view`], with overflow reported as an error.
    pub fn try_from_view(view: MatRef<'_, T>) -> Result<Self, Error> {
        let (rows, cols) = view.shape();
        if rows > 0 && view.row(0).is_some() {
            // Contiguous rows: one copy each.
            let len = rows
                .checked_mul(cols)
                .ok_or(Error::SizeOverflow { rows, cols })?;
            let mut data = Vec::with_capacity(len);
            advise_huge_storage(&mut data);
            for i in 0..rows {
                data.extend_from_slice(view.row(i).expect("columns are contiguous"));
            }
            return Ok(Matrix { data, rows, cols });
        }
        Self::try_from_fn(rows, cols, |i, j| {
            // SAFETY: try_from_fn calls with i < rows and j < cols.
            unsafe { view.get_unchecked(i, j) }
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The row-major storage.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The row-major storage, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Gives the storage back.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Element (i, j).
    ///
    /// # Panics
    /// If (i, j) is out of bounds; [`Matrix::try_get`] returns an error.
    pub fn get(&self, i: usize, j: usize) -> T {
        self.as_ref().get(i, j)
    }

    /// Element (i, j), or [`Error::OutOfBounds`].
    pub fn try_get(&self, i: usize, j: usize) -> Result<T, Error> {
        self.as_ref().try_get(i, j)
    }

    /// Sets element (i, j).
    ///
    /// # Panics
    /// If (i, j) is out of bounds; [`Matrix::try_set`] returns an error.
    pub fn set(&mut self, i: usize, j: usize, value: T) {
        self.as_mut().set(i, j, value)
    }

    /// Sets element (i, j), or returns [`Error::OutOfBounds`].
    pub fn try_set(&mut self, i: usize, j: usize, value: T) -> Result<(), Error> {
        self.as_mut().try_set(i, j, value)
    }

    /// A view of the whole matrix.
    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef {
            ptr: self.data.as_ptr(),
            rows: self.rows,
            cols: self.cols,
            row_stride: self.cols,
            col_stride: 1,
            _marker: PhantomData,
        }
    }

    /// A mutable view of the whole matrix.
    pub fn as_mut(&mut self) -> MatMut<'_, T> {
        MatMut {
            ptr: self.data.as_mut_ptr(),
            rows: self.rows,
            cols: self.cols,
            row_stride: self.cols,
            col_stride: 1,
            _marker: PhantomData,
        }
    }
}

impl<T: Element> fmt::Debug for Matrix<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_ref(), f)
    }
}

impl<T: Element> fmt::Display for Matrix<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.as_ref(), f)
    }
}

/// A borrowed, read-only, strided matrix view: element (i, j) lives at
/// `ptr + i·row_stride + j·col_stride`.
#[derive(Clone, Copy)]
pub struct MatRef<'a, T> {
    ptr: *const T,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
    _marker: PhantomData<&'a T>,
}

// SAFETY: a MatRef is a shared borrow of T values; sharing it across threads is
// as safe as sharing `&[T]`, which requires `T: Sync`.
unsafe impl<T: Sync> Send for MatRef<'_, T> {}
// SAFETY: as above, `&MatRef` only hands out reads of T.
unsafe impl<T: Sync> Sync for MatRef<'_, T> {}

impl<'a, T: Element> MatRef<'a, T> {
    /// A view of raw memory.
    ///
    /// # Safety
    /// Every `ptr + i·row_stride + j·col_stride` (i < rows, j < cols) is
    /// readable for `'a` and not written through any other path meanwhile.
    pub unsafe fn from_raw_parts(
        ptr: *const T,
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        MatRef {
            ptr,
            rows,
            cols,
            row_stride,
            col_stride,
            _marker: PhantomData,
        }
    }

    /// A contiguous row-major view of `data`.
    pub fn from_slice(data: &'a [T], rows: usize, cols: usize) -> Result<Self, Error> {
        Self::from_slice_strided(data, rows, cols, cols, 1)
    }

    /// A view of `data` with explicit strides. Column-major storage is
    /// `row_stride = 1, col_stride = rows`.
    pub fn from_slice_strided(
        data: &'a [T],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<Self, Error> {
        check_layout(data.len(), rows, cols, row_stride, col_stride)?;
        Ok(MatRef {
            ptr: data.as_ptr(),
            rows,
            cols,
            row_stride,
            col_stride,
            _marker: PhantomData,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Distance between (i, j) and (i+1, j), in elements.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Distance between (i, j) and (i, j+1), in elements.
    pub fn col_stride(&self) -> usize {
        self.col_stride
    }

    /// Pointer to element (0, 0).
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Element (i, j).
    ///
    /// # Panics
    /// If (i, j) is out of bounds; [`MatRef::try_get`] returns an error.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> T {
        assert!(
            i < self.rows && j < self.cols,
            "index ({i}, {j}) out of bounds for {}×{} view",
            self.rows,
            self.cols
        );
        // SAFETY: bounds checked just above; the constructor checked the extent.
        unsafe { self.get_unchecked(i, j) }
    }

    /// Element (i, j), or [`Error::OutOfBounds`].
    pub fn try_get(&self, i: usize, j: usize) -> Result<T, Error> {
        check_index(i, j, self.shape())?;
        // SAFETY: bounds checked just above; the constructor checked the extent.
        Ok(unsafe { self.get_unchecked(i, j) })
    }

    /// Element (i, j) without a bounds check.
    ///
    /// # Safety
    /// `i < rows` and `j < cols`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize, j: usize) -> T {
        // SAFETY: the caller guarantees the index is in bounds, so the offset
        // lies within the extent checked at construction.
        unsafe { *self.ptr.add(i * self.row_stride + j * self.col_stride) }
    }

    /// Row i as a slice, when columns are contiguous (`col_stride == 1`).
    ///
    /// # Panics
    /// If `i >= rows`; [`MatRef::try_row`] returns an error.
    #[inline]
    pub fn row(&self, i: usize) -> Option<&'a [T]> {
        assert!(
            i < self.rows,
            "row {i} out of bounds for {} rows",
            self.rows
        );
        if self.col_stride != 1 && self.cols > 1 {
            return None;
        }
        // SAFETY: row i spans offsets i·rs .. i·rs + cols, all inside the
        // checked extent, and the data is borrowed for 'a.
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(i * self.row_stride), self.cols) })
    }

    /// Like [`MatRef::row`], with `i >= rows` reported as
    /// [`Error::OutOfBounds`].
    pub fn try_row(&self, i: usize) -> Result<Option<&'a [T]>, Error> {
        check_index(i, 0, (self.rows, 1))?;
        Ok(self.row(i))
    }

    /// The transpose, as a view: no data moves.
    pub fn t(self) -> MatRef<'a, T> {
        MatRef {
            ptr: self.ptr,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            _marker: PhantomData,
        }
    }

    /// The `rows`×`cols` block whose top-left corner is (row, col).
    ///
    /// # Panics
    /// If the block does not lie inside the view;
    /// [`MatRef::try_submatrix`] returns an error.
    pub fn submatrix(self, row: usize, col: usize, rows: usize, cols: usize) -> MatRef<'a, T> {
        self.try_submatrix(row, col, rows, cols)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`MatRef::submatrix`], with a block outside the view reported
    /// as [`Error::OutOfBounds`].
    pub fn try_submatrix(
        self,
        row: usize,
        col: usize,
        rows: usize,
        cols: usize,
    ) -> Result<MatRef<'a, T>, Error> {
        check_block((row, col), (rows, cols), self.shape())?;
        let ptr = if rows == 0 || cols == 0 {
            self.ptr
        } else {
            // SAFETY: (row, col) is inside the view, so the offset is within its extent.
            unsafe { self.ptr.add(row * self.row_stride + col * self.col_stride) }
        };
        Ok(MatRef {
            ptr,
            rows,
            cols,
            ..self
        })
    }

    /// Iterates over the elements row by row.
    pub fn iter(self) -> impl Iterator<Item = T> + 'a {
        (0..self.rows).flat_map(move |i| (0..self.cols).map(move |j| self.get(i, j)))
    }
}

/// Writes a view as rows of right-aligned numbers.
impl<T: Element> fmt::Display for MatRef<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cells: Vec<String> = self
            .iter()
            .map(|x| match f.precision() {
                Some(p) if !T::DTYPE.is_integer() => format!("{x:.p$}"),
                _ => format!("{x}"),
            })
            .collect();
        let width = cells.iter().map(String::len).max().unwrap_or(0);
        for i in 0..self.rows {
            let row = &cells[i * self.cols..(i + 1) * self.cols];
            let line: Vec<String> = row.iter().map(|c| format!("{c:>width$}")).collect();
            writeln!(f, "{}", line.join(" "))?;
        }
        Ok(())
    }
}

impl<T: Element> fmt::Debug for MatRef<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×{} ", self.rows, self.cols)?;
        let rows: Vec<Vec<T>> = (0..self.rows)
            .map(|i| (0..self.cols).map(|j| self.get(i, j)).collect())
            .collect();
        f.debug_list().entries(rows).finish()
    }
}

/// A borrowed, mutable, strided matrix view that never aliases itself.
pub struct MatMut<'a, T> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
    _marker: PhantomData<&'a mut T>,
}

// SAFETY: a MatMut is an exclusive borrow of the elements it reaches (its
// constructors reject self-aliasing layouts and its splits are disjoint), so
// moving it to another thread is as safe as moving `&mut [T]`.
unsafe impl<T: Send> Send for MatMut<'_, T> {}
// SAFETY: `&MatMut` only allows reads (through `rb`), as `&&mut [T]` does.
unsafe impl<T: Sync> Sync for MatMut<'_, T> {}

impl<'a, T: Element> MatMut<'a, T> {
    /// A mutable view of raw memory.
    ///
    /// # Safety
    /// Every `ptr + i·row_stride + j·col_stride` (i < rows, j < cols) is
    /// valid for reads and writes for `'a`, reached through no other path
    /// meanwhile, and no two (i, j) share an address.
    pub unsafe fn from_raw_parts(
        ptr: *mut T,
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        MatMut {
            ptr,
            rows,
            cols,
            row_stride,
            col_stride,
            _marker: PhantomData,
        }
    }

    /// A contiguous row-major mutable view of `data`.
    pub fn from_slice(data: &'a mut [T], rows: usize, cols: usize) -> Result<Self, Error> {
        Self::from_slice_strided(data, rows, cols, cols, 1)
    }

    /// A mutable view with explicit strides; layouts in which two indices
    /// share an address are rejected with [`Error::SelfAliasing`].
    pub fn from_slice_strided(
        data: &'a mut [T],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<Self, Error> {
        check_layout(data.len(), rows, cols, row_stride, col_stride)?;
        if !is_injective(rows, cols, row_stride, col_stride) {
            return Err(Error::SelfAliasing {
                rows,
                cols,
                row_stride,
                col_stride,
            });
        }
        Ok(MatMut {
            ptr: data.as_mut_ptr(),
            rows,
            cols,
            row_stride,
            col_stride,
            _marker: PhantomData,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Distance between (i, j) and (i+1, j), in elements.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }

    /// Distance between (i, j) and (i, j+1), in elements.
    pub fn col_stride(&self) -> usize {
        self.col_stride
    }

    /// Pointer to element (0, 0).
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// A read-only view of the same elements, borrowing this one.
    pub fn rb(&self) -> MatRef<'_, T> {
        MatRef {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
            _marker: PhantomData,
        }
    }

    /// A shorter-lived mutable view of the same elements (a reborrow).
    pub fn rb_mut(&mut self) -> MatMut<'_, T> {
        MatMut {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
            _marker: PhantomData,
        }
    }

    /// Element (i, j).
    ///
    /// # Panics
    /// If (i, j) is out of bounds; [`MatMut::try_get`] returns an error.
    pub fn get(&self, i: usize, j: usize) -> T {
        self.rb().get(i, j)
    }

    /// Element (i, j), or [`Error::OutOfBounds`].
    pub fn try_get(&self, i: usize, j: usize) -> Result<T, Error> {
        self.rb().try_get(i, j)
    }

    /// Sets element (i, j).
    ///
    /// # Panics
    /// If (i, j) is out of bounds; [`MatMut::try_set`] returns an error.
    #[inline]
    pub fn set(&mut self, i: usize, j: usize, value: T) {
        assert!(
            i < self.rows && j < self.cols,
            "index ({i}, {j}) out of bounds for {}×{} view",
            self.rows,
            self.cols
        );
        // SAFETY: bounds checked just above.
        unsafe { *self.get_unchecked_mut(i, j) = value }
    }

    /// Sets element (i, j), or returns [`Error::OutOfBounds`].
    pub fn try_set(&mut self, i: usize, j: usize, value: T) -> Result<(), Error> {
        check_index(i, j, self.shape())?;
        // SAFETY: bounds checked just above.
        unsafe { *self.get_unchecked_mut(i, j) = value };
        Ok(())
    }

    /// Mutable reference to element (i, j) without a bounds check.
    ///
    /// # Safety
    /// `i < rows` and `j < cols`.
    #[inline(always)]
    pub unsafe fn get_unchecked_mut(&mut self, i: usize, j: usize) -> &mut T {
        // SAFETY: the caller guarantees the index is in bounds; the view is
        // exclusive and injective, so no other reference reaches this element.
        unsafe { &mut *self.ptr.add(i * self.row_stride + j * self.col_stride) }
    }

    /// Row i as a mutable slice, when columns are contiguous.
    ///
    /// # Panics
    /// If `i >= rows`; [`MatMut::try_row_mut`] returns an error.
    #[inline]
    pub fn row_mut(&mut self, i: usize) -> Option<&mut [T]> {
        assert!(
            i < self.rows,
            "row {i} out of bounds for {} rows",
            self.rows
        );
        if self.col_stride != 1 && self.cols > 1 {
            return None;
        }
        // SAFETY: row i spans offsets i·rs .. i·rs + cols inside the checked
        // extent; the view is exclusive, and the slice borrows `self` mutably.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(i * self.row_stride), self.cols)
        })
    }

    /// Like [`MatMut::row_mut`], with `i >= rows` reported as
    /// [`Error::OutOfBounds`].
    pub fn try_row_mut(&mut self, i: usize) -> Result<Option<&mut [T]>, Error> {
        check_index(i, 0, (self.rows, 1))?;
        Ok(self.row_mut(i))
    }

    /// Sets every element to `value` without reading any.
    pub fn fill(&mut self, value: T) {
        self.for_each_row(|row| row.fill(value), |x| *x = value);
    }

    /// Multiplies every element by `factor` in place.
    pub fn scale(&mut self, factor: T) {
        self.for_each_row(
            |row| row.iter_mut().for_each(|x| *x = x.mul(factor)),
            |x| *x = x.mul(factor),
        );
    }

    /// C ← β·C, the β step of C ← α·A·B + β·C: with β = 0 every element
    /// is set to zero and none is read (so NaN in C never survives), with
    /// β = 1 nothing is touched.
    pub fn scale_by(&mut self, beta: T) {
        if beta == T::ZERO {
            self.fill(T::ZERO);
        } else if beta != T::ONE {
            self.scale(beta);
        }
    }

    /// Applies `contiguous` to each row when rows are slices, else `each` to every element.
    fn for_each_row(&mut self, mut contiguous: impl FnMut(&mut [T]), mut each: impl FnMut(&mut T)) {
        for i in 0..self.rows {
            match self.row_mut(i) {
                Some(row) => contiguous(row),
                None => {
                    for j in 0..self.cols {
                        // SAFETY: i < rows and j < cols.
                        each(unsafe { self.get_unchecked_mut(i, j) });
                    }
                }
            }
        }
    }

    /// The transpose, as a mutable view.
    pub fn t(self) -> MatMut<'a, T> {
        MatMut {
            ptr: self.ptr,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            _marker: PhantomData,
        }
    }

    /// The `rows`×`cols` block whose top-left corner is (row, col).
    ///
    /// # Panics
    /// If the block does not lie inside the view;
    /// [`MatMut::try_submatrix`] returns an error.
    pub fn submatrix(self, row: usize, col: usize, rows: usize, cols: usize) -> MatMut<'a, T> {
        self.try_submatrix(row, col, rows, cols)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`MatMut::submatrix`], with a block outside the view reported
    /// as [`Error::OutOfBounds`].
    pub fn try_submatrix(
        self,
        row: usize,
        col: usize,
        rows: usize,
        cols: usize,
    ) -> Result<MatMut<'a, T>, Error> {
        let sub = self.rb().try_submatrix(row, col, rows, cols)?;
        Ok(MatMut {
            ptr: sub.ptr as *mut T,
            rows,
            cols,
            row_stride: self.row_stride,
            col_stride: self.col_stride,
            _marker: PhantomData,
        })
    }

    /// Splits into rows `0..r` and `r..rows`: two disjoint views.
    ///
    /// # Panics
    /// If `r > rows`; [`MatMut::try_split_at_row`] returns an error.
    pub fn split_at_row(self, r: usize) -> (MatMut<'a, T>, MatMut<'a, T>) {
        self.try_split_at_row(r).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`MatMut::split_at_row`], with `r > rows` reported as
    /// [`Error::OutOfBounds`].
    pub fn try_split_at_row(self, r: usize) -> Result<(MatMut<'a, T>, MatMut<'a, T>), Error> {
        if r > self.rows {
            return Err(Error::OutOfBounds(format!(
                "split at row {r} beyond {} rows",
                self.rows
            )));
        }
        let (rows, cols) = (self.rows, self.cols);
        let top = MatMut {
            ptr: self.ptr,
            rows: r,
            ..self
        };
        let bottom = self.try_submatrix(r, 0, rows - r, cols)?;
        Ok((top, bottom))
    }

    /// Splits into columns `0..c` and `c..cols`: two disjoint views.
    ///
    /// # Panics
    /// If `c > cols`; [`MatMut::try_split_at_col`] returns an error.
    pub fn split_at_col(self, c: usize) -> (MatMut<'a, T>, MatMut<'a, T>) {
        self.try_split_at_col(c).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`MatMut::split_at_col`], with `c > cols` reported as
    /// [`Error::OutOfBounds`].
    pub fn try_split_at_col(self, c: usize) -> Result<(MatMut<'a, T>, MatMut<'a, T>), Error> {
        if c > self.cols {
            return Err(Error::OutOfBounds(format!(
                "split at column {c} beyond {} columns",
                self.cols
            )));
        }
        let (left, right) = self.t().try_split_at_row(c)?;
        Ok((left.t(), right.t()))
    }

    /// Cuts the view into a grid of disjoint blocks of at most
    /// `block_rows`×`block_cols`, row of blocks by row of blocks. Each item
    /// is `(row offset, column offset, block)`.
    ///
    /// # Panics
    /// If a block size is 0; [`MatMut::try_into_blocks`] returns an error.
    pub fn into_blocks(
        self,
        block_rows: usize,
        block_cols: usize,
    ) -> Vec<(usize, usize, MatMut<'a, T>)> {
        self.try_into_blocks(block_rows, block_cols)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`MatMut::into_blocks`], with a block size of 0 reported as
    /// [`Error::InvalidOption`].
    pub fn try_into_blocks(
        self,
        block_rows: usize,
        block_cols: usize,
    ) -> Result<Vec<(usize, usize, MatMut<'a, T>)>, Error> {
        if block_rows == 0 || block_cols == 0 {
            return Err(Error::InvalidOption(
                "block sizes must be positive".to_string(),
            ));
        }
        let mut blocks = Vec::new();
        let mut rest = self;
        let mut row0 = 0;
        while rest.rows > 0 {
            let take = block_rows.min(rest.rows);
            let (mut strip, below) = rest.split_at_row(take);
            let mut col0 = 0;
            while strip.cols > 0 {
                let width = block_cols.min(strip.cols);
                let (block, right) = strip.split_at_col(width);
                blocks.push((row0, col0, block));
                strip = right;
                col0 += width;
            }
            rest = below;
            row0 += take;
        }
        Ok(blocks)
    }
}

impl<T: Element> fmt::Debug for MatMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.rb(), f)
    }
}

/// A·B's shapes: A's columns are B's rows and C is m×n.
pub(crate) fn check_product_shapes<T: Element>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c_shape: (usize, usize),
) -> Result<(), Error> {
    if a.cols() != b.rows() {
        return Err(Error::DimensionMismatch {
            a: a.shape(),
            b: b.shape(),
        });
    }
    let expected = (a.rows(), b.cols());
    if c_shape != expected {
        return Err(Error::OutputShape {
            expected,
            got: c_shape,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills and chunked construction write every element once, on one
    /// thread or many, at the sizes either side of the parallel threshold.
    #[test]
    fn parallel_fills_and_chunks_cover_every_element() {
        for (rows, cols) in [(0, 3), (1, 1), (3, 5), (511, 513), (1, 4 * FILL_CHUNK + 7)] {
            let mut m = Matrix::<f64>::try_filled(rows, cols, f64::NAN).unwrap();
            assert!(m.as_slice().iter().all(|x| x.is_nan()));
            m.fill(1.5);
            assert!(m.as_slice().iter().all(|&x| x == 1.5));
            let n = Matrix::<i64>::try_from_chunks(rows, cols, |start, chunk| {
                for (o, x) in chunk.iter_mut().enumerate() {
                    *x = (start + o) as i64;
                }
            })
            .unwrap();
            assert!(n.as_slice().iter().enumerate().all(|(i, &x)| x == i as i64));
            assert_eq!(n.shape(), (rows, cols));
        }
    }

    /// Every panicking accessor has a `try_` twin that returns the error
    /// instead, and agrees with it where both succeed.
    #[test]
    fn try_twins_return_errors_where_the_others_panic() {
        let mut m = Matrix::from_fn(3, 4, |i, j| (10 * i + j) as i64);
        assert_eq!(m.try_get(2, 3), Ok(23));
        assert!(matches!(m.try_get(3, 0), Err(Error::OutOfBounds(_))));
        assert!(m.try_set(0, 4, 1).is_err());
        m.try_set(1, 1, -1).unwrap();
        assert_eq!(m.get(1, 1), -1);
        let view = m.as_ref();
        assert_eq!(view.try_submatrix(1, 1, 2, 3).unwrap().get(1, 2), 23);
        assert!(view.try_submatrix(2, 0, 2, 1).is_err());
        assert!(view.try_submatrix(usize::MAX, 0, 2, 1).is_err());
        assert!(view.try_row(3).is_err());
        assert_eq!(view.try_row(1).unwrap(), Some(&[10, -1, 12, 13][..]));
        let e = view.try_get(5, 5).unwrap_err().to_string();
        assert_eq!(e, "index (5, 5) out of bounds for a 3×4 matrix");
        assert!(Matrix::<f32>::try_zeros(usize::MAX, 2).is_err());
        assert!(Matrix::<f32>::try_from_fn(usize::MAX, 2, |_, _| 0.0).is_err());
        let zero = [0.0f64];
        let huge = MatRef::from_slice_strided(&zero, usize::MAX, 2, 0, 0).unwrap();
        assert!(Matrix::try_from_view(huge).is_err());
        let mut c = m.clone();
        let mut v = c.as_mut();
        assert!(v.try_row_mut(3).is_err());
        assert!(v.rb_mut().try_split_at_row(4).is_err());
        assert!(v.rb_mut().try_split_at_col(5).is_err());
        assert!(v.rb_mut().try_into_blocks(0, 1).is_err());
        assert!(v.rb_mut().try_submatrix(0, 0, 4, 1).is_err());
        let (top, bottom) = v.rb_mut().try_split_at_row(1).unwrap();
        assert_eq!((top.shape(), bottom.shape()), ((1, 4), (2, 4)));
        assert_eq!(v.rb_mut().try_into_blocks(2, 3).unwrap().len(), 4);
        assert_eq!(v.try_get(2, 0), Ok(20));
    }

    #[test]
    fn transpose_and_submatrix_are_views() {
        let m = Matrix::from_fn(3, 4, |i, j| (10 * i + j) as i32);
        let t = m.as_ref().t();
        assert_eq!(t.shape(), (4, 3));
        assert_eq!(t.get(3, 2), 23);
        let s = m.as_ref().submatrix(1, 1, 2, 3);
        assert_eq!(s.get(1, 2), 23);
        assert_eq!(s.row(0).unwrap(), &[11, 12, 13]);
        assert!(t.row(0).is_none());
    }

    #[test]
    fn strided_views_are_checked() {
        let data = [0.0f32; 10];
        assert!(MatRef::from_slice_strided(&data, 2, 3, 5, 2).is_ok());
        assert!(MatRef::from_slice_strided(&data, 2, 3, 6, 2).is_err());
        assert!(MatRef::from_slice_strided(&data, 2, 3, 4, 1).is_ok());
        assert!(matches!(
            MatRef::from_slice_strided(&data, 3, 3, 4, 1),
            Err(Error::BufferTooSmall { needed: 11, .. })
        ));
        let mut buf = [0.0f64; 16];
        assert!(matches!(
            MatMut::from_slice_strided(&mut buf, 3, 3, 1, 1),
            Err(Error::SelfAliasing { .. })
        ));
        assert!(MatMut::from_slice_strided(&mut buf, 3, 3, 1, 3).is_ok());
        assert!(matches!(
            MatRef::from_slice_strided(&data, usize::MAX, 2, usize::MAX, 1),
            Err(Error::SizeOverflow { .. })
        ));
    }

    #[test]
    fn blocks_tile_the_view_exactly() {
        let mut m = Matrix::<i64>::zeros(5, 7);
        let blocks = m.as_mut().into_blocks(2, 3);
        assert_eq!(blocks.len(), 3 * 3);
        for (r0, c0, mut b) in blocks {
            for i in 0..b.rows() {
                for j in 0..b.cols() {
                    b.set(i, j, b.get(i, j) + (100 * (r0 + i) + c0 + j) as i64 + 1);
                }
            }
        }
        for i in 0..5 {
            for j in 0..7 {
                assert_eq!(m.get(i, j), (100 * i + j) as i64 + 1);
            }
        }
    }
}

/// A matrix in a GPU's memory, owned by the caller (a DLPack tensor of
/// PyTorch or CuPy, say, or a [`crate::GpuBuffer`]): row-major, element
/// (i, j) of type T at byte `ptr + (i·ld + j)·size_of::<T>()`; or, when
/// `transposed`, column-major (a transposed view of a row-major matrix,
/// such as torch's `w.mT`), element (i, j) at `ptr + (j·ld + i)·size_of::<T>()`.
/// Plain data: the product that takes it ([`crate::Context::gemm_gpu`]) is
/// `unsafe`, since nothing here proves the memory is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMatrix {
    /// The device address of element (0, 0).
    pub ptr: u64,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Elements from one row to the next (at least `cols`); from one
    /// column to the next (at least `rows`) when `transposed`.
    pub ld: usize,
    /// Column-major storage: the matrix is a transposed view.
    pub transposed: bool,
}

impl GpuMatrix {
    /// A row-major matrix.
    pub fn row_major(ptr: u64, (rows, cols): (usize, usize), ld: usize) -> GpuMatrix {
        GpuMatrix {
            ptr,
            rows,
            cols,
            ld,
            transposed: false,
        }
    }

    /// The same memory read as the transposed matrix (cols×rows).
    pub fn t(self) -> GpuMatrix {
        GpuMatrix {
            rows: self.cols,
            cols: self.rows,
            transposed: !self.transposed,
            ..self
        }
    }

    /// (lines, their length): rows and columns for a row-major matrix,
    /// columns and rows for a transposed one, as it lies in memory.
    fn lines(&self) -> (usize, usize) {
        match self.transposed {
            false => (self.rows, self.cols),
            true => (self.cols, self.rows),
        }
    }

    /// Whether `ld` spans a whole line (row, or column when transposed).
    pub fn ld_ok(&self) -> bool {
        self.ld >= self.lines().1
    }

    /// The bytes from element (0, 0) to just past the last element, for
    /// elements of `item` bytes (0 for an empty matrix).
    pub fn extent(&self, item: usize) -> u64 {
        let (lines, len) = self.lines();
        match lines == 0 || len == 0 {
            true => 0,
            false => (((lines - 1) * self.ld + len) * item) as u64,
        }
    }
}

/// One product of a batch on GPU-resident operands
/// ([`crate::Context::gemm_gpu_batch`]): C ← α·A·B + β·C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProduct {
    /// A, m×k.
    pub a: GpuMatrix,
    /// B, k×n.
    pub b: GpuMatrix,
    /// C, m×n, written.
    pub c: GpuMatrix,
}
