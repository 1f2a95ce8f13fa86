//! trust: trusted issuer keys and log verifier keys.
//!
//! STUB: written by the lead.
