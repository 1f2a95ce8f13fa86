//! note: C2SP signed notes and tlog-checkpoint bodies.
//!
//! Boundary: the bytes of a signed note (c2sp.org/signed-note) in, its text
//! and signature lines out; Ed25519 (type 0x01) signing and the trust rule
//! for notes; the checkpoint body (c2sp.org/tlog-checkpoint) parsed and
//! printed. No I/O, no Merkle hashing: whether a root hash is right is
//! [`crate::tlog::merkle`]'s question.

use crate::keys::{NoteVerifier, SigningKey, is_valid_key_name, note_key_hash};
use crate::limits::{MAX_NOTE_BYTES, MAX_NOTE_SIGNATURES};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signer as _;

/// The start of every signature line: em dash (U+2014) and a space.
pub const SIGNATURE_LINE_PREFIX: &str = "\u{2014} ";

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

impl NoteSignature {
    /// This signature as the line a note carries, newline included
    /// ([`signature_line`]).
    pub fn to_line(&self) -> String {
        signature_line(&self.name, self.key_hash, &self.sig)
    }
}

/// One signature line of a signed note, newline included:
/// `— NAME base64(key ID || signature bytes)` (C2SP signed-note). The one
/// place the crate writes a line, whatever signed it: a log's Ed25519
/// signature ([`sign`]), a witness's cosignature (`tlog::cosig::sign`,
/// whose signature bytes are the timestamp and the signature), or a line
/// read from a note and written again ([`NoteSignature::to_line`]).
pub fn signature_line(name: &str, key_id: [u8; 4], signature: &[u8]) -> String {
    let mut raw = Vec::with_capacity(key_id.len() + signature.len());
    raw.extend_from_slice(&key_id);
    raw.extend_from_slice(signature);
    format!("{SIGNATURE_LINE_PREFIX}{name} {}\n", STANDARD.encode(raw))
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
#[non_exhaustive]
pub enum NoteError {
    /// A note over [`MAX_NOTE_BYTES`].
    #[error("signed note is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Size found.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Bytes that are not UTF-8.
    #[error("signed note is not valid UTF-8")]
    NotUtf8,
    /// A control character other than newline (CR included).
    #[error(
        "signed note holds control character 0x{byte:02x} at byte {offset}; only newline is allowed"
    )]
    ControlChar {
        /// The byte.
        byte: u8,
        /// Its offset.
        offset: usize,
    },
    /// Text (or a whole note) that does not end in a newline.
    #[error("note text must end with a newline")]
    NoFinalNewline,
    /// No blank line separating text from signatures.
    #[error("signed note has no blank line before its signature lines")]
    NoSeparator,
    /// A blank line followed by no signature line.
    #[error("signed note has no signature lines")]
    NoSignatures,
    /// More signature lines than [`MAX_NOTE_SIGNATURES`].
    #[error("signed note has {count} signature lines, over the limit of {limit}")]
    TooManySignatures {
        /// Count found.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A signature line not of the form `— NAME BASE64`.
    #[error("signature line {line} is not of the form \"\u{2014} NAME BASE64\"")]
    BadSignatureLine {
        /// 1-based index among the signature lines.
        line: usize,
    },
    /// A key name that is empty or holds a space or `+`.
    #[error("key name {name:?} is invalid: it must be non-empty, without spaces or '+'")]
    BadKeyName {
        /// The name.
        name: String,
    },
    /// A signature that is not standard base64 of at least 5 bytes.
    #[error(
        "signature line {line} ({name}): signature must be standard base64 of key hash || signature"
    )]
    BadSignature {
        /// 1-based index among the signature lines.
        line: usize,
        /// Key name.
        name: String,
    },
    /// A checkpoint body with fewer than three lines.
    #[error("checkpoint needs origin, tree size and root hash lines; found {0} line(s)")]
    CheckpointTooShort(usize),
    /// An empty origin line.
    #[error("checkpoint origin line is empty")]
    EmptyOrigin,
    /// A tree size that is not a decimal u64 without leading zeros.
    #[error("checkpoint tree size {0:?} is not a decimal number without leading zeros")]
    BadTreeSize(String),
    /// A root hash that is not standard base64 of 32 bytes.
    #[error("checkpoint root hash {0:?} is not standard base64 of 32 bytes")]
    BadRootHash(String),
    /// An empty extension line.
    #[error("checkpoint extension line {0} is empty")]
    EmptyExtension(usize),
}

/// Refuse an origin that a checkpoint cannot carry as its first line.
///
/// C2SP tlog-checkpoint: "The origin MUST be non-empty"; C2SP signed-note:
/// a note "MUST NOT contain any ASCII control characters (those below
/// U+0020) other than newline", and the origin is one line, so it holds no
/// newline either. Any such origin (in a bundle, say) names no checkpoint.
pub fn check_origin(origin: &str) -> Result<(), NoteError> {
    if origin.is_empty() {
        return Err(NoteError::EmptyOrigin);
    }
    match origin.bytes().enumerate().find(|&(_, b)| b < 0x20) {
        Some((offset, byte)) => Err(NoteError::ControlChar { byte, offset }),
        None => Ok(()),
    }
}

/// C2SP signed-note "Format": valid UTF-8, no control characters other than
/// newline.
fn check_characters(text: &str) -> Result<(), NoteError> {
    match text
        .bytes()
        .enumerate()
        .find(|&(_, b)| b < 0x20 && b != b'\n')
    {
        Some((offset, byte)) => Err(NoteError::ControlChar { byte, offset }),
        None => Ok(()),
    }
}

impl Note {
    /// Parse a signed note (size and signature-count limits first).
    ///
    /// C2SP signed-note "Format": "a text ending in newline (U+000A),
    /// followed by a blank line (only a newline), followed by one or more
    /// signature lines [...] the text is separated from the signatures by
    /// the last empty line in the note."
    pub fn parse(bytes: &[u8]) -> Result<Note, NoteError> {
        crate::limits::check_size(bytes, MAX_NOTE_BYTES, |size, limit| NoteError::TooLarge {
            size,
            limit,
        })?;
        let all = std::str::from_utf8(bytes).map_err(|_| NoteError::NotUtf8)?;
        check_characters(all)?;
        if !all.ends_with('\n') {
            return Err(NoteError::NoFinalNewline);
        }
        let split = all.rfind("\n\n").ok_or(NoteError::NoSeparator)?;
        // `split` is a char boundary ('\n' is ASCII) and split + 2 <= len.
        let (text, rest) = all.split_at(split + 1);
        let lines = rest.get(1..).unwrap_or_default();
        let count = lines.matches('\n').count();
        if count == 0 {
            return Err(NoteError::NoSignatures);
        }
        if count > MAX_NOTE_SIGNATURES {
            return Err(NoteError::TooManySignatures {
                count,
                limit: MAX_NOTE_SIGNATURES,
            });
        }
        let signatures = lines
            .split_terminator('\n')
            .enumerate()
            .map(|(i, line)| parse_signature_line(line, i + 1))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Note {
            text: text.to_owned(),
            signatures,
        })
    }
}

/// `— <key name> base64(32-bit key ID || signature)`; at least 5 bytes.
fn parse_signature_line(line: &str, index: usize) -> Result<NoteSignature, NoteError> {
    let body = line
        .strip_prefix(SIGNATURE_LINE_PREFIX)
        .ok_or(NoteError::BadSignatureLine { line: index })?;
    let (name, b64) = body
        .split_once(' ')
        .ok_or(NoteError::BadSignatureLine { line: index })?;
    if !is_valid_key_name(name) {
        return Err(NoteError::BadKeyName {
            name: name.to_owned(),
        });
    }
    let bad = || NoteError::BadSignature {
        line: index,
        name: name.to_owned(),
    };
    let raw = STANDARD.decode(b64).map_err(|_| bad())?;
    match raw.split_first_chunk::<4>() {
        Some((hash, sig)) if !sig.is_empty() => Ok(NoteSignature {
            name: name.to_owned(),
            key_hash: *hash,
            sig: sig.to_vec(),
        }),
        _ => Err(bad()),
    }
}

/// Sign `text` (must end in a newline) as `name`: the whole note text.
///
/// C2SP signed-note "Ed25519 signatures": RFC 8032 Ed25519 over the note
/// text; the line carries `base64(key hash || signature)`.
pub fn sign(text: &str, name: &str, key: &SigningKey) -> Result<String, NoteError> {
    if !text.ends_with('\n') {
        return Err(NoteError::NoFinalNewline);
    }
    check_characters(text)?;
    if !is_valid_key_name(name) {
        return Err(NoteError::BadKeyName {
            name: name.to_owned(),
        });
    }
    let key_id = note_key_hash(name, &key.verifying_key());
    let signature = key.sign(text.as_bytes()).to_bytes();
    Ok(format!(
        "{text}\n{}",
        signature_line(name, key_id, &signature)
    ))
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
///
/// C2SP signed-note "Signatures": "Verifiers MUST ignore signatures from
/// unknown keys, even if they share a name or ID (but not both) with a known
/// key. If the key name and ID match a known key, verifiers MUST verify the
/// signature. If a signature from a known key fails to verify, clients
/// SHOULD reject the whole note." We do reject ([`NoteCheck::Failed`]).
/// Strict Ed25519 only; a signature that is not 64 bytes does not verify.
pub fn check(note: &Note, verifiers: &[NoteVerifier]) -> NoteCheck {
    let mut names: Vec<String> = Vec::new();
    for line in &note.signatures {
        let known = verifiers
            .iter()
            .find(|v| v.name == line.name && v.key_hash == line.key_hash);
        let Some(verifier) = known else {
            continue; // an unknown key, or grease: ignored
        };
        let ok = ed25519_dalek::Signature::from_slice(&line.sig).is_ok_and(|sig| {
            verifier
                .key
                .verify_strict(note.text.as_bytes(), &sig)
                .is_ok()
        });
        if !ok {
            return NoteCheck::Failed {
                name: line.name.clone(),
                key_hash: line.key_hash,
            };
        }
        if !names.contains(&line.name) {
            names.push(line.name.clone());
        }
    }
    if names.is_empty() {
        NoteCheck::NotEvaluated
    } else {
        NoteCheck::Verified { names }
    }
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
    ///
    /// C2SP tlog-checkpoint "Note text": at least three non-empty lines:
    /// origin (non-empty), tree size ("ASCII decimal [...] with no leading
    /// zeroes"), root hash (standard base64), then optional extension lines,
    /// which "MUST be non-empty".
    pub fn parse(text: &str) -> Result<Checkpoint, NoteError> {
        let body = text.strip_suffix('\n').ok_or(NoteError::NoFinalNewline)?;
        check_characters(body)?;
        let lines: Vec<&str> = body.split('\n').collect();
        let [origin, size, root, extensions @ ..] = lines.as_slice() else {
            return Err(NoteError::CheckpointTooShort(lines.len()));
        };
        if origin.is_empty() {
            return Err(NoteError::EmptyOrigin);
        }
        if let Some(i) = extensions.iter().position(|l| l.is_empty()) {
            return Err(NoteError::EmptyExtension(i + 1));
        }
        Ok(Checkpoint {
            origin: (*origin).to_owned(),
            size: parse_tree_size(size)?,
            root_hash: parse_root_hash(root)?,
            extensions: extensions.iter().map(|l| (*l).to_owned()).collect(),
        })
    }

    /// The body text, ending in a newline.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.root_hash)
        );
        for line in &self.extensions {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Decimal u64, no sign, no leading zeros (except `0` itself).
fn parse_tree_size(text: &str) -> Result<u64, NoteError> {
    let bad = || NoteError::BadTreeSize(text.to_owned());
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (text.len() > 1 && text.starts_with('0')) {
        return Err(bad());
    }
    text.parse::<u64>().map_err(|_| bad())
}

/// Standard padded base64 of exactly 32 bytes.
fn parse_root_hash(text: &str) -> Result<[u8; 32], NoteError> {
    let bad = || NoteError::BadRootHash(text.to_owned());
    let raw = STANDARD.decode(text).map_err(|_| bad())?;
    raw.try_into().map_err(|_| bad())
}

/// ASCII decimal u64 "with no leading zeroes (unless the size is zero, in
/// which case the encoding MUST be `0`)"; no sign, no spaces.
pub fn parse_decimal(text: &[u8]) -> Option<u64> {
    match text {
        [b'0'] => Some(0),
        [b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(text).ok()?.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::NoteVerifier;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn verifier(name: &str, k: &SigningKey) -> NoteVerifier {
        NoteVerifier::new(name, k.verifying_key()).unwrap()
    }

    #[test]
    fn sign_parse_check_round_trip() {
        let k = key(1);
        let signed = sign("hello\n\nworld\n", "a.example/log", &k).unwrap();
        let note = Note::parse(signed.as_bytes()).unwrap();
        assert_eq!(note.text, "hello\n\nworld\n");
        let v = verifier("a.example/log", &k);
        assert_eq!(
            check(&note, &[v]),
            NoteCheck::Verified {
                names: vec!["a.example/log".into()]
            }
        );
    }

    #[test]
    fn the_lines_of_a_note_are_written_back_byte_for_byte() {
        let signed = sign("o\n1\nAAAA\n", "a.example/log", &key(1)).unwrap();
        let twice = format!(
            "{signed}{}",
            sign("o\n1\nAAAA\n", "b", &key(2))
                .unwrap()
                .split_once("\n\n")
                .unwrap()
                .1
        );
        let note = Note::parse(twice.as_bytes()).unwrap();
        let lines: String = note.signatures.iter().map(NoteSignature::to_line).collect();
        assert_eq!(format!("{}\n{lines}", note.text), twice);
        // The line starts with the em dash and a space, and ends in a newline.
        let line = signature_line("n", [1, 2, 3, 4], &[5]);
        assert_eq!(line, "\u{2014} n AQIDBAU=\n");
    }

    #[test]
    fn trust_rule_for_notes() {
        let (a, b) = (key(1), key(2));
        let signed = sign("t\n", "a", &a).unwrap();
        let note = Note::parse(signed.as_bytes()).unwrap();
        // Same name, other key: a different key hash, so the line is unknown.
        assert_eq!(check(&note, &[verifier("a", &b)]), NoteCheck::NotEvaluated);
        assert_eq!(check(&note, &[]), NoteCheck::NotEvaluated);
        // Known key, tampered text: Failed.
        let mut bad = note.clone();
        bad.text = "u\n".into();
        assert!(matches!(
            check(&bad, &[verifier("a", &a)]),
            NoteCheck::Failed { .. }
        ));
        // Known key, truncated signature: Failed.
        let mut short = note.clone();
        short.signatures[0].sig.truncate(10);
        assert!(matches!(
            check(&short, &[verifier("a", &a)]),
            NoteCheck::Failed { .. }
        ));
    }

    #[test]
    fn malformed_notes_are_refused() {
        let k = key(1);
        let signed = sign("t\n", "a", &k).unwrap();
        assert_eq!(Note::parse(b"t\n"), Err(NoteError::NoSeparator));
        assert_eq!(Note::parse(b"t\n\n"), Err(NoteError::NoSignatures));
        let cr = signed.replace("t\n", "t\r\n");
        assert!(matches!(
            Note::parse(cr.as_bytes()),
            Err(NoteError::ControlChar { .. })
        ));
        let no_nl = signed.trim_end();
        assert_eq!(
            Note::parse(no_nl.as_bytes()),
            Err(NoteError::NoFinalNewline)
        );
        let dash = signed.replace('\u{2014}', "-");
        assert!(matches!(
            Note::parse(dash.as_bytes()),
            Err(NoteError::BadSignatureLine { .. })
        ));
        assert_eq!(Note::parse(&[0xff, b'\n', b'\n']), Err(NoteError::NotUtf8));
    }

    #[test]
    fn checkpoint_round_trip_and_rules() {
        let cp = Checkpoint {
            origin: "example.com/log".into(),
            size: 42,
            root_hash: [7; 32],
            extensions: vec!["ext".into()],
        };
        assert_eq!(Checkpoint::parse(&cp.to_text()).unwrap(), cp);
        let root = STANDARD.encode([0u8; 32]);
        assert!(Checkpoint::parse(&format!("o\n0\n{root}\n")).is_ok());
        assert!(Checkpoint::parse(&format!("o\n01\n{root}\n")).is_err());
        assert!(Checkpoint::parse(&format!("o\n+1\n{root}\n")).is_err());
        assert!(Checkpoint::parse(&format!("o\n18446744073709551616\n{root}\n")).is_err());
        assert!(Checkpoint::parse(&format!("\n1\n{root}\n")).is_err());
        assert!(Checkpoint::parse(&format!("o\n1\n{root}\n\n")).is_err());
        assert!(Checkpoint::parse(&format!("o\n1\n{root}")).is_err());
        assert!(Checkpoint::parse("o\n1\nAAAA\n").is_err());
        assert!(Checkpoint::parse("o\n1\n").is_err());
    }

    proptest::proptest! {
        #[test]
        fn sign_then_parse_and_check(text in "[ -~\n]{0,200}", seed in proptest::num::u8::ANY) {
            let text = format!("{text}\n");
            let k = key(seed);
            let signed = sign(&text, "n.example", &k).unwrap();
            let note = Note::parse(signed.as_bytes()).unwrap();
            proptest::prop_assert_eq!(&note.text, &text);
            let want = NoteCheck::Verified { names: vec!["n.example".into()] };
            proptest::prop_assert_eq!(check(&note, &[verifier("n.example", &k)]), want);
        }

        #[test]
        fn a_line_written_is_the_line_read(
            name in "[a-z0-9./_-]{1,40}",
            key_id in proptest::array::uniform4(proptest::num::u8::ANY),
            sig in proptest::collection::vec(proptest::num::u8::ANY, 1..100),
        ) {
            let line = signature_line(&name, key_id, &sig);
            let text = "t\n";
            let note = Note::parse(format!("{text}\n{line}").as_bytes()).unwrap();
            let want = NoteSignature { name: name.clone(), key_hash: key_id, sig: sig.clone() };
            proptest::prop_assert_eq!(&note.signatures, &vec![want]);
            proptest::prop_assert_eq!(note.signatures[0].to_line(), line);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = Note::parse(&bytes);
            let _ = Checkpoint::parse(&String::from_utf8_lossy(&bytes));
        }
    }
}
