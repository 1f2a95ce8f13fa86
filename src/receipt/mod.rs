//! receipt: the version-1 payload model, its schema and invariants, and the
//! replay combining function.
//!
//! Boundary: a canonical [`Value`](canonical::Value) ⇄ a typed [`Receipt`], and the two
//! paths that make a payload trustworthy: [`payload_from_json`] (issuing)
//! and [`payload_from_cbor`] (verifying, logging). Every refusal carries a
//! stable reason code (spec/receipt.md). No I/O, no signatures.
//!
//! The receipt layer: [`canonical`] (the value and its two encodings),
//! `model` (the payload model, its invariants), `schema` (a value read
//! into the model field by field), `payload` (the issuing and verifying
//! paths), [`dsse`] (the signed envelope and the
//! log entry), [`require`] (what a verified receipt must say). It uses only
//! the shared basics (digest, limits, reason, keys, strictjson), never the
//! tlog layer, storage, the log or the binary.

pub mod canonical;
pub mod dsse;
mod model;
mod payload;
pub mod require;
mod schema;

pub use model::{
    Invariant, InvariantViolation, ReadItem, Receipt, Replay, SchemaError, Stage, Substrate,
    Verdict, combine,
};
pub use payload::{
    PayloadError, ValidPayload, payload_from_cbor, payload_from_json, receipt_from_cbor,
};
pub use schema::TOP_FIELDS;
