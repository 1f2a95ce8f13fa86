//! digest: the text digests of the receipt data model,
//! `blake3:<64 lowercase hex>` and `sha256:<64 lowercase hex>`.
//!
//! Parsing is strict: the prefix, exactly 64 characters, lowercase hex only.
//! Equality between digests is constant time.

use crate::constants::{BLAKE3_PREFIX, SHA256_PREFIX};
use std::fmt;
use std::str::FromStr;
use subtle::ConstantTimeEq;

/// Which hash function produced a digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// BLAKE3 with 32-byte output: receipt identity.
    Blake3,
    /// SHA-256: interop digest and other ecosystems' identifiers.
    Sha256,
}

impl Algorithm {
    /// The text prefix, colon included.
    pub fn prefix(self) -> &'static str {
        match self {
            Algorithm::Blake3 => BLAKE3_PREFIX,
            Algorithm::Sha256 => SHA256_PREFIX,
        }
    }
}

/// A 32-byte digest tagged with its algorithm.
#[derive(Clone, Copy, Debug, Eq, PartialOrd, Ord)]
pub struct Digest {
    /// The algorithm named by the prefix.
    pub algorithm: Algorithm,
    /// The raw digest bytes.
    pub bytes: [u8; 32],
}

impl PartialEq for Digest {
    fn eq(&self, other: &Self) -> bool {
        self.algorithm == other.algorithm && bool::from(self.bytes.ct_eq(&other.bytes))
    }
}

impl std::hash::Hash for Digest {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Consistent with `eq`: equal digests hash equally.
        self.algorithm.hash(state);
        self.bytes.hash(state);
    }
}

impl Digest {
    /// `blake3:` digest of `data`.
    pub fn blake3(data: &[u8]) -> Digest {
        Digest {
            algorithm: Algorithm::Blake3,
            bytes: *blake3::hash(data).as_bytes(),
        }
    }

    /// `sha256:` digest of `data`.
    pub fn sha256(data: &[u8]) -> Digest {
        use sha2::Digest as _;
        Digest {
            algorithm: Algorithm::Sha256,
            bytes: sha2::Sha256::digest(data).into(),
        }
    }
}

/// Why a digest string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DigestError {
    /// Neither `blake3:` nor `sha256:` starts the string.
    #[error("digest must start with \"blake3:\" or \"sha256:\"")]
    UnknownPrefix,
    /// The hex part is not exactly 64 characters.
    #[error("digest must have exactly 64 hex characters after the prefix, found {0}")]
    BadLength(usize),
    /// A character outside `0-9a-f` (uppercase is refused: one value, one spelling).
    #[error("digest hex must be lowercase 0-9a-f")]
    BadHex,
}

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (algorithm, hex) = if let Some(rest) = s.strip_prefix(BLAKE3_PREFIX) {
            (Algorithm::Blake3, rest)
        } else if let Some(rest) = s.strip_prefix(SHA256_PREFIX) {
            (Algorithm::Sha256, rest)
        } else {
            return Err(DigestError::UnknownPrefix);
        };
        if hex.len() != 64 {
            return Err(DigestError::BadLength(hex.len()));
        }
        let mut bytes = [0u8; 32];
        // One check at the end instead of one per digit: an invalid digit
        // reads as INVALID, and `bad` collects the high bits.
        let mut bad = 0u8;
        for (out, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let &[high, low] = pair else {
                return Err(DigestError::BadLength(hex.len()));
            };
            let (h, l) = (hex_value(high), hex_value(low));
            bad |= h | l;
            *out = (h << 4) | (l & 0x0f);
        }
        if bad & INVALID != 0 {
            return Err(DigestError::BadHex);
        }
        Ok(Digest { algorithm, bytes })
    }
}

/// What [`hex_value`] gives for a byte that is not a lowercase hex digit.
const INVALID: u8 = 0x80;

/// The value of a lowercase hex digit, or [`INVALID`].
fn hex_value(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => INVALID,
    }
}

/// The lowercase hex digit of a nibble (`n` < 16).
fn hex_digit(n: u8) -> u8 {
    if n < 10 { b'0' + n } else { b'a' + n - 10 }
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(hex_digit(b >> 4)));
        s.push(char::from(hex_digit(b & 0x0f)));
    }
    s
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut hex = [0u8; 64];
        for (pair, b) in hex.chunks_exact_mut(2).zip(self.bytes) {
            if let [high, low] = pair {
                *high = hex_digit(b >> 4);
                *low = hex_digit(b & 0x0f);
            }
        }
        f.write_str(self.algorithm.prefix())?;
        // ASCII digits only, so always UTF-8.
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_uppercase() {
        let d = Digest::blake3(b"abc");
        let s = d.to_string();
        assert!(s.starts_with("blake3:"));
        assert_eq!(s.parse::<Digest>(), Ok(d));
        assert_eq!(
            s.to_uppercase()
                .replace("BLAKE3", "blake3")
                .parse::<Digest>(),
            Err(DigestError::BadHex)
        );
        assert_eq!(
            "sha256:00".parse::<Digest>(),
            Err(DigestError::BadLength(2))
        );
        assert_eq!("md5:00".parse::<Digest>(), Err(DigestError::UnknownPrefix));
        // Every ASCII byte that is not a lowercase hex digit, at four places
        // (a lone byte of 0x80 or more is not UTF-8, so not a `str`).
        let good = d.to_string();
        for bad in (0u8..=255).filter(|b| !b"0123456789abcdef".contains(b)) {
            for at in [7, 8, 40, 70] {
                let mut text = good.clone().into_bytes();
                text[at] = bad;
                if let Ok(text) = String::from_utf8(text) {
                    assert_eq!(text.parse::<Digest>(), Err(DigestError::BadHex), "{text}");
                }
            }
        }
        // Every digit value at both nibble positions.
        let all = "blake3:00112233445566778899aabbccddeeff0123456789abcdef0f1e2d3c4b5a6978";
        let parsed: Digest = all.parse().unwrap();
        assert_eq!(parsed.to_string(), all);
        assert_eq!(
            &parsed.bytes[..8],
            &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]
        );
        assert_eq!(to_hex(&parsed.bytes), &all[7..]);
        // SHA-256("abc"), FIPS 180-2 example.
        assert_eq!(
            Digest::sha256(b"abc").to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
