//! gate: receipts from real work in a git work tree (spec/gate.md).
//!
//! The issuing side, in the order the seeds ask for: identify the change
//! ([`change`]), run the policy's checks ([`policy`]) in a clean worktree
//! ([`clean`], [`run`]), keep their evidence in the store ([`store`],
//! [`evidence`]), decide (admit, deny, or no verdict), and build the
//! receipt whose read set pins what was tested. The gate runs `git` and the
//! checks as processes; the verifier ([`crate::verify`]) never imports it.
//!
//! Three outcomes apart: [`Decision`] carries a verdict (admit or deny);
//! a check that could not run, a change that cannot be identified, or a
//! store that cannot hold the evidence is a [`GateError`]: no verdict.

pub mod apply;
pub mod change;
pub mod clean;
pub mod evidence;
pub mod git;
pub mod inverse;
pub mod journal;
pub mod park;
pub mod patch;
pub mod policy;
pub mod run;
pub mod store;
pub mod undo;

use crate::digest::{Algorithm, Digest};
use crate::fresh::{HEAD, ReadSetError};
use crate::keys::{KeyError, NoteVerifier, SigningKey};
use crate::receipt::canonical::{Value, dagcbor, identity};
use crate::receipt::dsse::Envelope;
use crate::receipt::{
    PayloadError, ReadItem, Receipt, Replay, Substrate, ValidPayload, Verdict, payload_from_cbor,
};
use change::{Change, ChangeError};
use clean::{CleanError, CleanTree};
use evidence::{Evidence, EvidenceError};
use git::WorkTree;
use policy::Policy;
use run::NotRun;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use store::{GateStore, StoreError};

/// Why the gate reached no verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The change could not be identified.
    #[error(transparent)]
    Change(#[from] ChangeError),
    /// The clean worktree could not be made.
    #[error(transparent)]
    Clean(#[from] CleanError),
    /// A check could not run.
    #[error(transparent)]
    NotRun(#[from] NotRun),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The read set could not be made.
    #[error("making the read set")]
    ReadSet(#[from] ReadSetError),
    /// The receipt could not be built (too large, or an invariant).
    #[error("building the receipt")]
    Payload(#[from] PayloadError),
    /// The work tree moved while the checks ran.
    #[error(
        "{0} changed while the checks ran; the receipt would not describe what was tested: run again"
    )]
    Moved(String),
    /// The receipt could not carry the read set of this change.
    #[error(
        "the change has {files} files: its receipt's read set would make a payload of about \
         {bytes} bytes, over the limit of {max}; gate a smaller change",
        max = crate::limits::MAX_PAYLOAD_BYTES
    )]
    TooLarge {
        /// Files in the change.
        files: usize,
        /// The estimated payload size.
        bytes: usize,
    },
    /// Interrupted between checks.
    #[error("interrupted (SIGINT or SIGTERM); the clean worktree was removed")]
    Interrupted,
    /// The private scratch directory failed.
    #[error("preparing the capture directory")]
    Scratch(#[source] std::io::Error),
    /// The patch could not be read or does not apply.
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
    /// Writing the change (journal, compare and swap, files) failed.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// A touched path is in the work tree but not in the clean copy.
    #[error(
        "{0}: the patch touches a path whose file in the work tree is not part of the change \
         the gate can copy (an ignored file?); nothing was written"
    )]
    Outside(String),
    /// The change is over a limit of the store.
    #[error("{0}; nothing was written")]
    OverLimit(String),
    /// Refused: the receipt cannot be undone, or the like.
    #[error("refused: {0}")]
    Refused(String),
}

impl GateError {
    /// True when the cause is how the gate was called (exit 2), not an
    /// evaluation that could not be completed (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(self, GateError::Change(e) if e.is_usage())
            || matches!(self, GateError::Patch(patch::PatchError::Read(_)))
    }

    /// True when the gate refused to write (exit 1): a file that is not
    /// what was decided on (the compare and swap), a receipt it will not
    /// undo.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            GateError::Refused(_) | GateError::Journal(journal::JournalError::Mismatch { .. })
        )
    }
}

/// Who signs a receipt, and when.
#[derive(Clone, Copy)]
pub struct Signer<'a> {
    /// The gate key.
    pub key: &'a SigningKey,
    /// Its name (the receipt's issuer).
    pub issuer: &'a str,
    /// `issued_at`.
    pub now: i64,
}

impl std::fmt::Debug for Signer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("issuer", &self.issuer)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// A receipt encoded, checked (schema, the five invariants, size) and signed.
#[derive(Debug)]
pub struct Signed {
    /// The payload and its id.
    pub valid: ValidPayload,
    /// The DSSE envelope.
    pub envelope: Envelope,
}

/// Encode, check and sign `receipt`: a receipt that breaks an invariant
/// (such as `reversibility` true with a null inverse) is never signed.
pub fn sign(receipt: &Receipt, key: &SigningKey) -> Result<Signed, GateError> {
    let bytes = dagcbor::encode(&receipt.to_value());
    let valid = payload_from_cbor(&bytes)?;
    let envelope = Envelope::sign(
        crate::constants::RECEIPT_PAYLOAD_TYPE,
        valid.bytes.clone(),
        key,
    );
    Ok(Signed { valid, envelope })
}

/// Refuse pre-images over `MAX_GATE_PREIMAGE_BYTES`, or a store that would
/// pass `MAX_GATE_STORE_BYTES` with them (`used` bytes plus their sum).
pub fn limits_check(pre: &[(String, u64)], used: u64) -> Result<(), GateError> {
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

/// What to evaluate.
#[derive(Debug)]
pub struct Request<'a> {
    /// A directory inside the work tree.
    pub dir: &'a Path,
    /// The base revision (`HEAD` by default).
    pub base: &'a str,
    /// The policy.
    pub policy: &'a Policy,
    /// The store directory; default `<git common dir>/rcpt/store`.
    pub store: Option<&'a Path>,
    /// Set by the caller's SIGINT/SIGTERM handler.
    pub interrupted: &'a AtomicBool,
}

/// A verdict and everything the receipt says about it.
#[derive(Debug)]
pub struct Decision {
    /// The work tree.
    pub tree: WorkTree,
    /// The change evaluated.
    pub change: Change,
    /// Its identity.
    pub change_id: Digest,
    /// The evidence.
    pub evidence: Evidence,
    /// The evidence record's identity (the admit proof).
    pub evidence_id: Digest,
    /// Admit or deny.
    pub verdict: Verdict,
    /// The read set, read after the checks.
    pub read_set: Vec<ReadItem>,
    /// Identity of `{"base", "read_set"}`.
    pub precondition: Digest,
    /// The store holding the evidence.
    pub store: GateStore,
}

/// The work tree at `dir` and its change against `base` (`rcpt gate id`).
pub fn identify(dir: &Path, base: &str) -> Result<(WorkTree, Change), ChangeError> {
    let tree = change::work_tree(dir)?;
    let change = change::read_change(&tree, base)?;
    Ok((tree, change))
}

/// The store of `tree`: `dir`, or `<git common dir>/rcpt/store`.
pub fn default_store(tree: &WorkTree) -> PathBuf {
    tree.common_dir.join("rcpt").join("store")
}

/// Identify the change, run the policy's checks in a clean worktree, keep
/// the evidence, decide.
pub fn evaluate(req: &Request<'_>) -> Result<Decision, GateError> {
    let (tree, change) = identify(req.dir, req.base)?;
    let head = tree.commit(HEAD).map_err(ChangeError::from)?;
    fits(&change, req.policy)?;
    let store = GateStore::open(
        &req.store
            .map_or_else(|| default_store(&tree), Path::to_path_buf),
    )?;
    let (checks, failed) = run_checks(&tree, &change, req, &store)?;
    let change_id = change.id();
    let evidence = Evidence {
        base: change.base.clone(),
        change_id,
        policy_id: req.policy.id,
        policy: req.policy.name.clone(),
        checks,
    };
    let evidence_id = store.put_record(&evidence.to_value())?;
    let verdict = verdict_of(failed, evidence_id);
    let read_set = read_set_after(&tree, &change, head.as_deref(), &req.policy.reads)?;
    let precondition = precondition(&change.base, &read_set);
    Ok(Decision {
        tree,
        change,
        change_id,
        evidence,
        evidence_id,
        verdict,
        read_set,
        precondition,
        store,
    })
}

/// Admit with the evidence as proof, or deny naming the failed check.
pub fn verdict_of(failed: Option<String>, evidence_id: Digest) -> Verdict {
    match failed {
        None => Verdict::Admit { proof: evidence_id },
        Some(name) => Verdict::Deny {
            reasons: vec![format!("check.{name}.failed")],
        },
    }
}

/// Refuse, before any check runs, a change whose receipt would be over
/// the payload limit: the receipt with this read set (digests of the same
/// length) and the longest verdict this policy can give.
fn fits(change: &Change, policy: &Policy) -> Result<(), GateError> {
    let resources: Vec<&str> = change.existing().map(|f| f.path.as_str()).collect();
    fits_resources(change.files.len(), resources, policy)
}

/// [`fits`] for a receipt whose read set holds `resources` (and `HEAD`
/// and the policy's reads), with an inverse.
pub fn fits_resources<'a>(
    files: usize,
    mut resources: Vec<&'a str>,
    policy: &'a Policy,
) -> Result<(), GateError> {
    let placeholder = Digest::blake3(b"");
    resources.push(HEAD);
    resources.extend(policy.reads.iter().map(String::as_str));
    resources.sort_unstable();
    resources.dedup();
    let longest = policy
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    let receipt = Receipt {
        issuer: "x".repeat(crate::limits::MAX_TEXT_BYTES.min(256)),
        issued_at: crate::receipt::canonical::MAX_SAFE_INTEGER,
        substrate: Substrate::Git,
        change_id: placeholder,
        inverse_delta_id: Some(placeholder),
        reversibility: Some(true),
        read_set: resources
            .iter()
            .map(|r| ReadItem {
                resource: (*r).to_string(),
                digest: placeholder,
            })
            .collect(),
        precondition: Some(placeholder),
        policy_id: placeholder,
        verdict: Verdict::Deny {
            reasons: vec![format!("check.{}.failed", "x".repeat(longest.max(64)))],
        },
        applied: false,
        replay: Replay::DeterministicReplay,
    };
    let bytes = dagcbor::encode(&receipt.to_value()).len();
    if bytes > crate::limits::MAX_PAYLOAD_BYTES {
        return Err(GateError::TooLarge { files, bytes });
    }
    Ok(())
}

/// The checks in order in a clean worktree, stopping at the first failure
/// (its name). The worktree is removed before this returns, whatever happens.
fn run_checks(
    tree: &WorkTree,
    change: &Change,
    req: &Request<'_>,
    store: &GateStore,
) -> Result<(Vec<run::Ran>, Option<String>), GateError> {
    let clean = CleanTree::create(tree, change)?;
    run_checks_in(&clean, req.policy, store, req.interrupted)
}

/// The checks of `policy` in order in `clean`, stopping at the first
/// failure (its name).
pub fn run_checks_in(
    clean: &CleanTree,
    policy: &Policy,
    store: &GateStore,
    interrupted: &AtomicBool,
) -> Result<(Vec<run::Ran>, Option<String>), GateError> {
    let scratch = clean.scratch().map_err(GateError::Scratch)?;
    let mut ran = Vec::new();
    for (i, check) in policy.checks.iter().enumerate() {
        if interrupted.load(Ordering::SeqCst) {
            return Err(GateError::Interrupted);
        }
        let r = run::run_check(check, clean.path(), &scratch, i, store, interrupted)?;
        let passed = r.exit == 0;
        ran.push(r);
        if !passed {
            return Ok((ran, Some(check.name.clone())));
        }
    }
    Ok((ran, None))
}

/// The read set, read now: every file of the change that exists, `HEAD`,
/// the policy's reads. Each changed file must still have the digest the
/// change recorded, each deleted one must still be absent, and `HEAD` must
/// be where it was: else the receipt would not describe what was tested.
fn read_set_after(
    tree: &WorkTree,
    change: &Change,
    head: Option<&str>,
    reads: &[String],
) -> Result<Vec<ReadItem>, GateError> {
    let mut resources: Vec<String> = change.existing().map(|f| f.path.clone()).collect();
    resources.push(HEAD.to_string());
    resources.extend(reads.iter().cloned());
    resources.sort();
    resources.dedup();
    let items = crate::fresh::read_set(&tree.top, Substrate::Git, Algorithm::Blake3, &resources)?;
    let found: BTreeMap<&str, &Digest> = items
        .iter()
        .map(|i| (i.resource.as_str(), &i.digest))
        .collect();
    for f in &change.files {
        let now = found.get(f.path.as_str()).copied();
        let gone = f.digest.is_none() && std::fs::symlink_metadata(tree.top.join(&f.path)).is_ok();
        if (f.digest.is_some() && now != f.digest.as_ref()) || gone {
            return Err(GateError::Moved(f.path.clone()));
        }
    }
    let head_now = found.get(HEAD).copied();
    if head.map(|h| Digest::blake3(h.as_bytes())).as_ref() != head_now {
        return Err(GateError::Moved(HEAD.to_string()));
    }
    Ok(items)
}

/// `precondition`: identity of `{"base": oid, "read_set": [...]}`.
pub fn precondition(base: &str, read_set: &[ReadItem]) -> Digest {
    let items = read_set
        .iter()
        .map(|i| {
            Value::Map(BTreeMap::from([
                ("resource".to_string(), Value::Text(i.resource.clone())),
                ("digest".to_string(), Value::Text(i.digest.to_string())),
            ]))
        })
        .collect();
    let value = Value::Map(BTreeMap::from([
        ("base".to_string(), Value::Text(base.to_string())),
        ("read_set".to_string(), Value::Array(items)),
    ]));
    identity(&dagcbor::encode(&value))
}

impl Decision {
    /// The receipt of this decision (`applied` false, no inverse).
    pub fn receipt(&self, issuer: &str, issued_at: i64) -> Receipt {
        Receipt {
            issuer: issuer.to_string(),
            issued_at,
            substrate: Substrate::Git,
            change_id: self.change_id,
            inverse_delta_id: None,
            reversibility: None,
            read_set: self.read_set.clone(),
            precondition: Some(self.precondition),
            policy_id: self.evidence.policy_id,
            verdict: self.verdict.clone(),
            applied: false,
            replay: Replay::DeterministicReplay,
        }
    }
}

/// Encode, check (schema, invariants, size) and sign `receipt`; remember in
/// `store` that it rests on `record`.
pub fn issue(
    receipt: &Receipt,
    key: &SigningKey,
    store: &GateStore,
    record: &Digest,
) -> Result<(ValidPayload, Envelope), GateError> {
    let Signed { valid, envelope } = sign(receipt, key)?;
    store.link_receipt(&valid.id, record)?;
    Ok((valid, envelope))
}

/// Why the gate key has no usable name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IssuerError {
    /// No `.vkey` and no `--issuer`.
    #[error(
        "the gate key has no name: put its verifier key line NAME+HASH+KEY beside it as {0} \
         (the `verifier key:` line of `rcpt key show --name NAME GATE.pub`), \
         or pass --issuer NAME"
    )]
    Unnamed(PathBuf),
    /// `--issuer` differs from the `.vkey`'s name.
    #[error("--issuer {given:?} does not match the name {vkey:?} in {path}")]
    Mismatch {
        /// The flag.
        given: String,
        /// The `.vkey`'s name.
        vkey: String,
        /// The `.vkey`.
        path: PathBuf,
    },
    /// The `.vkey` is for another key.
    #[error("{0} is the verifier key of another key than the gate key")]
    OtherKey(PathBuf),
    /// The `.vkey` cannot be read.
    #[error("reading {path}")]
    Vkey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// `--issuer` is not a valid key name.
    #[error("--issuer {0:?}: a key name is non-empty, without spaces or '+'")]
    BadName(String),
}

/// The issuer name of the gate key at `key_path`: the name in the `.vkey`
/// beside it (same prefix), or `given`, which must then match that `.vkey`.
pub fn issuer_name(
    key_path: &Path,
    key: &SigningKey,
    given: Option<&str>,
) -> Result<String, IssuerError> {
    let vkey_path = key_path.with_extension("vkey");
    let vkey = match crate::keys::read_key_file(&vkey_path) {
        Ok(text) => Some(
            NoteVerifier::parse(&text).map_err(|source| IssuerError::Vkey {
                path: vkey_path.clone(),
                source,
            })?,
        ),
        Err(KeyError::File(e)) if e.is_bad_path() && !vkey_path.exists() => None,
        Err(source) => {
            return Err(IssuerError::Vkey {
                path: vkey_path,
                source,
            });
        }
    };
    match (vkey, given) {
        (Some(v), _) if v.key != key.verifying_key() => Err(IssuerError::OtherKey(vkey_path)),
        (Some(v), Some(g)) if v.name != g => Err(IssuerError::Mismatch {
            given: g.to_string(),
            vkey: v.name,
            path: vkey_path,
        }),
        (Some(v), _) => Ok(v.name),
        (None, Some(g)) if crate::keys::is_valid_key_name(g) => Ok(g.to_string()),
        (None, Some(g)) => Err(IssuerError::BadName(g.to_string())),
        (None, None) => Err(IssuerError::Unnamed(vkey_path)),
    }
}

/// Why `gate show` cannot show a receipt's evidence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShowError {
    /// The store has no record for the receipt.
    #[error("this store holds no evidence for receipt {0} (was it issued with another --store?)")]
    Unknown(Digest),
    /// The store failed or an object is corrupt.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record is not evidence.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// The evidence does not belong to the receipt.
    #[error("the stored evidence does not match the receipt: {0}")]
    Mismatch(String),
}

/// What `gate show` prints: the evidence record, its identity, and each
/// check's stdout and stderr, all re-hashed.
#[derive(Debug)]
pub struct Shown {
    /// The record's identity.
    pub id: Digest,
    /// The record.
    pub evidence: Evidence,
    /// (stdout, stderr) of each check, in order.
    pub outputs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The evidence of `receipt` (id `receipt_id`) and every output it names,
/// each object re-hashed; the evidence must name the receipt's change and
/// policy, and be an admit receipt's proof.
pub fn show(store: &GateStore, receipt: &Receipt, receipt_id: &Digest) -> Result<Shown, ShowError> {
    let id = store
        .receipt_record(receipt_id)?
        .ok_or(ShowError::Unknown(*receipt_id))?;
    let evidence = Evidence::from_value(&store.get_record(&id)?)?;
    if evidence.change_id != receipt.change_id || evidence.policy_id != receipt.policy_id {
        return Err(ShowError::Mismatch("change_id or policy_id differs".into()));
    }
    if let Verdict::Admit { proof } = &receipt.verdict
        && *proof != id
    {
        return Err(ShowError::Mismatch(format!(
            "the admit proof is {proof}, the record {id}"
        )));
    }
    let mut outputs = Vec::with_capacity(evidence.checks.len());
    for c in &evidence.checks {
        let (out, err) = (store.get(&c.stdout)?, store.get(&c.stderr)?);
        if out.len() as u64 != c.stdout_bytes || err.len() as u64 != c.stderr_bytes {
            return Err(ShowError::Mismatch(format!(
                "check {}: output sizes",
                c.name
            )));
        }
        outputs.push((out, err));
    }
    Ok(Shown {
        id,
        evidence,
        outputs,
    })
}
