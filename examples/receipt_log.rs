//! Build a log of N signed receipts, for measuring the log commands at
//! scale (`spec/log.md`, "Bundles for every entry").
//!
//! `cargo run --release --example receipt_log -- DIR N` writes a new log in
//! DIR (origin `bench.example/receipts`, log key from the seed `[1; 32]`,
//! issuer `bench-gate` from `[2; 32]`, written beside DIR as
//! `DIR.key`), appended in batches of 100,000. Deterministic: the same N
//! gives the same log.

use anyhow::{Context, Result};
use rayon::prelude::*;
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::log::{Log, LogWriter};
use rcpt::receipt::dsse::Envelope;
use std::path::PathBuf;

/// Receipt `n`: a deny verdict issued at second `n`.
fn envelope(n: u64, issuer: &SigningKey) -> Result<Vec<u8>> {
    let json = format!(
        r#"{{"version":1,"issuer":"bench-gate","issued_at":{n},"substrate":"git",
        "change_id":"blake3:{h}","inverse_delta_id":null,"reversibility":null,"read_set":[],
        "precondition":null,"policy_id":"sha256:{h}","verdict":{{"deny":{{"reasons":["r"]}}}},
        "applied":false,"replay":{{"class":"unknown"}}}}"#,
        h = "ab".repeat(32)
    );
    let payload = rcpt::receipt::payload_from_json(json.as_bytes())?;
    Ok(Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.bytes, issuer).to_entry())
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir: PathBuf = args.next().context("usage: receipt_log DIR N")?.into();
    let n: u64 = args.next().context("usage: receipt_log DIR N")?.parse()?;
    let log_key = SigningKey::from_bytes(&[1u8; 32]);
    let issuer = SigningKey::from_bytes(&[2u8; 32]);
    let key_file = dir.with_extension("key");
    std::fs::write(&key_file, rcpt::keys::signing_key_to_pem(&log_key))?;
    Log::create(&dir, "bench.example/receipts", &log_key, Some(&key_file))?;
    let mut writer = LogWriter::open(&dir, &log_key, false)?;
    let mut next = 0;
    while next < n {
        let end = (next + 100_000).min(n);
        let batch: Vec<Vec<u8>> = (next..end)
            .into_par_iter()
            .map(|i| envelope(i, &issuer))
            .collect::<Result<_>>()?;
        writer.append(&batch)?;
        next = end;
    }
    println!("{} entries in {}", writer.log().size(), dir.display());
    Ok(())
}
