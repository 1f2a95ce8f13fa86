//! writer: the one writer of a log, and the durability protocol of
//! `spec/log.md` ("The append protocol"), one named function per step.
//!
//! Opening a writer: [`lock`](LogWriter::open_store), read the **truth**
//! (the published checkpoint, verified), **repair** what an interrupted
//! writer left past it, rebuild the tree edge, bring the dedup index up to
//! the truth. Each append then runs the [`Step`](crate::log::Step)s in
//! order; a crash after any of them, or between any two storage calls,
//! leaves the store in a state the next repair undoes or completes, and the
//! checkpoint names only durable objects.

use super::entry::HashedEntry;
use super::index::{Index, Prepared};
use super::tilebuild::TileBuilder;
use super::{
    Appended, CheckpointError, Log, LogError, Settings, proof_error, sign_checkpoint,
    verify_checkpoint,
};
use crate::keys::SigningKey;
use crate::limits::{MAX_APPEND_BATCH_BYTES, MAX_APPEND_BATCH_ENTRIES, MAX_ENTRY_BYTES};
use crate::storage::posix::PosixStore;
use crate::storage::{Family, PrivateKey, Store, StoreError, TileKey, Width, WriterLock};
use crate::tlog::merkle::{self, Frontier, Hash};
use crate::tlog::tiles::path::MAX_TILE_LEVEL;
use crate::tlog::tiles::{self, TILE_WIDTH};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Whether the writer may append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The store is as the truth says.
    Ready,
    /// An append failed part-way: repair before the next one.
    NeedsRepair,
    /// Another writer published, or the lock was lost: never write again.
    Stopped(&'static str),
}

/// The new leaves of a batch after dedup (step 2).
struct Batch {
    /// Each entry's index (new or first), in batch order.
    results: Vec<Appended>,
    /// The positions in the batch of the new entries, and their leaf
    /// hashes, in index order from the size.
    fresh: Vec<usize>,
    leaves: Vec<Hash>,
}

/// The objects of a batch (step 3).
struct Built {
    frontier: Frontier,
    tiles: Vec<(TileKey, Vec<u8>)>,
}

/// The new checkpoint of a batch, signed and staged durably (step 4),
/// named by step 6.
struct Kept {
    checkpoint: String,
    staged: crate::storage::Staged,
}

/// The single writer of a log: holds its lock, its dedup index, and the
/// tree edge of the published checkpoint.
#[derive(Debug)]
pub struct LogWriter {
    log: Log,
    key: SigningKey,
    frontier: Frontier,
    index: Index,
    lock: Box<dyn WriterLock>,
    state: State,
}

/// Refuse a batch over the limits, or an empty or oversized entry, before any work.
fn check_batch<E: AsRef<[u8]>>(entries: &[E]) -> Result<(), LogError> {
    let bytes: usize = entries.iter().map(|e| e.as_ref().len()).sum();
    if entries.len() > MAX_APPEND_BATCH_ENTRIES || bytes > MAX_APPEND_BATCH_BYTES {
        return Err(LogError::BatchTooLarge {
            count: entries.len(),
            bytes,
        });
    }
    if let Some((position, e)) = entries
        .iter()
        .enumerate()
        .find(|(_, e)| e.as_ref().is_empty() || e.as_ref().len() > MAX_ENTRY_BYTES)
    {
        return Err(LogError::EntrySize {
            position,
            len: e.as_ref().len(),
            max: MAX_ENTRY_BYTES,
        });
    }
    Ok(())
}

/// The tiles an interrupted writer may have left past a tree of `size`
/// leaves: every stored tile with more items than the tree holds at its
/// level, among those an append from `size` can touch (one batch is at
/// most `MAX_APPEND_BATCH_ENTRIES`, and repair runs at every open, so
/// leftovers never reach further).
fn tiles_past(store: &dyn Store, size: u64) -> Result<Vec<TileKey>, LogError> {
    let reach = size.saturating_add(MAX_APPEND_BATCH_ENTRIES as u64);
    let mut families = vec![Family::Entries];
    for level in 0..=MAX_TILE_LEVEL {
        match reach.checked_shr(8 * u32::from(level)) {
            Some(n) if n > 0 => families.push(Family::Hashes(level)),
            _ => break,
        }
    }
    let mut past = Vec::new();
    for family in families {
        let shift = 8 * u32::from(family.level());
        let items = size.checked_shr(shift).unwrap_or(0);
        let top = reach.checked_shr(shift).unwrap_or(0);
        for key in store.list_tiles(family, items / TILE_WIDTH, top / TILE_WIDTH)? {
            let held = key.index().saturating_mul(TILE_WIDTH);
            if held.saturating_add(key.width().items() as u64) > items {
                past.push(key);
            }
        }
    }
    Ok(past)
}

/// Repair: undo what an interrupted writer left past the truth of `log`
/// (the crash table of `spec/log.md`): the store's temporary files, kept
/// checkpoints past the published size, tiles past it, the index of early
/// versions. Idempotent; only a writer holding the lock calls it.
fn repair(log: &Log) -> Result<(), LogError> {
    let store = log.store();
    store.clear_staging()?;
    let unpublished: Vec<PrivateKey> = log
        .kept_sizes()?
        .into_iter()
        .filter(|&s| s > log.size())
        .map(PrivateKey::Checkpoint)
        .collect();
    store.remove_private(&unpublished)?;
    store.remove_tiles(&tiles_past(&**store, log.size())?)?;
    store.remove_private(&[PrivateKey::LegacyIndex])?;
    Ok(())
}

impl LogWriter {
    /// Open the log in the directory `dir` for appends
    /// ([`LogWriter::open_store`]).
    pub fn open(dir: &Path, key: &SigningKey, wait: bool) -> Result<LogWriter, LogError> {
        LogWriter::open_store(Arc::new(PosixStore::new(dir)), key, wait)
    }

    /// Take the lock (waiting for another writer when `wait`), read the
    /// truth, repair what an interrupted writer left past it, and rebuild
    /// the tree edge and the dedup index.
    pub fn open_store(
        store: Arc<dyn Store>,
        key: &SigningKey,
        wait: bool,
    ) -> Result<LogWriter, LogError> {
        // A copy of the public files has no settings and takes no writer.
        if Settings::read(&*store)?.is_none() {
            let location = store.describe();
            let max = crate::limits::MAX_NOTE_BYTES;
            return Err(match store.read_checkpoint(max)? {
                Some(_) => LogError::NotWritable { location },
                None => LogError::no_log(&*store, location),
            });
        }
        // Lock: one writer at a time.
        let lock = store.lock(wait).map_err(|e| match e {
            StoreError::Locked { store, lock } => LogError::Locked { dir: store, lock },
            other => other.into(),
        })?;
        // Truth: the published checkpoint, verified.
        let log = Log::open_store(store, None)?;
        if log.verifier().key != key.verifying_key() {
            return Err(LogError::WrongKey {
                origin: log.origin().to_string(),
                expected: log.verifier().to_string(),
            });
        }
        // Repair, then the tree edge and the index, from the truth.
        repair(&log)?;
        let frontier =
            Frontier::from_reader(log.size(), &log.reader(log.size())).map_err(proof_error)?;
        let index = Index::open_writer(Arc::clone(log.store()), log.size())?;
        let mut writer = LogWriter {
            log,
            key: key.clone(),
            frontier,
            index,
            lock,
            state: State::Ready,
        };
        writer.catch_up_index()?;
        Ok(writer)
    }

    /// The log as it stands after the last append.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// Append a batch of entries durably, publish the new checkpoint, then return.
    ///
    /// Each entry gets its index: a new one, or the first index of the same
    /// entry bytes already logged (or earlier in this batch). A batch of
    /// only duplicates publishes nothing. After a failure the next call
    /// repairs first; after [`LogError::Stopped`] (another writer
    /// published, or the lock was lost) every call fails.
    pub fn append(&mut self, entries: &[Vec<u8>]) -> Result<Vec<Appended>, LogError> {
        self.append_leaves(entries.iter().map(Vec::as_slice).collect(), None)
    }

    /// [`LogWriter::append`] of entries whose leaf hashes were computed
    /// with them ([`HashedEntry::new`]): the same protocol, the hashing
    /// already done. The entries are dropped as soon as the tiles holding
    /// them are built, before the tiles are written.
    pub fn append_hashed(&mut self, entries: Vec<HashedEntry>) -> Result<Vec<Appended>, LogError> {
        let leaves = entries.iter().map(|e| *e.leaf()).collect();
        self.append_leaves(entries, Some(leaves))
    }

    /// `leaves`, when given, are the leaf hashes of `entries` (from
    /// [`HashedEntry`]); else they are computed here.
    fn append_leaves<E: AsRef<[u8]> + Sync>(
        &mut self,
        entries: Vec<E>,
        leaves: Option<Vec<Hash>>,
    ) -> Result<Vec<Appended>, LogError> {
        self.ready()?;
        check_batch(&entries)?;
        let leaves = leaves.unwrap_or_else(|| {
            entries
                .par_iter()
                .map(|e| merkle::leaf_hash(e.as_ref()))
                .collect()
        });
        let batch = self.integrate(&entries, &leaves)?;
        if batch.fresh.is_empty() {
            return Ok(batch.results);
        }
        let published = self.publish_batch(&batch, entries);
        if let Err(e) = &published {
            self.state = match e {
                LogError::Store(StoreError::CheckpointMoved) => {
                    State::Stopped("another writer published")
                }
                LogError::Stopped { reason } => State::Stopped(reason),
                LogError::Store(StoreError::LockLost { .. }) => State::Stopped("the lock was lost"),
                _ => State::NeedsRepair,
            };
        }
        published.map(|()| batch.results)
    }

    /// Why this writer stopped for good (another writer published, its
    /// lock was lost): every later append fails. `None` while it can go on
    /// (after an ordinary failure it repairs at its next append).
    pub fn stopped(&self) -> Option<&'static str> {
        match self.state {
            State::Stopped(reason) => Some(reason),
            State::Ready | State::NeedsRepair => None,
        }
    }

    /// Steps 3 to 8 ([`crate::log::Step::Tiles`] to
    /// [`crate::log::Step::Retire`]) for the new leaves of `batch`.
    fn publish_batch<E: AsRef<[u8]>>(
        &mut self,
        batch: &Batch,
        entries: Vec<E>,
    ) -> Result<(), LogError> {
        let built = self.build_tiles(batch, &entries)?;
        // The tiles hold the entries now.
        drop(entries);
        let (prepared, staged) = self.write(&built, &batch.leaves)?;
        let installed = self.index.install(prepared)?;
        let checkpoint = self.keep(&built.frontier, staged)?;
        self.publish(built.frontier, checkpoint)?;
        self.index.retire(installed)
    }

    /// Before an append: refuse a stopped writer; after a failed append,
    /// repair (if the truth is still the one this writer holds).
    fn ready(&mut self) -> Result<(), LogError> {
        match self.state {
            State::Ready => Ok(()),
            State::Stopped(reason) => Err(LogError::Stopped { reason }),
            State::NeedsRepair => {
                if let Err(e) = self.lock.check() {
                    if matches!(e, StoreError::LockLost { .. }) {
                        self.state = State::Stopped("the lock was lost");
                    }
                    return Err(e.into());
                }
                let store = Arc::clone(self.log.store());
                let now = store.read_checkpoint(crate::limits::MAX_NOTE_BYTES)?;
                if now.map(|v| v.version).as_ref() != Some(&self.log.version) {
                    self.state = State::Stopped("another writer published");
                    return Err(LogError::Stopped {
                        reason: "another writer published",
                    });
                }
                repair(&self.log)?;
                self.index = Index::open_writer(store, self.log.size())?;
                self.catch_up_index()?;
                self.state = State::Ready;
                Ok(())
            }
        }
    }

    /// Step 2, given the leaf hashes of `entries` (computed in parallel,
    /// or with each [`HashedEntry`]): dedup (within the batch, then the
    /// index hints confirmed against the entries), new indexes.
    fn integrate<E: AsRef<[u8]>>(&self, entries: &[E], leaves: &[Hash]) -> Result<Batch, LogError> {
        let hints = self.index.get_many(leaves)?;
        let old = self.log.size();
        let mut seen: HashMap<Hash, u64> = HashMap::with_capacity(entries.len());
        let mut batch = Batch {
            results: Vec::with_capacity(entries.len()),
            fresh: Vec::new(),
            leaves: Vec::new(),
        };
        let mut h = 0;
        for (pos, leaf) in leaves.iter().enumerate().take(entries.len()) {
            // The hints of this position (sorted by position, then index).
            let from = h;
            while hints.get(h).is_some_and(|c| c.0 == pos) {
                h += 1;
            }
            let first = match seen.get(leaf) {
                Some(&index) => Some(index),
                None => self.confirmed(hints.get(from..h).unwrap_or_default(), leaf)?,
            };
            if let Some(index) = first {
                batch.results.push(Appended { index, new: false });
                continue;
            }
            let index = old + batch.fresh.len() as u64;
            seen.insert(*leaf, index);
            batch.fresh.push(pos);
            batch.leaves.push(*leaf);
            batch.results.push(Appended { index, new: true });
        }
        Ok(batch)
    }

    /// The first hint `(position, index)` the log confirms for `leaf`.
    fn confirmed(&self, hints: &[(usize, u64)], leaf: &Hash) -> Result<Option<u64>, LogError> {
        for &(_, index) in hints {
            if self.log.confirm(index, leaf)? {
                return Ok(Some(index));
            }
        }
        Ok(None)
    }

    /// Step 3: push the new leaves onto a copy of the tree edge, collect
    /// the hash tiles they complete or extend, and build every entry
    /// bundle they touch (the first of each starts from the stored partial
    /// tile of the old size).
    fn build_tiles<E: AsRef<[u8]>>(&self, batch: &Batch, entries: &[E]) -> Result<Built, LogError> {
        let store = &**self.log.store();
        let old = self.log.size();
        let mut frontier = self.frontier.clone();
        let mut builder =
            TileBuilder::new(old, |key| crate::storage::tiles::read_hash_tile(store, key))?;
        for leaf in &batch.leaves {
            frontier
                .push(*leaf, |id, h| builder.node(id, h))
                .map_err(LogError::Full)?;
        }
        // Positions come from `integrate` over these entries: all in range.
        let fresh: Vec<&[u8]> = batch
            .fresh
            .iter()
            .filter_map(|&p| entries.get(p).map(AsRef::as_ref))
            .collect();
        let mut built = self.entry_bundles(&fresh)?;
        let hash_tiles = builder
            .take_full()
            .into_iter()
            .chain(builder.take_partial());
        built.extend(hash_tiles.map(|t| (t.key, t.bytes())));
        Ok(Built {
            frontier,
            tiles: built,
        })
    }

    /// The entry bundles touched by appending `new` (entries `old..`).
    fn entry_bundles(&self, new: &[&[u8]]) -> Result<Vec<(TileKey, Vec<u8>)>, LogError> {
        let old = self.log.size();
        let end = old + new.len() as u64;
        let first = old / TILE_WIDTH;
        let prefix = match Width::of(first, old) {
            Some(w @ Width::Partial(_)) => crate::storage::tiles::read_entry_bundle(
                &**self.log.store(),
                &TileKey::entries(first, w),
            )?,
            _ => Vec::new(),
        };
        // Each tile is encoded on its own (in parallel, kept in order).
        (first..end.div_ceil(TILE_WIDTH))
            .into_par_iter()
            .filter_map(|t| {
                // Every tile below end.div_ceil(256) has a width.
                let width = Width::of(t, end)?;
                let lo = (t * TILE_WIDTH).max(old) - old;
                let hi = ((t + 1) * TILE_WIDTH).min(end) - old;
                // lo <= hi <= new.len() by construction; get() keeps it panic-free.
                let fresh = new.get(lo as usize..hi as usize).unwrap_or_default();
                let old_part = if t == first { prefix.as_slice() } else { &[] };
                let all = old_part
                    .iter()
                    .map(Vec::as_slice)
                    .chain(fresh.iter().copied());
                Some(
                    tiles::encode_entry_bundle(all)
                        .map(|bytes| (TileKey::entries(t, width), bytes))
                        .map_err(LogError::from),
                )
            })
            .collect()
    }

    /// Step 4: every tile durable under its name (create-only) and, on
    /// another thread at the same time, the new dedup run durable and the
    /// new checkpoint signed and durable in a temporary file, both
    /// unnamed (named by steps 5 and 6).
    fn write(&self, built: &Built, leaves: &[Hash]) -> Result<(Prepared, Kept), LogError> {
        let old = self.log.size();
        let store = &**self.log.store();
        let (written, prepared) = std::thread::scope(|s| {
            let run = s.spawn(|| {
                let kept = self.stage_checkpoint(&built.frontier)?;
                Ok((self.index.prepare(old, leaves)?, kept))
            });
            let written = store.create_tiles(&built.tiles);
            let prepared = run
                .join()
                .unwrap_or(Err(LogError::Store(StoreError::Thread)));
            (written, prepared)
        });
        written?;
        prepared
    }

    /// Part of step 4: the checkpoint of `frontier` signed and written,
    /// synced, to the store's staging area (`.rcpt/tmp/`), not yet named.
    fn stage_checkpoint(&self, frontier: &Frontier) -> Result<Kept, LogError> {
        let checkpoint = sign_checkpoint(
            self.log.origin(),
            frontier.size(),
            frontier.root(),
            &self.key,
        )?;
        let mut out = self.log.store().stage_private()?;
        out.write_at(checkpoint.as_bytes(), 0)?;
        let staged = out.finish()?;
        Ok(Kept { checkpoint, staged })
    }

    /// Step 6: keep the new checkpoint (staged and synced in step 4) as
    /// `.rcpt/checkpoints/<size>`: renamed there, the directory synced.
    fn keep(&self, frontier: &Frontier, kept: Kept) -> Result<String, LogError> {
        let key = PrivateKey::Checkpoint(frontier.size());
        self.log.store().install_private(kept.staged, &key)?;
        Ok(kept.checkpoint)
    }

    /// Step 7: publish by compare-and-swap on the version this writer
    /// holds (the lock still held), then take the new tree as the truth.
    fn publish(&mut self, frontier: Frontier, checkpoint: String) -> Result<(), LogError> {
        if self.lock.check().is_err() {
            return Err(LogError::Stopped {
                reason: "the writer lock was lost",
            });
        }
        let version = self
            .log
            .store()
            .replace_checkpoint(Some(&self.log.version), checkpoint.as_bytes())?;
        self.log.size = frontier.size();
        self.log.root = frontier.root();
        self.log.checkpoint = checkpoint;
        self.log.version = version;
        self.frontier = frontier;
        Ok(())
    }

    /// Replace the latest checkpoint, kept and published, with `note`: the
    /// same checkpoint with more signature lines (a witness quorum's
    /// cosignatures, `spec/witness.md` "Witnessed log"). The note must
    /// carry the latest checkpoint's body and a log signature that
    /// verifies, and be readable by every reader (the note size and
    /// signature line limits). The kept copy is replaced first, then the
    /// published one by compare-and-swap on the version this writer holds.
    pub fn add_signatures(&mut self, note: &str) -> Result<(), LogError> {
        self.ready()?;
        let name = "checkpoint".to_string();
        let cp = verify_checkpoint(note.as_bytes(), self.log.verifier(), None)?;
        let same = crate::tlog::note::Note::parse(self.log.checkpoint.as_bytes())
            .ok()
            .zip(crate::tlog::note::Note::parse(note.as_bytes()).ok())
            .is_some_and(|(now, new)| now.text == new.text);
        if !same || cp.size != self.log.size() {
            return Err(LogError::Checkpoint {
                name,
                source: CheckpointError::NotLatest,
            });
        }
        if self.lock.check().is_err() {
            return Err(LogError::Stopped {
                reason: "the writer lock was lost",
            });
        }
        let store = Arc::clone(self.log.store());
        store.write_private(&PrivateKey::Checkpoint(cp.size), note.as_bytes())?;
        let replaced = store.replace_checkpoint(Some(&self.log.version), note.as_bytes());
        let version = match replaced {
            Ok(v) => v,
            Err(StoreError::CheckpointMoved) => {
                self.state = State::Stopped("another writer published");
                return Err(StoreError::CheckpointMoved.into());
            }
            Err(e) => {
                self.state = State::NeedsRepair;
                return Err(e.into());
            }
        };
        self.log.checkpoint = note.to_string();
        self.log.version = version;
        Ok(())
    }

    /// Bring a lost or stale dedup index up to the truth, from the entries
    /// (the index is never ahead of the truth it is checked against).
    fn catch_up_index(&mut self) -> Result<(), LogError> {
        let size = self.log.size();
        let from = self.index.indexed_size();
        if from >= size {
            return Ok(());
        }
        let mut pending: Vec<Hash> = Vec::new();
        let mut pending_first = from;
        let (log, index) = (&self.log, &mut self.index);
        log.for_each_bundle(from, size, |first, entries| {
            pending.par_extend(entries.par_iter().map(|e| merkle::leaf_hash(e)));
            if pending.len() >= MAX_APPEND_BATCH_ENTRIES {
                add_run(index, pending_first, &std::mem::take(&mut pending))?;
                pending_first = first + entries.len() as u64;
            }
            Ok(())
        })?;
        if pending.is_empty() {
            return Ok(());
        }
        add_run(index, pending_first, &pending)
    }
}

/// Add the run of `leaves` (indexes `first..`, all published) to the index.
fn add_run(index: &mut Index, first: u64, leaves: &[Hash]) -> Result<(), LogError> {
    let prepared = index.prepare(first, leaves)?;
    let installed = index.install(prepared)?;
    index.retire(installed)
}
