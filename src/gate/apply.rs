//! apply: `rcpt gate apply PATCH` (spec/gate.md "The apply protocol").
//!
//! In the seeds' order: the patch is applied in a clean copy (never the
//! work tree), which gives the change (every touched path and its new
//! digest, `change_id`); every pre-image and post-image is stored in the
//! store and the transition record stored, read back and checked
//! (`inverse_delta_id`); the policy's checks run in that clean copy; on
//! deny nothing is written; on admit the receipt is signed, then
//! [`execute`] writes the files under the journal with a compare and swap
//! over every one of them.

use super::approval::Candidate;
use super::change::{Change, FileChange, Status};
use super::check::{file_size, fits_resources, rules_of, run_checks_in, start_rules};
use super::clean::CleanTree;
use super::conclude::{Concluded, Findings, conclude};
use super::error::GateError;
use super::git::WorkTree;
use super::inverse::{Record, Side, Transition};
use super::issue::{Signed, Signer, sign};
use super::journal::{self, Entry, Locked};
use super::policy::Policy;
use super::rules::{Evaluator, RuleOutcome, RulesError, Started, input};
use super::store::GateStore;
use crate::digest::{Algorithm, Digest};
use crate::fresh::HEAD;
use crate::limits::{MAX_CHANGE_FILE_BYTES, MAX_GATE_PATCH_BYTES, MAX_GATE_PREIMAGE_BYTES};
use crate::receipt::{ReadItem, Receipt, Replay, Substrate, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// What to apply.
pub struct ApplyRequest<'a> {
    /// A directory inside the work tree.
    pub dir: &'a Path,
    /// The patch file.
    pub patch: &'a Path,
    /// The policy.
    pub policy: &'a Policy,
    /// The store, locked and recovered ([`journal::lock_and_recover`]).
    pub store: &'a Locked,
    /// Set by the caller's SIGINT/SIGTERM handler.
    pub interrupted: &'a AtomicBool,
    /// Who signs, and when.
    pub signer: Signer<'a>,
    /// Runs the policy's rules.
    pub evaluator: &'a Evaluator,
    /// Approvals offered (`--approval`); those the store keeps are added.
    pub approvals: &'a [Candidate],
    /// Called after each durable write step of [`execute`] with its number
    /// (crash trials stop the process there).
    pub crash: &'a dyn Fn(u32),
}

/// What `apply` or `undo` did.
#[derive(Debug)]
pub struct Outcome {
    /// The change's identity.
    pub change_id: Digest,
    /// The transition record (inverse) and its identity when it was kept.
    pub record: Record,
    /// `inverse_delta_id`.
    pub inverse: Option<Digest>,
    /// The receipt, signed.
    pub signed: Signed,
    /// Whether the work tree was written.
    pub applied: bool,
    /// The verdict, its evidence, the approvals judged.
    pub concluded: Concluded,
}

/// Apply `req.patch` if the policy admits it.
pub fn apply(req: &ApplyRequest<'_>) -> Result<Outcome, GateError> {
    // The evaluator compiles the rules while the patch is read and applied.
    let started = start_rules(req.policy, req.evaluator);
    let tree = super::change::work_tree(req.dir)?;
    let store = req.store.store();
    let current = super::change::read_change(&tree, HEAD)?;
    let clean = CleanTree::create(&tree, &current)?;
    let (record, change) = patched(req, &tree, &clean, &current)?;
    let (rules, inverse) =
        rules_and_inverse(req, started, (&tree, &clean), (&current, &change), &record)?;
    // Rules first: a rule denial means the checks do not run.
    let checks = match &rules {
        Some(r) if !r.deny.is_empty() => (Vec::new(), None),
        _ => run_checks_in(&clean, req.policy, store, req.interrupted)?,
    };
    drop(clean);
    let change_id = change.id();
    let untouched = read_set_untouched(&tree.top, &record, &req.policy.reads)?;
    let concluded = conclude(Findings {
        store,
        policy: req.policy,
        base: &current.base,
        change_id,
        rules,
        checks,
        read_set: &untouched,
        offered: req.approvals,
        top: &tree.top,
    })?;
    let admit = matches!(concluded.verdict, Verdict::Admit { .. });
    let read_set = match admit {
        true => read_set_written(&tree.top, &record, &req.policy.reads)?,
        false => untouched,
    };
    let receipt = Receipt {
        issuer: req.signer.issuer.to_string(),
        issued_at: req.signer.now,
        substrate: Substrate::Git,
        change_id,
        inverse_delta_id: inverse,
        reversibility: Some(inverse.is_some()),
        read_set,
        precondition: Some(precondition_of_transition(&record, inverse)),
        policy_id: req.policy.id,
        verdict: concluded.verdict.clone(),
        applied: admit,
        replay: Replay::DeterministicReplay,
    };
    let signed = sign(&receipt, req.signer.key)?;
    let id = concluded.evidence_id;
    match admit {
        true => write_admitted(store, &tree.top, &record, inverse, id, &signed, req.crash)?,
        false => store.link_receipt(&signed.valid.id, &id)?,
    }
    Ok(Outcome {
        change_id,
        record,
        inverse,
        signed,
        applied: admit,
        concluded,
    })
}

/// The rules' outcome (evaluated while the pre-images are kept) and the
/// inverse record's identity (`None`: irreversible, as the policy allows).
fn rules_and_inverse(
    req: &ApplyRequest<'_>,
    started: Result<Option<Started>, RulesError>,
    (tree, clean): (&WorkTree, &CleanTree),
    (current, change): (&Change, &Change),
    record: &Record,
) -> Result<(Option<RuleOutcome>, Option<Digest>), GateError> {
    let store = req.store.store();
    let (policy, signer) = (req.policy, req.signer);
    let (rules, inverse) = std::thread::scope(|scope| {
        let rules = scope.spawn(|| {
            rules_of(started, || {
                let files = input::files_of(change, |p| file_size(clean.path(), p));
                input::git_input(signer.issuer, signer.now, &current.base, true, &files)
            })
        });
        let inverse = keepable(store, &tree.top, clean.path(), record, policy)
            .and_then(|reversible| keep(store, &tree.top, clean.path(), record, reversible));
        (rules.join(), inverse)
    });
    let rules = rules.map_err(|_| GateError::RulesPanicked)??;
    Ok((rules, inverse?))
}

/// The patch read, copied beside the clean copy and applied there: its
/// transitions and its change (refused when its receipt would be too large).
fn patched(
    req: &ApplyRequest<'_>,
    tree: &WorkTree,
    clean: &CleanTree,
    current: &Change,
) -> Result<(Record, Change), GateError> {
    let bytes = crate::io::read_path(req.patch, MAX_GATE_PATCH_BYTES)
        .map_err(super::patch::PatchError::Read)?;
    let scratch = clean.scratch().map_err(GateError::Scratch)?;
    let patch_file = scratch.join("change.patch");
    crate::io::write_scratch(&patch_file, &bytes, 0o600).map_err(super::patch::PatchError::Copy)?;
    let (record, renamed) = transitions(&tree.top, clean.path(), &patch_file, current)?;
    let change = change_of(&record, &renamed);
    let post_paths: Vec<&str> = change.existing().map(|f| f.path.as_str()).collect();
    fits_resources(change.files.len(), post_paths, req.policy)?;
    Ok((record, change))
}

/// Write an admitted change: reversible, committed after the writes; else
/// (no pre-images kept) committed first, so only a roll forward remains.
fn write_admitted(
    store: &GateStore,
    top: &Path,
    record: &Record,
    inverse: Option<Digest>,
    evidence_id: Digest,
    signed: &Signed,
    crash: &dyn Fn(u32),
) -> Result<(), GateError> {
    let (record_id, link_first) = match inverse {
        Some(id) => (id, false),
        None => (
            record
                .store_checked(store, false, true)
                .map_err(journal::JournalError::from)?,
            true,
        ),
    };
    let plan = Plan {
        op: "apply",
        record,
        record_id,
        evidence_id,
        link_first,
    };
    execute(store, top, &plan, signed, crash)
}

/// The patch's transitions: every path it touches, its side in the user's
/// work tree (which must equal the clean copy's before the patch) and in
/// the clean copy after. Renamed paths are returned apart.
fn transitions(
    top: &Path,
    clean: &Path,
    patch: &Path,
    current: &Change,
) -> Result<(Record, BTreeSet<String>), GateError> {
    let base = current.base.as_str();
    let touches = super::patch::touched(clean, patch)?;
    let mut paths = BTreeSet::new();
    let mut renamed = BTreeSet::new();
    for t in &touches {
        if let Some(from) = &t.from {
            paths.insert(from.clone());
            renamed.insert(t.path.clone());
        }
        paths.insert(t.path.clone());
    }
    let mut pre = BTreeMap::new();
    for p in &paths {
        super::change::check_path(p)?;
        let mine = regular(top, p)?;
        if regular(clean, p)? != mine {
            return Err(GateError::Outside(p.clone()));
        }
        pre.insert(p.clone(), mine);
    }
    super::patch::apply_in(clean, patch)?;
    // `--numstat` names only the new path of a rename: the old one is a
    // tracked file the patch removed, found by git in the clean copy (its
    // bytes before were the base's, as in the work tree).
    for p in super::patch::changed_paths(clean)? {
        let known = pre.contains_key(&p) || current.files.iter().any(|f| f.path == p);
        if !known {
            super::change::check_path(&p)?;
            pre.insert(p.clone(), regular(top, &p)?);
        }
    }
    let mut files = Vec::with_capacity(pre.len());
    for (path, before) in pre {
        let after = regular(clean, &path)?;
        if after != before {
            files.push(Transition {
                path,
                pre: before,
                post: after,
            });
        }
    }
    if files.is_empty() {
        return Err(super::patch::PatchError::Empty.into());
    }
    Ok((
        Record {
            base: base.to_string(),
            files,
        },
        renamed,
    ))
}

/// [`journal::side_now`], refusing what is not a regular file.
fn regular(root: &Path, path: &str) -> Result<Option<Side>, GateError> {
    journal::side_now(root, path).map_err(|_| {
        super::patch::PatchError::BadPath {
            path: path.to_string(),
            why: "not a regular file (a symbolic link, a directory or a submodule): \
                  the gate writes regular files only"
                .into(),
        }
        .into()
    })
}

/// The change of a record: its paths, git's words, the new digests.
pub fn change_of(record: &Record, renamed: &BTreeSet<String>) -> Change {
    let files = record
        .files
        .iter()
        .map(|t| FileChange {
            path: t.path.clone(),
            status: match (t.pre, t.post) {
                (_, None) => Status::Deleted,
                (None, Some(_)) if renamed.contains(&t.path) => Status::Renamed,
                (None, Some(_)) => Status::Added,
                (Some(_), Some(_)) => Status::Modified,
            },
            digest: t.post.map(|s| s.digest),
            executable: t.post.is_some_and(|s| s.executable),
        })
        .collect();
    Change {
        base: record.base.clone(),
        files,
    }
}

/// Refuse pre-images over `MAX_GATE_PREIMAGE_BYTES`, or a store that would
/// pass `MAX_GATE_STORE_BYTES` with them (`used` bytes plus their sum).
pub fn store_limits(pre: &[(String, u64)], used: u64) -> Result<(), GateError> {
    use crate::limits::{MAX_GATE_PREIMAGE_BYTES, MAX_GATE_STORE_BYTES};
    if let Some((path, n)) = pre
        .iter()
        .find(|(_, n)| *n > MAX_GATE_PREIMAGE_BYTES as u64)
    {
        return Err(GateError::OverLimit(format!(
            "{path}: a pre-image of {n} bytes, over the limit of {MAX_GATE_PREIMAGE_BYTES} \
             (MAX_GATE_PREIMAGE_BYTES); a policy with \"allow_irreversible\": true issues \
             the receipt with reversibility false and no inverse"
        )));
    }
    let total = pre.iter().fold(used, |a, (_, n)| a.saturating_add(*n));
    if total > MAX_GATE_STORE_BYTES {
        return Err(GateError::OverLimit(format!(
            "the store would hold {total} bytes, over the limit of {MAX_GATE_STORE_BYTES} \
             (MAX_GATE_STORE_BYTES)"
        )));
    }
    Ok(())
}

/// Bytes on disk of `path` under `top` (0 when absent).
fn size_of(top: &Path, path: &str) -> u64 {
    std::fs::symlink_metadata(top.join(path)).map_or(0, |m| m.len())
}

/// Whether the pre-images can be kept: each at most
/// `MAX_GATE_PREIMAGE_BYTES`, and the store within `MAX_GATE_STORE_BYTES`
/// with them and the post-images. Over a limit: refused before anything is
/// written, unless the policy allows irreversible changes (then false).
/// The post-images (needed to finish an interrupted write) must fit in
/// any case.
fn keepable(
    store: &GateStore,
    top: &Path,
    clean: &Path,
    record: &Record,
    policy: &Policy,
) -> Result<bool, GateError> {
    let sizes = |root: &Path, pick: fn(&Transition) -> bool| -> Vec<(String, u64)> {
        record
            .files
            .iter()
            .filter(|t| pick(t))
            .map(|t| (t.path.clone(), size_of(root, &t.path)))
            .collect()
    };
    let pre = sizes(top, |t| t.pre.is_some());
    let post = sizes(clean, |t| t.post.is_some());
    let used = store.size()?;
    let post_total: u64 = post.iter().map(|(_, n)| n).sum();
    store_limits(&[], used.saturating_add(post_total))?;
    match store_limits(&pre, used.saturating_add(post_total)) {
        Ok(()) => Ok(true),
        Err(_) if policy.allow_irreversible => Ok(false),
        Err(e) => Err(e),
    }
}

/// Store the pre-images (when `reversible`) and the post-images, then the
/// record, read back and checked. Its identity when reversible.
fn keep(
    store: &GateStore,
    top: &Path,
    clean: &Path,
    record: &Record,
    reversible: bool,
) -> Result<Option<Digest>, GateError> {
    for t in &record.files {
        if let (Some(side), true) = (t.pre, reversible) {
            put_side(store, top, &t.path, side, MAX_GATE_PREIMAGE_BYTES)?;
        }
        if let Some(side) = t.post {
            put_side(store, clean, &t.path, side, MAX_CHANGE_FILE_BYTES)?;
        }
    }
    if !reversible {
        return Ok(None);
    }
    let id = record
        .store_checked(store, true, true)
        .map_err(journal::JournalError::from)?;
    Ok(Some(id))
}

/// Read `path` under `top` (at most `limit` bytes), check it is `side`, store it.
pub fn put_side(
    store: &GateStore,
    top: &Path,
    path: &str,
    side: Side,
    limit: usize,
) -> Result<(), GateError> {
    let mut batch = crate::io::Batch::new();
    store.put_in(&mut batch, &read_side(top, path, side, limit)?)?;
    batch
        .commit()
        .map_err(|e| GateError::Store(crate::gate::store::StoreError::Write(e)))
}

/// The bytes of `path` under `top` (at most `limit`), when they are still
/// `side` (else [`GateError::Moved`]).
pub fn read_side(top: &Path, path: &str, side: Side, limit: usize) -> Result<Vec<u8>, GateError> {
    let bytes = crate::io::read_path(&top.join(path), limit).map_err(|source| {
        journal::JournalError::Read {
            path: path.to_string(),
            source,
        }
    })?;
    if crate::digest::Digest::blake3(&bytes) != side.digest {
        return Err(GateError::Moved(path.to_string()));
    }
    Ok(bytes)
}

/// The read set once the change is written: every file it leaves (its new
/// digest), `HEAD`, and the policy's reads (read now; a touched one at its
/// new digest).
pub fn read_set_written(
    top: &Path,
    record: &Record,
    reads: &[String],
) -> Result<Vec<ReadItem>, GateError> {
    let mut items: BTreeMap<String, Digest> = BTreeMap::new();
    let touched: BTreeSet<&str> = record.files.iter().map(|t| t.path.as_str()).collect();
    let mut others: Vec<String> = reads
        .iter()
        .filter(|r| !touched.contains(r.as_str()))
        .cloned()
        .collect();
    others.push(HEAD.to_string());
    others.sort();
    others.dedup();
    for i in crate::fresh::read_set(top, Substrate::Git, Algorithm::Blake3, &others)? {
        items.insert(i.resource, i.digest);
    }
    for t in &record.files {
        if let Some(s) = t.post {
            items.insert(t.path.clone(), s.digest);
        }
    }
    Ok(items
        .into_iter()
        .map(|(resource, digest)| ReadItem { resource, digest })
        .collect())
}

/// The read set now (nothing written): the touched files that exist, `HEAD`, the reads.
fn read_set_untouched(
    top: &Path,
    record: &Record,
    reads: &[String],
) -> Result<Vec<ReadItem>, GateError> {
    let mut resources: Vec<String> = record
        .files
        .iter()
        .filter(|t| t.pre.is_some())
        .map(|t| t.path.clone())
        .collect();
    resources.push(HEAD.to_string());
    resources.extend(reads.iter().cloned());
    resources.sort();
    resources.dedup();
    Ok(crate::fresh::read_set(
        top,
        Substrate::Git,
        Algorithm::Blake3,
        &resources,
    )?)
}

/// `precondition` of apply and undo: the identity of `{"base", "inverse",
/// "pre": [{"path", "digest" or null}]}`, what the compare and swap requires.
pub fn precondition_of_transition(record: &Record, inverse: Option<Digest>) -> Digest {
    use crate::receipt::canonical::{Value, dagcbor, identity};
    let pre = record
        .files
        .iter()
        .map(|t| {
            let d = t
                .pre
                .map_or(Value::Null, |s| Value::Text(s.digest.to_string()));
            Value::Map(BTreeMap::from([
                ("path".to_string(), Value::Text(t.path.clone())),
                ("digest".to_string(), d),
            ]))
        })
        .collect();
    let inv = inverse.map_or(Value::Null, |d| Value::Text(d.to_string()));
    identity(&dagcbor::encode(&Value::Map(BTreeMap::from([
        ("base".to_string(), Value::Text(record.base.clone())),
        ("inverse".to_string(), inv),
        ("pre".to_string(), Value::Array(pre)),
    ]))))
}

/// How [`execute`] writes one change.
pub struct Plan<'a> {
    /// `apply` or `undo`.
    pub op: &'static str,
    /// The transition to make (`pre` → `post`).
    pub record: &'a Record,
    /// Its identity (objects of both sides in the store).
    pub record_id: Digest,
    /// What the receipt pointer names (the evidence record).
    pub evidence_id: Digest,
    /// Commit (the receipt pointer) before the writes: an irreversible
    /// change can only be rolled forward.
    pub link_first: bool,
}

/// Write a change under the journal: journal (step 1), compare and swap
/// over every file, the files one by one, the receipt pointer (the commit
/// point; before the files when `link_first`), the journal removed.
pub fn execute(
    store: &GateStore,
    top: &Path,
    plan: &Plan<'_>,
    signed: &Signed,
    crash: &dyn Fn(u32),
) -> Result<(), GateError> {
    let envelope = store.put(signed.envelope.to_json().as_bytes())?;
    let entry = Entry {
        op: plan.op.to_string(),
        top: top.to_path_buf(),
        record: plan.record_id,
        receipt: signed.valid.id,
        envelope,
    };
    let mut n = 0u32;
    let mut tick = || {
        n += 1;
        crash(n);
    };
    entry.write(store)?;
    tick();
    if let Err(e) = journal::check_pre(top, plan.record) {
        journal::clear(store)?;
        return Err(e.into());
    }
    if plan.link_first {
        store.link_receipt(&signed.valid.id, &plan.evidence_id)?;
        tick();
    }
    let (_, conflicts) = match journal::reach(store, top, plan.record, &mut tick) {
        Ok(r) => r,
        Err(e) if !plan.link_first => {
            // A write failed (no space, permissions): put back what was
            // written; if even that fails, the journal stays for the next
            // gate command.
            let back = plan.record.swapped(&plan.record.base);
            if journal::reach(store, top, &back, &mut || {}).is_ok() {
                journal::clear(store)?;
            }
            return Err(e.into());
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(first) = conflicts.first().filter(|_| !plan.link_first) {
        // Edited between the compare and the write: put back what was written.
        let back = plan.record.swapped(&plan.record.base);
        journal::reach(store, top, &back, &mut || {})?;
        journal::clear(store)?;
        return Err(journal::JournalError::Mismatch {
            path: first.clone(),
            why: "edited while the change was being written; the change was rolled back".into(),
        }
        .into());
    }
    if !plan.link_first {
        store.link_receipt(&signed.valid.id, &plan.evidence_id)?;
        tick();
    }
    journal::clear(store)?;
    tick();
    Ok(())
}
