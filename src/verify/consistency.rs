//! The `--since` input: an older checkpoint and consistency proofs from it,
//! in either form `rcpt log consistency` prints: the text form (base64
//! hashes, one a line, sizes not named) or the `--json` form
//! (`{"from": M, "to": N, "proof": [...]}`, one object or JSON Lines).

use super::VerifierError;
use crate::bundle::decode_hashes;
use crate::limits::{MAX_JSON_DEPTH, MAX_PROOF_FILE_BYTES, MAX_PROOF_HASHES};
use crate::strictjson;
use crate::tlog::merkle::Hash;
use serde::Deserialize;

/// One consistency proof, as `rcpt log consistency --json` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsistencyProof {
    /// The older tree size.
    pub from: u64,
    /// The newer tree size.
    pub to: u64,
    /// The proof hashes (RFC 9162 section 2.1.4).
    pub proof: Vec<Hash>,
}

/// A proof in the text form: from the `--since` checkpoint's size to a
/// size it does not name, so it is tried against each bundle's tree size
/// (it verifies for at most the one it was made for).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsizedProof {
    /// The file it came from, as given.
    pub file: String,
    /// The proof hashes.
    pub proof: Vec<Hash>,
}

/// The `--since` input: an older checkpoint and consistency proofs from it,
/// at most one per newer tree size.
#[derive(Clone, Debug)]
pub struct ConsistencyInput {
    /// The older signed checkpoint note text.
    pub old_checkpoint: String,
    /// The proofs that name their sizes, each to a distinct tree size.
    pub proofs: Vec<ConsistencyProof>,
    /// The proofs in the text form, sizes not named.
    pub unsized_proofs: Vec<UnsizedProof>,
}

/// The JSON that `rcpt log consistency --json` prints.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProofFile {
    from: u64,
    to: u64,
    proof: Vec<String>,
}

impl ProofFile {
    /// Decode the hashes.
    fn decode(self) -> Result<ConsistencyProof, String> {
        Ok(ConsistencyProof {
            from: self.from,
            to: self.to,
            proof: decode_hashes(&self.proof).map_err(|e| e.to_string())?,
        })
    }
}

/// What one proof file held.
enum Parsed {
    Sized(Vec<ConsistencyProof>),
    Unsized(Vec<Hash>),
}

impl ConsistencyInput {
    /// Read the old checkpoint text and one proof file.
    pub fn parse(old_checkpoint: &[u8], proof: &[u8]) -> Result<Self, VerifierError> {
        Self::parse_many(old_checkpoint, &[proof])
    }

    /// [`ConsistencyInput::parse_named`], the files named by position.
    pub fn parse_many(old_checkpoint: &[u8], files: &[&[u8]]) -> Result<Self, VerifierError> {
        let named: Vec<(String, &[u8])> = files
            .iter()
            .enumerate()
            .map(|(i, b)| ((i + 1).to_string(), *b))
            .collect();
        Self::parse_named(old_checkpoint, &named)
    }

    /// Read the old checkpoint text and proof files (name, bytes), each in
    /// the text form or the JSON form (one object or JSON Lines), at most
    /// [`MAX_PROOF_FILE_BYTES`] each; two proofs to one tree size are
    /// refused. Errors name the file.
    pub fn parse_named(
        old_checkpoint: &[u8],
        files: &[(String, &[u8])],
    ) -> Result<Self, VerifierError> {
        let mut proofs: Vec<ConsistencyProof> = Vec::new();
        let mut unsized_proofs = Vec::new();
        for (name, bytes) in files {
            match parse_proof_file(name, bytes)? {
                Parsed::Sized(sized) => {
                    for proof in sized {
                        if proofs.iter().any(|p| p.to == proof.to) {
                            return Err(VerifierError::DuplicateProof { to: proof.to });
                        }
                        proofs.push(proof);
                    }
                }
                Parsed::Unsized(proof) => unsized_proofs.push(UnsizedProof {
                    file: name.clone(),
                    proof,
                }),
            }
        }
        Ok(ConsistencyInput {
            old_checkpoint: String::from_utf8_lossy(old_checkpoint).into_owned(),
            proofs,
            unsized_proofs,
        })
    }
}

/// One proof file: JSON when it starts with `{` or `[` (a single value,
/// however laid out, or else JSON Lines, one object per non-blank line);
/// otherwise the text form, one base64 hash a line.
fn parse_proof_file(file: &str, bytes: &[u8]) -> Result<Parsed, VerifierError> {
    let bad = |line: Option<usize>, detail: String| VerifierError::ProofFile {
        file: file.to_string(),
        line,
        detail,
    };
    if bytes.len() > MAX_PROOF_FILE_BYTES {
        let detail = format!("over the limit of {MAX_PROOF_FILE_BYTES} bytes");
        return Err(bad(None, detail));
    }
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    // An empty file is the text form of an empty proof (`rcpt log
    // consistency` from a size to itself): it verifies only between equal
    // roots.
    match first {
        Some(b'{' | b'[') => parse_json(bytes, &bad).map(Parsed::Sized),
        _ => parse_text(bytes, &bad).map(Parsed::Unsized),
    }
}

fn parse_json(
    bytes: &[u8],
    bad: &dyn Fn(Option<usize>, String) -> VerifierError,
) -> Result<Vec<ConsistencyProof>, VerifierError> {
    if let Ok(one) = strictjson::from_slice::<ProofFile>(bytes, MAX_JSON_DEPTH) {
        return Ok(vec![one.decode().map_err(|e| bad(None, e))?]);
    }
    let lines = bytes.split(|&b| b == b'\n').enumerate();
    let lines = lines.filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace));
    let mut proofs = Vec::new();
    for (i, line) in lines {
        let one: ProofFile = strictjson::from_slice(line, MAX_JSON_DEPTH)
            .map_err(|e| bad(Some(i + 1), e.to_string()))?;
        proofs.push(one.decode().map_err(|e| bad(Some(i + 1), e))?);
    }
    Ok(proofs)
}

/// The text form: every non-blank line one base64 hash.
fn parse_text(
    bytes: &[u8],
    bad: &dyn Fn(Option<usize>, String) -> VerifierError,
) -> Result<Vec<Hash>, VerifierError> {
    let mut lines: Vec<(usize, &str)> = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let text = std::str::from_utf8(line).map_err(|_| {
            bad(
                Some(i + 1),
                "not text: a proof file is `rcpt log consistency`'s output".to_string(),
            )
        })?;
        let text = text.trim();
        if !text.is_empty() {
            lines.push((i + 1, text));
        }
        if lines.len() > MAX_PROOF_HASHES {
            let detail = format!("more than {MAX_PROOF_HASHES} hashes");
            return Err(bad(None, detail));
        }
    }
    let mut hashes = Vec::with_capacity(lines.len());
    for (n, text) in lines {
        let hash = decode_hashes(&[text]).map_err(|_| {
            bad(
                Some(n),
                "neither base64 of a 32-byte hash (the text form of `rcpt log consistency`) \
                 nor JSON (its --json form)"
                    .to_string(),
            )
        })?;
        hashes.extend(hash);
    }
    Ok(hashes)
}
