//! bundle: the offline proof bundle of one receipt (spec/verify.md "The bundle").
//!
//! ```json
//! {"media_type": "application/vnd.rcpt.bundle.v1+json",
//!  "receipt_id": "blake3:...",
//!  "envelope": { DSSE envelope },
//!  "log": {"origin": "...", "index": 0, "tree_size": 1,
//!          "inclusion": ["<base64 hash>", ...], "checkpoint": "<signed note>"}}
//! ```
//!
//! Parsing is in two stages so that the verifier can report every check: a
//! [`RawBundle`] is the JSON shape with strings left undecoded; [`Bundle`]
//! is fully decoded. This module does no verification.

use crate::constants::BUNDLE_MEDIA_TYPE;
use crate::limits::{MAX_BUNDLE_BYTES, MAX_JSON_DEPTH, MAX_PROOF_HASHES};
use crate::receipt::dsse::{Envelope, EnvelopeError};
use crate::strictjson::{self, StrictJsonError};
use crate::tlog::merkle::Hash;
use crate::tlog::proof::{TlogProof, TlogProofError};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Where a receipt sits in a log, with the proof and the signed checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogProof {
    /// The log's origin (checkpoint first line, log key name).
    pub origin: String,
    /// Leaf index of the entry.
    pub index: u64,
    /// Tree size the proof and checkpoint are for.
    pub tree_size: u64,
    /// RFC 9162 inclusion proof, leaf to root.
    pub inclusion: Vec<Hash>,
    /// The signed checkpoint note text at `tree_size`.
    pub checkpoint: String,
}

/// A v1 bundle: the envelope, its claimed id, and its log proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// Claimed receipt id (`blake3:`...); must match the payload.
    pub receipt_id: String,
    /// The DSSE envelope.
    pub envelope: Envelope,
    /// Log inclusion.
    pub log: LogProof,
}

/// Why a bundle could not be read.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    /// Over [`MAX_BUNDLE_BYTES`].
    #[error("bundle is {0} bytes, over the limit of {MAX_BUNDLE_BYTES}")]
    TooLarge(usize),
    /// Not JSON of the bundle shape (duplicate keys, unknown or missing fields included).
    #[error("bundle JSON: {0}")]
    Json(String),
    /// `media_type` names another format: not evaluated, not failed.
    #[error("unsupported bundle media type \"{0}\" (this rcpt reads {BUNDLE_MEDIA_TYPE})")]
    UnsupportedMediaType(String),
    /// The envelope inside is malformed.
    #[error("envelope: {0}")]
    Envelope(#[from] EnvelopeError),
    /// An inclusion hash is not base64 of 32 bytes.
    #[error("inclusion hash {index}: {detail}")]
    ProofHash {
        /// Position in `inclusion`.
        index: usize,
        /// What is wrong with it.
        detail: String,
    },
    /// A `log.origin` no checkpoint can carry (empty, a control character
    /// or a newline): it could name no checkpoint, and could make two
    /// (origin, checkpoint) pairs run together.
    #[error("log origin {origin:?}: {source}")]
    BadOrigin {
        /// The origin given.
        origin: String,
        /// Why a checkpoint cannot carry it.
        #[source]
        source: crate::tlog::note::NoteError,
    },
    /// A DSSE envelope where a bundle is expected.
    #[error(
        "this is a DSSE envelope (what `rcpt receipt issue` writes), not a bundle: append it \
         to a log with `rcpt log append LOG FILE`, then `rcpt log prove LOG --receipt FILE \
         -o BUNDLE` writes the bundle `rcpt verify` checks"
    )]
    IsEnvelope,
    /// More than [`MAX_PROOF_HASHES`] inclusion hashes.
    #[error("inclusion proof has {0} hashes, over the limit of {MAX_PROOF_HASHES}")]
    ProofTooLong(usize),
}

/// Only the media type, read first so another version's shape is never judged.
#[derive(Deserialize)]
struct MediaTypeOnly {
    media_type: Option<String>,
}

/// The v1 JSON shape, strings undecoded and borrowed from the document
/// where they hold no escape (a string with one is unescaped into its own
/// buffer, as JSON demands: `\/` is `/`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBundle<'a> {
    /// Must be [`BUNDLE_MEDIA_TYPE`].
    #[serde(borrow)]
    pub media_type: Cow<'a, str>,
    /// Claimed receipt id text.
    #[serde(borrow)]
    pub receipt_id: Cow<'a, str>,
    /// The envelope JSON, byte for byte as in the file.
    #[serde(borrow)]
    pub envelope: &'a RawValue,
    /// The log part.
    #[serde(borrow)]
    pub log: RawLogProof<'a>,
}

/// The v1 `log` object, strings undecoded.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLogProof<'a> {
    /// Log origin.
    #[serde(borrow)]
    pub origin: Cow<'a, str>,
    /// Leaf index.
    pub index: u64,
    /// Tree size.
    pub tree_size: u64,
    /// Base64 proof hashes.
    #[serde(borrow)]
    pub inclusion: Vec<JsonStr<'a>>,
    /// Signed checkpoint note text.
    #[serde(borrow)]
    pub checkpoint: Cow<'a, str>,
}

/// A JSON string, borrowed from the document when it holds no escape.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct JsonStr<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl AsRef<str> for JsonStr<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'a> RawBundle<'a> {
    /// Size limit, then the v1 shape, then the media type, then the origin
    /// (one a checkpoint can carry: [`crate::tlog::note::check_origin`]).
    ///
    /// One pass on the happy path ([`strictjson::from_slice_closed`]):
    /// serde's derived structs refuse a repeated or unknown field at every
    /// level of the v1 shape, the strict reader refuses an array where the
    /// bundle or its `log` object is specified, and the shape bounds the
    /// depth (the envelope inside is checked strictly by
    /// [`Envelope::from_json`]). Only when that parse fails is the document
    /// walked again, to tell another bundle version (not evaluated) from a
    /// malformed v1 bundle (failed).
    pub fn parse(bytes: &'a [u8]) -> Result<RawBundle<'a>, BundleError> {
        if bytes.len() > MAX_BUNDLE_BYTES {
            return Err(BundleError::TooLarge(bytes.len()));
        }
        let raw = match strictjson::from_slice_closed::<RawBundle>(bytes) {
            Ok(raw) if raw.media_type == BUNDLE_MEDIA_TYPE => raw,
            Ok(raw) => {
                return Err(BundleError::UnsupportedMediaType(
                    raw.media_type.into_owned(),
                ));
            }
            Err(e) => return Err(classify_refusal(bytes, e)),
        };
        crate::tlog::note::check_origin(&raw.log.origin).map_err(|source| {
            BundleError::BadOrigin {
                origin: raw.log.origin.to_string(),
                source,
            }
        })?;
        Ok(raw)
    }

    /// Decode the inclusion hashes (each base64 of exactly 32 bytes).
    pub fn inclusion_hashes(&self) -> Result<Vec<Hash>, BundleError> {
        decode_hashes(&self.log.inclusion)
    }
}

/// Why a document that is not a v1 bundle was refused: another media type
/// is unsupported (whatever its shape); a DSSE envelope is named as such
/// (malformed, with the commands that make a bundle of it); anything else
/// is malformed.
fn classify_refusal(bytes: &[u8], error: StrictJsonError) -> BundleError {
    let other_version = strictjson::from_slice::<MediaTypeOnly>(bytes, MAX_JSON_DEPTH)
        .ok()
        .and_then(|head| head.media_type)
        .filter(|media_type| media_type != BUNDLE_MEDIA_TYPE);
    match other_version {
        Some(media_type) => BundleError::UnsupportedMediaType(media_type),
        None if Envelope::from_json(bytes).is_ok() => BundleError::IsEnvelope,
        None => BundleError::Json(error.to_string()),
    }
}

/// Decode base64 proof hashes, each exactly 32 bytes, at most [`MAX_PROOF_HASHES`].
pub fn decode_hashes<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Hash>, BundleError> {
    if texts.len() > MAX_PROOF_HASHES {
        return Err(BundleError::ProofTooLong(texts.len()));
    }
    let mut hashes = Vec::with_capacity(texts.len());
    for (index, text) in texts.iter().enumerate() {
        hashes.push(decode_hash(index, text.as_ref())?);
    }
    Ok(hashes)
}

/// One proof hash: standard base64 of exactly 32 bytes, decoded in place.
fn decode_hash(index: usize, text: &str) -> Result<Hash, BundleError> {
    // 32 bytes are 44 base64 characters with padding; room for 33 lets a
    // longer input be told apart from a short one.
    let mut buf = [0u8; 33];
    let bad = |detail: String| BundleError::ProofHash { index, detail };
    if text.len() > 48 {
        return Err(bad(format!(
            "{} base64 characters, expected 44",
            text.len()
        )));
    }
    let n = STANDARD
        .decode_slice(text, &mut buf)
        .map_err(|e| bad(e.to_string()))?;
    match buf.get(..n).map(Hash::try_from) {
        Some(Ok(hash)) => Ok(hash),
        _ => Err(bad(format!("{n} bytes, expected 32"))),
    }
}

/// Base64 (standard, padded) of each hash, for JSON output.
pub fn encode_hashes(hashes: &[Hash]) -> Vec<JsonStr<'static>> {
    hashes
        .iter()
        .map(|h| JsonStr(Cow::Owned(STANDARD.encode(h))))
        .collect()
}

/// The JSON written for a bundle (field order as spec/verify.md "The bundle").
#[derive(Serialize)]
struct BundleOut<'a> {
    media_type: &'a str,
    receipt_id: &'a str,
    envelope: &'a RawValue,
    log: RawLogProof<'a>,
}

impl Bundle {
    /// Parse and fully decode a bundle.
    pub fn from_json(bytes: &[u8]) -> Result<Bundle, BundleError> {
        let raw = RawBundle::parse(bytes)?;
        let envelope = Envelope::from_json(raw.envelope.get().as_bytes())?;
        let inclusion = raw.inclusion_hashes()?;
        let log = LogProof {
            origin: raw.log.origin.into_owned(),
            index: raw.log.index,
            tree_size: raw.log.tree_size,
            inclusion,
            checkpoint: raw.log.checkpoint.into_owned(),
        };
        Ok(Bundle {
            receipt_id: raw.receipt_id.into_owned(),
            envelope,
            log,
        })
    }

    /// The bundle as JSON text (media type `application/vnd.rcpt.bundle.v1+json`).
    pub fn to_json(&self) -> String {
        let envelope = self.envelope.to_json();
        // An envelope's own JSON is always valid JSON; fall back to `null`
        // (Box<RawValue>'s default) rather than panic if that ever stopped holding.
        let raw = RawValue::from_string(envelope).unwrap_or_default();
        let out = BundleOut {
            media_type: BUNDLE_MEDIA_TYPE,
            receipt_id: &self.receipt_id,
            envelope: &raw,
            log: RawLogProof {
                origin: Cow::Borrowed(&self.log.origin),
                index: self.log.index,
                tree_size: self.log.tree_size,
                inclusion: encode_hashes(&self.log.inclusion),
                checkpoint: Cow::Borrowed(&self.log.checkpoint),
            },
        };
        serde_json::to_string_pretty(&out).unwrap_or_default()
    }
}

/// Why a tlog-proof could not become a bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProofBundleError {
    /// The tlog-proof itself was refused.
    #[error(transparent)]
    Proof(#[from] TlogProofError),
    /// No `extra` line: an `rcpt` proof carries its log entry there.
    #[error(
        "tlog-proof has no extra line; an rcpt proof carries the log entry (the envelope) there"
    )]
    NoEntry,
    /// `extra` is not an `rcpt` log entry.
    #[error("extra is not an rcpt log entry")]
    Entry(#[source] crate::receipt::dsse::EntryError),
}

impl TlogProof {
    /// The bundle that states what this proof states: the envelope decoded
    /// from `extra` (the log entry), origin and tree size from the
    /// checkpoint, index, inclusion proof and checkpoint as given. A
    /// tlog-proof claims no receipt id, so the bundle's is the payload's.
    pub fn to_bundle(&self) -> Result<Bundle, ProofBundleError> {
        let entry = self.extra.as_deref().ok_or(ProofBundleError::NoEntry)?;
        let envelope = Envelope::from_entry(entry).map_err(ProofBundleError::Entry)?;
        Ok(Bundle {
            receipt_id: crate::receipt::canonical::identity(&envelope.payload).to_string(),
            envelope,
            log: LogProof {
                origin: self.body.origin.clone(),
                index: self.index,
                tree_size: self.body.size,
                inclusion: self.inclusion.clone(),
                checkpoint: self.checkpoint.clone(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = BUNDLE_MEDIA_TYPE;

    fn doc(media: &str, extra_top: &str, extra_log: &str) -> String {
        format!(
            r#"{{"media_type": "{media}", "receipt_id": "x"{extra_top}, "envelope": {{}},
               "log": {{"origin": "o", "index": 0, "tree_size": 1, "inclusion": [],
                        "checkpoint": "c"{extra_log}}}}}"#
        )
    }

    #[test]
    fn strings_are_borrowed_unless_escaped_and_escapes_are_read() {
        let hash = STANDARD.encode([0xffu8; 32]);
        assert!(hash.contains('/'));
        let plain = format!(
            r#"{{"media_type": "{V1}", "receipt_id": "x", "envelope": {{"a": 1}},
               "log": {{"origin": "o", "index": 0, "tree_size": 2, "inclusion": ["{hash}"],
                        "checkpoint": "c\n"}}}}"#
        );
        let raw = RawBundle::parse(plain.as_bytes()).unwrap();
        assert!(matches!(raw.receipt_id, Cow::Borrowed("x")));
        assert!(matches!(raw.log.origin, Cow::Borrowed("o")));
        assert!(matches!(&raw.log.inclusion[0].0, Cow::Borrowed(h) if *h == hash));
        assert_eq!(raw.envelope.get(), r#"{"a": 1}"#);
        // An escape is unescaped into its own buffer: "\/" is "/".
        assert_eq!(raw.log.checkpoint, "c\n");
        let escaped = plain.replace(&hash, &hash.replace('/', "\\/"));
        assert_ne!(escaped, plain);
        let raw = RawBundle::parse(escaped.as_bytes()).unwrap();
        assert!(matches!(&raw.log.inclusion[0].0, Cow::Owned(h) if *h == hash));
        assert_eq!(raw.inclusion_hashes().unwrap(), vec![[0xffu8; 32]]);
    }

    #[test]
    fn one_parse_refuses_repeats_and_unknown_fields_at_every_level() {
        assert!(RawBundle::parse(doc(V1, "", "").as_bytes()).is_ok());
        for (top, log) in [
            (r#", "receipt_id": "y""#, ""),
            ("", r#", "index": 1"#),
            (r#", "extra": 1"#, ""),
            ("", r#", "extra": 1"#),
        ] {
            let err = RawBundle::parse(doc(V1, top, log).as_bytes()).unwrap_err();
            assert!(matches!(err, BundleError::Json(_)), "{top} {log}: {err:?}");
        }
    }

    #[test]
    fn another_media_type_is_unsupported_whatever_its_shape() {
        let v2 = "application/vnd.rcpt.bundle.v2+json";
        for text in [
            doc(v2, "", ""),
            format!(r#"{{"media_type": "{v2}", "anything": [1]}}"#),
        ] {
            let err = RawBundle::parse(text.as_bytes()).unwrap_err();
            assert_eq!(
                err,
                BundleError::UnsupportedMediaType(v2.to_string()),
                "{text}"
            );
        }
        // ...unless the document is not even strict JSON.
        let dup = format!(r#"{{"media_type": "{v2}", "a": 1, "a": 2}}"#);
        assert!(matches!(
            RawBundle::parse(dup.as_bytes()),
            Err(BundleError::Json(_))
        ));
        let none = r#"{"receipt_id": "x"}"#;
        assert!(matches!(
            RawBundle::parse(none.as_bytes()),
            Err(BundleError::Json(_))
        ));
    }

    #[test]
    fn size_limit_before_parsing() {
        let big = vec![b' '; MAX_BUNDLE_BYTES + 1];
        assert!(
            matches!(RawBundle::parse(&big), Err(BundleError::TooLarge(n)) if n == MAX_BUNDLE_BYTES + 1)
        );
    }

    #[test]
    fn proof_hashes_are_32_bytes_and_at_most_63() {
        let ok = encode_hashes(&[[1u8; 32], [2u8; 32]]);
        assert_eq!(decode_hashes(&ok), Ok(vec![[1u8; 32], [2u8; 32]]));
        let short = vec![STANDARD.encode([0u8; 31])];
        assert!(matches!(
            decode_hashes(&short),
            Err(BundleError::ProofHash { index: 0, .. })
        ));
        let long = encode_hashes(&[[0u8; 32]; 64]);
        assert_eq!(decode_hashes(&long), Err(BundleError::ProofTooLong(64)));
    }
}
