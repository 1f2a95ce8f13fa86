//! verify: checks, outcomes and reports.
//!
//! STUB: written by the lead.
