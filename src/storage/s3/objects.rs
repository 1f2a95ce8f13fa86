//! objects: the store's private objects as the log reads and writes them
//! in pieces: read whole when small, by ranged GETs when large, and staged
//! in memory until installed under their name (spec/storage.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;

use super::blocking::BlockingClient;
use crate::storage::{RandomRead, Staged, StagedWrite, StoreError};

/// Largest staged private object (a dedup run), held in memory until installed.
pub const MAX_STAGED_BYTES: usize = 1 << 30;

/// A small private object, read whole when opened.
pub(super) struct WholeObject {
    pub(super) key: String,
    pub(super) bytes: Bytes,
}

fn short_read(key: &str, offset: u64, len: usize) -> StoreError {
    StoreError::Io {
        what: key.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{len} bytes at {offset} are past the end"),
        ),
    }
}

impl RandomRead for WholeObject {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StoreError> {
        let start =
            usize::try_from(offset).map_err(|_| short_read(&self.key, offset, buf.len()))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| short_read(&self.key, offset, buf.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// A large private object, read by ranged GETs.
pub(super) struct RangedObject {
    pub(super) s3: Arc<BlockingClient>,
    pub(super) key: String,
    pub(super) len: u64,
}

impl RandomRead for RangedObject {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), StoreError> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(short_read(&self.key, offset, buf.len()));
        }
        let got = self
            .s3
            .block_on(self.s3.client().get_range(&self.key, offset, buf.len()))
            .map_err(|e| StoreError::Io {
                what: self.key.clone(),
                source: std::io::Error::other(e),
            })?
            .ok_or_else(|| short_read(&self.key, offset, buf.len()))?;
        buf.copy_from_slice(&got);
        Ok(())
    }
}

/// A private object being written, in memory.
pub(super) struct StagedObject {
    pub(super) name: String,
    pub(super) bytes: Vec<u8>,
    pub(super) staging: Arc<Mutex<HashMap<String, Vec<u8>>>>,
}

impl StagedWrite for StagedObject {
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<(), StoreError> {
        let too_large = || StoreError::TooLarge {
            what: format!("staged object {}", self.name),
            max: MAX_STAGED_BYTES,
        };
        let start = usize::try_from(offset).map_err(|_| too_large())?;
        let end = start.checked_add(bytes.len()).ok_or_else(too_large)?;
        if end > MAX_STAGED_BYTES {
            return Err(too_large());
        }
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        if let Some(dst) = self.bytes.get_mut(start..end) {
            dst.copy_from_slice(bytes);
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<Staged, StoreError> {
        let StagedObject {
            name,
            bytes,
            staging,
        } = *self;
        // A map of plain values, consistent after every statement.
        staging
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.clone(), bytes);
        Ok(Staged { temp: name })
    }
}
