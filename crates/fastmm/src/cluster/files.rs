//! Products of matrix files across the ranks: every rank reads the
//! headers of A and B (.npy or raw, on a file system they all see) and
//! maps only the lines of the files that hold its pieces (rows of a
//! row-major file, columns of a Fortran-order one); C is one .npy (or raw) file, created at its full size under a
//! temporary name by rank 0, into which every rank writes its own blocks
//! at their offsets. Rank 0 checks the whole C against A and B and renames
//! it into place only after every rank has reported its part written: a
//! failure anywhere leaves no file under the final name (and the old file,
//! if there was one, untouched).
//!
//! Every step that can fail on one rank only (opening a file, writing a
//! block) ends in [`Cluster::agree`], so that all ranks take the same
//! branch and none waits in a collective for a rank that gave up.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use mpi::traits::{Communicator, CommunicatorCollectives, Root};

use super::{wire::as_bytes, Cluster, ClusterReport, Operand};
use crate::distributed::schedule::Piece;
use crate::element::{DType, Element};
use crate::error::Error;
use crate::io::out_of_core::{MappedMatrix, MatrixFile};
use crate::io::{file_error, npy, Format};
use crate::matrix::MatRef;
use crate::options::GemmOptions;
use crate::partial::PartialFile;

/// What a product of files across the ranks did.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFileReport {
    /// The product's report (grid, time, words).
    pub product: ClusterReport,
    /// (m, k, n).
    pub shape: (usize, usize, usize),
    /// The element type of A, B and C.
    pub dtype: DType,
    /// Rank 0's check of C against A and B: its error against the bound
    /// (at most 1 passes; 0 for exact integers).
    pub bound_ratio: f64,
    /// The check's relative error.
    pub rel_error: f64,
    /// The most bytes of the inputs a rank mapped for its pieces: the
    /// lines of A and B that hold them (rank 0 maps A and B whole again
    /// afterwards, to check C).
    pub mapped_bytes_per_rank: u64,
}

impl Cluster {
    /// C = A·B from files: `a` and `b` are .npy files (or raw files of
    /// the `raw` shapes and type, both) that every rank can read, of one
    /// element type; C is written to `c` (.npy unless its extension says
    /// raw) in that type. Each rank maps only the lines of the inputs that
    /// hold its pieces, copies the pieces out, and writes its blocks of C into the file that rank 0 made
    /// at its full size; rank 0 checks C
    /// ([`crate::verify::verify_with_growth`]) and renames it into place
    /// once every rank has written its part. Collective: every rank calls
    /// it with the same arguments.
    ///
    /// # Errors
    /// Every rank returns an error (the failing rank its own, the others
    /// one naming it) when a rank cannot read an input, the operands do
    /// not chain or differ in type, a block cannot be written, or C fails
    /// the check; no file is then left under `c`'s name.
    pub fn multiply_files(
        &self,
        a: &Path,
        b: &Path,
        c: &Path,
        raw: Option<[((usize, usize), DType); 2]>,
        opts: &GemmOptions,
    ) -> Result<ClusterFileReport, Error> {
        self.check_same(
            "file products (paths or options)",
            &(a, b, c, format!("{raw:?}"), super::chosen(opts)),
        )?;
        let opened = (|| {
            let a_file = MatrixFile::open(a, raw.map(|r| r[0]))?;
            let b_file = MatrixFile::open(b, raw.map(|r| r[1]))?;
            if a_file.cols != b_file.rows {
                return Err(Error::DimensionMismatch {
                    a: (a_file.rows, a_file.cols),
                    b: (b_file.rows, b_file.cols),
                });
            }
            if a_file.dtype != b_file.dtype {
                return Err(file_error(
                    b,
                    &format!(
                        "holds {} elements and {} holds {}: a product across ranks takes one type",
                        b_file.dtype,
                        a.display(),
                        a_file.dtype
                    ),
                ));
            }
            Ok((a_file, b_file))
        })();
        let (a_file, b_file) = self.agree("read its inputs", opened)?;
        let shape = (a_file.rows, a_file.cols, b_file.cols);
        self.check_same("inputs (shapes or types)", &(shape, a_file.dtype.name()))?;
        let files = [(a, &a_file), (b, &b_file)];
        match a_file.dtype {
            DType::F32 => self.files_of::<f32>(files, raw, c, opts),
            DType::F64 => self.files_of::<f64>(files, raw, c, opts),
            DType::I32 => self.files_of::<i32>(files, raw, c, opts),
            DType::I64 => self.files_of::<i64>(files, raw, c, opts),
        }
    }

    fn files_of<T: Element>(
        &self,
        [(a_path, a_file), (b_path, b_file)]: [(&Path, &MatrixFile); 2],
        raw: Option<[((usize, usize), DType); 2]>,
        c_path: &Path,
        opts: &GemmOptions,
    ) -> Result<ClusterFileReport, Error> {
        // Each file's type, byte order and alignment, checked on one line.
        let mappable = (|| {
            for file in [a_file, b_file] {
                let line = file.map_part(0..file.rows.min(1), 0..file.cols.min(1))?;
                line.view::<T>()?;
            }
            Ok(())
        })();
        self.agree("map its inputs", mappable)?;
        let (m, k, n) = (a_file.rows, a_file.cols, b_file.cols);
        let header = match Format::of_path(c_path)? {
            Format::Npy => npy::header_bytes(T::DTYPE, m, n),
            Format::Raw => Vec::new(),
            other => {
                return Err(file_error(
                    c_path,
                    &format!("a product across ranks writes .npy or raw files, not {other:?}"),
                ))
            }
        };
        let elem = std::mem::size_of::<T>();
        let total = header.len() as u128 + (m as u128) * (n as u128) * elem as u128;

        // Rank 0 makes C at its full size under a temporary name.
        let mut partial = None;
        let made = if self.rank() == 0 {
            let file = PartialFile::keeping_extension(c_path);
            let result = create_sized(file.path(), &header, total)
                .map_err(|e| file_error(c_path, &format!("cannot create: {e}")));
            partial = Some(file);
            result
        } else {
            Ok(())
        };
        self.agree("create C", made)?;
        let temporary = self.share_path(partial.as_ref().map(|p| p.path()))?;

        // The product, then every rank's blocks into the file.
        let mut mapped_most = 0u64;
        let report = if m == 0 || n == 0 || k == 0 {
            // C is zeros: the file was created so (set_len fills zeros).
            ClusterReport::empty(self.size())
        } else {
            // Each rank maps only the lines of the files that hold its
            // pieces, as the product asks for them.
            let mapped = std::cell::Cell::new(0u64);
            let source =
                |operand: Operand,
                 p: &Piece,
                 take: &mut dyn FnMut(MatRef<'_, T>) -> Result<(), Error>| {
                    let file = match operand {
                        Operand::A => a_file,
                        Operand::B => b_file,
                    };
                    let part = file.map_part(p.rows.clone(), p.cols.clone())?;
                    mapped.set(mapped.get() + part.mapped_bytes() as u64);
                    take(part.view::<T>()?)
                };
            let (schedule, mine, report) = self.product((m, k, n), &source, opts, None)?;
            self.world.all_reduce_into(
                &mapped.get(),
                &mut mapped_most,
                mpi::collective::SystemOperation::max(),
            );
            let piece = &schedule.c.pieces[self.rank()];
            let written = write_blocks(&temporary, header.len() as u64, n, piece, &mine)
                .map_err(|e| file_error(c_path, &format!("cannot write its blocks: {e}")));
            self.agree("write its blocks of C", written)?;
            report
        };

        // Rank 0 checks the whole C, then renames it into place.
        let checked = match &partial {
            Some(file) => (|| {
                let a = MappedMatrix::open(a_path, raw.map(|r| r[0]))?;
                let b = MappedMatrix::open(b_path, raw.map(|r| r[1]))?;
                check(file.path(), c_path, a.view::<T>()?, b.view::<T>()?, opts)
            })(),
            None => Ok((0.0, 0.0)),
        };
        let (bound_ratio, rel_error) = self.agree("check C", checked)?;
        let renamed = match partial {
            Some(file) => file.commit(),
            None => Ok(()),
        };
        self.agree("rename C into place", renamed)?;
        let mut scores = [bound_ratio, rel_error];
        self.world
            .process_at_rank(0)
            .broadcast_into(&mut scores[..]);
        Ok(ClusterFileReport {
            product: report,
            shape: (m, k, n),
            dtype: T::DTYPE,
            bound_ratio: scores[0],
            rel_error: scores[1],
            mapped_bytes_per_rank: mapped_most,
        })
    }

    /// Rank 0's `path`, on every rank.
    fn share_path(&self, path: Option<&Path>) -> Result<PathBuf, Error> {
        let mut bytes = path.map_or(Vec::new(), |p| p.as_os_str().as_encoded_bytes().to_vec());
        let mut len = bytes.len() as u64;
        let root = self.world.process_at_rank(0);
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        root.broadcast_into(&mut bytes[..]);
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::InvalidOption("the output's temporary name is not UTF-8".into()))?;
        Ok(PathBuf::from(text))
    }
}

/// Creates `path` holding `header` and zeros up to `total` bytes.
fn create_sized(path: &Path, header: &[u8], total: u128) -> std::io::Result<()> {
    let total = u64::try_from(total)
        .map_err(|_| std::io::Error::other("C is larger than a file can be"))?;
    let mut file = File::create(path)?;
    file.write_all(header)?;
    file.set_len(total)?;
    file.sync_all()
}

/// Writes this rank's piece of C (row-major `data`, the piece's rows and
/// columns of an n-column C) into the file at `path`, whose data starts
/// at byte `start`, row by row, and flushes it to the disk.
fn write_blocks<T: Element>(
    path: &Path,
    start: u64,
    n: usize,
    piece: &crate::distributed::schedule::Piece,
    data: &[T],
) -> std::io::Result<()> {
    if piece.elements() == 0 {
        return Ok(());
    }
    let file = OpenOptions::new().write(true).open(path)?;
    let elem = std::mem::size_of::<T>() as u64;
    let width = piece.cols.len();
    for (i, row) in piece.rows.clone().enumerate() {
        let at = start + (row as u64 * n as u64 + piece.cols.start as u64) * elem;
        file.write_all_at(as_bytes(&data[i * width..(i + 1) * width]), at)?;
    }
    file.sync_data()
}

/// Rank 0's check of the written C (mapped from `path`) against A and B:
/// (bound ratio, relative error), or an error when it fails.
fn check<T: Element>(
    path: &Path,
    c_path: &Path,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    opts: &GemmOptions,
) -> Result<(f64, f64), Error> {
    let raw = (Format::of_path(c_path)? == Format::Raw).then_some(((a.rows(), b.cols()), T::DTYPE));
    let c_map = MappedMatrix::open(path, raw)?;
    let c = c_map.view::<T>()?;
    let growth = crate::Context::cpu()
        .plan(
            crate::gemm::Problem::of::<T>((a.rows(), a.cols(), b.cols())),
            opts,
        )
        .map_or(1.0, |plan| plan.error_growth);
    let verdict = crate::verify::verify_with_growth(a, b, c, growth)?;
    if !verdict.ok {
        return Err(file_error(
            c_path,
            &format!(
                "C failed its check ({:.3e} of the bound); it was not written",
                verdict.bound_ratio
            ),
        ));
    }
    Ok((verdict.bound_ratio, verdict.rel_error))
}
