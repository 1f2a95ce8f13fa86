//! Test support for witnesses over HTTP: `rcpt witness init`, a started
//! `rcpt witness serve` process, synthetic log trees and signed
//! checkpoints, and `add-checkpoint` bodies.

use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

pub use super::bin;

/// A witness key from a seed.
pub fn witness_key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// `rcpt witness init tmp/NAME` for the logs of `logs_policy` (text);
/// returns the directory and the witness verifier key the command printed.
pub fn init_witness(tmp: &Path, name: &str, seed: u8, logs_policy: &str) -> (PathBuf, String) {
    let key = tmp.join(format!("{name}.key"));
    std::fs::write(&key, rcpt::keys::signing_key_to_pem(&witness_key(seed))).unwrap();
    let policy = tmp.join(format!("{name}.logs"));
    std::fs::write(&policy, logs_policy).unwrap();
    let dir = tmp.join(name);
    let out = super::succeeded(
        Command::new(bin())
            .args(["witness", "init"])
            .arg(&dir)
            .args(["--name", &format!("witness.example/{name}"), "--key"])
            .arg(&key)
            .arg("--policy")
            .arg(&policy)
            .output()
            .unwrap(),
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let vkey = stdout
        .lines()
        .find_map(|l| l.strip_prefix("witness verifier key: "))
        .unwrap()
        .to_string();
    (dir, vkey)
}

/// A running `rcpt witness serve`.
pub struct WitnessProc {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
}

impl WitnessProc {
    /// Start `rcpt witness serve DIR --listen LISTEN`, wait for its address.
    pub fn start(dir: &Path, listen: &str) -> WitnessProc {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let stderr = dir.with_extension(format!("stderr-{}", N.fetch_add(1, Ordering::Relaxed)));
        let (child, addr) = super::spawn_listening(
            Command::new(bin())
                .args(["witness", "serve"])
                .arg(dir)
                .args(["--listen", listen]),
            &stderr,
        );
        WitnessProc {
            child,
            addr,
            stderr,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for WitnessProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tree of `n` synthetic leaves; `fork` changes every leaf from index 4 on.
pub fn tree(n: u64, fork: &str) -> MemoryTree {
    let leaves: Vec<Hash> = (0..n)
        .map(|i| {
            let tag = if i < 4 { "" } else { fork };
            merkle::leaf_hash(format!("entry {i}{tag}").as_bytes())
        })
        .collect();
    MemoryTree::new(&leaves)
}

/// The checkpoint of `t` at `size`, signed as `origin` by `key`.
pub fn checkpoint(origin: &str, key: &SigningKey, t: &MemoryTree, size: u64) -> String {
    let body = Checkpoint {
        origin: origin.into(),
        size,
        root_hash: merkle::tree_root(size, t).unwrap(),
        extensions: vec![],
    };
    note::sign(&body.to_text(), origin, key).unwrap()
}

/// An `add-checkpoint` body from `old` to `size` of `t`.
pub fn body(origin: &str, key: &SigningKey, t: &MemoryTree, old: u64, size: u64) -> String {
    let proof = if old == 0 {
        Vec::new()
    } else {
        merkle::prove_consistency(old, size, t).unwrap()
    };
    rcpt::witness::AddCheckpointRequest::to_body(old, &proof, &checkpoint(origin, key, t, size))
}

/// The policy text a witness needs to witness the log `origin` signed by `key`.
pub fn logs_policy(origin: &str, key: &SigningKey) -> String {
    format!(
        "log {}\nquorum none\n",
        NoteVerifier::new(origin, key.verifying_key()).unwrap()
    )
}
