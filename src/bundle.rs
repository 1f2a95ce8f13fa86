//! bundle: the offline proof bundle of one receipt (DESIGN.md "Bundle").
//!
//! STUB: written by the lead.
