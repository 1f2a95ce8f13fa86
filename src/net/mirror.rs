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
//! The mirror also writes `DIR/.rcpt/settings.json` (origin and public key,
//! no key file) and `DIR/.rcpt/checkpoints/<size>`, so `rcpt log prove`,
//! `consistency` and `check` work on it.

use super::client::{Client, ClientError};
use super::paths::{PublicPath, TileKind};
use crate::keys::NoteVerifier;
use crate::limits::{MAX_ENTRY_BUNDLE_BYTES, MAX_NOTE_BYTES};
use crate::log::layout::{self, Settings};
use crate::log::tilebuild::TileBuilder;
use crate::merkle::{self, Frontier, Hash, HashReader, NodeId};
use crate::note::Checkpoint;
use crate::tiles::{self, TILE_WIDTH, TileReader};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Files fetched at once.
pub const FETCH_CONCURRENCY: usize = 16;
/// Largest hash tile: 256 hashes.
const MAX_HASH_TILE_BYTES: usize = 256 * 32;

/// Why a mirror run stopped (the mirror is then as it was before the run).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// A request failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The log serves no checkpoint.
    #[error("{url} has no checkpoint (HTTP 404); is this the URL of a tiled log?")]
    NoCheckpoint {
        /// The checkpoint URL.
        url: String,
    },
    /// The log's checkpoint does not verify under the log key.
    #[error("the log's checkpoint: {0}")]
    Checkpoint(String),
    /// The mirror directory holds something else.
    #[error("the mirror at {dir}: {detail}")]
    Local {
        /// The mirror directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The log's checkpoint is older than the mirror's.
    #[error(
        "the log now shows size {new}, smaller than the mirrored size {old}: it rolled back \
         (the mirror is kept at {old})"
    )]
    Rollback {
        /// Mirrored size.
        old: u64,
        /// The log's size.
        new: u64,
    },
    /// Same size, another root: two histories.
    #[error(
        "the log shows a different root at the mirrored size {size}: it forked (the mirror is kept)"
    )]
    Fork {
        /// The size.
        size: u64,
    },
    /// The new tree does not extend the mirrored one.
    #[error(
        "the log rewrote its history: no consistency from the mirrored size {old} to {new} \
         ({detail}); the mirror is kept at {old}"
    )]
    Rewritten {
        /// Mirrored size.
        old: u64,
        /// The log's size.
        new: u64,
        /// What failed.
        detail: String,
    },
    /// The fetched files do not match the checkpoint.
    #[error("the log's files do not match its checkpoint: {0}; the mirror is kept")]
    Mismatch(String),
    /// A file the checkpoint needs is not served.
    #[error("{url}: not found, but the checkpoint of size {size} needs it")]
    Missing {
        /// The file's URL.
        url: String,
        /// The checkpoint size.
        size: u64,
    },
    /// A local file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> MirrorError + '_ {
    move |source| MirrorError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorReport {
    /// Size mirrored before the run (0 for a new mirror).
    pub old_size: u64,
    /// Size mirrored now.
    pub new_size: u64,
    /// Files fetched in this run (staged files from an interrupted run not counted).
    pub fetched: u64,
    /// The new root.
    pub root: Hash,
}

/// `DIR/.rcpt/mirror/`: files fetched and not yet checked.
pub fn staging(dir: &Path) -> PathBuf {
    layout::private(dir).join("mirror")
}

/// Bring the mirror in `dir` up to the log at `client`'s base URL.
pub async fn mirror(
    client: &Client,
    dir: &Path,
    key: &NoteVerifier,
) -> Result<MirrorReport, MirrorError> {
    let url = client.url("checkpoint");
    let text = client
        .get("checkpoint", MAX_NOTE_BYTES)
        .await?
        .ok_or_else(|| MirrorError::NoCheckpoint { url: url.clone() })?;
    let new = crate::log::verify_checkpoint(&text, key, &key.name, Path::new(&url))
        .map_err(|e| MirrorError::Checkpoint(e.to_string()))?;
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let old = local_checkpoint(dir, key)?;
    let (m, old_root) = old
        .as_ref()
        .map_or((0, merkle::empty_root()), |c| (c.size, c.root_hash));
    let n = new.size;
    if n < m {
        return Err(MirrorError::Rollback { old: m, new: n });
    }
    if n == m {
        if new.root_hash != old_root {
            return Err(MirrorError::Fork { size: m });
        }
        return Ok(MirrorReport {
            old_size: m,
            new_size: n,
            fetched: 0,
            root: old_root,
        });
    }
    let stage = staging(dir);
    std::fs::create_dir_all(&stage).map_err(io_err(&stage))?;
    let needed: Vec<PublicPath> = needed(m, n)
        .into_iter()
        .filter(|p| !dir.join(p.relative()).is_file())
        .collect();
    let fetched = fetch_all(client, &stage, &needed, n).await?;
    let (d, s, nr) = (dir.to_path_buf(), stage.clone(), new.root_hash);
    let checked = tokio::task::spawn_blocking(move || check_new(&d, &s, m, n, &old_root, &nr))
        .await
        .map_err(|e| MirrorError::Mismatch(format!("the check stopped: {e}")))?;
    if let Err(e) = checked {
        // What was fetched is not part of this log's one history: drop it,
        // so a later run fetches afresh.
        let _ = std::fs::remove_dir_all(&stage);
        return Err(e);
    }
    install(dir, &stage, &needed, key, n, &text)?;
    Ok(MirrorReport {
        old_size: m,
        new_size: n,
        fetched,
        root: new.root_hash,
    })
}

/// The mirror's own checkpoint, verified, if it has one.
fn local_checkpoint(dir: &Path, key: &NoteVerifier) -> Result<Option<Checkpoint>, MirrorError> {
    let local = |detail: String| MirrorError::Local {
        dir: dir.to_path_buf(),
        detail,
    };
    let settings = layout::settings(dir);
    if settings.is_file() {
        let s = Settings::read(dir).map_err(|e| local(e.to_string()))?;
        if s.verifier_key != key.to_string() {
            return Err(local(format!(
                "it holds the log {} (key {}), not {key}",
                s.origin, s.verifier_key
            )));
        }
    }
    let path = layout::checkpoint(dir);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    crate::log::verify_checkpoint(&text, key, &key.name, &path)
        .map(Some)
        .map_err(|e| local(format!("{e} (not a mirror of this log?)")))
}

/// Width of tile `t` of a level holding `count` items: `None` when full.
fn width_at(t: u64, count: u64) -> Option<u8> {
    let w = count.saturating_sub(t * TILE_WIDTH).min(TILE_WIDTH);
    // w < 256 in this branch, so the cast is exact.
    (w < TILE_WIDTH).then_some(w as u8)
}

/// Every public file of the tree of `n` leaves that the tree of `m`
/// leaves does not have: the entry bundles and hash tiles from the ones
/// holding item `m` (of their level) on.
fn needed(m: u64, n: u64) -> Vec<PublicPath> {
    let mut out = Vec::new();
    for t in m / TILE_WIDTH..n.div_ceil(TILE_WIDTH) {
        out.push(PublicPath::Tile {
            kind: TileKind::Entries,
            index: t,
            width: width_at(t, n),
        });
    }
    let mut level: u8 = 0;
    while let Some(count) = n.checked_shr(8 * u32::from(level)).filter(|&c| c > 0) {
        let from = (m >> (8 * u32::from(level))) / TILE_WIDTH;
        for t in from..count.div_ceil(TILE_WIDTH) {
            out.push(PublicPath::Tile {
                kind: TileKind::Hash(level),
                index: t,
                width: width_at(t, count),
            });
        }
        level += 1;
    }
    out
}

/// Fetch each path not yet staged, [`FETCH_CONCURRENCY`] at a time, each
/// written durably under `stage`. Returns how many were fetched.
async fn fetch_all(
    client: &Client,
    stage: &Path,
    paths: &[PublicPath],
    size: u64,
) -> Result<u64, MirrorError> {
    let mut todo = paths
        .iter()
        .filter(|p| !stage.join(p.relative()).is_file())
        .copied();
    let mut tasks = tokio::task::JoinSet::new();
    let mut fetched = 0u64;
    loop {
        while tasks.len() < FETCH_CONCURRENCY {
            let Some(p) = todo.next() else { break };
            let (client, stage) = (client.clone(), stage.to_path_buf());
            tasks.spawn(async move { fetch_one(&client, &stage, p, size).await });
        }
        let Some(done) = tasks.join_next().await else {
            return Ok(fetched);
        };
        done.map_err(|e| MirrorError::Mismatch(format!("a fetch task stopped: {e}")))??;
        fetched += 1;
    }
}

async fn fetch_one(
    client: &Client,
    stage: &Path,
    path: PublicPath,
    size: u64,
) -> Result<(), MirrorError> {
    let rel = path.relative();
    let max = match path {
        PublicPath::Tile {
            kind: TileKind::Entries,
            ..
        } => MAX_ENTRY_BUNDLE_BYTES,
        _ => MAX_HASH_TILE_BYTES,
    };
    let bytes = client
        .get(&rel, max)
        .await?
        .ok_or_else(|| MirrorError::Missing {
            url: client.url(&rel),
            size,
        })?;
    let dest = stage.join(&rel);
    tokio::task::spawn_blocking(move || write_durable(&dest, &bytes))
        .await
        .map_err(|e| MirrorError::Mismatch(format!("a write task stopped: {e}")))?
}

/// Write `bytes` to `dest` through a temporary file beside it: write,
/// fsync, rename (the directory is fsynced by the caller's install step).
fn write_durable(dest: &Path, bytes: &[u8]) -> Result<(), MirrorError> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, dest).map_err(io_err(dest))
}

/// fsync a directory.
fn sync_dir(dir: &Path) -> Result<(), MirrorError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Read a fetched file: staged, else already in the public tree.
fn read_new(dir: &Path, stage: &Path, rel: &str, max: usize) -> Result<Vec<u8>, MirrorError> {
    let staged = stage.join(rel);
    let path = if staged.is_file() {
        staged
    } else {
        dir.join(rel)
    };
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    if bytes.len() > max {
        return Err(MirrorError::Mismatch(format!("{rel} is over {max} bytes")));
    }
    Ok(bytes)
}

/// Nodes from the staged tiles, else from the mirrored ones.
struct Union {
    staged: TileReader,
    public: TileReader,
}

impl HashReader for Union {
    type Error = tiles::TileError;
    fn read_hashes(&self, ids: &[NodeId]) -> Result<Vec<Hash>, tiles::TileError> {
        ids.iter()
            .map(|id| {
                let one = std::slice::from_ref(id);
                let hashes = match self.staged.read_hashes(one) {
                    Ok(h) => h,
                    Err(_) => self.public.read_hashes(one)?,
                };
                hashes.first().copied().ok_or(tiles::TileError::NotInTree {
                    level: id.level,
                    index: id.index,
                    size: self.staged.size(),
                })
            })
            .collect()
    }
}

/// Steps 1 and 2 of the module comment, on the files fetched for the tree
/// of `n` leaves extending the mirrored tree of `m`.
fn check_new(
    dir: &Path,
    stage: &Path,
    m: u64,
    n: u64,
    old_root: &Hash,
    new_root: &Hash,
) -> Result<(), MirrorError> {
    let mismatch = |e: String| MirrorError::Mismatch(e);
    if m > 0 {
        let union = Union {
            staged: TileReader::new(stage, n),
            public: TileReader::new(dir, n),
        };
        let proof = merkle::prove_consistency(m, n, &union)
            .map_err(|e| mismatch(format!("consistency proof from the tiles: {e}")))?;
        merkle::verify_consistency(m, n, &proof, old_root, new_root).map_err(|e| {
            MirrorError::Rewritten {
                old: m,
                new: n,
                detail: e.to_string(),
            }
        })?;
    }
    let mut frontier = if m == 0 {
        Frontier::new()
    } else {
        Frontier::from_reader(m, &TileReader::new(dir, m))
            .map_err(|e| mismatch(format!("the mirrored tree's edge: {e}")))?
    };
    let mut builder = TileBuilder::new(m, |l, i, w| {
        let rel = tiles::hash_tile_path(l, i, Some(w));
        let bytes = std::fs::read(dir.join(&rel)).map_err(|e| mismatch(format!("{rel}: {e}")))?;
        tiles::decode_hash_tile(&bytes, usize::from(w), &rel).map_err(|e| mismatch(e.to_string()))
    })?;
    let old_partial = old_partial_entries(dir, m)?;
    for t in m / TILE_WIDTH..n.div_ceil(TILE_WIDTH) {
        let width = width_at(t, n);
        let rel = tiles::entries_tile_path(t, width);
        let bytes = read_new(dir, stage, &rel, MAX_ENTRY_BUNDLE_BYTES)?;
        let entries =
            tiles::decode_entry_bundle(&bytes).map_err(|e| mismatch(format!("{rel}: {e}")))?;
        let want = width.map_or(TILE_WIDTH as usize, usize::from);
        if entries.len() != want {
            return Err(mismatch(format!(
                "{rel} holds {} entries, not {want}",
                entries.len()
            )));
        }
        for (k, entry) in entries.iter().enumerate() {
            let index = t * TILE_WIDTH + k as u64;
            if index < m {
                if old_partial.get(k).map(Vec::as_slice) != Some(*entry) {
                    return Err(MirrorError::Rewritten {
                        old: m,
                        new: n,
                        detail: format!("entry {index} differs from the mirrored one"),
                    });
                }
                continue;
            }
            frontier
                .push(merkle::leaf_hash(entry), |id, h| builder.node(id, h))
                .map_err(|e| mismatch(e.to_string()))?;
        }
        for tile in builder.take_full() {
            compare(dir, stage, &tile.path(), &tile.bytes())?;
        }
    }
    for tile in builder.take_partial() {
        compare(dir, stage, &tile.path(), &tile.bytes())?;
    }
    if frontier.root() != *new_root {
        return Err(mismatch(format!(
            "the entries give root {}, the checkpoint {}",
            STANDARD.encode(frontier.root()),
            STANDARD.encode(new_root)
        )));
    }
    Ok(())
}

/// The entries of the mirrored partial bundle at size `m` (none when `m`
/// ends a full bundle).
fn old_partial_entries(dir: &Path, m: u64) -> Result<Vec<Vec<u8>>, MirrorError> {
    let Some(w) = width_at(m / TILE_WIDTH, m).filter(|&w| w > 0) else {
        return Ok(Vec::new());
    };
    let rel = tiles::entries_tile_path(m / TILE_WIDTH, Some(w));
    let path = dir.join(&rel);
    let bytes = std::fs::read(&path).map_err(io_err(&path))?;
    let entries = tiles::decode_entry_bundle(&bytes).map_err(|e| MirrorError::Local {
        dir: dir.to_path_buf(),
        detail: format!("{rel}: {e}"),
    })?;
    Ok(entries.into_iter().map(<[u8]>::to_vec).collect())
}

/// A rebuilt tile must equal the fetched one, byte for byte.
fn compare(dir: &Path, stage: &Path, rel: &str, built: &[u8]) -> Result<(), MirrorError> {
    let fetched = read_new(dir, stage, rel, MAX_HASH_TILE_BYTES)?;
    if fetched != built {
        return Err(MirrorError::Mismatch(format!(
            "tile {rel} is not the tile the entries give"
        )));
    }
    Ok(())
}

/// Rename the staged files into the public tree, make them durable, keep
/// and publish the checkpoint (last), and empty the staging directory.
fn install(
    dir: &Path,
    stage: &Path,
    paths: &[PublicPath],
    key: &NoteVerifier,
    size: u64,
    checkpoint: &[u8],
) -> Result<(), MirrorError> {
    let mut dirs = std::collections::BTreeSet::new();
    for p in paths {
        let rel = p.relative();
        let (src, dest) = (stage.join(&rel), dir.join(&rel));
        if !src.is_file() {
            continue; // installed by an interrupted earlier run
        }
        let mut parent = dest.parent().map(Path::to_path_buf);
        if let Some(pd) = &parent {
            std::fs::create_dir_all(pd).map_err(io_err(pd))?;
        }
        std::fs::rename(&src, &dest).map_err(io_err(&dest))?;
        // Every directory from the file's up to DIR may have gained a name.
        while let Some(d) = parent.filter(|d| d.starts_with(dir)) {
            parent = d.parent().map(Path::to_path_buf);
            dirs.insert(d);
        }
    }
    for d in dirs.iter().rev() {
        sync_dir(d)?;
    }
    let private = layout::private(dir);
    let settings = layout::settings(dir);
    if !settings.is_file() {
        let s = Settings {
            format: layout::SETTINGS_FORMAT,
            origin: key.name.clone(),
            public_key: STANDARD.encode(key.key.as_bytes()),
            verifier_key: key.to_string(),
            key_file: None,
        };
        let json = s.to_json().map_err(|e| MirrorError::Local {
            dir: dir.to_path_buf(),
            detail: e.to_string(),
        })?;
        write_durable(&settings, &json)?;
        sync_dir(&private)?;
    }
    let kept = layout::checkpoint_at(dir, size);
    write_durable(&kept, checkpoint)?;
    sync_dir(&layout::checkpoints(dir))?;
    sync_dir(&private)?;
    write_durable(&layout::checkpoint(dir), checkpoint)?;
    sync_dir(dir)?;
    let _ = std::fs::remove_dir_all(stage);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn needed_files_cover_the_new_part_only() {
        let rel = |m, n| {
            needed(m, n)
                .iter()
                .map(PublicPath::relative)
                .collect::<Vec<_>>()
        };
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
