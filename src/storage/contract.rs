//! contract: the properties every [`Store`] keeps (`spec/storage.md`),
//! checked through the trait alone, so each backend runs the same checks:
//! `contract::run(&store)` on a new, empty store.
//!
//! Library code (no test framework): each check returns the first broken
//! property as a [`Broken`] naming it, and the backend's test asserts
//! `run(..)` is `Ok`.

use super::{
    Family, PrivateDir, PrivateKey, PublicKey, Store, StoreError, TileKey, Version, Width,
};

/// A broken property of the storage contract.
#[derive(Debug, thiserror::Error)]
#[error("storage contract: {property}: {detail}")]
pub struct Broken {
    /// The property, as `spec/storage.md` states it.
    pub property: &'static str,
    /// What happened instead.
    pub detail: String,
}

type Check = Result<(), Broken>;

fn broken(property: &'static str, detail: impl std::fmt::Debug) -> Broken {
    Broken {
        property,
        detail: format!("{detail:?}"),
    }
}

/// `ok` or the broken `property`.
fn require(property: &'static str, ok: bool, detail: impl std::fmt::Debug) -> Check {
    if ok {
        Ok(())
    } else {
        Err(broken(property, detail))
    }
}

/// Unwrap a store result or report it as the broken `property`.
fn call<T>(property: &'static str, r: Result<T, StoreError>) -> Result<T, Broken> {
    r.map_err(|e| broken(property, e))
}

/// One group of checks, run on a new empty store.
pub type Group = fn(&dyn Store) -> Check;

/// The groups, one per storage trait, by name; [`run`] is all of them.
pub const GROUPS: [(&str, Group); 3] = [
    ("tiles", tile_store),
    ("checkpoint", checkpoint_store),
    ("private", private_store),
];

/// Every group, in order, on one new empty store.
pub fn run(store: &dyn Store) -> Check {
    tile_store(store)?;
    checkpoint_store(store)?;
    private_store(store)
}

/// The [`PublicRead`](super::PublicRead) and [`TileStore`](super::TileStore)
/// group, on a new empty store.
pub fn tile_store(store: &dyn Store) -> Check {
    empty_store_reads_nothing(store)?;
    tiles_are_create_only(store)?;
    reads_are_capped(store)?;
    listing_and_removal_find_tiles_by_index(store)
}

/// The [`CheckpointStore`](super::CheckpointStore) group (compare-and-swap
/// and the writer's lock), on a new empty store.
pub fn checkpoint_store(store: &dyn Store) -> Check {
    checkpoint_changes_by_compare_and_swap(store)?;
    one_writer_holds_the_lock(store)
}

/// The [`PrivateStore`](super::PrivateStore) group, on a new empty store.
pub fn private_store(store: &dyn Store) -> Check {
    private_objects_are_replaced_whole(store)?;
    staged_objects_are_named_when_installed(store)
}

fn tile(level: u8, index: u64, width: u8) -> Result<TileKey, Broken> {
    let w = if width == 0 {
        Some(Width::Full)
    } else {
        Width::partial(width)
    };
    w.and_then(|w| TileKey::hashes(level, index, w))
        .ok_or_else(|| broken("test keys are valid", (level, index, width)))
}

/// A new store holds no checkpoint and no tile.
pub fn empty_store_reads_nothing(store: &dyn Store) -> Check {
    const P: &str = "a new store is empty";
    require(P, call(P, store.is_empty())?, "is_empty() is false")?;
    require(
        P,
        call(P, store.read(&PublicKey::Checkpoint, 1024))?.is_none(),
        "checkpoint",
    )?;
    require(
        P,
        call(P, store.read_checkpoint(1024))?.is_none(),
        "read_checkpoint",
    )?;
    let t = PublicKey::Tile(tile(0, 0, 0)?);
    require(P, call(P, store.read(&t, 8192))?.is_none(), "tile/0/000")
}

/// Immutable objects: written once; the same bytes again succeed (a
/// retried write); other bytes are a conflict and change nothing.
pub fn tiles_are_create_only(store: &dyn Store) -> Check {
    const P: &str = "tiles are create-only";
    let a = tile(0, 0, 3)?;
    let b = TileKey::entries(1234, Width::Full);
    let objects = vec![(a, vec![1u8; 96]), (b, b"bundle".to_vec())];
    call(P, store.create_tiles(&objects))?;
    for (k, bytes) in &objects {
        let got = call(P, store.read(&PublicKey::Tile(*k), 8192))?;
        require(
            P,
            got.as_ref() == Some(bytes),
            (k.path(), got.map(|g| g.len())),
        )?;
    }
    call(
        "the same bytes again are a retried write",
        store.create_tiles(&objects),
    )?;
    let other = store.create_tiles(&[(a, vec![2u8; 96])]);
    require(
        "other bytes are a conflict",
        matches!(other, Err(StoreError::Conflict { key }) if key == a),
        &other,
    )?;
    let still = call(P, store.read(&PublicKey::Tile(a), 8192))?;
    require(
        "a conflict changes nothing",
        still == Some(vec![1u8; 96]),
        still.map(|s| s.len()),
    )
}

/// A read longer than its limit is refused, not truncated.
pub fn reads_are_capped(store: &dyn Store) -> Check {
    const P: &str = "reads are capped";
    let a = PublicKey::Tile(tile(0, 0, 3)?);
    let r = store.read(&a, 95);
    require(
        P,
        matches!(r, Err(StoreError::TooLarge { max: 95, .. })),
        r.map(|o| o.map(|b| b.len())),
    )?;
    let exact = call(P, store.read(&a, 96))?;
    require(P, exact.is_some_and(|b| b.len() == 96), "at the limit")
}

/// `list_tiles` finds full and partial tiles by family and index range;
/// `remove_tiles` removes them (absent ones are fine).
pub fn listing_and_removal_find_tiles_by_index(store: &dyn Store) -> Check {
    const P: &str = "tiles are listed by index range";
    let keys = [
        tile(0, 999, 0)?,
        tile(0, 1000, 7)?,
        tile(0, 1000, 0)?,
        tile(0, 2001, 1)?,
        tile(1, 1000, 0)?,
    ];
    let objects: Vec<(TileKey, Vec<u8>)> = keys.iter().map(|k| (*k, vec![0u8; 32])).collect();
    call(P, store.create_tiles(&objects))?;
    let mut got = call(P, store.list_tiles(Family::Hashes(0), 1000, 2001))?;
    got.sort();
    let mut want = vec![keys[1], keys[2], keys[3]];
    want.sort();
    require(P, got == want, (&got, &want))?;
    let none = call(P, store.list_tiles(Family::Entries, 0, 10))?;
    require(P, none.is_empty(), &none)?;
    call("removal", store.remove_tiles(&[keys[1], keys[3], keys[3]]))?;
    let left = call(P, store.list_tiles(Family::Hashes(0), 0, 3000))?;
    require(
        "removed tiles are gone",
        left.len() == 3 && !left.contains(&keys[1]),
        &left,
    )?;
    let gone = call(P, store.read(&PublicKey::Tile(keys[1]), 64))?;
    require(
        "removed tiles are gone",
        gone.is_none(),
        "read after remove",
    )
}

/// The checkpoint changes only from the version read (compare-and-swap).
pub fn checkpoint_changes_by_compare_and_swap(store: &dyn Store) -> Check {
    const P: &str = "the checkpoint changes by compare-and-swap";
    let v1 = call(P, store.replace_checkpoint(None, b"one\n"))?;
    let again = store.replace_checkpoint(None, b"two\n");
    moved("create-if-absent fails when present", &again)?;
    checkpoint_is(store, P, b"one\n", &v1)?;
    let v2 = call(P, store.replace_checkpoint(Some(&v1), b"two\n"))?;
    let stale = store.replace_checkpoint(Some(&v1), b"three\n");
    moved("a stale version is refused", &stale)?;
    checkpoint_is(store, P, b"two\n", &v2)?;
    let plain = call(P, store.read(&PublicKey::Checkpoint, 1024))?;
    require(
        "the checkpoint is a public object",
        plain.as_deref() == Some(b"two\n".as_slice()),
        &plain,
    )
}

/// A checkpoint replacement refused because the checkpoint moved.
fn moved(property: &'static str, replaced: &Result<Version, StoreError>) -> Check {
    let ok = matches!(replaced, Err(StoreError::CheckpointMoved));
    require(property, ok, replaced)
}

/// The checkpoint reads as `bytes` at `version`.
fn checkpoint_is(
    store: &dyn Store,
    property: &'static str,
    bytes: &[u8],
    version: &Version,
) -> Check {
    let read = call(property, store.read_checkpoint(1024))?;
    require(
        property,
        read.as_ref()
            .is_some_and(|r| r.bytes == bytes && &r.version == version),
        &read,
    )
}

/// Private objects: absent, written, replaced whole, listed, removed;
/// never public.
pub fn private_objects_are_replaced_whole(store: &dyn Store) -> Check {
    const P: &str = "private objects are replaced whole";
    let k = PrivateKey::Checkpoint(5);
    require(
        P,
        call(P, store.read_private(&k, 64))?.is_none(),
        "absent at first",
    )?;
    call(P, store.write_private(&k, b"first version"))?;
    call(P, store.write_private(&k, b"second"))?;
    let got = call(P, store.read_private(&k, 64))?;
    require(P, got.as_deref() == Some(b"second".as_slice()), &got)?;
    let capped = store.read_private(&k, 5);
    require(
        "private reads are capped",
        matches!(capped, Err(StoreError::TooLarge { .. })),
        &capped,
    )?;
    call(P, store.write_private(&PrivateKey::Settings, b"{}"))?;
    let listed = call(P, store.list_private(PrivateDir::Checkpoints))?;
    require(
        "listing names the private objects",
        listed == vec![k.clone()],
        &listed,
    )?;
    call(
        P,
        store.remove_private(&[k.clone(), PrivateKey::Checkpoint(6)]),
    )?;
    require(P, call(P, store.read_private(&k, 64))?.is_none(), "removed")?;
    let listed = call(P, store.list_private(PrivateDir::Checkpoints))?;
    require("listing after removal", listed.is_empty(), &listed)
}

/// A staged object is invisible until installed, then read back at offsets.
pub fn staged_objects_are_named_when_installed(store: &dyn Store) -> Check {
    const P: &str = "staged objects are named when installed";
    let key = PrivateKey::DedupRun { first: 0, end: 4 };
    let mut w = call(P, store.stage_private())?;
    call(P, w.write_at(b"world", 6))?;
    call(P, w.write_at(b"hello ", 0))?;
    let staged = call(P, w.finish())?;
    require(
        P,
        call(P, store.open_private(&key))?.is_none(),
        "visible before install",
    )?;
    call(P, store.install_private(staged, &key))?;
    let r = call(P, store.open_private(&key))?.ok_or_else(|| broken(P, "absent after install"))?;
    require(P, r.len() == 11, r.len())?;
    let mut buf = [0u8; 5];
    call(P, r.read_exact_at(&mut buf, 6))?;
    require(P, &buf == b"world", buf)?;
    let mut past = [0u8; 8];
    require(
        "reads past the end fail",
        r.read_exact_at(&mut past, 6).is_err(),
        "read past end",
    )?;
    let listed = call(P, store.list_private(PrivateDir::Dedup))?;
    require(P, listed == vec![key.clone()], &listed)?;
    call(P, store.remove_private(&[key]))?;
    call("staging is cleared", store.clear_staging())
}

/// One writer at a time: a second `lock(false)` fails with `Locked`
/// until the first is dropped.
pub fn one_writer_holds_the_lock(store: &dyn Store) -> Check {
    const P: &str = "one writer holds the lock";
    let held = call(P, store.lock(false))?;
    call(P, held.check())?;
    let second = store.lock(false);
    require(
        P,
        matches!(second, Err(StoreError::Locked { .. })),
        second.map(|_| "taken twice"),
    )?;
    drop(held);
    let again = call("a dropped lock is free", store.lock(false))?;
    drop(again);
    Ok(())
}
