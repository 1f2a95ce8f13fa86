//! strictjson: the one entry point for every JSON document `rcpt` reads.
//!
//! serde_json keeps the last of two equal keys, allows 128 levels of
//! nesting, and its derived struct readers accept a JSON *array* in place of
//! an object (`["a", 1]` read as the struct's fields in order). Each of these
//! lets two JSON readers see two different documents in one file. So every
//! input (bundle, envelope, trust file, consistency proof, corpus manifest)
//! is read through [`from_slice`], which
//!
//! 1. walks the document once ([`check`]) and refuses duplicate keys,
//!    nesting deeper than a limit, and trailing data; then
//! 2. deserializes the typed value through [`Strict`], a wrapper around
//!    serde_json's deserializer that refuses anything but a JSON object
//!    wherever a struct is read, at every depth (nested structs, structs in
//!    arrays, maps and options, struct variants).
//!
//! [`from_slice_closed`] skips step 1 for a type closed at every depth
//! (`deny_unknown_fields` everywhere, no free-form maps): the derived
//! readers then refuse a repeated field themselves and the shape bounds the
//! depth. The bundle uses it, so the verifier's hot path parses once.
//!
//! Types read here must not use `#[serde(flatten)]` or `untagged`: those
//! buffer the input and read structs from the buffer, outside the wrapper.

use serde::Deserialize;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Error as _, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use std::borrow::Cow;
use std::fmt;

/// Why a JSON document was refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictJsonError {
    /// An object names `key` twice (`at` is serde_json's line and column).
    #[error("duplicate key \"{key}\" {at}")]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Where, as "at line L column C".
        at: String,
    },
    /// Not JSON, too deep, or trailing data (serde_json's message carries
    /// the line and column).
    #[error("{0}")]
    Invalid(String),
    /// JSON, but not of the specified shape: an array or other value where
    /// an object is specified, a missing, unknown or mistyped field.
    #[error("{0}")]
    Shape(String),
}

/// Read a typed value from untrusted JSON: [`check`] (duplicate keys,
/// `max_depth`, trailing data), then the typed read through [`Strict`]
/// (an object wherever a struct is specified, at every depth).
pub fn from_slice<'de, T: Deserialize<'de>>(
    bytes: &'de [u8],
    max_depth: usize,
) -> Result<T, StrictJsonError> {
    check(bytes, max_depth)?;
    from_slice_closed(bytes)
}

/// The typed read alone, for a type closed at every depth (see the module
/// documentation): an object wherever a struct is specified, no trailing
/// data. Repeated keys are refused by the derived readers of such a type.
pub fn from_slice_closed<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, StrictJsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let shape = |e: serde_json::Error| StrictJsonError::Shape(e.to_string());
    let value = T::deserialize(Strict(&mut de)).map_err(shape)?;
    de.end()
        .map_err(|e| StrictJsonError::Invalid(e.to_string()))?;
    Ok(value)
}

/// Marks the serde error raised for a repeated key, so it can be told apart.
const DUPLICATE_MARKER: &str = "\u{0}duplicate key\u{0}";

/// Refuse duplicate object keys, nesting deeper than `max_depth`, and
/// anything after the document.
pub fn check(bytes: &[u8], max_depth: usize) -> Result<(), StrictJsonError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Walk {
        depth_left: max_depth,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| classify(&e.to_string()))
}

/// Turn serde_json's message back into a typed error.
fn classify(message: &str) -> StrictJsonError {
    match message.strip_prefix(DUPLICATE_MARKER) {
        Some(rest) => {
            let (key, at) = rest.split_once(DUPLICATE_MARKER).unwrap_or((rest, ""));
            StrictJsonError::DuplicateKey {
                key: key.to_string(),
                at: at.trim().to_string(),
            }
        }
        None => StrictJsonError::Invalid(message.to_string()),
    }
}

/// One level of the walk: how many more levels of nesting are allowed.
struct Walk {
    depth_left: usize,
}

impl Walk {
    /// The walker for a nested container, or an error past the limit.
    fn nested<E: serde::de::Error>(&self) -> Result<Walk, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(Walk { depth_left }),
            None => Err(E::custom("JSON nesting is deeper than the limit")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while seq.next_element_seed(Walk { ..inner })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        // Objects here have a handful of keys: a linear scan over borrowed
        // keys costs less than hashing owned ones.
        let mut seen: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format!(
                    "{DUPLICATE_MARKER}{key}{DUPLICATE_MARKER}"
                )));
            }
            seen.push(key);
            map.next_value_seed(Walk { ..inner })?;
        }
        Ok(())
    }
}

/// Reads an object key, borrowing it from the input when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

/// A deserializer that reads structs only from JSON objects.
///
/// It forwards every call to the deserializer it wraps, wrapping in turn
/// every visitor, seed, sequence, map and enum it hands out, so the rule
/// holds at every depth. Where a struct is read (`deserialize_struct`, a
/// struct variant) the visitor refuses a sequence.
pub struct Strict<D>(pub D);

/// What a struct visitor says when handed an array.
const ARRAY_FOR_OBJECT: &str = "found a JSON array where an object is specified";

/// Forward `deserialize_*` methods that take only a visitor.
macro_rules! forward {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap::any(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Wrap::any(visitor))
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrap::any(visitor))
    }
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap::any(visitor))
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, Wrap::any(visitor))
    }
    /// The one place the rule bites: a struct is read from an object only.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_struct(name, fields, Wrap::object(visitor))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap::any(visitor))
    }
    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor that wraps what it is handed; `object_only` refuses sequences.
struct Wrap<V> {
    inner: V,
    object_only: bool,
}

impl<V> Wrap<V> {
    fn any(inner: V) -> Self {
        Wrap {
            inner,
            object_only: false,
        }
    }
    fn object(inner: V) -> Self {
        Wrap {
            inner,
            object_only: true,
        }
    }
}

/// Forward `visit_*` methods that take a plain value.
macro_rules! forward_visit {
    ($($method:ident($ty:ty))*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_f64(f64) visit_char(char)
        visit_str(&str) visit_borrowed_str(&'de str) visit_string(String)
        visit_bytes(&[u8]) visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Strict(d))
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict(d))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        if self.object_only {
            return Err(A::Error::custom(ARRAY_FOR_OBJECT));
        }
        self.inner.visit_seq(WrapSeq(seq))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(WrapMap(map))
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(WrapEnum(data))
    }
}

/// A seed whose deserializer is wrapped in [`Strict`].
struct WrapSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for WrapSeed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

/// Array elements, each read through [`Strict`].
struct WrapSeq<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for WrapSeq<A> {
    type Error = A::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(WrapSeed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// Object keys and values, each read through [`Strict`].
struct WrapMap<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WrapMap<A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(WrapSeed(seed))
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(WrapSeed(seed))
    }
    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// An enum's variant name and content, read through [`Strict`].
struct WrapEnum<A>(A);

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for WrapEnum<A> {
    type Error = A::Error;
    type Variant = WrapEnum<A::Variant>;
    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(WrapSeed(seed))?;
        Ok((value, WrapEnum(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for WrapEnum<A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(WrapSeed(seed))
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap::any(visitor))
    }
    /// A struct variant is a struct: from an object only.
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrap::object(visitor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_duplicates_depth_and_trailing_data() {
        assert!(check(br#"{"a": [1, {"b": null}], "c": "x"}"#, 3).is_ok());
        let dup = check(br#"{"a": 1, "b": {"a": 1, "a": 2}}"#, 8).unwrap_err();
        assert!(
            matches!(&dup, StrictJsonError::DuplicateKey { key, .. } if key == "a"),
            "{dup}"
        );
        assert!(
            dup.to_string().starts_with("duplicate key \"a\" at line 1"),
            "{dup}"
        );
        assert!(check(b"[[[1]]]", 3).is_ok());
        assert!(check(b"[[[[1]]]]", 3).is_err());
        assert!(check(b"{} {}", 3).is_err());
        assert!(check(b"{\"a\":1", 3).is_err());
        // 100,000 nested arrays: refused at the limit, no stack overflow.
        let deep = "[".repeat(100_000);
        assert!(check(deep.as_bytes(), 32).is_err());
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: u8,
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    enum Kind {
        Unit,
        Pair { x: u8 },
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Inner,
        list: Vec<Inner>,
        maybe: Option<Inner>,
        map: std::collections::BTreeMap<String, Inner>,
        kind: Kind,
        raw: Box<serde_json::value::RawValue>,
    }

    const GOOD: &str = r#"{"inner": {"a": 1}, "list": [{"a": 2}], "maybe": {"a": 3},
        "map": {"k": {"a": 4}}, "kind": {"Pair": {"x": 5}}, "raw": [1, {"b": 2}]}"#;

    #[test]
    fn objects_are_read_at_every_depth_and_raw_values_kept() {
        let o: Outer = from_slice(GOOD.as_bytes(), 8).unwrap();
        assert_eq!(o.inner, Inner { a: 1 });
        assert_eq!(o.list, vec![Inner { a: 2 }]);
        assert_eq!(o.maybe, Some(Inner { a: 3 }));
        assert_eq!(o.map.get("k"), Some(&Inner { a: 4 }));
        assert_eq!(o.kind, Kind::Pair { x: 5 });
        assert_eq!(o.raw.get(), r#"[1, {"b": 2}]"#);
        let unit = GOOD.replace(r#"{"Pair": {"x": 5}}"#, r#""Unit""#);
        assert_eq!(
            from_slice::<Outer>(unit.as_bytes(), 8).unwrap().kind,
            Kind::Unit
        );
    }

    #[test]
    fn an_array_for_a_struct_is_refused_at_every_depth() {
        // serde_json alone accepts each of these.
        let cases = [
            (r#"{"inner": {"a": 1}"#, r#"{"inner": [1]"#),
            (r#""list": [{"a": 2}]"#, r#""list": [[2]]"#),
            (r#""maybe": {"a": 3}"#, r#""maybe": [3]"#),
            (r#""map": {"k": {"a": 4}}"#, r#""map": {"k": [4]}"#),
            (r#"{"Pair": {"x": 5}}"#, r#"{"Pair": [5]}"#),
        ];
        for (from, to) in cases {
            let doc = GOOD.replace(from, to);
            assert_ne!(doc, GOOD);
            assert!(serde_json::from_str::<Outer>(&doc).is_ok(), "{doc}");
            let err = from_slice::<Outer>(doc.as_bytes(), 8).unwrap_err();
            assert!(
                matches!(&err, StrictJsonError::Shape(m) if m.contains(ARRAY_FOR_OBJECT)),
                "{doc}: {err}"
            );
        }
        let top = r#"[{"a": 1}, [], null, {}, {"Unit": null}, []]"#;
        assert!(serde_json::from_str::<Outer>(top).is_ok());
        assert!(matches!(
            from_slice::<Outer>(top.as_bytes(), 8),
            Err(StrictJsonError::Shape(_))
        ));
        assert!(matches!(
            from_slice_closed::<Inner>(b"[1]"),
            Err(StrictJsonError::Shape(_))
        ));
        assert!(matches!(
            from_slice_closed::<Inner>(br#"{"a": 1} x"#),
            Err(StrictJsonError::Invalid(_))
        ));
    }
}
