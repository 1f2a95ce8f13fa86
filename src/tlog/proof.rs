//! tlogproof: C2SP tlog-proof@v1, the portable offline proof of logging.
//!
//! Boundary: the text of a `.tlog-proof` file in and out (header, optional
//! `extra`, `index`, inclusion proof, blank line, checkpoint note). No
//! verification here: the proof's hashes, signatures and cosignatures are
//! checked by [`crate::tlog::merkle`], [`crate::tlog::note`] and [`crate::tlog::policy`].
//! `rcpt` puts the log entry (the DAG-CBOR envelope) in `extra`, so the
//! leaf hash is `SHA-256(0x00 || extra)`; `crate::bundle` turns a proof
//! into a bundle (this layer knows no envelope). Format: `spec/witness.md`.

use crate::constants::TLOG_PROOF_HEADER;
use crate::limits::{MAX_PROOF_HASHES, MAX_TLOG_PROOF_BYTES, MAX_TLOG_PROOF_EXTRA_BYTES};
use crate::tlog::merkle::Hash;
use crate::tlog::note::parse_decimal;
use crate::tlog::note::{Checkpoint, Note, NoteError};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A parsed tlog-proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogProof {
    /// Opaque extra data (for `rcpt`: the log entry), if present.
    pub extra: Option<Vec<u8>>,
    /// Zero-based index of the entry in the log.
    pub index: u64,
    /// RFC 6962 inclusion proof, from the leaf's sibling up.
    pub inclusion: Vec<Hash>,
    /// The checkpoint note, verbatim (with its signature and cosignature lines).
    pub checkpoint: String,
    /// The checkpoint note, parsed.
    pub note: Note,
    /// The checkpoint body, parsed.
    pub body: Checkpoint,
}

/// Why a tlog-proof was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlogProofError {
    /// Input over [`MAX_TLOG_PROOF_BYTES`].
    #[error("tlog-proof is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The first line is not `c2sp.org/tlog-proof@v1`.
    #[error("first line must be {TLOG_PROOF_HEADER}")]
    Header,
    /// An `extra` line that is not `extra <base64>` of 1 to
    /// [`MAX_TLOG_PROOF_EXTRA_BYTES`] bytes.
    #[error(
        "extra line must be \"extra <standard base64>\" of 1 to {MAX_TLOG_PROOF_EXTRA_BYTES} bytes"
    )]
    Extra,
    /// No `index <decimal>` line where one is due.
    #[error("expected \"index <decimal, no leading zeros>\" line")]
    Index,
    /// An inclusion line that is not standard base64 of 32 bytes.
    #[error("inclusion proof line {0} is not standard base64 of a 32-byte hash")]
    ProofLine(usize),
    /// More inclusion lines than [`MAX_PROOF_HASHES`].
    #[error("more than {MAX_PROOF_HASHES} inclusion proof lines")]
    TooManyProofLines,
    /// The file ends before the blank line and the checkpoint.
    #[error("no blank line before the checkpoint")]
    NoBlankLine,
    /// The checkpoint is not a signed checkpoint note.
    #[error("checkpoint")]
    Checkpoint(#[source] NoteError),
    /// Text that is not UTF-8 before the checkpoint.
    #[error("tlog-proof is not UTF-8 text")]
    NotUtf8,
}

/// Split off the next newline-terminated line.
fn next_line(rest: &str) -> Option<(&str, &str)> {
    rest.split_once('\n')
}

/// Why [`hash_lines`] stopped.
#[derive(Debug)]
pub(crate) enum HashLinesError {
    /// The text ended before an empty line.
    NoBlankLine,
    /// More hash lines than allowed.
    TooMany,
    /// This line (1-based) is not standard base64 of a 32-byte hash.
    NotAHash(usize),
}

/// Newline-terminated lines of standard base64 32-byte hashes (at most
/// `most`) up to an empty line: the hashes, and what follows the empty
/// line. A tlog-proof's inclusion proof and an add-checkpoint request's
/// consistency proof are written alike.
pub(crate) fn hash_lines(
    mut rest: &[u8],
    most: usize,
) -> Result<(Vec<Hash>, &[u8]), HashLinesError> {
    let mut hashes = Vec::new();
    loop {
        let end = rest.iter().position(|&b| b == b'\n');
        let end = end.ok_or(HashLinesError::NoBlankLine)?;
        let line = rest.get(..end).unwrap_or_default();
        rest = rest.get(end + 1..).unwrap_or_default();
        if line.is_empty() {
            return Ok((hashes, rest));
        }
        if hashes.len() == most {
            return Err(HashLinesError::TooMany);
        }
        let hash = STANDARD
            .decode(line)
            .ok()
            .and_then(|raw| Hash::try_from(raw).ok())
            .ok_or(HashLinesError::NotAHash(hashes.len() + 1))?;
        hashes.push(hash);
    }
}

impl TlogProof {
    /// A proof of `index` under `checkpoint` (a signed note), checking that
    /// what is written parses back.
    pub fn new(
        extra: Option<Vec<u8>>,
        index: u64,
        inclusion: Vec<Hash>,
        checkpoint: &str,
    ) -> Result<TlogProof, TlogProofError> {
        let mut text = String::new();
        write_text(&mut text, extra.as_deref(), index, &inclusion, checkpoint);
        TlogProof::parse(text.as_bytes())
    }

    /// Parse a tlog-proof (size limit first).
    ///
    /// C2SP tlog-proof "Format": the header line; optionally `extra`, a
    /// space and base64 ("If no extra data is present, this line is
    /// omitted", so an empty `extra` is refused); `index`, a space and a
    /// decimal with no leading zeros; "zero or more non-empty lines" of
    /// base64 hashes; an empty line; the checkpoint "verbatim".
    pub fn parse(bytes: &[u8]) -> Result<TlogProof, TlogProofError> {
        crate::limits::check_size(bytes, MAX_TLOG_PROOF_BYTES, |size, limit| {
            TlogProofError::TooLarge { size, limit }
        })?;
        let text = std::str::from_utf8(bytes).map_err(|_| TlogProofError::NotUtf8)?;
        let (header, rest) = next_line(text).ok_or(TlogProofError::Header)?;
        if header != TLOG_PROOF_HEADER {
            return Err(TlogProofError::Header);
        }
        let mut extra = None;
        let (mut line, mut after) = next_line(rest).ok_or(TlogProofError::Index)?;
        if let Some(b64) = line.strip_prefix("extra ") {
            extra = Some(decode_extra(b64)?);
            (line, after) = next_line(after).ok_or(TlogProofError::Index)?;
        }
        let index = line
            .strip_prefix("index ")
            .and_then(|d| parse_decimal(d.as_bytes()))
            .ok_or(TlogProofError::Index)?;
        let (inclusion, rest) =
            hash_lines(after.as_bytes(), MAX_PROOF_HASHES).map_err(|e| match e {
                HashLinesError::NoBlankLine => TlogProofError::NoBlankLine,
                HashLinesError::TooMany => TlogProofError::TooManyProofLines,
                HashLinesError::NotAHash(n) => TlogProofError::ProofLine(n),
            })?;
        // What follows a newline of UTF-8 text is UTF-8 text.
        let rest = std::str::from_utf8(rest).map_err(|_| TlogProofError::NotUtf8)?;
        let note = Note::parse(rest.as_bytes()).map_err(TlogProofError::Checkpoint)?;
        let body = Checkpoint::parse(&note.text).map_err(TlogProofError::Checkpoint)?;
        Ok(TlogProof {
            extra,
            index,
            inclusion,
            checkpoint: rest.to_owned(),
            note,
            body,
        })
    }

    /// The proof as text; parsing it gives back this proof.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let extra = self.extra.as_deref();
        write_text(
            &mut out,
            extra,
            self.index,
            &self.inclusion,
            &self.checkpoint,
        );
        out
    }

    /// RFC 6962 leaf hash of the extra data, when present: for an `rcpt`
    /// log, the entry's leaf hash.
    pub fn extra_leaf_hash(&self) -> Option<Hash> {
        self.extra.as_deref().map(crate::tlog::merkle::leaf_hash)
    }
}

/// Standard padded base64 of 1 to [`MAX_TLOG_PROOF_EXTRA_BYTES`] bytes,
/// the length checked before decoding.
fn decode_extra(b64: &str) -> Result<Vec<u8>, TlogProofError> {
    if b64.is_empty() || b64.len() > MAX_TLOG_PROOF_EXTRA_BYTES.div_ceil(3) * 4 {
        return Err(TlogProofError::Extra);
    }
    let raw = STANDARD.decode(b64).map_err(|_| TlogProofError::Extra)?;
    if raw.is_empty() || raw.len() > MAX_TLOG_PROOF_EXTRA_BYTES {
        return Err(TlogProofError::Extra);
    }
    Ok(raw)
}

fn write_text(out: &mut String, extra: Option<&[u8]>, index: u64, inclusion: &[Hash], cp: &str) {
    out.push_str(TLOG_PROOF_HEADER);
    out.push('\n');
    if let Some(extra) = extra {
        out.push_str("extra ");
        out.push_str(&STANDARD.encode(extra));
        out.push('\n');
    }
    out.push_str(&format!("index {index}\n"));
    for h in inclusion {
        out.push_str(&STANDARD.encode(h));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(cp);
}
