//! request: the body of a tlog-witness `add-checkpoint` request.
//!
//! "The request body MUST be a sequence of an old size line, zero or more
//! consistency proof lines, and an empty line, followed by a checkpoint.
//! Each line MUST terminate in a newline character (U+000A)."

use crate::limits::{MAX_ADD_CHECKPOINT_BYTES, MAX_ADD_CHECKPOINT_PROOF_LINES};
use crate::tlog::merkle::Hash;
use crate::tlog::note::{Checkpoint, Note, NoteError};
use crate::tlog::proof::{HashLinesError, hash_lines};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A parsed `add-checkpoint` request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddCheckpointRequest {
    /// The `old` line: the size of the checkpoint the client believes the
    /// witness cosigned last (0 when it knows none).
    pub old_size: u64,
    /// Consistency proof from `old_size` to the checkpoint's size.
    pub proof: Vec<Hash>,
    /// The submitted checkpoint note, with all its signature lines.
    pub note: Note,
    /// The note's body, parsed.
    pub checkpoint: Checkpoint,
}

/// Why a request body is malformed (answered with 400 Bad Request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// A body over [`MAX_ADD_CHECKPOINT_BYTES`].
    #[error("request body is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// No newline-terminated first line of the form `old <size>`.
    #[error("first line must be \"old <size>\" (decimal, no leading zeros) ending in a newline")]
    OldLine,
    /// A proof line that is not standard base64 of 32 bytes.
    #[error("consistency proof line {0} is not standard base64 of a 32-byte hash")]
    ProofLine(usize),
    /// More than [`MAX_ADD_CHECKPOINT_PROOF_LINES`] proof lines.
    #[error("more than {0} consistency proof lines")]
    TooManyProofLines(usize),
    /// No empty line before the checkpoint.
    #[error("no empty line between the proof and the checkpoint")]
    NoBlankLine,
    /// The checkpoint is not a signed checkpoint note.
    #[error("checkpoint")]
    Checkpoint(#[source] NoteError),
}

pub(crate) use crate::tlog::note::parse_decimal;

/// The body of a 409 answer (`Content-Type: text/x.tlog.size`): "the tree
/// size of the latest cosigned checkpoint in decimal, followed by a
/// newline". For the client side (a log asking witnesses); strict.
pub fn parse_size_body(body: &[u8]) -> Option<u64> {
    parse_decimal(body.strip_suffix(b"\n")?)
}

/// The next newline-terminated line of `rest` (without its newline), and
/// what follows it.
fn next_line(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = rest.iter().position(|&b| b == b'\n')?;
    Some((rest.get(..end)?, rest.get(end + 1..)?))
}

impl AddCheckpointRequest {
    /// Parse a request body (size limit first, then line by line).
    pub fn parse(body: &[u8]) -> Result<AddCheckpointRequest, RequestError> {
        crate::limits::check_size(body, MAX_ADD_CHECKPOINT_BYTES, |size, limit| {
            RequestError::TooLarge { size, limit }
        })?;
        let (first, rest) = next_line(body).ok_or(RequestError::OldLine)?;
        let old_size = first
            .strip_prefix(b"old ")
            .and_then(parse_decimal)
            .ok_or(RequestError::OldLine)?;
        let most = MAX_ADD_CHECKPOINT_PROOF_LINES;
        let (proof, rest) = hash_lines(rest, most).map_err(|e| match e {
            HashLinesError::NoBlankLine => RequestError::NoBlankLine,
            HashLinesError::TooMany => RequestError::TooManyProofLines(most),
            HashLinesError::NotAHash(n) => RequestError::ProofLine(n),
        })?;
        let note = Note::parse(rest).map_err(RequestError::Checkpoint)?;
        let checkpoint = Checkpoint::parse(&note.text).map_err(RequestError::Checkpoint)?;
        Ok(AddCheckpointRequest {
            old_size,
            proof,
            note,
            checkpoint,
        })
    }

    /// The request body: `old N`, one base64 hash per line, a blank line,
    /// the checkpoint note as given.
    pub fn to_body(old_size: u64, proof: &[Hash], checkpoint_note: &str) -> String {
        let mut out = format!("old {old_size}\n");
        for h in proof {
            out.push_str(&STANDARD.encode(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(checkpoint_note);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_rules() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"10"), Some(10));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"00",
            b"01",
            b"+1",
            b"-1",
            b" 1",
            b"1 ",
            b"18446744073709551616",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }
}
