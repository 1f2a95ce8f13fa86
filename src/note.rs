//! note: C2SP signed notes and tlog-checkpoint bodies.
//!
//! STUB: interface fixed, body to be written (helper B).

use crate::keys::{NoteVerifier, SigningKey};

/// One signature line of a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    /// Key name.
    pub name: String,
    /// 4-byte key hash.
    pub key_hash: [u8; 4],
    /// Signature bytes after the key hash.
    pub sig: Vec<u8>,
}

/// A parsed signed note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The signed text, ending in a newline.
    pub text: String,
    /// Signature lines, in order.
    pub signatures: Vec<NoteSignature>,
}

/// Why a note or checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// Placeholder until notes land.
    #[error("not implemented")]
    Unimplemented,
}

impl Note {
    /// Parse a signed note (size and signature-count limits first).
    pub fn parse(bytes: &[u8]) -> Result<Note, NoteError> {
        let _ = bytes;
        todo!()
    }
}

/// Sign `text` (must end in a newline) as `name`: the whole note text.
pub fn sign(text: &str, name: &str, key: &SigningKey) -> Result<String, NoteError> {
    let _ = (text, name, key);
    todo!()
}

/// The outcome of checking a note against trusted verifiers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoteCheck {
    /// At least one trusted key verified, none failed.
    Verified {
        /// Names of the verifying keys.
        names: Vec<String>,
    },
    /// A signature line from a trusted key (by name and key hash) did not verify.
    Failed {
        /// Key name.
        name: String,
        /// Key hash.
        key_hash: [u8; 4],
    },
    /// No trusted key signed the note.
    NotEvaluated,
}

/// Check `note` against `verifiers`; unknown signature lines are ignored.
pub fn check(note: &Note, verifiers: &[NoteVerifier]) -> NoteCheck {
    let _ = (note, verifiers);
    todo!()
}

/// A C2SP tlog-checkpoint body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Origin line.
    pub origin: String,
    /// Tree size.
    pub size: u64,
    /// Root hash.
    pub root_hash: [u8; 32],
    /// Extension lines (without newlines), kept verbatim.
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// Parse a checkpoint body (the note text).
    pub fn parse(text: &str) -> Result<Checkpoint, NoteError> {
        let _ = text;
        todo!()
    }

    /// The body text, ending in a newline.
    pub fn to_text(&self) -> String {
        todo!()
    }
}
