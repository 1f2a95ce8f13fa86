//! Fuzz target `add_checkpoint`: runs [`rcpt_fuzz::add_checkpoint`] (the same check
//! tests/fuzz_corpus.rs replays over the committed corpus).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rcpt_fuzz::add_checkpoint(data));
