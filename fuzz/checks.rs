//! checks: the property each fuzz target asserts, in one place.
//!
//! Boundary: every function here takes the fuzzer's bytes, drives one rcpt
//! parser or verify entry point, and asserts a property of the result (a
//! round trip, a differential against an independent re-derivation, an
//! outcome that random bytes cannot reach). A violated property panics,
//! which is how libFuzzer and the test harness see a failure. The fuzz
//! targets in fuzz/fuzz_targets/ call these functions, and
//! tests/fuzz_corpus.rs includes this file by path and replays the
//! committed corpus through the same functions, so CI keeps every input.
//!
//! No function here may loop on its input or allocate beyond a small
//! multiple of it: the sizes it derives are bounded by the rcpt limits.

// Test code: a failed property panics, and indexes are into values this
// file built (fixed-size hashes, known JSON), where a panic is a finding.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rcpt::bundle::RawBundle;
use rcpt::keys::NoteVerifier;
use rcpt::limits::{MAX_ADD_CHECKPOINT_BYTES, MAX_ADD_CHECKPOINT_PROOF_LINES};
use rcpt::limits::{MAX_ENTRY_BYTES, MAX_NOTE_BYTES, MAX_NOTE_SIGNATURES, MAX_PROOF_HASHES};
use rcpt::limits::{MAX_POLICY_BYTES, MAX_POLICY_GROUPS, MAX_POLICY_LOGS, MAX_POLICY_WITNESSES};
use rcpt::receipt::canonical::{self, dagcbor, json as cjson};
use rcpt::receipt::dsse::{self, Envelope, SignatureCheck};
use rcpt::receipt::{self, Invariant, PayloadError};
use rcpt::tlog::cosig::{self, CosigStatus, WitnessVerifier};
use rcpt::tlog::merkle::{self, Hash, MemoryTree};
use rcpt::tlog::note::{self, Checkpoint, Note, NoteCheck};
use rcpt::tlog::policy::{LogStatus, Member, Quorum, QuorumVerdict, TlogPolicy};
use rcpt::tlog::proof::TlogProof;
use rcpt::tlog::tiles;
use rcpt::trust::Trust;
use rcpt::verify::{Outcome, Verifier};
use rcpt::witness::AddCheckpointRequest;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The frozen corpus trust file (one issuer, one log).
const FROZEN_TRUST: &[u8] = include_bytes!("../fixtures/frozen-receipts/trust.json");
/// The frozen corpus manifest: which bundles are expected to verify.
const FROZEN_MANIFEST: &[u8] = include_bytes!("../fixtures/frozen-receipts/manifest.json");

/// The names of every fuzz target, in the order fuzz/run-all.sh runs them.
pub const TARGETS: [&str; 13] = [
    "dagcbor",
    "receipt_json",
    "dsse_envelope",
    "bundle",
    "note_checkpoint",
    "merkle_inclusion",
    "merkle_consistency",
    "tiles",
    "trust",
    "tlog_policy",
    "cosignature",
    "add_checkpoint",
    "tlog_proof",
];

/// Run the check of target `name` on `data`; false for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    let check: fn(&[u8]) = match name {
        "dagcbor" => dagcbor,
        "receipt_json" => receipt_json,
        "dsse_envelope" => dsse_envelope,
        "bundle" => bundle,
        "note_checkpoint" => note_checkpoint,
        "merkle_inclusion" => merkle_inclusion,
        "merkle_consistency" => merkle_consistency,
        "tiles" => tiles,
        "trust" => trust,
        "tlog_policy" => tlog_policy,
        "cosignature" => cosignature,
        "add_checkpoint" => add_checkpoint,
        "tlog_proof" => tlog_proof,
        _ => return false,
    };
    check(data);
    true
}

// ---------------------------------------------------------------------------
// Input cursor
// ---------------------------------------------------------------------------

/// Reads fixed-size fields off the front of the fuzz input; a short input
/// reads as zeros, so every input maps to some case.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Cursor { rest: data }
    }

    fn u8(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((b, tail)) => {
                self.rest = tail;
                *b
            }
            None => 0,
        }
    }

    fn u64(&mut self) -> u64 {
        let mut out = [0u8; 8];
        for b in &mut out {
            *b = self.u8();
        }
        u64::from_be_bytes(out)
    }

    fn hash(&mut self) -> Hash {
        let mut out = [0u8; 32];
        for b in &mut out {
            *b = self.u8();
        }
        out
    }

    /// The rest as 32-byte hashes (a short tail is dropped); at most `max`.
    fn hashes(&mut self, max: usize) -> Vec<Hash> {
        let out = self
            .rest
            .chunks_exact(32)
            .take(max)
            .filter_map(|c| Hash::try_from(c).ok())
            .collect();
        self.rest = &[];
        out
    }
}

// ---------------------------------------------------------------------------
// dagcbor
// ---------------------------------------------------------------------------

/// Strict DAG-CBOR decoder: what decodes re-encodes to the same bytes;
/// decoding is deterministic; a refusal has one of the two stable reason
/// codes; the receipt path (`payload_from_cbor`) agrees with the decoder.
pub fn dagcbor(data: &[u8]) {
    let first = dagcbor::decode(data);
    assert_eq!(first, dagcbor::decode(data), "decode is not deterministic");
    match &first {
        Ok(value) => {
            assert_eq!(
                dagcbor::encode(value),
                data,
                "decoded value re-encodes to other bytes"
            );
        }
        Err(e) => {
            let code = e.reason_code();
            assert!(
                code == "payload.non_canonical" || code == "payload.malformed",
                "unexpected reason code {code}"
            );
        }
    }
    match receipt::payload_from_cbor(data) {
        Ok(p) => {
            assert_eq!(first.as_ref().ok(), Some(&p.value), "payload value differs");
            assert_eq!(p.bytes, data, "payload bytes are not the input");
            assert_eq!(
                p.id,
                canonical::identity(data),
                "payload id is not the identity"
            );
        }
        Err(PayloadError::Cbor(e)) => {
            assert_eq!(
                first.as_ref().err(),
                Some(&e),
                "payload decode error differs"
            );
        }
        Err(_) => {}
    }
}

// ---------------------------------------------------------------------------
// receipt_json
// ---------------------------------------------------------------------------

/// The stable reason codes a payload refusal may carry.
fn payload_reason_known(code: rcpt::reason::Reason) -> bool {
    [
        "payload.malformed",
        "payload.too_large",
        "payload.non_canonical",
        "payload.schema",
        "payload.version_unsupported",
    ]
    .contains(&code.as_str())
        || Invariant::ALL.iter().any(|i| i.reason_code() == code)
}

/// Receipt JSON form: when accepted, the canonical bytes decode back to the
/// same value, the CBOR path accepts them with the same receipt and id, and
/// the value printed as JSON reads back to the same bytes.
pub fn receipt_json(data: &[u8]) {
    let payload = match receipt::payload_from_json(data) {
        Ok(p) => p,
        Err(e) => {
            let code = e.reason_code();
            assert!(payload_reason_known(code), "unknown reason code {code}");
            return;
        }
    };
    assert_eq!(payload.bytes, dagcbor::encode(&payload.value));
    assert_eq!(dagcbor::decode(&payload.bytes).as_ref(), Ok(&payload.value));
    assert_eq!(payload.id, canonical::identity(&payload.bytes));
    let again = receipt::payload_from_cbor(&payload.bytes)
        .unwrap_or_else(|e| panic!("accepted JSON gives CBOR the verifier refuses: {e}"));
    assert_eq!(again.value, payload.value);
    assert_eq!(again.receipt, payload.receipt);
    assert_eq!(again.id, payload.id);
    assert_eq!(
        payload.receipt.to_value(),
        payload.value,
        "to_value loses fields"
    );
    let printed = cjson::to_json(&payload.value).to_string();
    let reread = receipt::payload_from_json(printed.as_bytes())
        .unwrap_or_else(|e| panic!("printed JSON does not read back: {e}"));
    assert_eq!(
        reread.bytes, payload.bytes,
        "JSON round trip changes the bytes"
    );
}

// ---------------------------------------------------------------------------
// dsse_envelope
// ---------------------------------------------------------------------------

/// A fixed trusted key for the signature rule (the frozen issuer).
fn frozen_trust() -> &'static Trust {
    static TRUST: OnceLock<Trust> = OnceLock::new();
    TRUST.get_or_init(|| Trust::from_json(FROZEN_TRUST).expect("frozen trust.json loads"))
}

/// DSSE envelope: JSON round trip and log-entry round trip are the
/// identity; the input read as a log entry re-encodes to itself; the
/// signature rule never calls random bytes verified.
pub fn dsse_envelope(data: &[u8]) {
    if let Ok(env) = Envelope::from_json(data) {
        let json = env.to_json();
        let back = Envelope::from_json(json.as_bytes())
            .unwrap_or_else(|e| panic!("to_json output does not parse: {e}"));
        assert_eq!(back, env, "JSON round trip changes the envelope");
        entry_round_trip(&env);
        let keys = frozen_trust().issuer_keys();
        if let SignatureCheck::Verified { keyids } = dsse::check_signatures(&env, &keys) {
            // Only the frozen issuer can sign: the payload must be one it signed.
            let id = canonical::identity(&env.payload).to_string();
            assert!(
                known_signed_payloads().contains(&id),
                "signature verified on an unknown payload {id} by {keyids:?}"
            );
        }
    }
    if let Ok(env) = Envelope::from_entry(data) {
        assert_eq!(
            env.to_entry(),
            data,
            "a log entry does not re-encode to itself"
        );
    }
}

/// `from_entry(to_entry(e)) == e` whenever the entry fits the entry limit.
fn entry_round_trip(env: &Envelope) {
    let entry = env.to_entry();
    match Envelope::from_entry(&entry) {
        Ok(back) => assert_eq!(&back, env, "entry round trip changes the envelope"),
        Err(e) => assert!(
            entry.len() > MAX_ENTRY_BYTES,
            "entry of {} bytes refused: {e}",
            entry.len()
        ),
    }
}

// ---------------------------------------------------------------------------
// bundle
// ---------------------------------------------------------------------------

/// The frozen corpus directory, from whichever crate this file is built in.
fn frozen_dir() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let direct = here.join("fixtures/frozen-receipts");
    if direct.is_dir() {
        direct
    } else {
        here.join("../fixtures/frozen-receipts")
    }
}

/// Receipt ids of the frozen bundles the manifest expects to verify: the
/// only receipts the frozen issuer ever signed into a valid bundle.
fn known_verified_ids() -> &'static BTreeSet<String> {
    static IDS: OnceLock<BTreeSet<String>> = OnceLock::new();
    IDS.get_or_init(|| {
        let manifest: serde_json::Value =
            serde_json::from_slice(FROZEN_MANIFEST).expect("frozen manifest is JSON");
        let dir = frozen_dir();
        let mut ids = BTreeSet::new();
        for case in manifest["cases"].as_array().expect("manifest has cases") {
            if case["expect"] != "verified" {
                continue;
            }
            let file = case["file"].as_str().expect("case names its file");
            let bytes = std::fs::read(dir.join(file)).expect("frozen bundle readable");
            let raw = RawBundle::parse(&bytes).expect("verified frozen bundle parses");
            ids.insert(raw.receipt_id.into_owned());
        }
        assert!(
            !ids.is_empty(),
            "the frozen manifest lists no verified bundle"
        );
        ids
    })
}

/// Identities of every payload the frozen issuer signed in a frozen bundle
/// (valid receipts and the deliberately broken ones alike).
fn known_signed_payloads() -> &'static BTreeSet<String> {
    static IDS: OnceLock<BTreeSet<String>> = OnceLock::new();
    IDS.get_or_init(|| {
        let keys = frozen_trust().issuer_keys();
        let dir = frozen_dir().join("bundles");
        let mut ids = BTreeSet::new();
        for file in std::fs::read_dir(&dir).expect("frozen bundles readable") {
            let bytes = std::fs::read(file.expect("directory entry").path()).expect("readable");
            // A bundle the strict parser refuses (duplicate key) still holds
            // a signed envelope: take it from plain JSON.
            let text = match RawBundle::parse(&bytes) {
                Ok(raw) => raw.envelope.get().to_owned(),
                Err(_) => serde_json::from_slice::<serde_json::Value>(&bytes)
                    .map(|v| v["envelope"].to_string())
                    .unwrap_or_default(),
            };
            let Ok(env) = Envelope::from_json(text.as_bytes()) else {
                continue;
            };
            if let SignatureCheck::Verified { .. } = dsse::check_signatures(&env, &keys) {
                ids.insert(canonical::identity(&env.payload).to_string());
            }
        }
        assert!(
            ids.len() > 10,
            "too few signed frozen payloads: {}",
            ids.len()
        );
        ids
    })
}

/// One verifier with the frozen trust, shared by every input.
fn frozen_verifier() -> &'static Verifier {
    static VERIFIER: OnceLock<Verifier> = OnceLock::new();
    VERIFIER.get_or_init(|| {
        Verifier::new(frozen_trust().clone(), None).expect("frozen trust is usable")
    })
}

/// `Verifier::verify_bytes`: the outcome is the same on a second call
/// (checkpoint cache), every check is named once, and a verified outcome is
/// re-derived independently from the low-level functions and names one of
/// the receipts the frozen issuer signed.
pub fn bundle(data: &[u8]) {
    let verifier = frozen_verifier();
    let report = verifier.verify_bytes(data);
    let again = verifier.verify_bytes(data);
    assert_eq!(
        report.outcome(),
        again.outcome(),
        "outcome changed on a second call"
    );
    assert_eq!(report.receipt_id, again.receipt_id);
    assert!(!report.checks.is_empty(), "a report without checks");
    let names: BTreeSet<&str> = report.checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names.len(),
        report.checks.len(),
        "a check is reported twice"
    );
    if report.outcome() == Outcome::Verified {
        recheck_verified(data, report.receipt_id.as_deref());
    }
}

/// Every step of a verified bundle, redone with the low-level functions.
fn recheck_verified(data: &[u8], receipt_id: Option<&str>) {
    let raw = RawBundle::parse(data).expect("verified bundle parses");
    let env = Envelope::from_json(raw.envelope.get().as_bytes()).expect("envelope parses");
    let trust = frozen_trust();
    assert!(matches!(
        dsse::check_signatures(&env, &trust.issuer_keys()),
        SignatureCheck::Verified { .. }
    ));
    let payload = receipt::payload_from_cbor(&env.payload).expect("payload valid");
    let id = payload.id.to_string();
    assert_eq!(
        Some(id.as_str()),
        receipt_id,
        "reported id is not the payload's"
    );
    assert_eq!(id, raw.receipt_id, "claimed id is not the payload's");
    assert!(
        known_verified_ids().contains(&id),
        "verified an unknown receipt {id}"
    );
    let note = Note::parse(raw.log.checkpoint.as_bytes()).expect("checkpoint note parses");
    let keys = trust.log_keys_for(&raw.log.origin);
    assert!(matches!(
        note::check(&note, &keys),
        NoteCheck::Verified { .. }
    ));
    let cp = Checkpoint::parse(&note.text).expect("checkpoint body parses");
    assert_eq!(cp.origin, raw.log.origin);
    assert_eq!(cp.size, raw.log.tree_size);
    let proof = raw.inclusion_hashes().expect("inclusion hashes decode");
    let leaf = merkle::leaf_hash(&env.to_entry());
    let root = fold_inclusion(raw.log.index, raw.log.tree_size, &leaf, &proof);
    assert_eq!(
        root,
        Some(cp.root_hash),
        "independent inclusion fold disagrees"
    );
}

// ---------------------------------------------------------------------------
// note_checkpoint
// ---------------------------------------------------------------------------

/// The frozen log's verifier key: the fixed key notes are checked against.
fn frozen_log() -> &'static [NoteVerifier] {
    &frozen_trust().logs
}

/// Signed note and checkpoint: a parsed note prints back to the input; a
/// parsed checkpoint prints back to its text; only a real checkpoint of the
/// frozen log verifies under its key.
pub fn note_checkpoint(data: &[u8]) {
    if let Ok(note) = Note::parse(data) {
        assert!(note.text.ends_with('\n'));
        assert!(!note.signatures.is_empty());
        assert!(note.signatures.len() <= MAX_NOTE_SIGNATURES);
        assert_eq!(
            print_note(&note).as_bytes(),
            data,
            "note does not print back"
        );
        match note::check(&note, frozen_log()) {
            NoteCheck::Verified { names } => {
                let cp = Checkpoint::parse(&note.text).expect("a verified note is a checkpoint");
                assert_eq!(
                    names,
                    vec![cp.origin],
                    "verified under a name not its origin"
                );
            }
            NoteCheck::Failed { name, key_hash } => {
                assert!(
                    note.signatures
                        .iter()
                        .any(|s| s.name == name && s.key_hash == key_hash),
                    "failure names a line the note does not have"
                );
            }
            NoteCheck::NotEvaluated => {}
        }
        checkpoint_round_trip(&note.text);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        checkpoint_round_trip(text);
    }
}

/// A checkpoint that parses prints back to exactly its text.
fn checkpoint_round_trip(text: &str) {
    if let Ok(cp) = Checkpoint::parse(text) {
        assert_eq!(cp.to_text(), text, "checkpoint does not print back");
        assert_eq!(Checkpoint::parse(&cp.to_text()), Ok(cp));
    }
}

/// The note in its C2SP wire form, independently of `note::sign`.
fn print_note(note: &Note) -> String {
    use base64::Engine as _;
    let mut out = format!("{}\n", note.text);
    for s in &note.signatures {
        let mut raw = s.key_hash.to_vec();
        raw.extend_from_slice(&s.sig);
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        out.push_str(&format!(
            "{}{} {b64}\n",
            note::SIGNATURE_LINE_PREFIX,
            s.name
        ));
    }
    out
}

// ---------------------------------------------------------------------------
// merkle: an independent RFC 6962 fold, from the recursive definitions
// ---------------------------------------------------------------------------

/// The largest power of two smaller than `n` (`n >= 2`).
fn split_point(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// The root that `path` proves for leaf `m` of a tree of `n` leaves, folded
/// from RFC 6962 2.1.1 "PATH(m, D[n]) = PATH(m, D[0:k]) : MTH(D[k:n]) for
/// m < k; PATH(m - k, D[k:n]) : MTH(D[0:k]) for m >= k". None when the path
/// has the wrong length for `(m, n)` or `m >= n`.
fn fold_inclusion(m: u64, n: u64, leaf: &Hash, path: &[Hash]) -> Option<Hash> {
    if m >= n {
        return None;
    }
    if n == 1 {
        return path.is_empty().then_some(*leaf);
    }
    let (last, rest) = path.split_last()?;
    let k = split_point(n);
    if m < k {
        Some(merkle::node_hash(&fold_inclusion(m, k, leaf, rest)?, last))
    } else {
        Some(merkle::node_hash(
            last,
            &fold_inclusion(m - k, n - k, leaf, rest)?,
        ))
    }
}

/// (old root, new root) that `proof` proves for SUBPROOF(m, D[n], b) of
/// RFC 6962 2.1.2, `old_whole` standing for MTH(D[0:m]) where b is true and
/// m == n. None when the proof has the wrong shape.
fn fold_consistency(
    m: u64,
    n: u64,
    b: bool,
    old_whole: &Hash,
    proof: &[Hash],
) -> Option<(Hash, Hash)> {
    if m == n {
        return match (b, proof) {
            (true, []) => Some((*old_whole, *old_whole)),
            (false, [h]) => Some((*h, *h)),
            _ => None,
        };
    }
    let (last, rest) = proof.split_last()?;
    let k = split_point(n);
    if m <= k {
        let (old, new) = fold_consistency(m, k, b, old_whole, rest)?;
        Some((old, merkle::node_hash(&new, last)))
    } else {
        let (old, new) = fold_consistency(m - k, n - k, false, old_whole, rest)?;
        Some((merkle::node_hash(last, &old), merkle::node_hash(last, &new)))
    }
}

/// Whether the independent fold accepts a consistency proof, with the
/// crate's edge conventions (m == 0: empty proof, old root MTH({})).
fn consistency_accepted(m: u64, n: u64, proof: &[Hash], root_m: &Hash, root_n: &Hash) -> bool {
    if m > n || proof.len() > MAX_PROOF_HASHES {
        return false;
    }
    if m == 0 || m == n {
        return proof.is_empty()
            && (m != n || root_m == root_n)
            && (m != 0 || *root_m == merkle::empty_root());
    }
    fold_consistency(m, n, true, root_m, proof) == Some((*root_m, *root_n))
}

/// Leaf hashes of a small test tree of `n` leaves.
fn small_leaves(n: u64) -> Vec<Hash> {
    (0..n)
        .map(|i| merkle::leaf_hash(&i.to_be_bytes()))
        .collect()
}

/// Mutate one field of a proof case as the cursor directs (or nothing).
fn mutate(c: &mut Cursor<'_>, a: &mut u64, b: &mut u64, proof: &mut Vec<Hash>, h: &mut Hash) {
    match c.u8() % 8 {
        0 => {}
        1 => *a = a.wrapping_add(u64::from(c.u8())).wrapping_sub(128),
        2 => *b = b.wrapping_add(u64::from(c.u8())).wrapping_sub(128),
        3 => {
            let len = proof.len();
            if let Some(p) = proof.get_mut(usize::from(c.u8()) % len.max(1)) {
                p[usize::from(c.u8() % 32)] ^= 1 << (c.u8() % 8);
            }
        }
        4 => {
            proof.pop();
        }
        5 => proof.push(c.hash()),
        6 => h[usize::from(c.u8() % 32)] ^= 1,
        _ => {
            let len = proof.len();
            if len >= 2 {
                proof.swap(usize::from(c.u8()) % len, usize::from(c.u8()) % len);
            }
        }
    }
}

/// Inclusion verifier: arbitrary u64 index and size and a proof of any
/// length (mode 0), or a real proof from a small tree, perhaps mutated
/// (mode 1). `verify_inclusion` accepts exactly when the independent fold
/// reaches the root with a proof of the implied length, and a real proof
/// always verifies.
pub fn merkle_inclusion(data: &[u8]) {
    let mut c = Cursor::new(data);
    let (mut index, mut size, mut leaf, root, mut proof);
    if c.u8() & 1 == 0 {
        index = c.u64();
        size = c.u64();
        leaf = c.hash();
        root = c.hash();
        proof = c.hashes(MAX_PROOF_HASHES + 2);
    } else {
        size = 1 + u64::from(c.u8() % 80);
        index = u64::from(c.u8()) % size;
        let leaves = small_leaves(size);
        let tree = MemoryTree::new(&leaves);
        proof = merkle::prove_inclusion(index, size, &tree).expect("proof of a small tree");
        root = merkle::tree_root(size, &tree).expect("root of a small tree");
        leaf = leaves[usize::try_from(index).expect("index < 80")];
        assert_eq!(
            merkle::verify_inclusion(&leaf, index, size, &proof, &root),
            Ok(())
        );
        mutate(&mut c, &mut index, &mut size, &mut proof, &mut leaf);
    }
    let got = merkle::verify_inclusion(&leaf, index, size, &proof, &root);
    let want =
        proof.len() <= MAX_PROOF_HASHES && fold_inclusion(index, size, &leaf, &proof) == Some(root);
    assert_eq!(
        got.is_ok(),
        want,
        "verify_inclusion({index}, {size}, {} hashes): {got:?}",
        proof.len()
    );
}

/// Consistency verifier: arbitrary sizes and proofs (mode 0), or a real
/// proof between two sizes of a small tree, perhaps mutated (mode 1).
/// `verify_consistency` accepts exactly when the independent fold reaches
/// both roots; a real proof always verifies.
pub fn merkle_consistency(data: &[u8]) {
    let mut c = Cursor::new(data);
    let (mut m, mut n, mut root_m, root_n, mut proof);
    if c.u8() & 1 == 0 {
        m = c.u64();
        n = c.u64();
        root_m = if c.u8() & 1 == 0 {
            merkle::empty_root()
        } else {
            c.hash()
        };
        root_n = c.hash();
        proof = c.hashes(MAX_PROOF_HASHES + 2);
    } else {
        n = 1 + u64::from(c.u8() % 80);
        m = u64::from(c.u8()) % (n + 1);
        let tree = MemoryTree::new(&small_leaves(n));
        let old = MemoryTree::new(&small_leaves(m));
        proof = merkle::prove_consistency(m, n, &tree).expect("proof of a small tree");
        root_m = merkle::tree_root(m, &old).expect("old root");
        root_n = merkle::tree_root(n, &tree).expect("new root");
        assert_eq!(
            merkle::verify_consistency(m, n, &proof, &root_m, &root_n),
            Ok(())
        );
        mutate(&mut c, &mut m, &mut n, &mut proof, &mut root_m);
    }
    let got = merkle::verify_consistency(m, n, &proof, &root_m, &root_n);
    let want = consistency_accepted(m, n, &proof, &root_m, &root_n);
    assert_eq!(
        got.is_ok(),
        want,
        "verify_consistency({m}, {n}, {} hashes): {got:?}",
        proof.len()
    );
}

// ---------------------------------------------------------------------------
// tiles
// ---------------------------------------------------------------------------

/// Entry bundles and hash tiles: what decodes re-encodes to the input; a
/// hash tile decodes exactly when its length is 32 times the width.
pub fn tiles(data: &[u8]) {
    if let Ok(entries) = tiles::decode_entry_bundle(data) {
        assert!(entries.len() as u64 <= tiles::TILE_WIDTH);
        let again = tiles::encode_entry_bundle(entries.iter().copied())
            .unwrap_or_else(|e| panic!("decoded bundle does not re-encode: {e}"));
        assert_eq!(again, data, "entry bundle does not re-encode to itself");
    }
    let width = data.first().map_or(0, |b| usize::from(*b) + 1);
    for w in [width, data.len() / tiles::HASH_BYTES] {
        match tiles::decode_hash_tile(data, w, "tile/0/000") {
            Ok(hashes) => {
                assert_eq!(hashes.len(), w);
                assert_eq!(tiles::encode_hash_tile(&hashes), data);
            }
            Err(_) => assert_ne!(
                data.len(),
                w * tiles::HASH_BYTES,
                "a well-sized tile refused"
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// trust
// ---------------------------------------------------------------------------

/// Trust file: every log key's hash is the one its name and key imply, and
/// a verifier can be built exactly when both lists are non-empty.
pub fn trust(data: &[u8]) {
    let Ok(trust) = Trust::from_json(data) else {
        return;
    };
    for log in &trust.logs {
        let fresh = NoteVerifier::new(&log.name, log.key).expect("a parsed log key is valid");
        assert_eq!(
            fresh.key_hash, log.key_hash,
            "vkey hash does not match name and key"
        );
    }
    assert_eq!(trust.issuer_keys().len(), trust.issuers.len());
    let usable = !trust.issuers.is_empty() && !trust.logs.is_empty();
    assert_eq!(Verifier::new(trust, None).is_ok(), usable);
}

// ---------------------------------------------------------------------------
// Witnesses: tlog-policy, cosignature/v1, add-checkpoint, tlog-proof
// ---------------------------------------------------------------------------

/// The witnessed series: trust file, 2-of-3 policy, a cosigned checkpoint.
const WITNESSED_TRUST: &[u8] = include_bytes!("../fixtures/frozen-receipts/witnessed/trust.json");
const WITNESSED_POLICY: &[u8] =
    include_bytes!("../fixtures/frozen-receipts/witnessed/witnesses.policy");
const WITNESSED_BUNDLE: &[u8] =
    include_bytes!("../fixtures/frozen-receipts/witnessed/bundles/quorum-met.json");

/// The witnessed series' policy.
fn witnessed_policy() -> &'static TlogPolicy {
    static POLICY: OnceLock<TlogPolicy> = OnceLock::new();
    POLICY.get_or_init(|| TlogPolicy::parse(WITNESSED_POLICY).expect("witnesses.policy parses"))
}

/// The checkpoint note of the witnessed series (cosigned by w1 and w2).
fn witnessed_note() -> &'static Note {
    static NOTE: OnceLock<Note> = OnceLock::new();
    NOTE.get_or_init(|| {
        let raw = RawBundle::parse(WITNESSED_BUNDLE).expect("quorum-met.json parses");
        Note::parse(raw.log.checkpoint.as_bytes()).expect("its checkpoint parses")
    })
}

/// A verifier of the witnessed series under its policy.
fn witnessed_verifier() -> &'static Verifier {
    static VERIFIER: OnceLock<Verifier> = OnceLock::new();
    VERIFIER.get_or_init(|| {
        let trust = Trust::from_json(WITNESSED_TRUST).expect("witnessed trust.json loads");
        Verifier::new(trust, None)
            .expect("witnessed trust is usable")
            .with_policy(witnessed_policy().clone())
    })
}

/// tlog-policy: what parses is within the limits, names resolve to
/// earlier definitions, each member is listed once, thresholds are 1..=n;
/// with every witness cosigning the quorum is met, with none only `none`
/// is; octets the format forbids are refused; and the evaluation of a
/// fixed cosigned checkpoint is consistent with its verdict.
pub fn tlog_policy(data: &[u8]) {
    let parsed = TlogPolicy::parse(data);
    assert_eq!(
        parsed,
        TlogPolicy::parse(data),
        "parsing is not deterministic"
    );
    let forbidden = data
        .iter()
        .any(|&b| b != b'\t' && b != b'\n' && (b < 0x20 || b == 0x7f));
    let Ok(policy) = parsed else { return };
    assert!(!forbidden, "a policy with a forbidden octet parsed");
    assert!(data.len() <= MAX_POLICY_BYTES);
    assert!(
        data.ends_with(b"\n"),
        "a policy whose last line has no newline parsed"
    );
    assert!(policy.logs.len() <= MAX_POLICY_LOGS);
    assert!(policy.witnesses.len() <= MAX_POLICY_WITNESSES);
    assert!(policy.groups.len() <= MAX_POLICY_GROUPS);
    let mut listed = BTreeSet::new();
    for (g, group) in policy.groups.iter().enumerate() {
        assert!((1..=group.members.len()).contains(&group.threshold));
        for m in &group.members {
            match *m {
                Member::Witness(i) => assert!(i < policy.witnesses.len()),
                Member::Group(h) => assert!(h < g, "a group member defined later"),
            }
            assert!(listed.insert(format!("{m:?}")), "a member listed twice");
        }
    }
    let n = policy.witnesses.len();
    assert!(
        policy.quorum_met(&vec![true; n]),
        "all witnesses do not meet the quorum"
    );
    assert_eq!(
        policy.quorum_met(&vec![false; n]),
        policy.quorum == Quorum::None,
        "no witness meets a quorum other than none"
    );
    let eval = policy.evaluate(witnessed_note()).expect("a checkpoint");
    assert_eq!(eval.witnesses.len(), n);
    if eval.verdict() == QuorumVerdict::Verified {
        assert!(eval.quorum_met);
        assert!(matches!(eval.log, LogStatus::Verified { .. }));
    }
}

/// cosignature/v1 lines: each listed witness's status follows from its
/// lines (absent without one, cosigned only when a 72-byte line verifies,
/// at that line's timestamp); a witness vkey that parses prints back to
/// one that parses equal; a checkpoint cosigned by a fixed key verifies.
pub fn cosignature(data: &[u8]) {
    let verifiers: Vec<WitnessVerifier> = witnessed_policy()
        .witnesses
        .iter()
        .map(|w| w.verifier.clone())
        .collect();
    if let Ok(note) = Note::parse(data) {
        let statuses = cosig::check(&note, &verifiers);
        assert_eq!(statuses.len(), verifiers.len());
        for (w, status) in verifiers.iter().zip(&statuses) {
            let lines: Vec<_> = note.signatures.iter().filter(|l| w.matches(l)).collect();
            match status {
                CosigStatus::Absent => assert!(lines.is_empty()),
                CosigStatus::Failed(_) => assert!(!lines.is_empty()),
                CosigStatus::Verified { timestamp } => {
                    let first = lines.first().expect("a verified witness has a line");
                    assert_eq!(first.sig.len(), cosig::TIMESTAMPED_SIGNATURE_LEN);
                    let ts = u64::from_be_bytes(first.sig[..8].try_into().unwrap());
                    assert_eq!(ts, *timestamp);
                    assert!(ts <= cosig::MAX_TIMESTAMP);
                }
            }
        }
        for line in &note.signatures {
            let decoded = cosig::Cosignature::decode(line);
            let ts_ok = line.sig.len() == cosig::TIMESTAMPED_SIGNATURE_LEN
                && u64::from_be_bytes(line.sig[..8].try_into().unwrap()) <= cosig::MAX_TIMESTAMP;
            assert_eq!(decoded.is_ok(), ts_ok, "decode disagrees with the format");
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(v) = WitnessVerifier::parse(text) {
            assert_eq!(WitnessVerifier::parse(&v.to_string()), Ok(v));
        }
        if Checkpoint::parse(text).is_ok() {
            let key = rcpt::keys::SigningKey::from_bytes(&[9; 32]);
            let line = cosig::sign(text, "fuzz.example/w", &key, 1).expect("cosign a checkpoint");
            let cosigned = format!("{text}\n{line}");
            match Note::parse(cosigned.as_bytes()) {
                Ok(note) => {
                    let w = WitnessVerifier::new("fuzz.example/w", key.verifying_key()).unwrap();
                    assert_eq!(
                        cosig::check(&note, &[w]),
                        vec![CosigStatus::Verified { timestamp: 1 }]
                    );
                }
                // Only the note size limit may refuse a cosigned checkpoint.
                Err(e) => assert!(cosigned.len() > MAX_NOTE_BYTES, "cosigned note: {e}"),
            }
        }
    }
}

/// tlog-witness `add-checkpoint` request body: what parses prints back to
/// the same bytes, within the limits, its note text a checkpoint.
pub fn add_checkpoint(data: &[u8]) {
    let Ok(req) = AddCheckpointRequest::parse(data) else {
        return;
    };
    assert!(data.len() <= MAX_ADD_CHECKPOINT_BYTES);
    assert!(req.proof.len() <= MAX_ADD_CHECKPOINT_PROOF_LINES);
    assert!(req.note.signatures.len() <= MAX_NOTE_SIGNATURES);
    assert_eq!(req.checkpoint.to_text(), req.note.text);
    let body = AddCheckpointRequest::to_body(req.old_size, &req.proof, &print_note(&req.note));
    assert_eq!(body.as_bytes(), data, "request does not print back");
}

/// tlog-proof: what parses prints back to the same bytes; the verifier
/// gives it exactly the report of the bundle it states (under the
/// witnessed policy); a verified one has the policy's quorum.
pub fn tlog_proof(data: &[u8]) {
    let verifier = witnessed_verifier();
    let report = verifier.verify_bytes(data);
    let names: BTreeSet<&str> = report.checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names.len(),
        report.checks.len(),
        "a check is reported twice"
    );
    let Ok(proof) = TlogProof::parse(data) else {
        return;
    };
    assert_eq!(
        proof.to_text().as_bytes(),
        data,
        "tlog-proof does not print back"
    );
    assert_eq!(
        TlogProof::parse(proof.to_text().as_bytes()),
        Ok(proof.clone())
    );
    if let Ok(bundle) = proof.to_bundle() {
        let direct = verifier.verify_bytes(bundle.to_json().as_bytes());
        assert_eq!(report, direct, "a tlog-proof and its bundle differ");
    }
    if report.outcome() == Outcome::Verified {
        let eval = witnessed_policy()
            .evaluate(&proof.note)
            .expect("a checkpoint");
        assert_eq!(eval.verdict(), QuorumVerdict::Verified);
    }
}
