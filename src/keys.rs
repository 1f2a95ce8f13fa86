//! keys: Ed25519 keys, keyids, PEM files and C2SP signed-note verifier keys.
//!
//! Boundary: key material in and out (bytes, base64, PEM, verifier-key
//! strings) and the two key identifiers `rcpt` uses, the DSSE keyid and the
//! signed-note key hash. No signing or verification policy lives here (see
//! [`crate::receipt::dsse`] and [`crate::tlog::note`]); the only I/O is [`read_key_file`],
//! which reads one file with a size cap.

use crate::constants::NOTE_ED25519_TYPE;
use crate::digest::to_hex;
use crate::limits::MAX_KEY_FILE_BYTES;
use base64::Engine as _;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::{DecodePaddingMode, general_purpose};
use ed25519_dalek::pkcs8::KeypairBytes;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use sha2::Digest as _;
use std::path::Path;

pub use ed25519_dalek::{SigningKey, VerifyingKey};

/// Why a key could not be read or made.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The operating system's random source failed.
    #[error("could not read OS randomness to generate a key")]
    Random(#[source] std::io::Error),
    /// A PKCS#8 private-key PEM did not parse.
    #[error("not an Ed25519 PKCS#8 private key PEM (-----BEGIN PRIVATE KEY-----)")]
    PrivatePem(#[source] ed25519_dalek::pkcs8::Error),
    /// An SPKI public-key PEM did not parse.
    #[error("not an Ed25519 SPKI public key PEM (-----BEGIN PUBLIC KEY-----)")]
    PublicPem(#[source] ed25519_dalek::pkcs8::spki::Error),
    /// A PEM document could not be written.
    #[error("could not encode key as PEM: {0}")]
    PemEncode(String),
    /// Public-key text that is neither PEM nor base64.
    #[error("public key is neither SPKI PEM nor base64 of 32 raw bytes")]
    Base64,
    /// Text in none of the public-key forms [`parse_public_key`] reads.
    #[error(
        "not a public key: expected base64 of the raw 32-byte key, a verifier key \
         NAME+HASH+KEY, or SPKI PEM (`rcpt key show FILE` prints each form)"
    )]
    NotAPublicKey,
    /// A keyid (64 hex digits) where a key is expected.
    #[error(
        "{0} is a keyid (a hash that names a key), not a key: give the public key \
         (`rcpt key show FILE` prints it)"
    )]
    KeyidNotKey(String),
    /// A private key where a public key is expected.
    #[error(
        "this is a private key, where a public key belongs: give the .vkey file beside it \
         (`rcpt key generate` writes PREFIX.key, PREFIX.pub and PREFIX.vkey), or the .pub file"
    )]
    PrivateNotPublic,
    /// A key without a name where one is needed (a log key, known by its
    /// origin; a trust file entry).
    #[error(
        "this key carries no name, and {what} needs one: give the .vkey file `rcpt key \
         generate` wrote (NAME+HASH+KEY), or NAME=KEY (e.g. {example}=KEY)"
    )]
    Unnamed {
        /// What needs the name ("a log key (its name is the log's origin)").
        what: &'static str,
        /// A name to show in the example.
        example: &'static str,
    },
    /// `NAME=VKEY`: a verifier key already carries its name.
    #[error(
        "{outer:?}=... names a verifier key that already carries the name {inner:?}: give the \
         verifier key alone"
    )]
    NamedTwice {
        /// The name before `=`.
        outer: String,
        /// The name inside the verifier key.
        inner: String,
    },
    /// A raw public key of the wrong length.
    #[error("Ed25519 public key must be 32 bytes, found {0}")]
    PublicKeyLength(usize),
    /// 32 bytes that are not a point on the curve.
    #[error("public key bytes do not encode a point on Ed25519")]
    NotOnCurve,
    /// A point whose encoding is not the canonical one (y >= p).
    #[error("public key uses a non-canonical point encoding; re-encode it")]
    NonCanonical,
    /// A small-order point: signatures under it prove nothing.
    #[error("public key is a weak (small-order) point and is refused")]
    Weak,
    /// A signed-note key name that is empty or holds a space or `+`.
    #[error("key name {0:?} is invalid: it must be non-empty, without spaces or '+'")]
    BadName(String),
    /// A verifier key string not of the form `NAME+HASH+KEY`.
    #[error("verifier key must be NAME+<8 hex>+<base64 key>, got {0:?}")]
    VerifierFormat(String),
    /// The key-hash field is not 8 lowercase hex digits.
    #[error("verifier key hash {0:?} must be 8 lowercase hex digits")]
    VerifierHash(String),
    /// The key field is not standard base64 of 33 bytes.
    #[error("verifier key for {name}: key part must be standard base64 of 0x01 || 32 bytes")]
    VerifierKey {
        /// Key name.
        name: String,
    },
    /// A signature type other than Ed25519 (0x01); for 0x04 (a witness's
    /// cosignature key) the message says where such a key goes.
    #[error("{}", unsupported_type(name, *found))]
    UnsupportedType {
        /// Key name.
        name: String,
        /// The type byte found.
        found: u8,
    },
    /// The key hash in the string does not match name and key.
    #[error("verifier key for {name}: key hash {found} does not match the computed {expected}")]
    KeyHashMismatch {
        /// Key name.
        name: String,
        /// Hash in the string.
        found: String,
        /// Hash computed from name and key.
        expected: String,
    },
    /// A key file could not be read (missing, not a regular file, over
    /// [`MAX_KEY_FILE_BYTES`], not text).
    #[error("cannot read the key file")]
    File(#[source] crate::io::InputError),
}

/// The message of [`KeyError::UnsupportedType`].
fn unsupported_type(name: &str, found: u8) -> String {
    if found == crate::constants::NOTE_COSIGNATURE_TYPE {
        format!(
            "verifier key for {name} is a witness key (cosignature/v1, type 0x04): it cosigns \
             checkpoints, and belongs in a policy's `witness` line, not where a log or issuer \
             key is asked for (give that key's .vkey, type 0x01)"
        )
    } else {
        format!(
            "verifier key for {name}: signature type 0x{found:02x} is not supported (only \
             0x01, Ed25519)"
        )
    }
}

/// Base64 that accepts padding or none (used for the URL-safe alphabet and
/// the unpadded standard one).
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

/// Decode base64 in the standard or the URL-safe alphabet (RFC 4648 sections
/// 4 and 5), padded or not, as DSSE requires of verifiers. Non-zero trailing
/// bits are refused, so each byte string has one spelling per alphabet.
pub fn decode_base64_any(text: &str) -> Option<Vec<u8>> {
    STANDARD_ANY_PAD
        .decode(text)
        .or_else(|_| URL_SAFE_ANY_PAD.decode(text))
        .ok()
}

/// A fresh key from the operating system's randomness.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    crate::io::random_bytes(&mut seed).map_err(KeyError::Random)?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    Ok(key)
}

/// keyid: lowercase hex SHA-256 of the raw 32-byte public key (a hint only).
pub fn keyid(key: &VerifyingKey) -> String {
    to_hex(&sha2::Sha256::digest(key.as_bytes()))
}

/// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as openssl writes for Ed25519.
///
/// RFC 8410 section 7: a version-1 `OneAsymmetricKey` carrying only the
/// 32-byte seed, the form `openssl genpkey -algorithm ed25519` writes.
/// (The version-2 form with the public key, which dalek writes by default,
/// is refused by OpenSSL 3.0: "unsupported".)
pub fn signing_key_to_pem(key: &SigningKey) -> String {
    let seed_only = KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    };
    // Encoding 32 known bytes into a fixed DER structure cannot fail; the
    // fallback keeps the signature infallible without a panic path.
    match seed_only.to_pkcs8_pem(LineEnding::LF) {
        Ok(pem) => pem.as_str().to_owned(),
        Err(_) => String::new(),
    }
}

/// Read a PKCS#8 PEM private key.
pub fn signing_key_from_pem(pem: &str) -> Result<SigningKey, KeyError> {
    SigningKey::from_pkcs8_pem(pem.trim()).map_err(KeyError::PrivatePem)
}

/// SPKI PEM (`-----BEGIN PUBLIC KEY-----`), as openssl writes for Ed25519.
pub fn verifying_key_to_pem(key: &VerifyingKey) -> String {
    // As above: a fixed-shape DER of 32 bytes cannot fail to encode.
    key.to_public_key_pem(LineEnding::LF).unwrap_or_default()
}

/// Read a public key: SPKI PEM, or base64 of the raw 32 bytes. Weak
/// (small-order) and non-canonical keys are refused.
pub fn verifying_key_from_text(text: &str) -> Result<VerifyingKey, KeyError> {
    let text = text.trim();
    if text.starts_with("-----BEGIN") {
        let key = VerifyingKey::from_public_key_pem(text).map_err(KeyError::PublicPem)?;
        return verifying_key_from_bytes(key.as_bytes());
    }
    let bytes = decode_base64_any(text).ok_or(KeyError::Base64)?;
    verifying_key_from_bytes(&bytes)
}

/// A public key read from text, with the name a verifier key carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKeyText {
    /// The key.
    pub key: VerifyingKey,
    /// The name, when the text was a verifier key `NAME+HASH+KEY`.
    pub name: Option<String>,
}

/// Read a public key in any form `rcpt key show` prints (spec/keys.md
/// "Reading a public key"), by one fixed rule that no file can shadow:
///
/// 1. `-----BEGIN PUBLIC KEY-----` ...: SPKI PEM;
/// 2. 64 hex digits: a keyid, refused ([`KeyError::KeyidNotKey`]);
/// 3. standard or URL-safe base64 of exactly 32 bytes: the raw key; of
///    other bytes, an SPKI DER (a PEM without its armour lines), else refused;
/// 4. `NAME+<8 hex>+<base64(0x01 || key)>`: a C2SP verifier key, whose key
///    hash must match (the name is returned);
/// 5. anything else: [`KeyError::NotAPublicKey`].
///
/// A private-key PEM is refused ([`KeyError::PrivateNotPublic`]). Weak and
/// non-canonical keys are refused in every form.
pub fn parse_public_key(text: &str) -> Result<PublicKeyText, KeyError> {
    let text = text.trim();
    let unnamed = |key| PublicKeyText { key, name: None };
    if text.starts_with("-----BEGIN PRIVATE KEY-----") {
        return Err(KeyError::PrivateNotPublic);
    }
    if text.starts_with("-----BEGIN") {
        return verifying_key_from_text(text).map(unnamed);
    }
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(KeyError::KeyidNotKey(text.to_owned()));
    }
    let decoded = decode_base64_any(text);
    if let Some(raw) = decoded.as_ref().filter(|raw| raw.len() == 32) {
        return verifying_key_from_bytes(raw).map(unnamed);
    }
    let hash_field = text.split('+').nth(1);
    let looks_like_vkey = hash_field.is_some_and(|h| h.len() == 8);
    if let (Some(raw), false) = (&decoded, looks_like_vkey) {
        // The base64 body of an SPKI PEM (what `sed -n 2p key.pub` gives):
        // the DER of the public key, read as such; other lengths are named.
        return match VerifyingKey::from_public_key_der(raw) {
            Ok(key) => verifying_key_from_bytes(key.as_bytes()).map(unnamed),
            Err(_) => Err(KeyError::PublicKeyLength(raw.len())),
        };
    }
    if text.splitn(3, '+').count() == 3 {
        let verifier = NoteVerifier::parse(text)?;
        return Ok(PublicKeyText {
            key: verifier.key,
            name: Some(verifier.name),
        });
    }
    Err(KeyError::NotAPublicKey)
}

/// Read a public key in every form a key flag takes (spec/keys.md): what
/// [`parse_public_key`] reads, and `NAME=KEY` where KEY is a raw base64 key
/// or SPKI PEM. The whole text is tried as a key first: a raw base64 key's
/// only `=` is its padding, and a verifier key's name holds no `=` that
/// could split it wrongly (its `+` makes the part before `=` no name).
pub fn parse_key_arg(text: &str) -> Result<PublicKeyText, KeyError> {
    let whole = match parse_public_key(text) {
        Ok(parsed) => return Ok(parsed),
        Err(e) => e,
    };
    let Some((name, key)) = text.trim().split_once('=') else {
        return Err(whole);
    };
    if !is_valid_key_name(name) || name.starts_with('-') || key.trim().is_empty() {
        return Err(whole);
    }
    let parsed = parse_public_key(key)?;
    if let Some(inner) = parsed.name {
        return Err(KeyError::NamedTwice {
            outer: name.to_owned(),
            inner,
        });
    }
    Ok(PublicKeyText {
        key: parsed.key,
        name: Some(name.to_owned()),
    })
}

impl PublicKeyText {
    /// The signed-note verifier key of a named key; an unnamed one is
    /// refused ([`KeyError::Unnamed`]), as a log key is known by its name.
    pub fn note_verifier(&self) -> Result<NoteVerifier, KeyError> {
        match &self.name {
            Some(name) => NoteVerifier::new(name, self.key),
            None => Err(KeyError::Unnamed {
                what: "a log key (its name is the log's origin)",
                example: "log.example/receipts",
            }),
        }
    }
}

/// Standard base64 of the raw 32-byte key: the form of a trust file's
/// `public_key` and of `--issuer-key`.
pub fn public_key_base64(key: &VerifyingKey) -> String {
    STANDARD.encode(key.as_bytes())
}

/// Raw 32 bytes to a public key, refusing weak and non-canonical keys.
///
/// RFC 8032 section 5.1.3 decoding, made strict: the point must re-encode
/// to the same bytes (no y >= p, no "negative zero" x), and must not be of
/// small order (ed25519-dalek `is_weak`).
pub fn verifying_key_from_bytes(bytes: &[u8]) -> Result<VerifyingKey, KeyError> {
    let raw: &[u8; 32] = bytes
        .try_into()
        .map_err(|_| KeyError::PublicKeyLength(bytes.len()))?;
    let key = VerifyingKey::from_bytes(raw).map_err(|_| KeyError::NotOnCurve)?;
    if key.to_edwards().compress().as_bytes() != raw {
        return Err(KeyError::NonCanonical);
    }
    if key.is_weak() {
        return Err(KeyError::Weak);
    }
    Ok(key)
}

/// Read a key or verifier-key file as text, at most [`MAX_KEY_FILE_BYTES`]
/// (the capped reader of [`crate::io`]: a FIFO or device is refused).
pub fn read_key_file(path: &Path) -> Result<String, KeyError> {
    crate::io::read_path_text(path, MAX_KEY_FILE_BYTES).map_err(KeyError::File)
}

/// C2SP signed-note: "Key names MUST be non-empty and MUST NOT contain any
/// Unicode spaces or plus (U+002B) characters."
pub fn is_valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

/// C2SP signed-note "Ed25519 signatures": `key ID = SHA-256(key name || 0x0A
/// || 0x01 || 32-byte Ed25519 public key)[:4]`.
pub fn note_key_hash(name: &str, key: &VerifyingKey) -> [u8; 4] {
    typed_key_id(name, NOTE_ED25519_TYPE, key)
}

/// The key ID of a signed-note key of signature type `alg` (0x01 an
/// Ed25519 signer, 0x04 a cosigner): `SHA-256(name || 0x0A || alg ||
/// 32-byte Ed25519 public key)[:4]`.
pub fn typed_key_id(name: &str, alg: u8, key: &VerifyingKey) -> [u8; 4] {
    let mut h = sha2::Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', alg]);
    h.update(key.as_bytes());
    let d: [u8; 32] = h.finalize().into();
    let [a, b, c, e, ..] = d;
    [a, b, c, e]
}

/// A C2SP signed-note Ed25519 verifier key: `NAME+<8 hex>+<base64(0x01||pub)>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteVerifier {
    /// Key name (for a log: its origin).
    pub name: String,
    /// First 4 bytes of SHA-256(name || 0x0A || 0x01 || pub).
    pub key_hash: [u8; 4],
    /// The public key.
    pub key: VerifyingKey,
}

impl NoteVerifier {
    /// Verifier for `key` under `name`.
    pub fn new(name: &str, key: VerifyingKey) -> Result<NoteVerifier, KeyError> {
        if !is_valid_key_name(name) {
            return Err(KeyError::BadName(name.to_owned()));
        }
        let key = verifying_key_from_bytes(key.as_bytes())?;
        Ok(NoteVerifier {
            name: name.to_owned(),
            key_hash: note_key_hash(name, &key),
            key,
        })
    }

    /// Parse a verifier key string (split on the first two `+` only: the
    /// base64 part may itself contain `+`).
    pub fn parse(text: &str) -> Result<NoteVerifier, KeyError> {
        let text = text.trim();
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(hash), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(KeyError::VerifierFormat(text.to_owned()));
        };
        let found = parse_hash_hex(hash)?;
        let bad_key = || KeyError::VerifierKey {
            name: name.to_owned(),
        };
        let raw = STANDARD.decode(b64).map_err(|_| bad_key())?;
        let Some((&kind, public)) = raw.split_first() else {
            return Err(bad_key());
        };
        if kind != NOTE_ED25519_TYPE {
            return Err(KeyError::UnsupportedType {
                name: name.to_owned(),
                found: kind,
            });
        }
        let verifier = NoteVerifier::new(name, verifying_key_from_bytes(public)?)?;
        if verifier.key_hash != found {
            return Err(KeyError::KeyHashMismatch {
                name: name.to_owned(),
                found: hash.to_owned(),
                expected: to_hex(&verifier.key_hash),
            });
        }
        Ok(verifier)
    }
}

/// The 8-lowercase-hex key hash field of a verifier key.
pub(crate) fn parse_hash_hex(hash: &str) -> Result<[u8; 4], KeyError> {
    let bad = || KeyError::VerifierHash(hash.to_owned());
    let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if hash.len() != 8 || !hash.chars().all(lower_hex) {
        return Err(bad());
    }
    let n = u32::from_str_radix(hash, 16).map_err(|_| bad())?;
    Ok(n.to_be_bytes())
}

impl std::fmt::Display for NoteVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_vkey(f, &self.name, &self.key_hash, NOTE_ED25519_TYPE, &self.key)
    }
}

/// A signed-note verifier key of signature type `alg`:
/// `NAME+<8 hex key ID>+<base64(alg||pub)>`.
pub(crate) fn write_vkey(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    id: &[u8; 4],
    alg: u8,
    key: &VerifyingKey,
) -> std::fmt::Result {
    let mut raw = Vec::with_capacity(33);
    raw.push(alg);
    raw.extend_from_slice(key.as_bytes());
    let b64 = general_purpose::STANDARD.encode(raw);
    write!(f, "{name}+{}+{b64}", to_hex(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trips() {
        let key = generate().unwrap();
        let back = signing_key_from_pem(&signing_key_to_pem(&key)).unwrap();
        assert_eq!(back.to_bytes(), key.to_bytes());
        let public = key.verifying_key();
        let pem = verifying_key_to_pem(&public);
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n"));
        assert_eq!(verifying_key_from_text(&pem).unwrap(), public);
    }

    #[test]
    fn weak_and_non_canonical_keys_are_refused() {
        // The identity point (0, 1): small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(matches!(
            verifying_key_from_bytes(&identity),
            Err(KeyError::Weak)
        ));
        // y = p + 1 encodes the same point as y = 1, non-canonically.
        let mut non_canonical = [0xffu8; 32];
        non_canonical[0] = 0xee;
        non_canonical[31] = 0x7f;
        assert!(matches!(
            verifying_key_from_bytes(&non_canonical),
            Err(KeyError::NonCanonical) | Err(KeyError::NotOnCurve)
        ));
        assert!(matches!(
            verifying_key_from_bytes(&[1u8; 31]),
            Err(KeyError::PublicKeyLength(31))
        ));
    }

    #[test]
    fn key_args_take_every_form_and_never_split_a_key() {
        let key = generate().unwrap().verifying_key();
        let b64 = public_key_base64(&key);
        let pem = verifying_key_to_pem(&key);
        let vkey = NoteVerifier::new("gate.example/ci", key)
            .unwrap()
            .to_string();
        let named = |name: &str| PublicKeyText {
            key,
            name: Some(name.to_owned()),
        };
        let unnamed = PublicKeyText { key, name: None };
        assert_eq!(parse_key_arg(&b64).unwrap(), unnamed);
        assert_eq!(parse_key_arg(&pem).unwrap(), unnamed);
        assert_eq!(parse_key_arg(&vkey).unwrap(), named("gate.example/ci"));
        assert_eq!(
            parse_key_arg(&format!("a.b/c={b64}")).unwrap(),
            named("a.b/c")
        );
        assert_eq!(
            parse_key_arg(&format!("a.b/c={pem}")).unwrap(),
            named("a.b/c")
        );
        assert!(matches!(
            parse_key_arg(&format!("x={vkey}")),
            Err(KeyError::NamedTwice { .. })
        ));
        let private = signing_key_to_pem(&generate().unwrap());
        assert!(matches!(
            parse_key_arg(&private),
            Err(KeyError::PrivateNotPublic)
        ));
        assert!(matches!(
            parse_key_arg(&format!("x={private}")),
            Err(KeyError::PrivateNotPublic)
        ));
        assert!(matches!(
            unnamed.note_verifier(),
            Err(KeyError::Unnamed { .. })
        ));
        assert_eq!(
            named("gate.example/ci")
                .note_verifier()
                .unwrap()
                .to_string(),
            vkey
        );
        // A broken raw key is reported as itself, not split at its padding.
        assert!(matches!(
            parse_key_arg("AAAA="),
            Err(KeyError::NotAPublicKey)
        ));
    }

    #[test]
    fn verifier_key_round_trips_and_checks_hash() {
        let key = generate().unwrap().verifying_key();
        let v = NoteVerifier::new("example.com/log", key).unwrap();
        let text = v.to_string();
        assert_eq!(NoteVerifier::parse(&text).unwrap(), v);
        let mut wrong = text.clone();
        wrong.replace_range(16..24, "00000000");
        assert!(NoteVerifier::parse(&wrong).is_err());
        assert!(NoteVerifier::new("has space", key).is_err());
        assert!(NoteVerifier::new("has+plus", key).is_err());
        assert!(NoteVerifier::new("", key).is_err());
    }
}
