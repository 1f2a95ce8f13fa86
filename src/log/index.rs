//! index: the dedup index, sorted runs of (leaf-hash key, log index) under
//! `DIR/.rcpt/dedup/`, merged like a binary counter (an LSM of one level
//! per power of two).
//!
//! The index is a hint, never the truth: the caller confirms every
//! candidate against the checkpoint size and the stored entry (see
//! `spec/log.md`, "Dedup"). A run file `<first>-<end>` holds one record per
//! leaf of `[first, end)`; the runs chosen at open tile `[0, indexed_size)`
//! contiguously, and a lost or stale range is rebuilt from the entries.
//! Every run file is written once (temporary file, fsync, rename) and never
//! changed, so readers need no lock. Memory is bounded by the batch: runs
//! are read and merged in fixed-size chunks, never loaded whole.
//!
//! Run file layout (all integers big-endian):
//! `MAGIC || first:u64 || end:u64 || dir[0..=D]:u64 || records`, where a
//! record is `key:u64 || index:u64` (key = the first 8 bytes of the leaf
//! hash), records are sorted by (key, index), D = 2^bits buckets with
//! `bits` a function of the record count, and `dir[j]` is the number of
//! records whose key's top `bits` bits are below `j` (`dir[D]` = count).

use super::error::LogError;
use crate::storage::{PrivateDir, PrivateKey, RandomRead, Staged, StagedWrite, Store};
use crate::tlog::merkle::Hash;
use std::sync::Arc;

/// First bytes of every run file.
const MAGIC: &[u8; 8] = b"rcptdd01";
/// Header: magic, first, end.
const HEADER_BYTES: u64 = 24;
/// One record: key and index.
const RECORD_BYTES: u64 = 16;
/// Records read at once when streaming a run (64 KiB).
const CHUNK_RECORDS: u64 = 4096;
/// Bytes buffered before a positional write of a run being written.
const WRITE_BUFFER_BYTES: usize = 1 << 16;
/// Runs this small are read whole for a look-up (1 MiB).
const DENSE_RECORDS: u64 = 65_536;
/// Largest bucket a look-up reads at once; with SHA-256 keys a bucket
/// averages 128 to 256 records, so a larger one marks a damaged run.
const MAX_BUCKET_RECORDS: u64 = 65_536;
/// Most directory bits: 2^24 buckets cover 2^31 records at 128 a bucket.
const MAX_BITS: u32 = 24;

/// The sort key of a leaf hash: its first 8 bytes.
fn key_of(leaf: &Hash) -> u64 {
    let mut k = [0u8; 8];
    k.copy_from_slice(leaf.get(..8).unwrap_or(&[0; 8]));
    u64::from_be_bytes(k)
}

/// A big-endian u64 from 8 bytes (shorter input reads as 0).
fn be(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
}

/// Directory bits for a run of `count` records: about 128 records a bucket.
fn bits_for(count: u64) -> u32 {
    let buckets = (count / 128).max(1);
    (63 - buckets.leading_zeros()).min(MAX_BITS)
}

/// The bucket of `key` in a directory of `bits` bits.
fn bucket(key: u64, bits: u32) -> u64 {
    key.checked_shr(64 - bits).unwrap_or(0)
}

/// One immutable run covering leaves `[first, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    first: u64,
    end: u64,
}

impl Run {
    fn key(&self) -> PrivateKey {
        PrivateKey::DedupRun {
            first: self.first,
            end: self.end,
        }
    }
    fn count(&self) -> u64 {
        self.end - self.first
    }
    fn bits(&self) -> u32 {
        bits_for(self.count())
    }
    /// Byte offset of the records.
    fn records_at(&self) -> u64 {
        HEADER_BYTES + 8 * ((1u64 << self.bits()) + 1)
    }
    fn file_len(&self) -> u64 {
        self.records_at() + RECORD_BYTES * self.count()
    }
    /// An index error naming this run.
    fn damaged(&self, detail: String) -> LogError {
        LogError::Index {
            run: self.key().to_string(),
            detail,
        }
    }
}

/// True when the stored run's header and length match its name.
fn valid_run(store: &dyn Store, run: &Run) -> bool {
    let Ok(Some(file)) = store.open_private(&run.key()) else {
        return false;
    };
    if file.len() != run.file_len() {
        return false;
    }
    let mut head = [0u8; HEADER_BYTES as usize];
    if file.read_exact_at(&mut head, 0).is_err() {
        return false;
    }
    let mut want = Vec::with_capacity(head.len());
    want.extend_from_slice(MAGIC);
    want.extend_from_slice(&run.first.to_be_bytes());
    want.extend_from_slice(&run.end.to_be_bytes());
    head[..] == want[..]
}

/// Every run in the store, then the contiguous cover of `[0, ..)` within
/// `size`: from each position, the run starting there that reaches
/// farthest. Returns (cover, every other object in the directory).
fn list_runs(store: &dyn Store, size: u64) -> Result<(Vec<Run>, Vec<PrivateKey>), LogError> {
    let mut all = Vec::new();
    let mut other = Vec::new();
    for key in store.list_private(PrivateDir::Dedup)? {
        match key {
            PrivateKey::DedupRun { first, end } if end <= size => {
                let run = Run { first, end };
                if valid_run(store, &run) {
                    all.push(run);
                } else {
                    other.push(run.key());
                }
            }
            k => other.push(k),
        }
    }
    // Farthest-reaching first among runs of one start.
    all.sort_unstable_by(|a, b| a.first.cmp(&b.first).then(b.end.cmp(&a.end)));
    let mut cover: Vec<Run> = Vec::new();
    let mut pos = 0;
    for run in all {
        if run.first == pos {
            pos = run.end;
            cover.push(run);
        } else {
            other.push(run.key());
        }
    }
    Ok((cover, other))
}

/// Reads records `[lo, hi)` of a run in chunks of [`CHUNK_RECORDS`].
struct Records<'a> {
    file: &'a dyn RandomRead,
    run: &'a Run,
    next: u64,
    hi: u64,
    buf: Vec<u8>,
    at: usize,
}

impl<'a> Records<'a> {
    fn new(file: &'a dyn RandomRead, run: &'a Run, lo: u64, hi: u64) -> Records<'a> {
        Records {
            file,
            run,
            next: lo,
            hi,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The next (key, index), or `None` at `hi`.
    fn next_record(&mut self) -> Result<Option<(u64, u64)>, LogError> {
        if self.at >= self.buf.len() {
            if self.next >= self.hi {
                return Ok(None);
            }
            let n = (self.hi - self.next).min(CHUNK_RECORDS);
            // n <= CHUNK_RECORDS, so the buffer stays at 64 KiB.
            self.buf.resize((n * RECORD_BYTES) as usize, 0);
            let offset = self.run.records_at() + self.next * RECORD_BYTES;
            self.file.read_exact_at(&mut self.buf, offset)?;
            self.next += n;
            self.at = 0;
        }
        let rec = self.buf.get(self.at..self.at + 16).unwrap_or(&[0; 16]);
        self.at += 16;
        let (k, i) = rec.split_at(8);
        Ok(Some((be(k), be(i))))
    }
}

/// Merge-join `probes` (sorted by key) with a stream of records; push
/// `(probe position, index)` for every equal key.
fn join(
    probes: &[(u64, usize)],
    records: &mut Records<'_>,
    out: &mut Vec<(usize, u64)>,
) -> Result<(), LogError> {
    let mut p = 0;
    while let Some((key, index)) = records.next_record()? {
        while probes.get(p).is_some_and(|q| q.0 < key) {
            p += 1;
        }
        if p >= probes.len() {
            break;
        }
        let equal = probes.get(p..).unwrap_or_default();
        out.extend(
            equal
                .iter()
                .take_while(|q| q.0 == key)
                .map(|q| (q.1, index)),
        );
    }
    Ok(())
}

/// Look `probes` (sorted by key) up in one run.
fn lookup_run(
    store: &dyn Store,
    run: &Run,
    probes: &[(u64, usize)],
    out: &mut Vec<(usize, u64)>,
) -> Result<(), LogError> {
    let file = store
        .open_private(&run.key())?
        .ok_or_else(|| run.damaged("gone while reading".to_string()))?;
    let file = &*file;
    let count = run.count();
    if count <= DENSE_RECORDS || probes.len() as u64 * 128 >= count {
        // Many probes: one sequential pass over the run is cheapest.
        return join(probes, &mut Records::new(file, run, 0, count), out);
    }
    let bits = run.bits();
    let mut start = 0;
    while let Some(&(key, _)) = probes.get(start) {
        // The probes of one bucket share one read of that bucket.
        let b = bucket(key, bits);
        let len = probes
            .get(start..)
            .unwrap_or_default()
            .iter()
            .take_while(|q| bucket(q.0, bits) == b)
            .count();
        let group = probes.get(start..start + len).unwrap_or_default();
        let mut dir = [0u8; 16];
        file.read_exact_at(&mut dir, HEADER_BYTES + 8 * b)?;
        let (lo, hi) = dir.split_at(8);
        let (lo, hi) = (be(lo), be(hi));
        if lo > hi || hi > count || hi - lo > MAX_BUCKET_RECORDS {
            return Err(run.damaged(format!("bucket {b} spans records {lo}..{hi}")));
        }
        join(group, &mut Records::new(file, run, lo, hi), out)?;
        start += len.max(1);
    }
    Ok(())
}

/// A buffer that writes itself at a running offset of a staged object.
struct Region {
    buf: Vec<u8>,
    offset: u64,
}

impl Region {
    fn new(offset: u64) -> Region {
        Region {
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            offset,
        }
    }
    fn put(&mut self, out: &mut dyn StagedWrite, bytes: &[u8]) -> Result<(), LogError> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.flush(out)?;
        }
        Ok(())
    }
    fn flush(&mut self, out: &mut dyn StagedWrite) -> Result<(), LogError> {
        out.write_at(&self.buf, self.offset)?;
        self.offset += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// Writes a run in one streaming pass: records in key order, the
/// directory filled in as they go. Memory: two write buffers.
struct RunWriter {
    out: Box<dyn StagedWrite>,
    dir: Region,
    records: Region,
    run: Run,
    bits: u32,
    written: u64,
    next_bucket: u64,
}

impl RunWriter {
    fn create(store: &dyn Store, run: Run) -> Result<RunWriter, LogError> {
        let mut out = store.stage_private()?;
        let mut head = Vec::with_capacity(HEADER_BYTES as usize);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&run.first.to_be_bytes());
        head.extend_from_slice(&run.end.to_be_bytes());
        out.write_at(&head, 0)?;
        Ok(RunWriter {
            out,
            dir: Region::new(HEADER_BYTES),
            records: Region::new(run.records_at()),
            bits: run.bits(),
            run,
            written: 0,
            next_bucket: 0,
        })
    }

    /// Append one record; keys must come in ascending order.
    fn push(&mut self, key: u64, index: u64) -> Result<(), LogError> {
        let b = bucket(key, self.bits);
        while self.next_bucket <= b {
            self.dir.put(&mut *self.out, &self.written.to_be_bytes())?;
            self.next_bucket += 1;
        }
        self.records.put(&mut *self.out, &key.to_be_bytes())?;
        self.records.put(&mut *self.out, &index.to_be_bytes())?;
        self.written += 1;
        Ok(())
    }

    /// Close the directory, flush, and make the run durable (unnamed).
    fn finish(mut self) -> Result<Staged, LogError> {
        let count = self.run.count();
        if self.written != count {
            return Err(self
                .run
                .damaged(format!("wrote {} records, expected {count}", self.written)));
        }
        let last = 1u64 << self.bits;
        while self.next_bucket <= last {
            self.dir.put(&mut *self.out, &count.to_be_bytes())?;
            self.next_bucket += 1;
        }
        self.dir.flush(&mut *self.out)?;
        self.records.flush(&mut *self.out)?;
        Ok(self.out.finish()?)
    }
}

/// A run written durably but not yet named: merged from the absorbed tail
/// runs and a batch of new leaves ([`Index::prepare`]).
#[derive(Debug)]
pub struct Prepared {
    staged: Staged,
    run: Run,
    absorbed: usize,
}

/// A run installed under its name, whose absorbed runs are still there
/// until [`Index::retire`] (after the checkpoint covering it is published).
#[derive(Debug)]
pub struct Installed {
    run: Run,
    absorbed: usize,
}

/// The dedup index of one log.
#[derive(Debug)]
pub struct Index {
    store: Arc<dyn Store>,
    runs: Vec<Run>,
}

impl Index {
    /// The runs that tile `[0, n)` for the largest `n <= size`.
    pub fn open(store: Arc<dyn Store>, size: u64) -> Result<Index, LogError> {
        let (runs, _) = list_runs(&*store, size)?;
        Ok(Index { store, runs })
    }

    /// [`Index::open`] for the writer: also removes every object outside
    /// the cover (runs past `size` from a crashed append, runs already
    /// merged, damaged files), so they are rebuilt from the entries.
    pub fn open_writer(store: Arc<dyn Store>, size: u64) -> Result<Index, LogError> {
        let (runs, other) = list_runs(&*store, size)?;
        store.remove_private(&other)?;
        Ok(Index { store, runs })
    }

    /// The tree size the runs cover from 0.
    pub fn indexed_size(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.end)
    }

    /// Every stored candidate `(position in leaves, index)` whose key equals
    /// that leaf's key (unconfirmed hints: a key is 8 bytes of the hash).
    pub fn get_many(&self, leaves: &[Hash]) -> Result<Vec<(usize, u64)>, LogError> {
        let mut probes: Vec<(u64, usize)> = leaves
            .iter()
            .enumerate()
            .map(|(i, l)| (key_of(l), i))
            .collect();
        probes.sort_unstable();
        let mut out = Vec::new();
        for run in &self.runs {
            lookup_run(&*self.store, run, &probes, &mut out)?;
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Write, durably but not yet under its name, the run of `leaves`
    /// (indexes `first..`) merged with every tail run no larger than the
    /// result would grow to (a binary counter: about log2(n / batch) runs).
    pub fn prepare(&self, first: u64, leaves: &[Hash]) -> Result<Prepared, LogError> {
        let end = first + leaves.len() as u64;
        if self.indexed_size() != first {
            return Err(LogError::Index {
                run: PrivateDir::Dedup.path().to_string(),
                detail: format!("covers {} leaves, not {first}", self.indexed_size()),
            });
        }
        let mut start = first;
        let mut absorbed = 0;
        for run in self.runs.iter().rev() {
            if run.count() > end - start {
                break;
            }
            start = run.first;
            absorbed += 1;
        }
        let tails = self
            .runs
            .get(self.runs.len() - absorbed..)
            .unwrap_or_default();
        let run = Run { first: start, end };
        let mut w = RunWriter::create(&*self.store, run.clone())?;
        merge_into(&*self.store, &mut w, tails, first, leaves)?;
        Ok(Prepared {
            staged: w.finish()?,
            run,
            absorbed,
        })
    }

    /// Give a prepared run its name (durably). Until the checkpoint
    /// covering it is published, the writer's open removes it again (its
    /// end is past the checkpoint size).
    pub fn install(&self, prepared: Prepared) -> Result<Installed, LogError> {
        self.store
            .install_private(prepared.staged, &prepared.run.key())?;
        Ok(Installed {
            run: prepared.run,
            absorbed: prepared.absorbed,
        })
    }

    /// After the checkpoint covering `installed` is published: drop the
    /// absorbed runs from the cover and delete them.
    pub fn retire(&mut self, installed: Installed) -> Result<(), LogError> {
        let keep = self.runs.len().saturating_sub(installed.absorbed);
        let old: Vec<PrivateKey> = self.runs.drain(keep..).map(|r| r.key()).collect();
        self.runs.push(installed.run);
        Ok(self.store.remove_private(&old)?)
    }
}

/// Stream the records of `tails` (contiguous runs) and the new `leaves`
/// (indexes `first..`, sorted here) into `w` in key order.
fn merge_into(
    store: &dyn Store,
    w: &mut RunWriter,
    tails: &[Run],
    first: u64,
    leaves: &[Hash],
) -> Result<(), LogError> {
    let mut fresh: Vec<(u64, u64)> = leaves
        .iter()
        .enumerate()
        .map(|(k, l)| (key_of(l), first + k as u64))
        .collect();
    fresh.sort_unstable();
    let mut files = Vec::new();
    for run in tails {
        let file = store
            .open_private(&run.key())?
            .ok_or_else(|| run.damaged("gone while merging".to_string()))?;
        files.push(file);
    }
    let mut streams: Vec<Records<'_>> = tails
        .iter()
        .zip(&files)
        .map(|(run, f)| Records::new(&**f, run, 0, run.count()))
        .collect();
    let mut heads: Vec<Option<(u64, u64)>> = Vec::with_capacity(streams.len() + 1);
    for s in &mut streams {
        heads.push(s.next_record()?);
    }
    let mut fresh_iter = fresh.into_iter();
    heads.push(fresh_iter.next());
    // At most ~64 sources (one per power of two), so a linear minimum is fine.
    loop {
        let Some((src, &Some(rec))) = heads
            .iter()
            .enumerate()
            .filter(|(_, h)| h.is_some())
            .min_by_key(|(_, h)| *h)
        else {
            return Ok(());
        };
        w.push(rec.0, rec.1)?;
        let next = match streams.get_mut(src) {
            Some(s) => s.next_record()?,
            None => fresh_iter.next(),
        };
        if let Some(h) = heads.get_mut(src) {
            *h = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::posix::PosixStore;
    use crate::tlog::merkle::leaf_hash;

    fn leaves(range: std::ops::Range<u64>) -> Vec<Hash> {
        range.map(|i| leaf_hash(&i.to_le_bytes())).collect()
    }

    /// Add `first..end` the way an append does: prepare, install, retire.
    fn add(index: &mut Index, first: u64, end: u64) {
        let p = index.prepare(first, &leaves(first..end)).unwrap();
        let i = index.install(p).unwrap();
        index.retire(i).unwrap();
    }

    fn store(tmp: &tempfile::TempDir) -> Arc<dyn Store> {
        Arc::new(PosixStore::new(tmp.path()))
    }

    #[test]
    fn runs_merge_like_a_binary_counter_and_find_every_leaf() {
        let tmp = tempfile::tempdir().unwrap();
        let mut index = Index::open_writer(store(&tmp), u64::MAX).unwrap();
        // A large first run (sparse look-ups), then small batches.
        add(&mut index, 0, 150_000);
        for k in 0..7u64 {
            add(&mut index, 150_000 + k * 1000, 151_000 + k * 1000);
        }
        let counts: Vec<u64> = index.runs.iter().map(Run::count).collect();
        assert_eq!(counts, vec![150_000, 4000, 2000, 1000]);
        assert_eq!(index.indexed_size(), 157_000);
        // Reopened from the files alone: the same cover.
        let again = Index::open(store(&tmp), 157_000).unwrap();
        assert_eq!(again.runs, index.runs);
        // A few probes (sparse path) and many (dense path).
        let few: Vec<Hash> = [3u64, 149_999, 150_500, 156_999]
            .iter()
            .map(|i| leaf_hash(&i.to_le_bytes()))
            .collect();
        let got = again.get_many(&few).unwrap();
        assert_eq!(got, vec![(0, 3), (1, 149_999), (2, 150_500), (3, 156_999)]);
        let all = leaves(0..157_000);
        let got = again.get_many(&all).unwrap();
        assert_eq!(got.len(), 157_000);
        assert!(got.iter().all(|&(pos, i)| pos as u64 == i));
        assert!(again.get_many(&[leaf_hash(b"absent")]).unwrap().is_empty());
    }

    #[test]
    fn runs_past_the_size_and_merged_leftovers_are_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".rcpt/dedup");
        let mut index = Index::open_writer(store(&tmp), u64::MAX).unwrap();
        add(&mut index, 0, 10);
        // A crash after install, before publish: the run ends past size 10.
        let p = index.prepare(10, &leaves(10..20)).unwrap();
        index.install(p).unwrap();
        assert!(dir.join("0-20").exists() && dir.join("0-10").exists());
        let index = Index::open_writer(store(&tmp), 10).unwrap();
        assert_eq!(index.indexed_size(), 10);
        assert!(!dir.join("0-20").exists());
        // A crash after publish, before retire: the merged run wins.
        let p = index.prepare(10, &leaves(10..20)).unwrap();
        index.install(p).unwrap();
        std::fs::write(dir.join("junk"), b"x").unwrap();
        std::fs::write(dir.join("20-30"), b"short").unwrap();
        let index = Index::open_writer(store(&tmp), 30).unwrap();
        assert_eq!(index.indexed_size(), 20);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, vec!["0-20"]);
    }
}
