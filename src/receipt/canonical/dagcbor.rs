//! dagcbor: strict canonical DAG-CBOR for the receipt data model.
//!
//! Boundary: bytes ⇄ [`Value`]. The encoder writes the one canonical form
//! (IPLD DAG-CBOR spec, "Strictness"; RFC 8949 section 4.2.1 with the
//! length-first key order of RFC 7049 section 3.9). The decoder accepts
//! that form only: it never normalises, so two byte strings that mean one
//! value cannot both pass and land on two identities. No I/O, no hashing.
//!
//! Refusals come in two kinds (see [`DecodeError::reason_code`]):
//! well-formed CBOR of the data model written in a non-canonical way
//! (`payload.non_canonical`), and bytes that are not one well-formed data
//! item of the data model at all (`payload.malformed`).

use super::{MAX_SAFE_INTEGER, Value, ValueRef};
use crate::limits::MAX_VALUE_DEPTH;
use crate::reason::Reason;
use std::cmp::Ordering;

/// CBOR major types (RFC 8949 section 3.1).
const MAJOR_UNSIGNED: u8 = 0;
const MAJOR_NEGATIVE: u8 = 1;
const MAJOR_BYTES: u8 = 2;
const MAJOR_TEXT: u8 = 3;
const MAJOR_ARRAY: u8 = 4;
const MAJOR_MAP: u8 = 5;
const MAJOR_TAG: u8 = 6;
const MAJOR_SIMPLE: u8 = 7;

/// Simple values of major type 7 the data model holds (RFC 8949 section 3.3).
const SIMPLE_FALSE: u8 = 20;
const SIMPLE_TRUE: u8 = 21;
const SIMPLE_NULL: u8 = 22;
const SIMPLE_UNDEFINED: u8 = 23;

/// Additional-information value that marks an indefinite length.
const AI_INDEFINITE: u8 = 31;

/// Why bytes were refused by the strict decoder. Offsets count bytes from
/// the start of the input and point at the head of the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside an item.
    #[error("CBOR ends at byte {len} inside the item at offset {offset}: the bytes are truncated")]
    Truncated { offset: usize, len: usize },
    /// Additional information 28..=30 is reserved (RFC 8949 section 3).
    #[error("reserved CBOR additional information {info} at offset {offset}: not CBOR")]
    Reserved { offset: usize, info: u8 },
    /// An integer or length head longer than needed.
    #[error(
        "non-shortest CBOR head at offset {offset} (value {value}): \
         canonical DAG-CBOR writes every integer and length in its shortest form"
    )]
    NonShortest { offset: usize, value: u64 },
    /// An indefinite-length string, array or map.
    #[error("indefinite length at offset {offset}: canonical DAG-CBOR uses definite lengths only")]
    Indefinite { offset: usize },
    /// A break byte (0xff) outside an indefinite-length item.
    #[error("stray CBOR break byte at offset {offset}")]
    StrayBreak { offset: usize },
    /// Map keys not in canonical order (shorter first, then bytewise).
    #[error(
        "map key {key:?} at offset {offset} is out of order: canonical DAG-CBOR sorts keys \
         shorter first, then bytewise"
    )]
    UnsortedKey { offset: usize, key: String },
    /// The same key twice in one map.
    #[error("duplicate map key {key:?} at offset {offset}: each key may appear once")]
    DuplicateKey { offset: usize, key: String },
    /// An integer outside ±(2^53-1).
    #[error(
        "integer at offset {offset} is outside the data model's range ±(2^53-1) \
         (found {magnitude_desc})"
    )]
    IntegerOutOfRange {
        offset: usize,
        magnitude_desc: String,
    },
    /// A floating-point number (the data model has none).
    #[error("floating-point number at offset {offset}: the data model holds integers only")]
    Float { offset: usize },
    /// A CBOR tag (the data model has none; CIDs, tag 42, included).
    #[error("CBOR tag {tag} at offset {offset}: the data model has no tags")]
    Tag { offset: usize, tag: u64 },
    /// A simple value other than false, true and null (undefined included).
    #[error("CBOR simple value {value} at offset {offset}: only false, true and null are allowed")]
    Simple { offset: usize, value: u8 },
    /// A map key that is not a text string.
    #[error("map key at offset {offset} is not a text string")]
    NonTextKey { offset: usize },
    /// A text string that is not valid UTF-8.
    #[error("text string at offset {offset} is not valid UTF-8")]
    InvalidUtf8 { offset: usize },
    /// Arrays and maps nested deeper than `MAX_VALUE_DEPTH`.
    #[error("nesting deeper than {max} at offset {offset}", max = MAX_VALUE_DEPTH)]
    TooDeep { offset: usize },
    /// Bytes after the one top-level item.
    #[error("{count} trailing byte(s) after the CBOR item, starting at offset {offset}")]
    TrailingBytes { offset: usize, count: usize },
}

impl DecodeError {
    /// Stable reason code: `payload.non_canonical` for well-formed CBOR that
    /// is not in canonical form, `payload.malformed` otherwise.
    ///
    /// Duplicate keys count as non-canonical: the bytes are well-formed CBOR
    /// (RFC 8949 section 5.6 calls such a map "invalid", not ill-formed) and
    /// fail the canonical rule that keys strictly increase.
    pub fn reason_code(&self) -> Reason {
        match self {
            DecodeError::NonShortest { .. }
            | DecodeError::Indefinite { .. }
            | DecodeError::UnsortedKey { .. }
            | DecodeError::DuplicateKey { .. } => Reason::PayloadNonCanonical,
            _ => Reason::PayloadMalformed,
        }
    }
}

/// Canonical DAG-CBOR order of two map keys: shorter first, then bytewise
/// (IPLD DAG-CBOR spec, "Strictness", map key sorting).
pub fn key_order(a: &str, b: &str) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// Canonical DAG-CBOR encoding of `value`.
///
/// Integers are written in their shortest form whatever their size; the
/// data model's range ±(2^53-1) is kept by the value's producers (the JSON
/// reader and the decoder refuse anything outside it).
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&value.borrow(), &mut out);
    out
}

/// Append the canonical encoding of a borrowed value to `out` (as
/// [`encode`]; a map's keys must be unique and are written in
/// [`key_order`] whatever their order in the map).
pub fn encode_into(value: &ValueRef<'_>, out: &mut Vec<u8>) {
    match value {
        ValueRef::Null => out.push(MAJOR_SIMPLE << 5 | SIMPLE_NULL),
        ValueRef::Bool(b) => {
            out.push(MAJOR_SIMPLE << 5 | if *b { SIMPLE_TRUE } else { SIMPLE_FALSE });
        }
        ValueRef::Integer(n) if *n >= 0 => write_head(out, MAJOR_UNSIGNED, n.unsigned_abs()),
        // -1 - n fits u64 for every negative i64: |n| - 1.
        ValueRef::Integer(n) => write_head(out, MAJOR_NEGATIVE, n.unsigned_abs() - 1),
        ValueRef::Text(s) => {
            write_head(out, MAJOR_TEXT, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        ValueRef::Bytes(b) => {
            write_head(out, MAJOR_BYTES, b.len() as u64);
            out.extend_from_slice(b);
        }
        ValueRef::Array(items) => {
            write_head(out, MAJOR_ARRAY, items.len() as u64);
            items.iter().for_each(|item| encode_into(item, out));
        }
        ValueRef::Map(map) => {
            write_head(out, MAJOR_MAP, map.len() as u64);
            let mut entries: Vec<&(&str, ValueRef<'_>)> = map.iter().collect();
            entries.sort_by(|a, b| key_order(a.0, b.0));
            for (key, item) in entries {
                write_head(out, MAJOR_TEXT, key.len() as u64);
                out.extend_from_slice(key.as_bytes());
                encode_into(item, out);
            }
        }
    }
}

/// Write a head in its shortest form (RFC 8949 section 4.2.1, "preferred
/// serialization": arguments below 24 in the initial byte, else 1, 2, 4 or
/// 8 bytes, the fewest that hold the argument).
fn write_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let m = major << 5;
    if arg < 24 {
        out.push(m | arg as u8);
    } else if let Ok(v) = u8::try_from(arg) {
        out.extend_from_slice(&[m | 24, v]);
    } else if let Ok(v) = u16::try_from(arg) {
        out.push(m | 25);
        out.extend_from_slice(&v.to_be_bytes());
    } else if let Ok(v) = u32::try_from(arg) {
        out.push(m | 26);
        out.extend_from_slice(&v.to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&arg.to_be_bytes());
    }
}

/// Decode canonical bytes only; anything else is refused.
///
/// Accepts exactly one data item with nothing after it, in the form
/// [`encode`] writes: shortest heads, definite lengths, map keys of text
/// strictly increasing in [`key_order`], valid UTF-8, integers within
/// ±(2^53-1), no floats, tags or simple values other than false, true and
/// null, nesting at most `MAX_VALUE_DEPTH`. Every length is checked against
/// the remaining input before anything is allocated.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    decode_ref(bytes).map(|v| v.to_value())
}

/// [`decode`], borrowing texts, byte strings and keys from `bytes` (the
/// same refusals; only arrays and maps are allocated).
pub fn decode_ref(bytes: &[u8]) -> Result<ValueRef<'_>, DecodeError> {
    let mut d = Decoder { bytes, pos: 0 };
    let value = d.item(0)?;
    if d.pos < bytes.len() {
        return Err(DecodeError::TrailingBytes {
            offset: d.pos,
            count: bytes.len() - d.pos,
        });
    }
    Ok(value)
}

/// One head: major type, additional information and argument.
struct Head {
    offset: usize,
    major: u8,
    info: u8,
    arg: u64,
}

/// A cursor over the input.
struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Bytes left after the cursor.
    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// Take `n` bytes, or report truncation of the item at `offset`.
    fn take(&mut self, n: usize, offset: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let slice = end.and_then(|e| self.bytes.get(self.pos..e));
        match (end, slice) {
            (Some(e), Some(s)) => {
                self.pos = e;
                Ok(s)
            }
            _ => Err(DecodeError::Truncated {
                offset,
                len: self.bytes.len(),
            }),
        }
    }

    /// Read one head and check that its argument is in shortest form.
    fn head(&mut self) -> Result<Head, DecodeError> {
        let offset = self.pos;
        // `take(1)` returned exactly one byte, so `first()` is `Some`.
        let first = self.take(1, offset)?.first().copied().unwrap_or_default();
        let (major, info) = (first >> 5, first & 0x1f);
        let arg = match info {
            0..=23 => u64::from(info),
            24..=27 => self.argument(major, info, offset)?,
            AI_INDEFINITE if major == MAJOR_SIMPLE => {
                return Err(DecodeError::StrayBreak { offset });
            }
            AI_INDEFINITE if (MAJOR_BYTES..=MAJOR_MAP).contains(&major) => {
                return Err(DecodeError::Indefinite { offset });
            }
            _ => return Err(DecodeError::Reserved { offset, info }),
        };
        Ok(Head {
            offset,
            major,
            info,
            arg,
        })
    }

    /// The 1, 2, 4 or 8 argument bytes after an initial byte with
    /// additional information 24..=27, refused if a shorter head would do.
    /// Major types 6 and 7 are exempt: tags and floats are outside the data
    /// model whatever their head, and are refused as such by the caller.
    fn argument(&mut self, major: u8, info: u8, offset: usize) -> Result<u64, DecodeError> {
        let width = 1usize << info.saturating_sub(24);
        let raw = self.take(width, offset)?;
        let arg = raw.iter().fold(0u64, |acc, b| acc << 8 | u64::from(*b));
        let min = match info {
            24 => 24,
            25 => 1 << 8,
            26 => 1 << 16,
            _ => 1 << 32,
        };
        if arg < min && major != MAJOR_SIMPLE && major != MAJOR_TAG {
            return Err(DecodeError::NonShortest { offset, value: arg });
        }
        Ok(arg)
    }

    /// Decode one item at nesting `depth` (0 for the top level).
    fn item(&mut self, depth: usize) -> Result<ValueRef<'a>, DecodeError> {
        let head = self.head()?;
        match head.major {
            MAJOR_UNSIGNED => unsigned(&head),
            MAJOR_NEGATIVE => negative(&head),
            MAJOR_BYTES => Ok(ValueRef::Bytes(self.string(&head)?)),
            MAJOR_TEXT => Ok(ValueRef::Text(self.text(&head)?)),
            MAJOR_ARRAY => self.array(&head, depth),
            MAJOR_MAP => self.map(&head, depth),
            MAJOR_TAG => Err(DecodeError::Tag {
                offset: head.offset,
                tag: head.arg,
            }),
            _ => simple(&head),
        }
    }

    /// The content bytes of a byte or text string, bounded by the input.
    fn string(&mut self, head: &Head) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(head.arg).unwrap_or(usize::MAX);
        self.take(len, head.offset)
    }

    /// A text string: valid UTF-8 required.
    fn text(&mut self, head: &Head) -> Result<&'a str, DecodeError> {
        let offset = head.offset;
        let raw = self.string(head)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { offset })
    }

    /// Refuse nesting beyond the limit, and a count of items that the
    /// remaining input cannot hold (each item takes at least one byte), so
    /// that no allocation is driven by a header larger than the input.
    fn container_len(
        &self,
        head: &Head,
        depth: usize,
        per_item: usize,
    ) -> Result<usize, DecodeError> {
        if depth >= MAX_VALUE_DEPTH {
            return Err(DecodeError::TooDeep {
                offset: head.offset,
            });
        }
        usize::try_from(head.arg)
            .ok()
            .filter(|n| n.saturating_mul(per_item) <= self.remaining())
            .ok_or(DecodeError::Truncated {
                offset: head.offset,
                len: self.bytes.len(),
            })
    }

    /// An array of definite length.
    fn array(&mut self, head: &Head, depth: usize) -> Result<ValueRef<'a>, DecodeError> {
        let len = self.container_len(head, depth, 1)?;
        let mut items = Vec::with_capacity(len);
        for _ in 0..len {
            items.push(self.item(depth + 1)?);
        }
        Ok(ValueRef::Array(items))
    }

    /// A map of definite length whose text keys strictly increase.
    fn map(&mut self, head: &Head, depth: usize) -> Result<ValueRef<'a>, DecodeError> {
        let len = self.container_len(head, depth, 2)?;
        let mut map: Vec<(&'a str, ValueRef<'a>)> = Vec::with_capacity(len);
        for _ in 0..len {
            let key_head = self.head()?;
            if key_head.major != MAJOR_TEXT {
                return Err(DecodeError::NonTextKey {
                    offset: key_head.offset,
                });
            }
            let key = self.text(&key_head)?;
            check_key_order(map.last().map(|(k, _)| *k), key, key_head.offset)?;
            let item = self.item(depth + 1)?;
            map.push((key, item));
        }
        Ok(ValueRef::Map(map))
    }
}

/// Keys must strictly increase in [`key_order`]: equal is a duplicate,
/// smaller is out of order.
fn check_key_order(previous: Option<&str>, key: &str, offset: usize) -> Result<(), DecodeError> {
    match previous.map(|p| key_order(p, key)) {
        Some(Ordering::Equal) => Err(DecodeError::DuplicateKey {
            offset,
            key: key.to_owned(),
        }),
        Some(Ordering::Greater) => Err(DecodeError::UnsortedKey {
            offset,
            key: key.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Major type 0 within the data model's range.
fn unsigned<'a>(head: &Head) -> Result<ValueRef<'a>, DecodeError> {
    i64::try_from(head.arg)
        .ok()
        .filter(|n| *n <= MAX_SAFE_INTEGER)
        .map(ValueRef::Integer)
        .ok_or_else(|| DecodeError::IntegerOutOfRange {
            offset: head.offset,
            magnitude_desc: head.arg.to_string(),
        })
}

/// Major type 1 (the value -1 - arg) within the data model's range.
fn negative<'a>(head: &Head) -> Result<ValueRef<'a>, DecodeError> {
    i64::try_from(head.arg)
        .ok()
        .filter(|n| *n < MAX_SAFE_INTEGER)
        .map(|n| ValueRef::Integer(-1 - n))
        .ok_or_else(|| DecodeError::IntegerOutOfRange {
            offset: head.offset,
            magnitude_desc: format!("-1-{}", head.arg),
        })
}

/// Major type 7: false, true and null only.
fn simple<'a>(head: &Head) -> Result<ValueRef<'a>, DecodeError> {
    let offset = head.offset;
    match (head.info, head.arg) {
        (25..=27, _) => Err(DecodeError::Float { offset }),
        (_, a) if a == u64::from(SIMPLE_FALSE) && head.info < 24 => Ok(ValueRef::Bool(false)),
        (_, a) if a == u64::from(SIMPLE_TRUE) && head.info < 24 => Ok(ValueRef::Bool(true)),
        (_, a) if a == u64::from(SIMPLE_NULL) && head.info < 24 => Ok(ValueRef::Null),
        (_, a) => Err(DecodeError::Simple {
            offset,
            value: u8::try_from(a).unwrap_or(SIMPLE_UNDEFINED),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn heads_are_shortest_at_every_boundary() {
        for (n, h) in [
            (0i64, "00"),
            (23, "17"),
            (24, "1818"),
            (255, "18ff"),
            (256, "190100"),
            (65535, "19ffff"),
            (65536, "1a00010000"),
            (4294967295, "1affffffff"),
            (4294967296, "1b0000000100000000"),
            (MAX_SAFE_INTEGER, "1b001fffffffffffff"),
            (-1, "20"),
            (-24, "37"),
            (-25, "3818"),
            (-MAX_SAFE_INTEGER, "3b001ffffffffffffe"),
        ] {
            let bytes = encode(&Value::Integer(n));
            assert_eq!(bytes, hex(h), "encode {n}");
            assert_eq!(decode(&bytes), Ok(Value::Integer(n)), "decode {n}");
        }
    }

    #[test]
    fn range_edges_are_refused() {
        // 2^53 and -(2^53): one past the data model on each side.
        let e = decode(&hex("1b0020000000000000")).unwrap_err();
        assert!(matches!(e, DecodeError::IntegerOutOfRange { .. }));
        let e = decode(&hex("3b001fffffffffffff")).unwrap_err();
        assert!(matches!(e, DecodeError::IntegerOutOfRange { .. }));
        assert_eq!(e.reason_code(), "payload.malformed");
    }

    #[test]
    fn map_keys_sort_length_first() {
        let mut m = BTreeMap::new();
        for k in ["b", "aa", "a", "ab"] {
            m.insert(k.to_string(), Value::Null);
        }
        let bytes = encode(&Value::Map(m.clone()));
        assert_eq!(bytes, hex("a46161f66162f6626161f6626162f6"));
        assert_eq!(decode(&bytes), Ok(Value::Map(m)));
    }

    #[test]
    fn refusals_name_offset_and_kind() {
        let e = decode(&hex("a2616202616101")).unwrap_err();
        assert_eq!(
            e,
            DecodeError::UnsortedKey {
                offset: 4,
                key: "a".into()
            }
        );
        assert_eq!(e.reason_code(), "payload.non_canonical");
        for (input, want) in [
            (
                "82011801",
                DecodeError::NonShortest {
                    offset: 2,
                    value: 1,
                },
            ),
            ("f93e00", DecodeError::Float { offset: 0 }),
            (
                "f818",
                DecodeError::Simple {
                    offset: 0,
                    value: 24,
                },
            ),
            (
                "0102",
                DecodeError::TrailingBytes {
                    offset: 1,
                    count: 1,
                },
            ),
        ] {
            assert_eq!(decode(&hex(input)).unwrap_err(), want, "{input}");
        }
        assert_eq!(
            decode(&[]),
            Err(DecodeError::Truncated { offset: 0, len: 0 })
        );
        assert!(matches!(
            decode(&hex("ff")),
            Err(DecodeError::StrayBreak { .. })
        ));
        assert!(matches!(
            decode(&hex("1c")),
            Err(DecodeError::Reserved { .. })
        ));
        assert!(matches!(
            decode(&hex("a10102")),
            Err(DecodeError::NonTextKey { .. })
        ));
    }

    #[test]
    fn huge_length_headers_do_not_allocate() {
        // An array, a map and a string claiming 2^64-1 items/bytes in 9 bytes.
        for h in [
            "9bffffffffffffffff",
            "bbffffffffffffffff",
            "5bffffffffffffffff",
        ] {
            assert!(matches!(
                decode(&hex(h)),
                Err(DecodeError::Truncated { .. })
            ));
        }
    }

    #[test]
    fn depth_limit_is_enforced() {
        let ok = [vec![0x81u8; MAX_VALUE_DEPTH], vec![0xf6]].concat();
        assert!(decode(&ok).is_ok());
        let deep = [vec![0x81u8; MAX_VALUE_DEPTH + 1], vec![0xf6]].concat();
        assert!(matches!(decode(&deep), Err(DecodeError::TooDeep { .. })));
        // Far deeper input is refused without recursion blowing the stack.
        let deeper = vec![0x81u8; 1_000_000];
        assert!(matches!(decode(&deeper), Err(DecodeError::TooDeep { .. })));
    }
}
