//! mirror: copy a tiled log's public files over HTTP, checked, so that
//! proofs can be made offline from the copy (spec/service.md "Mirror").
//!
//! One run: fetch and verify the log's checkpoint under the log key; fetch
//! every tile and entry bundle the mirror lacks for that size into a
//! staging directory (`DIR/.rcpt/mirror/`, kept across runs, so an
//! interrupted run resumes); then, before anything enters the public tree:
//!
//! 1. a consistency proof from the mirrored size to the new one is computed
//!    from the tiles and verified against the two signed roots (a log that
//!    rewrote its history is refused here, and the old mirror is kept);
//! 2. the new entries are hashed onto the mirrored tree's edge, every hash
//!    tile they complete is rebuilt and compared byte for byte with the
//!    fetched one, the entries the old partial bundle held must be
//!    unchanged, and the root must be the checkpoint's.
//!
//! Only then are the staged files renamed into place (each fsynced when
//! fetched, their directories fsynced after the renames), and the new
//! checkpoint published last, by an atomic rename: a crash at any moment
//! leaves the old mirror or the new one, never a checkpoint naming a
//! missing or unchecked file.
//!
//! The mirror is any [`Store`]: a directory ([`PosixStore`]) or an object
//! store (`s3://BUCKET/PREFIX`, spec/storage.md "Mirroring into object
//! storage"); every write to it is create-only or compare-and-swap,
//! durable on return. The staging area is a local directory: for a
//! directory mirror, `DIR/.rcpt/mirror/`; for another store, one the
//! caller names (the CLI uses a temporary directory, so an interrupted run
//! into object storage fetches again rather than resuming). It
//! also writes `DIR/.rcpt/settings.json` (origin and public key, no key
//! file) and `DIR/.rcpt/checkpoints/<size>`, so `rcpt log prove`,
//! `consistency` and `check` work on it without `--log-key`, at every
//! mirrored size.

mod check;
mod error;
mod stage;

pub use error::{MirrorError, MirrorReport};

use super::Client;
use crate::keys::NoteVerifier;
use crate::limits::MAX_NOTE_BYTES;
use crate::log::{SETTINGS_FORMAT, Settings};
use crate::storage::TileStore as _;
use crate::storage::posix::PosixStore;
use crate::storage::{PrivateKey, PublicKey, Store, TileKey, Version, Width};
use crate::tlog::merkle;
use crate::tlog::note::Checkpoint;
use crate::tlog::tiles::TILE_WIDTH;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use check::check_new;
use stage::{Union, has_tile, max_bytes, read_new};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Files fetched at once.
pub const FETCH_CONCURRENCY: usize = 16;
/// Staged files installed per durable step.
const INSTALL_CHUNK: usize = 256;
/// Tile keys looked up in the mirror, then fetched, per step: the most
/// keys held at once, whatever size the log's checkpoint claims.
const KEY_BATCH: usize = 4096;

/// `DIR/.rcpt/mirror/`: files fetched and not yet checked.
pub fn staging(dir: &Path) -> PathBuf {
    dir.join(crate::storage::posix::PRIVATE_DIR).join("mirror")
}

/// Bring the mirror in `dir` up to the log at `client`'s base URL.
pub async fn mirror(
    client: &Client,
    dir: &Path,
    key: &NoteVerifier,
) -> Result<MirrorReport, MirrorError> {
    // The mirror and its private directory, never through a link (the
    // staging area below is filled and removed).
    crate::io::Dir::create(dir, 0o755)
        .and_then(|d| d.child_or_create(crate::storage::posix::PRIVATE_DIR, 0o755))
        .map_err(|e| MirrorError::Io {
            path: e.path().to_path_buf(),
            source: e.into_io(),
        })?;
    let public: Arc<dyn Store> = Arc::new(PosixStore::new(dir));
    mirror_into(client, &public, &staging(dir), key).await
}

/// Bring the mirror in the store `public` (a directory, an object store)
/// up to the log at `client`'s base URL, staging fetched files in the
/// local directory `stage` (created if absent, removed when the run ends
/// with the files installed or refused). The caller keeps `public`: an
/// object store's blocking client owns a runtime, which must not be
/// dropped inside this one.
pub async fn mirror_into(
    client: &Client,
    public: &Arc<dyn Store>,
    stage: &Path,
    key: &NoteVerifier,
) -> Result<MirrorReport, MirrorError> {
    let url = client.url("checkpoint");
    let text = client
        .get("checkpoint", MAX_NOTE_BYTES)
        .await?
        .ok_or_else(|| MirrorError::NoCheckpoint { url: url.clone() })?;
    let new =
        crate::log::verify_checkpoint(&text, key, None).map_err(|e| MirrorError::Checkpoint {
            url: url.clone(),
            source: Box::new(e),
        })?;
    // The store's calls block (an object store's client runs its own
    // runtime): each runs on a blocking thread, never on this one.
    let old = {
        let (public, key) = (Arc::clone(public), key.clone());
        blocking(move || local_checkpoint(&*public, &key)).await?
    };
    let (m, old_root) = old
        .as_ref()
        .map_or((0, merkle::empty_root()), |(c, _, _)| (c.size, c.root_hash));
    let n = new.size;
    if n < m {
        return Err(MirrorError::Rollback { old: m, new: n });
    }
    if n == m {
        if new.root_hash != old_root {
            return Err(MirrorError::Fork { size: m });
        }
        keep_cosigned(public, old, &text, n).await?;
        return Ok(MirrorReport {
            old_size: m,
            new_size: n,
            fetched: 0,
            root: old_root,
        });
    }
    let union = Arc::new(Union {
        staged: PosixStore::new(stage),
        public: Arc::clone(public),
    });
    let fetched = fetch_missing(client, public, &union, m, n).await?;
    let (u, nr) = (Arc::clone(&union), new.root_hash);
    let checked = tokio::task::spawn_blocking(move || check_new(u, m, n, &old_root, &nr))
        .await
        .map_err(|e| MirrorError::Task("the check", e))?;
    if let Err(e) = checked {
        // What was fetched is not part of this log's one history: drop it,
        // so a later run fetches afresh.
        let _ = crate::io::remove_tree_at(stage);
        return Err(e);
    }
    let version = old.map(|(_, v, _)| v);
    {
        let (union, key, text) = (Arc::clone(&union), key.clone(), text.clone());
        blocking(move || install(&union, (m, n), &key, &text, version.as_ref())).await?;
    }
    let _ = crate::io::remove_tree_at(stage);
    Ok(MirrorReport {
        old_size: m,
        new_size: n,
        fetched,
        root: new.root_hash,
    })
}

/// At the same tree size, keep the fetched checkpoint when it is the held
/// one with more signatures.
async fn keep_cosigned(
    public: &Arc<dyn Store>,
    old: Option<(Checkpoint, Version, Vec<u8>)>,
    text: &[u8],
    n: u64,
) -> Result<(), MirrorError> {
    // The same tree, now with more signatures (a witnessed log stores
    // its checkpoint cosigned once the quorum is met): keep the
    // cosigned note. Only a strict superset of the lines held, so a
    // mirror cannot be made to drop a cosignature it holds.
    if let Some((_, version, local)) = old
        && adds_signatures(&local, text)
    {
        let (public, text) = (Arc::clone(public), text.to_vec());
        blocking(move || {
            public.write_private(&PrivateKey::Checkpoint(n), &text)?;
            public.replace_checkpoint(Some(&version), &text)?;
            Ok(())
        })
        .await?;
    }
    Ok(())
}

/// Fetch into the stage every tile of the tree from `m` to `n` entries
/// that the mirror does not hold; how many files were fetched.
async fn fetch_missing(
    client: &Client,
    public: &Arc<dyn Store>,
    union: &Union,
    m: u64,
    n: u64,
) -> Result<u64, MirrorError> {
    // The tile list is walked, never built: work and memory follow the
    // files the log serves, a batch at a time, not the size it claims (a
    // signed checkpoint of 2^40 entries costs one batch of keys, then
    // stops at the first file the log does not serve).
    let mut fetched = 0u64;
    let mut keys = needed(m, n);
    loop {
        let batch: Vec<TileKey> = keys.by_ref().take(KEY_BATCH).collect();
        if batch.is_empty() {
            break;
        }
        let public = Arc::clone(public);
        let missing = blocking(move || {
            let mut missing = Vec::with_capacity(batch.len());
            for k in batch {
                if !has_tile(&*public, &k)? {
                    missing.push(k);
                }
            }
            Ok(missing)
        })
        .await?;
        fetched += fetch_all(client, &union.staged, &missing, n).await?;
    }
    Ok(fetched)
}

/// Run `f`, which calls the store, on a blocking thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, MirrorError> + Send + 'static,
) -> Result<T, MirrorError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| MirrorError::Task("a store task", e))?
}

/// The mirror's own checkpoint, verified, with its version, if it has one.
fn local_checkpoint(
    store: &dyn Store,
    key: &NoteVerifier,
) -> Result<Option<(Checkpoint, Version, Vec<u8>)>, MirrorError> {
    let dir = || PathBuf::from(store.describe());
    let local = |detail: String| MirrorError::Local { dir: dir(), detail };
    if let Some(s) = Settings::read(store).map_err(|e| MirrorError::LocalSettings {
        dir: dir(),
        source: Box::new(e),
    })? && s.verifier_key != key.to_string()
    {
        return Err(local(format!(
            "it holds the log {} (key {}), not {key}",
            s.origin, s.verifier_key
        )));
    }
    let Some(read) = store.read_checkpoint(MAX_NOTE_BYTES)? else {
        return Ok(None);
    };
    crate::log::verify_checkpoint(&read.bytes, key, None)
        .map(|c| Some((c, read.version, read.bytes)))
        .map_err(|e| MirrorError::NotThisLog {
            dir: dir(),
            source: Box::new(e),
        })
}

/// True when `new` (a verified note of the same tree as `held`) has every
/// signature line `held` has, and more: the only replacement at one size.
fn adds_signatures(held: &[u8], new: &[u8]) -> bool {
    let (Ok(held), Ok(new)) = (
        crate::tlog::note::Note::parse(held),
        crate::tlog::note::Note::parse(new),
    ) else {
        return false;
    };
    new.signatures.len() > held.signatures.len()
        && held.signatures.iter().all(|s| new.signatures.contains(s))
}

/// Every public file of the tree of `n` leaves that the tree of `m`
/// leaves does not have: the entry bundles and hash tiles from the ones
/// holding item `m` (of their level) on.
/// An iterator, so that no list of them is ever held whole: a claimed
/// size never sizes an allocation.
fn needed(m: u64, n: u64) -> impl Iterator<Item = TileKey> + Send + 'static {
    let entries = (m / TILE_WIDTH..n.div_ceil(TILE_WIDTH))
        .filter_map(move |t| Width::of(t, n).map(|w| TileKey::entries(t, w)));
    let levels = (0u8..=u8::MAX)
        .map_while(move |level| {
            n.checked_shr(8 * u32::from(level))
                .filter(|&c| c > 0)
                .map(|count| (level, count))
        })
        .flat_map(move |(level, count)| {
            let from = m.checked_shr(8 * u32::from(level)).unwrap_or(0) / TILE_WIDTH;
            (from..count.div_ceil(TILE_WIDTH))
                .filter_map(move |t| Width::of(t, count).and_then(|w| TileKey::hashes(level, t, w)))
        });
    entries.chain(levels)
}

/// Fetch each key not yet staged, [`FETCH_CONCURRENCY`] at a time, each
/// written durably into the staging store. Returns how many were fetched.
async fn fetch_all(
    client: &Client,
    stage: &PosixStore,
    keys: &[TileKey],
    size: u64,
) -> Result<u64, MirrorError> {
    let mut todo = keys
        .iter()
        .filter(|k| !stage.public_path(&PublicKey::Tile(**k)).is_file())
        .copied();
    let mut tasks = tokio::task::JoinSet::new();
    let mut fetched = 0u64;
    loop {
        while tasks.len() < FETCH_CONCURRENCY {
            let Some(k) = todo.next() else { break };
            let (client, stage) = (client.clone(), stage.clone());
            tasks.spawn(async move { fetch_one(&client, stage, k, size).await });
        }
        let Some(done) = tasks.join_next().await else {
            return Ok(fetched);
        };
        done.map_err(|e| MirrorError::Task("a fetch task", e))??;
        fetched += 1;
    }
}

async fn fetch_one(
    client: &Client,
    stage: PosixStore,
    key: TileKey,
    size: u64,
) -> Result<(), MirrorError> {
    let rel = key.path();
    let bytes = client
        .get(&rel, max_bytes(key.family()))
        .await?
        .ok_or_else(|| MirrorError::Missing {
            url: client.url(&rel),
            size,
        })?;
    tokio::task::spawn_blocking(move || stage.create_tiles(&[(key, bytes.to_vec())]))
        .await
        .map_err(|e| MirrorError::Task("a write task", e))??;
    Ok(())
}

/// Move the staged files into the mirror (create-only, durable, a chunk
/// at a time), keep the checkpoint, then publish it by compare-and-swap on
/// the version read at the start.
fn install(
    union: &Union,
    (m, n): (u64, u64),
    key: &NoteVerifier,
    checkpoint: &[u8],
    old: Option<&Version>,
) -> Result<(), MirrorError> {
    let size = n;
    let mut keys = needed(m, n);
    loop {
        let batch: Vec<TileKey> = keys.by_ref().take(INSTALL_CHUNK).collect();
        if batch.is_empty() {
            break;
        }
        let mut objects = Vec::with_capacity(batch.len());
        for k in batch {
            // Staged in this run (or an interrupted one) and not yet public.
            if union.staged.public_path(&PublicKey::Tile(k)).is_file()
                && !has_tile(&*union.public, &k)?
            {
                objects.push((k, read_new(union, &k)?));
            }
        }
        union.public.create_tiles(&objects)?;
    }
    let store = &*union.public;
    if Settings::read(store)
        .map_err(|e| MirrorError::LocalSettings {
            dir: PathBuf::from(store.describe()),
            source: Box::new(e),
        })?
        .is_none()
    {
        let s = Settings {
            format: SETTINGS_FORMAT,
            origin: key.name.clone(),
            public_key: STANDARD.encode(key.key.as_bytes()),
            verifier_key: key.to_string(),
            key_file: None,
        };
        let json = serde_json::to_vec_pretty(&s).map_err(MirrorError::SettingsJson)?;
        store.write_private(&PrivateKey::Settings, &json)?;
    }
    store.write_private(&PrivateKey::Checkpoint(size), checkpoint)?;
    store.replace_checkpoint(old, checkpoint)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_replaces_the_held_one_only_with_a_strict_superset_of_its_lines() {
        let body = "example.com/log\n5\n6oyOdDm5aYUhs5ItS4eCk2mkXeRccW54GfFwIgrMHjQ=\n\n";
        let log = "— example.com/log AAAAAAEC\n";
        let w1 = "— w1 AAAAAQMD\n";
        let w2 = "— w2 AAAAAgQE\n";
        let note = |lines: &[&str]| format!("{body}{}", lines.concat()).into_bytes();
        assert!(adds_signatures(&note(&[log]), &note(&[log, w1])));
        assert!(adds_signatures(&note(&[log, w1]), &note(&[w1, log, w2])));
        // Not more lines, other lines in place of held ones, or unparsable.
        assert!(!adds_signatures(&note(&[log, w1]), &note(&[log, w1])));
        assert!(!adds_signatures(&note(&[log, w1]), &note(&[log, w2])));
        assert!(!adds_signatures(&note(&[log, w1]), &note(&[log, w2, w2])));
        assert!(!adds_signatures(&note(&[log]), b"not a note"));
    }

    #[test]
    fn needed_files_cover_the_new_part_only() {
        let rel = |m, n| needed(m, n).map(|k| k.path()).collect::<Vec<_>>();
        assert_eq!(rel(0, 3), ["tile/entries/000.p/3", "tile/0/000.p/3"]);
        assert_eq!(
            rel(3, 300),
            [
                "tile/entries/000",
                "tile/entries/001.p/44",
                "tile/0/000",
                "tile/0/001.p/44",
                "tile/1/000.p/1"
            ]
        );
        assert_eq!(
            rel(300, 600),
            [
                "tile/entries/001",
                "tile/entries/002.p/88",
                "tile/0/001",
                "tile/0/002.p/88",
                "tile/1/000.p/2"
            ]
        );
        assert_eq!(
            rel(512, 513),
            ["tile/entries/002.p/1", "tile/0/002.p/1", "tile/1/000.p/2"]
        );
    }
}
