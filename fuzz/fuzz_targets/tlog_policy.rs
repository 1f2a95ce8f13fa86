//! Fuzz target `tlog_policy`: runs [`rcpt_fuzz::tlog_policy`] (the same check
//! tests/fuzz_corpus.rs replays over the committed corpus).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rcpt_fuzz::tlog_policy(data));
