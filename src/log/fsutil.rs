//! fsutil: the few file-system moves the durability protocol is built from:
//! write a temporary file, fsync it, rename it into place, fsync the
//! directories that changed. Nothing here knows what a tile is.

use super::LogError;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counter that makes temporary file names unique within this process.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Map an I/O error to [`LogError::Io`] naming `path` ([`LogError::NoSpace`]
/// and [`LogError::ReadOnly`] for a full or read-only file system).
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| {
        let path = path.to_path_buf();
        match source.kind() {
            std::io::ErrorKind::StorageFull => LogError::NoSpace { path },
            std::io::ErrorKind::ReadOnlyFilesystem => LogError::ReadOnly { path },
            _ => LogError::Io { path, source },
        }
    }
}

/// Read a whole file, refusing one larger than `max` bytes (checked before reading).
pub fn read_limited(path: &Path, max: usize) -> Result<Vec<u8>, LogError> {
    let file = File::open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    if len > max as u64 {
        return Err(LogError::FileTooLarge {
            path: path.to_path_buf(),
            len,
            max,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err(path))?;
    if bytes.len() > max {
        return Err(LogError::FileTooLarge {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            max,
        });
    }
    Ok(bytes)
}

/// A fresh temporary file name in `tmp_dir`, unique within this process.
pub fn tmp_name(tmp_dir: &Path) -> PathBuf {
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    tmp_dir.join(format!("{}-{n}", std::process::id()))
}

/// Write `bytes` to a fresh file in `tmp_dir`, fsync it, and rename it to
/// `dest` (creating `dest`'s parent directories). The rename is atomic: a
/// reader sees the old file or the whole new one. The caller fsyncs
/// `dest`'s directory (see [`sync_dirs`]) before relying on the name.
pub fn write_durable(tmp_dir: &Path, dest: &Path, bytes: &[u8]) -> Result<(), LogError> {
    let tmp = tmp_name(tmp_dir);
    let mut file = File::create(&tmp).map_err(io_err(&tmp))?;
    file.write_all(bytes).map_err(io_err(&tmp))?;
    file.sync_all().map_err(io_err(&tmp))?;
    drop(file);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    std::fs::rename(&tmp, dest).map_err(io_err(dest))
}

/// fsync one directory, so that the names created or renamed in it last.
pub fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// fsync the parent directory of every path in `files`, and each of their
/// ancestors up to and including `root` (new directories are names in
/// their parents too). Each directory is synced once.
pub fn sync_dirs<'a>(
    root: &Path,
    files: impl IntoIterator<Item = &'a Path>,
) -> Result<BTreeSet<PathBuf>, LogError> {
    let mut dirs = BTreeSet::new();
    for file in files {
        let mut cur = file.parent();
        while let Some(dir) = cur {
            if !dir.starts_with(root) || !dirs.insert(dir.to_path_buf()) {
                break;
            }
            cur = dir.parent();
        }
    }
    use rayon::prelude::*;
    dirs.par_iter().try_for_each(|d| sync_dir(d))?;
    Ok(dirs)
}

/// Remove every file in `dir` (left there by an interrupted write).
pub fn clear_dir(dir: &Path) -> Result<(), LogError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        std::fs::remove_file(&path).map_err(io_err(&path))?;
    }
    Ok(())
}

/// Threads that write and fsync tile files at once: fsync waits on the
/// device, not the CPU, so more threads than cores keep the device busy.
const WRITE_THREADS: usize = 16;

/// [`write_durable`] every `(dest, bytes)` pair, from several threads, then
/// fsync every directory that gained a name ([`sync_dirs`]). On return
/// every file is durable under its final name.
pub fn write_all_durable(
    root: &Path,
    tmp_dir: &Path,
    files: &[(PathBuf, Vec<u8>)],
) -> Result<(), LogError> {
    let next = AtomicU64::new(0);
    let threads = WRITE_THREADS.min(files.len()).max(1);
    let results: Vec<Result<(), LogError>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some((dest, bytes)) = files.get(k) else {
                            return Ok(());
                        };
                        write_durable(tmp_dir, dest, bytes)?;
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(Err(LogError::WriterThread)))
            .collect()
    });
    results.into_iter().collect::<Result<(), LogError>>()?;
    sync_dirs(root, files.iter().map(|(p, _)| p.as_path()))?;
    Ok(())
}
