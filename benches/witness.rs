//! Witness benchmark: strict Ed25519 verifies per second (the limit a
//! cosignature check is measured against), cosignature checks, policy
//! evaluation of a checkpoint cosigned by many witnesses, and durable
//! `add-checkpoint` calls (decide, sign, compare-and-swap with fsync).
//! One run prints one table.
//!
//! `cargo bench --bench witness`. `RCPT_BENCH_DIR` picks the file system for
//! the state (default: the system temp dir); `RCPT_BENCH_N` sets the number
//! of durable calls (default 2000).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use ed25519_dalek::Signer as _;
use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::tlog::cosig::{self, WitnessVerifier};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint, Note};
use rcpt::tlog::policy::TlogPolicy;
use rcpt::witness::{AddCheckpointRequest, Witness};
use std::time::Instant;

fn key(n: u32) -> SigningKey {
    let mut s = [7u8; 32];
    s[..4].copy_from_slice(&n.to_be_bytes());
    SigningKey::from_bytes(&s)
}

fn per_second(n: u64, f: impl FnMut(u64)) -> f64 {
    let mut f = f;
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

const ORIGIN: &str = "bench.example/log";

fn body(size: u64, root: Hash) -> String {
    Checkpoint {
        origin: ORIGIN.into(),
        size,
        root_hash: root,
        extensions: vec![],
    }
    .to_text()
}

fn main() {
    let n = std::env::var("RCPT_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000u64);
    let msg = b"cosignature/v1\ntime 1\nbench.example/log\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    let k = key(0);
    let sig = k.sign(msg);
    let vk = k.verifying_key();
    let strict = per_second(20_000, |_| vk.verify_strict(msg, &sig).unwrap());

    // One note cosigned by 100 - 1 witnesses (the note cap, with the log line).
    let b = body(1, [0; 32]);
    let log = key(1);
    let mut text = note::sign(&b, ORIGIN, &log).unwrap();
    let ws: Vec<WitnessVerifier> = (0..99u32)
        .map(|i| {
            WitnessVerifier::new(&format!("w{i}.example"), key(100 + i).verifying_key()).unwrap()
        })
        .collect();
    for i in 0..99u32 {
        text.push_str(&cosig::sign(&b, &format!("w{i}.example"), &key(100 + i), 1).unwrap());
    }
    let parsed = Note::parse(text.as_bytes()).unwrap();
    let check_rate = per_second(200, |_| {
        std::hint::black_box(cosig::check(&parsed, &ws));
    }) * 99.0;
    let mut policy = format!(
        "log {}\n",
        NoteVerifier::new(ORIGIN, log.verifying_key()).unwrap()
    );
    for (i, w) in ws.iter().enumerate() {
        policy.push_str(&format!("witness W{i} {w}\n"));
    }
    let names: Vec<String> = (0..99).map(|i| format!("W{i}")).collect();
    policy.push_str(&format!("group q 67 {}\nquorum q\n", names.join(" ")));
    let p = TlogPolicy::parse(policy.as_bytes()).unwrap();
    let parse_rate = per_second(200, |_| {
        std::hint::black_box(TlogPolicy::parse(policy.as_bytes()).unwrap());
    });
    let eval_rate = per_second(200, |_| {
        assert!(p.evaluate(&parsed).unwrap().quorum_met);
    });

    // Durable add-checkpoint: each call extends the last by one leaf.
    let root_dir =
        std::env::var("RCPT_BENCH_DIR").map_or_else(|_| std::env::temp_dir(), Into::into);
    let tmp = tempfile::tempdir_in(root_dir).unwrap();
    let wdir = tmp.path().join("w");
    let policy_logs = format!(
        "log {}\nquorum none\n",
        NoteVerifier::new(ORIGIN, log.verifying_key()).unwrap()
    );
    let witness = Witness::init(
        &wdir,
        "bench.example/w",
        &key(2),
        None,
        policy_logs.as_bytes(),
    )
    .unwrap();
    let leaves: Vec<Hash> = (0..=n)
        .map(|i| merkle::leaf_hash(&i.to_le_bytes()))
        .collect();
    let tree = MemoryTree::new(&leaves);
    let requests: Vec<String> = (1..=n)
        .map(|size| {
            let proof = merkle::prove_consistency(size - 1, size, &tree).unwrap();
            let cp = note::sign(
                &body(size, merkle::tree_root(size, &tree).unwrap()),
                ORIGIN,
                &log,
            )
            .unwrap();
            AddCheckpointRequest::to_body(size - 1, &proof, &cp)
        })
        .collect();
    let add_rate = per_second(n, |i| {
        witness
            .add_checkpoint(requests[i as usize].as_bytes(), 1_700_000_000 + i)
            .unwrap();
    });

    println!("| measure | per second |");
    println!("|---|---|");
    println!("| strict Ed25519 verify (one core, the limit) | {strict:.0} |");
    println!(
        "| cosignature checks, 99-witness note | {check_rate:.0} ({:.2} of the limit) |",
        check_rate / strict
    );
    println!("| policy parse, 99 witnesses + group | {parse_rate:.0} |");
    println!("| policy evaluate, 99 cosignatures, 67-of-99 | {eval_rate:.0} |");
    println!("| durable add-checkpoint (decide, sign, CAS, fsync), {n} calls | {add_rate:.0} |");
}
