//! Fuzz target `tlog_proof`: runs [`rcpt_fuzz::tlog_proof`] (the same check
//! tests/fuzz_corpus.rs replays over the committed corpus).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rcpt_fuzz::tlog_proof(data));
