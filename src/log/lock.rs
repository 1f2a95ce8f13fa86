//! lock: one writer at a time, by an exclusive advisory lock (flock) on
//! `DIR/.rcpt/lock`. The lock is released when the [`WriterLock`] is
//! dropped or the process dies, so a killed writer never blocks the next.

use super::fsutil::io_err;
use super::{LogError, layout};
use fs4::fs_std::FileExt;
use std::fs::{File, OpenOptions};
use std::path::Path;

/// A held writer lock.
#[derive(Debug)]
pub struct WriterLock {
    _file: File,
}

impl WriterLock {
    /// Take the lock of the log at `dir`: wait for it when `wait`, else
    /// fail at once with [`LogError::Locked`].
    pub fn acquire(dir: &Path, wait: bool) -> Result<WriterLock, LogError> {
        let path = layout::lock(dir);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        if wait {
            FileExt::lock_exclusive(&file).map_err(io_err(&path))?;
        } else if !FileExt::try_lock_exclusive(&file).map_err(io_err(&path))? {
            return Err(LogError::Locked {
                dir: dir.to_path_buf(),
                lock: path,
            });
        }
        Ok(WriterLock { _file: file })
    }
}
