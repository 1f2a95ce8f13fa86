//! constants: media types, domain-separation bytes and fixed strings, in one
//! place so that each appears once in the code.

/// DSSE `payloadType` of a version-1 receipt (spec/envelope.md "Envelope").
pub const RECEIPT_PAYLOAD_TYPE: &str = "application/vnd.rcpt.receipt.v1+cbor";
/// `media_type` of a version-1 bundle (spec/verify.md "The bundle").
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.rcpt.bundle.v1+json";
/// Prefix of the receipt identity digest.
pub const BLAKE3_PREFIX: &str = "blake3:";
/// Prefix of the interop digest.
pub const SHA256_PREFIX: &str = "sha256:";
/// RFC 6962 section 2.1: leaf hash domain byte.
pub const LEAF_HASH_PREFIX: u8 = 0x00;
/// RFC 6962 section 2.1: interior node hash domain byte.
pub const NODE_HASH_PREFIX: u8 = 0x01;
/// C2SP signed-note: signature type byte of Ed25519 keys.
pub const NOTE_ED25519_TYPE: u8 = 0x01;
/// DSSE v1 PAE prefix.
pub const DSSE_PAE_PREFIX: &str = "DSSEv1";
/// C2SP signed-note: signature type byte of Ed25519 checkpoint
/// cosignatures (c2sp.org/tlog-cosignature, `cosignature/v1`).
pub const NOTE_COSIGNATURE_TYPE: u8 = 0x04;
/// C2SP tlog-cosignature: the header line of the Ed25519 signed message.
pub const COSIGNATURE_V1_HEADER: &str = "cosignature/v1";
/// C2SP tlog-proof: the first line of a proof file.
pub const TLOG_PROOF_HEADER: &str = "c2sp.org/tlog-proof@v1";
/// C2SP tlog-witness: `Content-Type` of a 409 answer (the witness's size).
pub const TLOG_SIZE_CONTENT_TYPE: &str = "text/x.tlog.size";
/// `Content-Type` of a plain text answer: a checkpoint, a cosignature, a
/// refusal written for people.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
