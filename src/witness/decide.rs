//! decide: the `add-checkpoint` decision as a pure function of (known
//! logs, stored tree head, request), and the refusals the protocol names
//! with their HTTP status, content type and body (spec/witness.md).

use super::{AddCheckpointRequest, RequestError, TEXT_CONTENT_TYPE, TreeHead};
use crate::constants::TLOG_SIZE_CONTENT_TYPE;
use crate::io::error_chain;
use crate::keys::NoteVerifier;
use crate::tlog::merkle::{self, ProofError};
use crate::tlog::note::{self, Checkpoint, NoteCheck, NoteSignature};

/// What [`decide`] found acceptable: the checkpoint may be cosigned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The checkpoint body.
    pub checkpoint: Checkpoint,
    /// The log signature lines that verified (kept with the state).
    pub log_signatures: Vec<NoteSignature>,
}

/// A 400 Bad Request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// The body does not parse.
    #[error(transparent)]
    Malformed(#[from] RequestError),
    /// "The old size MUST be equal to or lower than the checkpoint size."
    #[error("old size {old} is larger than the checkpoint size {size}")]
    OldSizeAboveCheckpoint {
        /// The old size.
        old: u64,
        /// The checkpoint size.
        size: u64,
    },
    /// The checkpoint with this witness's cosignature appended would not be
    /// a note a reader accepts (over the C2SP size or signature-line limits).
    #[error("the checkpoint with this witness's cosignature would not be a valid note")]
    Unrecordable(#[source] crate::tlog::note::NoteError),
}

/// A 403 Forbidden: the checkpoint is not validly signed by a known log key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Forbidden {
    /// No signature line by a trusted key of the origin.
    #[error("no signature by a known key of log {origin}")]
    NotSigned {
        /// The origin.
        origin: String,
    },
    /// A line with a trusted key's name and key hash did not verify.
    #[error("signature of known log key {name}+{} does not verify", crate::digest::to_hex(.key_hash))]
    BadSignature {
        /// Key name.
        name: String,
        /// Key hash.
        key_hash: [u8; 4],
    },
}

/// A 422 Unprocessable Entity: the checkpoint is not consistent with the
/// witness's record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unprocessable {
    /// "A checkpoint of size zero MUST have the root hash of the empty tree".
    #[error("a checkpoint of size 0 must have the empty tree's root hash")]
    EmptyTreeRoot,
    /// "If the old size is zero, the consistency proof MUST be empty".
    #[error("old size is 0 but the request carries {0} proof line(s); send none")]
    ProofNotEmpty(usize),
    /// The consistency proof does not verify, or equal sizes with other roots.
    #[error("not consistent with the cosigned checkpoint of size {old}")]
    Inconsistent {
        /// The witness's size.
        old: u64,
        /// Why the proof failed.
        #[source]
        source: ProofError,
    },
}

/// Every refusal tlog-witness v1 names for `add-checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// 400: malformed request, or old size above the checkpoint size.
    #[error("bad request")]
    BadRequest(#[from] BadRequest),
    /// 403: not signed by a known key of the origin, or a known key's bad signature.
    #[error("forbidden")]
    Forbidden(#[from] Forbidden),
    /// 404: the origin is not a log this witness witnesses.
    #[error("unknown log origin {origin:?}")]
    UnknownOrigin {
        /// The origin.
        origin: String,
    },
    /// 409: the old size is not the size the witness last cosigned.
    #[error("conflict: the witness last cosigned size {size} of this log")]
    Conflict {
        /// The size of the latest cosigned checkpoint (0: never cosigned).
        size: u64,
    },
    /// 422: not consistent with the witness's record.
    #[error("unprocessable")]
    Unprocessable(#[from] Unprocessable),
}

impl Refusal {
    /// The HTTP status tlog-witness assigns.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest(_) => 400,
            Refusal::Forbidden(_) => 403,
            Refusal::UnknownOrigin { .. } => 404,
            Refusal::Conflict { .. } => 409,
            Refusal::Unprocessable(_) => 422,
        }
    }

    /// `text/x.tlog.size` for 409, else plain text.
    pub fn content_type(&self) -> &'static str {
        match self {
            Refusal::Conflict { .. } => TLOG_SIZE_CONTENT_TYPE,
            _ => TEXT_CONTENT_TYPE,
        }
    }

    /// 409: "the tree size of the latest cosigned checkpoint in decimal,
    /// followed by a newline"; otherwise the reason, for people.
    pub fn body(&self) -> String {
        match self {
            Refusal::Conflict { size } => format!("{size}\n"),
            other => format!("{}\n", error_chain(other)),
        }
    }
}

/// The tlog-witness v1 `add-checkpoint` checks, in the order the spec
/// gives them, over the witness's `logs` (all of them; those named after
/// the origin apply), its record for the origin (`None`: never cosigned)
/// and a parsed request. Pure: no I/O, no clock, no key.
pub fn decide(
    logs: &[NoteVerifier],
    state: Option<&TreeHead>,
    request: &AddCheckpointRequest,
) -> Result<Accepted, Refusal> {
    let cp = &request.checkpoint;
    let known: Vec<NoteVerifier> = logs
        .iter()
        .filter(|l| l.name == cp.origin)
        .cloned()
        .collect();
    // "If the checkpoint origin is unknown, the witness MUST respond with 404".
    if known.is_empty() {
        return Err(Refusal::UnknownOrigin {
            origin: cp.origin.clone(),
        });
    }
    // 403 when no trusted signature, or a trusted key's signature fails;
    // signatures of unknown keys are ignored.
    match note::check(&request.note, &known) {
        NoteCheck::Verified { .. } => {}
        NoteCheck::Failed { name, key_hash } => {
            return Err(Forbidden::BadSignature { name, key_hash }.into());
        }
        NoteCheck::NotEvaluated => {
            let origin = cp.origin.clone();
            return Err(Forbidden::NotSigned { origin }.into());
        }
    }
    let old = request.old_size;
    if old > cp.size {
        return Err(BadRequest::OldSizeAboveCheckpoint { old, size: cp.size }.into());
    }
    let (size, root) = state.map_or((0, merkle::empty_root()), |h| (h.size, h.root));
    if old != size {
        return Err(Refusal::Conflict { size });
    }
    consistent(old, &root, request)?;
    // One line per known key: a note may repeat a valid line (C2SP
    // signed-note allows it), the record keeps it once.
    let mut log_signatures: Vec<NoteSignature> = Vec::new();
    for l in &request.note.signatures {
        let is_known = known
            .iter()
            .any(|k| k.name == l.name && k.key_hash == l.key_hash);
        let seen = log_signatures
            .iter()
            .any(|s| s.name == l.name && s.key_hash == l.key_hash);
        if is_known && !seen {
            log_signatures.push(l.clone());
        }
    }
    Ok(Accepted {
        checkpoint: cp.clone(),
        log_signatures,
    })
}

/// The 422 checks: empty-tree root, empty proof from size 0, and the
/// RFC 6962 consistency proof from the recorded (`old`, `root`) (equal
/// sizes need equal roots).
fn consistent(
    old: u64,
    root: &merkle::Hash,
    request: &AddCheckpointRequest,
) -> Result<(), Unprocessable> {
    let cp = &request.checkpoint;
    if cp.size == 0 && cp.root_hash != merkle::empty_root() {
        return Err(Unprocessable::EmptyTreeRoot);
    }
    if old == 0 && !request.proof.is_empty() {
        return Err(Unprocessable::ProofNotEmpty(request.proof.len()));
    }
    merkle::verify_consistency(old, cp.size, &request.proof, root, &cp.root_hash)
        .map_err(|source| Unprocessable::Inconsistent { old, source })
}
