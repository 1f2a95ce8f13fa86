//! Fuzz target `merkle_inclusion`: runs [`rcpt_fuzz::merkle_inclusion`] (the same check
//! tests/fuzz_corpus.rs replays over the committed corpus).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rcpt_fuzz::merkle_inclusion(data));
