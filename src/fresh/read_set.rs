//! read_set: a read set made now (sorted, each resource once) and a
//! recorded one checked item by item (spec/gate.md "Freshness").

use super::git::RefError;
use super::resource::{Reader, ResourceError};
use crate::digest::Algorithm;
use crate::limits::MAX_READ_SET_ITEMS;
use crate::receipt::{ReadItem, Substrate};
use std::path::Path;

/// Why a whole read set could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadSetError {
    /// One resource failed.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// A resource was named twice.
    #[error("{0:?} is named twice; a read set holds each resource once")]
    Duplicate(String),
    /// More resources than a receipt may carry.
    #[error("{count} resources, over the limit of {MAX_READ_SET_ITEMS}")]
    TooMany {
        /// How many were given.
        count: usize,
    },
}

/// The `read_set` of `resources` read now: sorted bytewise by resource,
/// each named once (receipt invariant 4).
pub fn read_set(
    root: &Path,
    substrate: Substrate,
    alg: Algorithm,
    resources: &[String],
) -> Result<Vec<ReadItem>, ReadSetError> {
    if resources.len() > MAX_READ_SET_ITEMS {
        return Err(ReadSetError::TooMany {
            count: resources.len(),
        });
    }
    let mut sorted: Vec<&String> = resources.iter().collect();
    sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    if let Some(w) = sorted.windows(2).find(|w| w.first() == w.get(1)) {
        let dup = w.first().map(|s| s.to_string()).unwrap_or_default();
        return Err(ReadSetError::Duplicate(dup));
    }
    let reader = Reader::new(root, substrate);
    sorted
        .into_iter()
        .map(|resource| {
            let digest = reader.digest(resource, alg)?;
            Ok(ReadItem {
                resource: resource.clone(),
                digest,
            })
        })
        .collect()
}

/// What re-reading one recorded item found.
#[derive(Debug)]
pub enum ItemState {
    /// Same digest as recorded.
    Fresh,
    /// Different digest, absent, or no longer a file under ROOT: every
    /// stale item, said in read-set order.
    Stale(String),
    /// Could not be examined (permissions, unsupported substrate or ref
    /// storage, a git receipt's ROOT that is no git work tree): not
    /// evaluated.
    Unknown(String),
}

/// The state of a receipt's read set under `root`: any stale item fails
/// it, and every stale item is named; else the first item that could not
/// be examined makes it not evaluated; else fresh.
///
/// When ROOT looks like the wrong directory the message says so: a `git`
/// receipt whose ROOT is no git work tree is not evaluated (nothing under
/// it can be told stale or fresh); a read set of which no item exists under
/// ROOT is still stale, as a missing file is, but said to be that.
pub fn check_read_set(root: &Path, substrate: Substrate, items: &[ReadItem]) -> ItemState {
    let reader = Reader::new(root, substrate);
    let mut unknown = None;
    let mut stale = Vec::new();
    let mut missing = 0usize;
    for item in items {
        match reader.digest(&item.resource, item.digest.algorithm) {
            Ok(now) if now == item.digest => {}
            Ok(now) => stale.push(format!(
                "{} changed: recorded {}, now {now}",
                item.resource, item.digest
            )),
            Err(e) if e.is_stale() => {
                missing += usize::from(matches!(e, ResourceError::Missing(_)));
                stale.push(e.to_string());
            }
            Err(e) => {
                unknown.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let not_a_work_tree = matches!(reader.repo, Some(Err(RefError::NotARepository(_))));
    if not_a_work_tree && (unknown.is_some() || !stale.is_empty()) {
        return ItemState::Unknown(format!(
            "ROOT {} looks wrong: it is not a git work tree (no .git), and the receipt's \
             substrate is git; give --fresh the work tree the receipt was made in",
            root.display()
        ));
    }
    if missing == items.len() && missing > 1 {
        return ItemState::Stale(format!(
            "none of the {missing} items exists under {}: ROOT looks wrong (give --fresh \
             the tree the receipt was made in), or every item is gone",
            root.display()
        ));
    }
    match (stale.len(), unknown) {
        (0, Some(why)) => ItemState::Unknown(why),
        (0, None) => ItemState::Fresh,
        (1, _) => ItemState::Stale(stale.join("")),
        (n, _) => ItemState::Stale(format!("{n} items: {}", stale.join("; "))),
    }
}
