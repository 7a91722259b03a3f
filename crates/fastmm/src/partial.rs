//! Files written whole or not at all, and removable on an interrupt.
//!
//! A [`PartialFile`] is a hidden temporary name beside its target
//! (`.NAME.PID.partial`). The writer fills it, then [`PartialFile::commit`]
//! renames it over the target, so the target holds the old file or the
//! whole new one, never a part. Dropping it uncommitted (an error, a
//! panic) removes it. Every live one is listed in this process, so that a
//! signal handler can call [`remove_all`] before the process exits and no
//! temporary file outlives an interrupt: the one piece of process-wide
//! state in the library, because signals and the file system are
//! process-wide too.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::error::Error;

/// Temporary files this process is writing now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set by [`remove_all`]: the process is being interrupted, and no
/// temporary file is renamed into place any more.
static CLOSING: AtomicBool = AtomicBool::new(false);

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the list was held leaves it consistent (pushes and
    // removals are single operations), so a poisoned lock is still used.
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A temporary file beside a target, renamed over it when complete.
#[derive(Debug)]
pub struct PartialFile {
    temporary: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl PartialFile {
    /// `.NAME.PID.partial` beside `target`, listed for [`remove_all`]
    /// before anything creates it.
    pub fn new(target: &Path) -> PartialFile {
        PartialFile::named(target, "")
    }

    /// As [`PartialFile::new`], ending in the target's extension
    /// (`.NAME.PID.partial.png`), for writers that choose the format
    /// from the name.
    pub fn keeping_extension(target: &Path) -> PartialFile {
        let extension = target
            .extension()
            .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
        PartialFile::named(target, &extension)
    }

    fn named(target: &Path, suffix: &str) -> PartialFile {
        let name = target
            .file_name()
            .map_or("output".into(), |n| n.to_string_lossy().into_owned());
        let temporary =
            target.with_file_name(format!(".{name}.{}.partial{suffix}", std::process::id()));
        live().push(temporary.clone());
        PartialFile {
            temporary,
            target: target.to_path_buf(),
            committed: false,
        }
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.temporary
    }

    /// Renames the written file over the target.
    pub fn commit(mut self) -> Result<(), Error> {
        // Under the list's lock, so that an interrupt removes the
        // temporary file or sees it renamed, never half of each.
        let mut list = live();
        if CLOSING.load(Ordering::SeqCst) {
            return Err(Error::File {
                file: self.target.display().to_string(),
                reason: "not written: the process was interrupted".to_string(),
            });
        }
        std::fs::rename(&self.temporary, &self.target).map_err(|e| Error::File {
            file: self.target.display().to_string(),
            reason: format!("cannot write: {e}"),
        })?;
        list.retain(|p| p != &self.temporary);
        self.committed = true;
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            let mut list = live();
            let _ = std::fs::remove_file(&self.temporary);
            list.retain(|p| p != &self.temporary);
        }
    }
}

/// Writes `bytes` to `target` whole: to a [`PartialFile`], flushed to the
/// disk, then renamed over it.
pub fn write_whole(target: &Path, bytes: &[u8]) -> Result<(), Error> {
    let partial = PartialFile::new(target);
    // Flushed before the rename, so that after a crash the target holds
    // the whole file or the old one, never a hole.
    std::fs::File::create(partial.path())
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, bytes)?;
            file.sync_all()
        })
        .map_err(|e| Error::File {
            file: target.display().to_string(),
            reason: format!("cannot write: {e}"),
        })?;
    partial.commit()
}

/// Removes every temporary file this process is writing, and makes every
/// later [`PartialFile::commit`] fail instead of renaming: for a signal
/// handler (such as a `ctrlc` handler's thread) before the process exits,
/// so that an interrupt leaves no temporary file and no new output, and
/// earlier outputs untouched. Returns how many it removed.
pub fn remove_all() -> usize {
    let mut list = live();
    CLOSING.store(true, Ordering::SeqCst);
    list.drain(..)
        .filter(|path| std::fs::remove_file(path).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_file_is_renamed_or_removed() {
        let dir = std::env::temp_dir().join(format!("fastmm-partial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("out.txt");
        std::fs::write(&target, "old").unwrap();
        {
            let partial = PartialFile::new(&target);
            std::fs::write(partial.path(), "half").unwrap();
            assert!(partial.path().exists());
            // Dropped without a commit: removed, the target untouched.
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        write_whole(&target, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let png = PartialFile::keeping_extension(&dir.join("figure.png"));
        assert!(png.path().to_string_lossy().ends_with(".partial.png"));
        drop(png);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.txt")]);
        assert!(!live().iter().any(|p| p.starts_with(&dir)));
    }
}
