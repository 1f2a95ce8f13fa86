//! batch: atomic writes made durable together (a group commit).
//!
//! [`write_atomic_via`](super::write_atomic_via) pays two syncs per file: the
//! file's data and its directory. A writer that has many files to make
//! durable at one moment (a burst of tool calls, a batch of receipts)
//! stages them in a [`Batch`] instead: each file is written to a temporary
//! file created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`) in the given
//! temporary directory, and nothing is synced until [`Batch::commit`]:
//!
//! 1. writeback of every staged file is started at once
//!    (`posix_fadvise(POSIX_FADV_DONTNEED)`, which on Linux starts writing
//!    a file's dirty pages without waiting), then each is fsynced: the
//!    first fsync commits the file system's journal for all of them, so the
//!    rest find their data already on the device (64 files of 1.5 KB: 4.8
//!    ms against 11 ms fsynced one by one, spec/performance.md);
//! 2. phase by phase ([`Batch::barrier`]), the files are renamed over their
//!    paths and each directory that gained a name is synced once.
//!
//! A file staged by [`Batch::append`] is not replaced but grown: its
//! bytes go after what the file holds, its data is synced with the rest
//! (`fdatasync`: its name is already durable, so no rename and no
//! directory sync), and a crash before the commit returns may leave any
//! prefix of them, which the file's reader must tell from a whole record.
//!
//! A file of a later phase becomes visible only after every file of the
//! earlier phases is durable under its name: a record that names an object
//! is never durable before the object. Until `commit` returns, a staged
//! file may or may not be at its path after a crash, exactly as with one
//! [`write_atomic_via`](super::write_atomic_via) that did not return; the
//! caller says nothing is done before it returns. A batch dropped without
//! a commit (or a commit that failed) removes the temporary files it still
//! holds.

use super::write::{OutputError, io_error, open_append, open_dir, parent_dir, sync_dir, temp_file};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Most staged files a batch keeps open: beyond, the data of those open
/// is synced and they are closed (their renames still wait for the
/// commit), so a large batch never runs out of file descriptors.
pub const MAX_BATCH_OPEN_FILES: usize = 256;
/// Fewest open files for which writeback is started ahead of the fsyncs:
/// for one or two files the hint costs more than it saves.
const MIN_WRITEBACK_HINT: usize = 4;

/// One file written to its temporary name, not yet synced or renamed.
#[derive(Debug)]
struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    file: Option<File>,
    phase: usize,
    /// Appended to `path` ([`Batch::append`]): synced, never renamed.
    append: bool,
}

/// Atomic writes made durable together; see the module documentation.
#[derive(Debug, Default)]
pub struct Batch {
    staged: Vec<Staged>,
    phase: usize,
    open: usize,
    /// Synced by `syncfs(2)` of this directory's file system
    /// ([`Batch::sync_whole_filesystem`]).
    whole_fs: Option<(PathBuf, File)>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }

    /// How many files are staged.
    pub fn len(&self) -> usize {
        self.staged.len()
    }

    /// Make this batch durable by syncing the file system it writes to
    /// (`syncfs(2)`) once before its renames and once after each phase,
    /// instead of each file and each directory: for background batches of
    /// many files (the tool proxy's finisher), where one flush of the file
    /// system costs less than hundreds of file syncs. Not for a commit
    /// something waits on: `syncfs` waits for every other writer's data on
    /// that file system too. `dir` is a directory on that file system,
    /// opened now, so a writeback error from here on is reported by the
    /// sync (Linux 5.8 and later).
    pub fn sync_whole_filesystem(&mut self, dir: &Path) -> Result<(), OutputError> {
        let handle = open_dir(dir).map_err(io_error("open", dir))?;
        self.whole_fs = Some((dir.to_path_buf(), handle));
        Ok(())
    }

    /// Stage `bytes` for `path`: written to a new temporary file in
    /// `tmp_dir` (on the same file system as `path`), renamed over `path`
    /// by [`Batch::commit`].
    pub fn write_atomic_via(
        &mut self,
        tmp_dir: &Path,
        path: &Path,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), OutputError> {
        let name = path.file_name().ok_or_else(|| OutputError::NoFileName {
            path: path.to_path_buf(),
        })?;
        let (tmp, mut file) = temp_file(tmp_dir, name, mode)?;
        if let Err(e) = file.write_all(bytes) {
            drop(file);
            let _ = std::fs::remove_file(&tmp);
            return Err(io_error("write", &tmp)(e));
        }
        self.push(Staged {
            tmp,
            path: path.to_path_buf(),
            file: Some(file),
            phase: self.phase,
            append: false,
        })
    }

    /// Stage `bytes` appended to the existing regular file `path` (opened
    /// without following a link, never created or truncated): written now,
    /// its data synced by [`Batch::commit`] with the phase it is staged in.
    /// One data sync, where a rewrite pays a data sync, a rename and a
    /// directory sync; a crash before the commit returns may leave any
    /// prefix of `bytes` (see the module documentation).
    pub fn append(&mut self, path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
        let mut file = open_append(path).map_err(io_error("open to append to", path))?;
        file.write_all(bytes).map_err(io_error("append to", path))?;
        self.push(Staged {
            tmp: PathBuf::new(),
            path: path.to_path_buf(),
            file: Some(file),
            phase: self.phase,
            append: true,
        })
    }

    fn push(&mut self, staged: Staged) -> Result<(), OutputError> {
        self.staged.push(staged);
        self.open += 1;
        if self.open >= MAX_BATCH_OPEN_FILES {
            self.sync_data()?;
        }
        Ok(())
    }

    /// Files staged from now on become visible only after every file
    /// staged before is durable under its name.
    pub fn barrier(&mut self) {
        if self.staged.last().is_some_and(|s| s.phase == self.phase) {
            self.phase += 1;
        }
    }

    /// Take in `other`'s files, phase by phase beside this batch's own (its
    /// first phase with this batch's first, and so on): each batch's order
    /// is kept, and a burst of batches still pays one sync per phase.
    pub fn absorb(&mut self, mut other: Batch) {
        let base = self.staged.first().map_or(0, |s| s.phase);
        for mut s in other.staged.drain(..) {
            s.phase += base;
            self.phase = self.phase.max(s.phase);
            self.staged.push(s);
        }
        self.open += std::mem::take(&mut other.open);
        if self.open >= MAX_BATCH_OPEN_FILES {
            // Best effort here: a failure is met again at the commit.
            let _ = self.sync_data();
        }
    }

    /// Make every staged file durable under its name: the data of all of
    /// them synced, then phase by phase renamed and the directories synced.
    /// On an error the files not yet renamed are removed.
    pub fn commit(mut self) -> Result<(), OutputError> {
        self.sync_data()?;
        let whole_fs = self.whole_fs.take();
        let sync_fs = |(dir, handle): &(PathBuf, File)| {
            rustix::fs::syncfs(handle)
                .map_err(|e| io_error("sync the file system of", dir)(e.into()))
        };
        if let Some(fs) = &whole_fs {
            sync_fs(fs)?;
        }
        self.staged.sort_by_key(|s| s.phase);
        for phase in self.staged.chunk_by_mut(|a, b| a.phase == b.phase) {
            let mut dirs = BTreeSet::new();
            for s in phase.iter_mut().filter(|s| !s.append) {
                std::fs::rename(&s.tmp, &s.path).map_err(io_error("rename over", &s.path))?;
                s.tmp = PathBuf::new();
                dirs.insert(parent_dir(&s.path).to_path_buf());
            }
            match &whole_fs {
                Some(fs) => sync_fs(fs)?,
                None => {
                    for d in dirs {
                        sync_dir(&d).map_err(io_error("sync the directory", &d))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Start writeback of every open file, then fsync each and close it
    /// (only close it when the whole file system is synced at the commit).
    fn sync_data(&mut self) -> Result<(), OutputError> {
        if self.whole_fs.is_some() {
            self.staged.iter_mut().for_each(|s| s.file = None);
            self.open = 0;
            return Ok(());
        }
        if self.open >= MIN_WRITEBACK_HINT {
            for f in self.staged.iter().filter_map(|s| s.file.as_ref()) {
                // A hint only: a write error is found again by the fsync.
                let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::DontNeed);
            }
        }
        for s in &mut self.staged {
            match s.file.take() {
                Some(f) if s.append => f.sync_data().map_err(io_error("append to", &s.path))?,
                Some(f) => f.sync_all().map_err(io_error("write", &s.tmp))?,
                None => {}
            }
        }
        self.open = 0;
        Ok(())
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        for s in &self.staged {
            if !s.tmp.as_os_str().is_empty() {
                let _ = std::fs::remove_file(&s.tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tmp` and `out` made under `dir`.
    fn tmp_and_out(dir: &Path) -> (PathBuf, PathBuf) {
        let (tmp, out) = (dir.join("tmp"), dir.join("out"));
        std::fs::create_dir(&tmp).unwrap();
        std::fs::create_dir(&out).unwrap();
        (tmp, out)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_append_grows_the_file_in_place_and_follows_no_link() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"one").unwrap();
        let mut b = Batch::new();
        b.append(&f, b" two").unwrap();
        b.commit().unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"one two");
        assert!(names(d.path()) == ["f"], "no temporary file, no rename");
        // A missing file is not made; a link is not followed.
        let missing = d.path().join("missing");
        assert!(Batch::new().append(&missing, b"x").is_err());
        assert!(!missing.exists());
        std::os::unix::fs::symlink(&f, d.path().join("l")).unwrap();
        assert!(Batch::new().append(&d.path().join("l"), b"x").is_err());
        assert_eq!(std::fs::read(&f).unwrap(), b"one two");
    }

    #[test]
    fn a_batch_synced_by_its_file_system_commits_the_same() {
        let d = tempfile::tempdir().unwrap();
        let (tmp, out) = tmp_and_out(d.path());
        let mut b = Batch::new();
        b.sync_whole_filesystem(d.path()).unwrap();
        for i in 0..(MAX_BATCH_OPEN_FILES + 3) {
            b.write_atomic_via(&tmp, &out.join(format!("{i:04}")), b"x", 0o600)
                .unwrap();
        }
        b.barrier();
        b.write_atomic_via(&tmp, &out.join("last"), b"y", 0o600)
            .unwrap();
        assert!(names(&out).is_empty());
        b.commit().unwrap();
        assert_eq!(names(&out).len(), MAX_BATCH_OPEN_FILES + 4);
        assert!(names(&tmp).is_empty());
        assert!(
            Batch::new()
                .sync_whole_filesystem(&d.path().join("missing"))
                .is_err()
        );
    }

    #[test]
    fn nothing_is_at_its_path_before_the_commit_and_everything_after() {
        let d = tempfile::tempdir().unwrap();
        let (tmp, out) = tmp_and_out(d.path());
        let mut b = Batch::new();
        b.write_atomic_via(&tmp, &out.join("a"), b"one", 0o600)
            .unwrap();
        b.barrier();
        b.write_atomic_via(&tmp, &out.join("b"), b"two", 0o600)
            .unwrap();
        let mut other = Batch::new();
        other
            .write_atomic_via(&tmp, &out.join("c"), b"three", 0o600)
            .unwrap();
        b.absorb(other);
        assert_eq!(b.len(), 3);
        assert!(names(&out).is_empty());
        assert_eq!(names(&tmp).len(), 3);
        b.commit().unwrap();
        assert_eq!(names(&out), ["a", "b", "c"]);
        assert!(names(&tmp).is_empty());
        assert_eq!(std::fs::read(out.join("b")).unwrap(), b"two");
    }

    #[test]
    fn phases_are_kept_when_batches_are_absorbed() {
        let d = tempfile::tempdir().unwrap();
        let mut b = Batch::new();
        b.write_atomic_via(d.path(), &d.path().join("obj1"), b"x", 0o600)
            .unwrap();
        b.barrier();
        b.write_atomic_via(d.path(), &d.path().join("rec1"), b"x", 0o600)
            .unwrap();
        let mut o = Batch::new();
        o.write_atomic_via(d.path(), &d.path().join("obj2"), b"x", 0o600)
            .unwrap();
        o.barrier();
        o.write_atomic_via(d.path(), &d.path().join("rec2"), b"x", 0o600)
            .unwrap();
        b.absorb(o);
        let phase = |n: &str| b.staged.iter().find(|s| s.path.ends_with(n)).unwrap().phase;
        assert_eq!(phase("obj1"), phase("obj2"));
        assert_eq!(phase("rec1"), phase("rec2"));
        assert!(phase("obj1") < phase("rec1"));
    }

    #[test]
    fn a_batch_dropped_or_failed_leaves_no_temporary_file_and_no_output() {
        let d = tempfile::tempdir().unwrap();
        let mut b = Batch::new();
        b.write_atomic_via(d.path(), &d.path().join("a"), b"x", 0o600)
            .unwrap();
        drop(b);
        assert!(names(d.path()).is_empty());
        // A path whose directory is missing: the rename fails, the
        // temporary file is removed.
        let mut b = Batch::new();
        let missing = d.path().join("no/such/dir/f");
        b.write_atomic_via(d.path(), &missing, b"x", 0o600).unwrap();
        assert!(b.commit().is_err());
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn a_batch_larger_than_the_open_files_limit_commits_whole() {
        let d = tempfile::tempdir().unwrap();
        let (tmp, out) = tmp_and_out(d.path());
        let n = MAX_BATCH_OPEN_FILES * 2 + 3;
        let mut b = Batch::new();
        for i in 0..n {
            let bytes = i.to_string();
            b.write_atomic_via(&tmp, &out.join(format!("f{i}")), bytes.as_bytes(), 0o600)
                .unwrap();
        }
        assert!(b.open < MAX_BATCH_OPEN_FILES);
        assert!(names(&out).is_empty());
        b.commit().unwrap();
        assert_eq!(names(&out).len(), n);
        assert_eq!(std::fs::read(out.join("f300")).unwrap(), b"300");
    }
}
