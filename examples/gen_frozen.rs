//! The deterministic generator of `fixtures/frozen-receipts/`.
//!
//! Run once per series: `cargo run --example gen_frozen -- [--series NAME]
//! fixtures/frozen-receipts`. The default series (`v1`) is the corpus root
//! itself; every other series is written into its own subdirectory
//! `fixtures/frozen-receipts/<NAME>/`, with its own `manifest.json`,
//! `trust.json`, `log/`, `bundles/` and `SHA256SUMS`. Adding a series is
//! adding an entry to [`SERIES`] with its own table of cases: existing
//! series, and so existing frozen bytes, are never touched.
//!
//! The generator refuses to write into a directory that already holds a
//! manifest: frozen files are written once and never regenerated. Every key
//! comes from a fixed seed and every signature is deterministic (Ed25519), so
//! a second run into an empty directory writes the same bytes
//! (tests/frozen_regen.rs checks it); no clock and no randomness are read.
//!
//! Each case is one row of a series' table: a bundle plus its expected
//! outcome and reason code in `manifest.json`. A row's position fixes its key
//! number `n` and its log index, and every row's entry shapes the log that
//! every bundle of the series is proven from: a series' table is frozen with
//! its files (adding, removing or reordering a row rewrites them all). New
//! cases go into a new series. Receipts that break an invariant or the
//! canonical form are still correctly signed and logged: the log library
//! takes opaque entries, and the generator bypasses the issuing checks on
//! purpose.

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rcpt::bundle::{Bundle, LogProof};
use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::digest::{Digest, to_hex};
use rcpt::keys::{self, NoteVerifier, SigningKey};
use rcpt::log::{Log, LogWriter};
use rcpt::receipt::canonical::{Value, dagcbor, json};
use rcpt::receipt::dsse::Envelope;
use serde_json::{Value as J, json};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// Series
// ---------------------------------------------------------------------------

/// One frozen series: its table of cases and the main log they are proven from.
struct Series {
    /// The value of `--series`.
    name: &'static str,
    /// Where under the corpus root it is written ("" for the root itself).
    dir: &'static str,
    /// The series' own README.md.
    readme: &'static str,
    /// Origin of the series' main (trusted) log.
    origin: &'static str,
    /// Key label of the main log's signing key.
    log_key: &'static str,
    /// Key number `n` of the first row; row `i` gets `first_n + i`.
    first_n: i64,
    /// The cases, in log order.
    table: fn() -> Vec<Row>,
    /// Tree sizes at which the main log publishes checkpoints before the
    /// cases; a bundle is written for the first, middle and last entry of each.
    small_sizes: &'static [u64],
    /// Filler entries in the main log after the cases.
    final_filler: usize,
    /// Indexes proven at the final size (the last entry is always added).
    final_indexes: &'static [u64],
    /// Fixture files the series' cases read besides bundles (e.g. a
    /// `--fresh` root), written under the series directory.
    fixtures: &'static [(&'static str, &'static str)],
    /// Fixture files computed from the series (e.g. a tlog-policy naming
    /// its log key), written under the series directory.
    computed: fn(&Series) -> Result<Vec<Fixture>>,
}

/// A computed fixture file: path under the series directory, contents.
type Fixture = (&'static str, String);

/// No computed fixture files.
fn no_files(_: &Series) -> Result<Vec<Fixture>> {
    Ok(Vec::new())
}

/// Every series; the first is the default.
static SERIES: [Series; 3] = [
    Series {
        name: "v1",
        dir: "",
        readme: V1_README,
        origin: "rcpt.example/frozen-log",
        log_key: "log",
        first_n: 101,
        table: v1_table,
        small_sizes: &[1, 2, 3, 7, 8, 9],
        final_filler: 1030,
        final_indexes: &[0, 1, 511, 512, 1023],
        fixtures: &[],
        computed: no_files,
    },
    Series {
        name: "gate",
        dir: "gate",
        readme: GATE_README,
        origin: "rcpt.example/frozen-gate-log",
        log_key: "gate log",
        first_n: 1001,
        table: gate_table,
        small_sizes: &[],
        final_filler: 3,
        final_indexes: &[],
        fixtures: GATE_ROOT,
        computed: no_files,
    },
    Series {
        name: "witnessed",
        dir: "witnessed",
        readme: WITNESSED_README,
        origin: "rcpt.example/frozen-witnessed-log",
        log_key: "witnessed log",
        first_n: 2001,
        table: witnessed_table,
        small_sizes: &[],
        final_filler: 3,
        final_indexes: &[],
        fixtures: &[],
        computed: witnessed_policies,
    },
];

// ---------------------------------------------------------------------------
// The witnessed table
// ---------------------------------------------------------------------------

/// The `witnessed` series' README, written with it.
const WITNESSED_README: &str = "# Frozen receipt corpus: witnessed series\n\n\
Written once by `cargo run --example gen_frozen -- --series witnessed fixtures/frozen-receipts` \
and never regenerated; frozen on its own (its own SHA256SUMS). Cases exercise `rcpt verify \
--policy` (spec/witness.md \"Verifying with a policy\"): the checkpoint of each bundle carries \
cosignature/v1 lines of the witnesses in `witnesses.policy` (a 2-of-3 quorum), of a witness \
no policy lists, and grease lines. A manifest case's `\"gate\"` object names the policy file it \
runs with (`\"policy\"`). `other-log.policy` lists the same witnesses but another log only. \
Witness keys: seeds SHA-256(\"rcpt frozen corpus v1: witness 1\") and so on, as every key of the \
generator; cosignature times are fixed.\n";

/// The witnesses of `witnesses.policy`: (key label, policy name, key name).
const WITNESSES: [(&str, &str, &str); 3] = [
    ("witness 1", "w1", "witness.example/w1"),
    ("witness 2", "w2", "witness.example/w2"),
    ("witness 3", "w3", "witness.example/w3"),
];
/// A witness no policy lists: (key label, key name).
const STRANGER_WITNESS: (&str, &str) = ("stranger witness", "stranger.example/witness");
/// The fixed time of every cosignature of the series (POSIX seconds).
const COSIGNED_AT: u64 = 1_790_000_000;

/// `witnesses.policy` (the series' log, 2 of w1 w2 w3) and
/// `other-log.policy` (the same witnesses, the unknown log only).
fn witnessed_policies(series: &Series) -> Result<Vec<Fixture>> {
    let witness_lines: String = WITNESSES
        .iter()
        .map(|(label, name, key_name)| {
            let vkey =
                rcpt::tlog::cosig::WitnessVerifier::new(key_name, key(label).verifying_key())?;
            Ok(format!("witness {name} {vkey}\n"))
        })
        .collect::<Result<_>>()?;
    let quorum = "group witnesses 2 w1 w2 w3\nquorum witnesses\n";
    let policy = |origin: &str, label: &str| -> Result<String> {
        let log = NoteVerifier::new(origin, key(label).verifying_key())?;
        Ok(format!(
            "# rcpt frozen corpus, series witnessed: 2 of 3 witnesses\nlog {log}\n\n{witness_lines}{quorum}"
        ))
    };
    Ok(vec![
        ("witnesses.policy", policy(series.origin, series.log_key)?),
        ("other-log.policy", policy(UNKNOWN_ORIGIN, "unknown log")?),
    ])
}

/// The `witnessed` cases (row `i` has key number `2001 + i`).
#[rustfmt::skip]
fn witnessed_table() -> Vec<Row> {
    use Cosig::{Bad, By, Grease, OtherCheckpoint, Short, Stranger};
    use Edit::Checkpoint;
    use NoteEdit::Cosign;
    use Payload::Base;
    let policy = || json!({"policy": "witnesses.policy"});
    let cap = |n: usize| -> Vec<Cosig> { [By(0), By(1)].into_iter().chain((0..n).map(Grease)).collect() };
    vec![
        row("quorum-met", "cosigned by w1 and w2: 2 of 3", Base, VERIFIED)
            .edit(Checkpoint(Cosign(vec![By(0), By(1)]))).gate(policy()),
        row("quorum-met-all", "cosigned by w1, w2 and w3", Base, VERIFIED)
            .edit(Checkpoint(Cosign(vec![By(0), By(1), By(2)]))).gate(policy()),
        row("quorum-not-met", "cosigned by w1 only: 1 of 3", Base, failed("checkpoint.quorum"))
            .edit(Checkpoint(Cosign(vec![By(0)]))).gate(policy()),
        row("no-cosignature", "signed by the log only", Base, failed("checkpoint.quorum"))
            .gate(policy()),
        row("bad-cosignature", "w1 and w2 cosigned; w3's line has a flipped signature bit",
            Base, failed("checkpoint.cosignature"))
            .edit(Checkpoint(Cosign(vec![By(0), By(1), Bad(2)]))).gate(policy()),
        row("cosignature-other-checkpoint", "w1 cosigned; w2's line is its cosignature of another checkpoint",
            Base, failed("checkpoint.cosignature"))
            .edit(Checkpoint(Cosign(vec![By(0), OtherCheckpoint(1)]))).gate(policy()),
        row("cosignature-short", "w1 and w2 cosigned; a line with w3's name and key ID holds 68 bytes, not 72",
            Base, failed("checkpoint.cosignature"))
            .edit(Checkpoint(Cosign(vec![By(0), By(1), Short(2)]))).gate(policy()),
        row("grease", "grease lines before, between and after the cosignatures of w1 and w2", Base, VERIFIED)
            .edit(Checkpoint(Cosign(vec![Grease(0), By(0), Grease(1), By(1), Grease(2)]))).gate(policy()),
        row("unknown-cosigner-only", "cosigned by a witness no policy lists: ignored", Base,
            failed("checkpoint.quorum"))
            .edit(Checkpoint(Cosign(vec![Stranger]))).gate(policy()),
        row("unknown-cosigner-ignored", "w1, an unlisted witness, w2", Base, VERIFIED)
            .edit(Checkpoint(Cosign(vec![By(0), Stranger, By(1)]))).gate(policy()),
        row("line-cap-met", "log, w1, w2 and 97 grease lines: 100 signature lines", Base, VERIFIED)
            .edit(Checkpoint(Cosign(cap(97)))).gate(policy()),
        row("line-cap-exceeded", "log, w1, w2 and 98 grease lines: 101 signature lines",
            Base, failed("checkpoint.malformed"))
            .edit(Checkpoint(Cosign(cap(98)))).gate(policy()),
        row("log-not-in-policy", "quorum met, but the policy lists another log only: not evaluated",
            Base, error("log.untrusted"))
            .edit(Checkpoint(Cosign(vec![By(0), By(1)]))).gate(json!({"policy": "other-log.policy"})),
        row("no-policy", "cosigned by w1 only, verified without --policy: no witness check", Base, VERIFIED)
            .edit(Checkpoint(Cosign(vec![By(0)]))),
        row("tlog-proof-quorum-met", "the quorum-met checkpoint as a C2SP tlog-proof", Base, VERIFIED)
            .edit(Edit::TlogProof(Cosign(vec![By(0), By(1)]))).gate(policy()),
        row("tlog-proof-quorum-not-met", "a tlog-proof cosigned by w2 only", Base, failed("checkpoint.quorum"))
            .edit(Edit::TlogProof(Cosign(vec![By(1)]))).gate(policy()),
    ]
}

/// One signature line appended to a checkpoint by [`NoteEdit::Cosign`].
#[derive(Clone, Copy)]
enum Cosig {
    /// A valid cosignature by `WITNESSES[i]`.
    By(usize),
    /// `By(i)` with one signature bit flipped.
    Bad(usize),
    /// `WITNESSES[i]`'s valid cosignature of another checkpoint (size + 1).
    OtherCheckpoint(usize),
    /// `WITNESSES[i]`'s name and key ID, then 64 bytes (not 72).
    Short(usize),
    /// A valid cosignature by [`STRANGER_WITNESS`].
    Stranger,
    /// Grease line `i`: an unknown key.
    Grease(usize),
}

impl Cosig {
    /// The line, newline-terminated, over checkpoint `body`.
    fn line(self, body: &str) -> Result<String> {
        let witness = |i: usize| WITNESSES.get(i).context("no such witness");
        let cosign = |body: &str, label: &str, name: &str, at: u64| -> Result<String> {
            Ok(rcpt::tlog::cosig::sign(
                body,
                name,
                &key(label),
                COSIGNED_AT + at,
            )?)
        };
        Ok(match self {
            Cosig::By(i) => {
                let (label, _, name) = witness(i)?;
                cosign(body, label, name, i as u64)?
            }
            Cosig::Bad(i) => {
                let (label, _, name) = witness(i)?;
                let line = cosign(body, label, name, i as u64)?;
                let (prefix, b64) = line.trim_end().rsplit_once(' ').context("line")?;
                let mut raw = STANDARD.decode(b64)?;
                *raw.get_mut(4 + 8 + 10).context("short")? ^= 0x01;
                format!("{prefix} {}\n", STANDARD.encode(raw))
            }
            Cosig::OtherCheckpoint(i) => {
                let (label, _, name) = witness(i)?;
                let mut lines: Vec<String> = body.lines().map(str::to_string).collect();
                let size: u64 = lines.get(1).context("size line")?.parse()?;
                *lines.get_mut(1).context("size line")? = (size + 1).to_string();
                cosign(&(lines.join("\n") + "\n"), label, name, i as u64)?
            }
            Cosig::Short(i) => {
                let (label, _, name) = witness(i)?;
                let id = rcpt::tlog::cosig::key_id(name, &key(label).verifying_key());
                let raw: Vec<u8> = id.iter().copied().chain([7u8; 64]).collect();
                format!("— {name} {}\n", STANDARD.encode(raw))
            }
            Cosig::Stranger => {
                let (label, name) = STRANGER_WITNESS;
                cosign(body, label, name, 9)?
            }
            Cosig::Grease(i) => grease_line(&format!("w{i}")) + "\n",
        })
    }
}

/// The `gate` series' README, written with it.
const GATE_README: &str = "# Frozen receipt corpus: gating series\n\n\
Written once by `cargo run --example gen_frozen -- --series gate fixtures/frozen-receipts` \
and never regenerated; frozen on its own (its own SHA256SUMS), so adding it rewrote no file \
of the corpus root. Cases exercise spec/gate.md: issuer binding, each requirement met and \
not met, and freshness against `root/`. Each manifest case's `\"gate\"` object gives the \
flags it runs with (`require` as a trust file's, `now`, `fresh`).\n";

/// The `--fresh` root of the gate series: (path, contents).
const GATE_ROOT: &[(&str, &str)] = &[
    ("root/config.toml", "mode = \"strict\"\n"),
    ("root/src/lib.rs", "pub fn gate() {}\n"),
];

/// A filesystem read set over GATE_ROOT files, with digests of `contents`.
fn read_set_of(items: &[(&str, &str)]) -> J {
    J::Array(
        items
            .iter()
            .map(|(resource, contents)| {
                json!({"resource": resource, "digest": Digest::blake3(contents.as_bytes()).to_string()})
            })
            .collect(),
    )
}

/// The `gate` cases (row `i` has key number `1001 + i`).
#[rustfmt::skip]
fn gate_table() -> Vec<Row> {
    use Payload::With;
    let deny = json!({"deny": {"reasons": ["deploy window closed"]}});
    let t0: i64 = 1_790_000_000;
    let fresh_set = read_set_of(&[("config.toml", "mode = \"strict\"\n"), ("src/lib.rs", "pub fn gate() {}\n")]);
    let stale_set = read_set_of(&[("config.toml", "mode = \"lenient\"\n"), ("src/lib.rs", "pub fn gate() {}\n")]);
    let missing_set = read_set_of(&[("config.toml", "mode = \"strict\"\n"), ("removed.txt", "gone\n")]);
    let fs = |set: &J| json!({"substrate": "filesystem", "read_set": set});
    vec![
        // Issuer binding.
        row("issuer-mismatch", "signed by the trusted key of gate.example/frozen, claims another issuer",
            With(json!({"issuer": "bank.example/prod"})), failed("signature.issuer_mismatch")),
        // Verdict.
        row("require-verdict-admit-met", "admit receipt, admit required", Payload::Base, VERIFIED)
            .gate(json!({"require": {"verdict": ["admit"]}})),
        row("require-verdict-admit-deny", "deny receipt, admit required",
            With(json!({"verdict": deny, "applied": false})), failed("policy.verdict"))
            .gate(json!({"require": {"verdict": ["admit"]}})),
        row("require-verdict-escalate-not-any", "escalate receipt, admit or deny required",
            With(json!({"verdict": {"escalate": {"ticket": "OPS-7"}}, "applied": false})), failed("policy.verdict"))
            .gate(json!({"require": {"verdict": ["admit", "deny"]}})),
        // Issuer, change, policy, applied.
        row("require-issuer-met", "issuer required and matching", Payload::Base, VERIFIED)
            .gate(json!({"require": {"issuer": [ISSUER_NAME]}})),
        row("require-issuer-not-met", "another issuer required", Payload::Base, failed("policy.issuer"))
            .gate(json!({"require": {"issuer": ["ops.example/gate"]}})),
        row("require-change-id-met", "this change required",
            With(json!({"change_id": d("change gate-1")})), VERIFIED)
            .gate(json!({"require": {"change_id": d("change gate-1")}})),
        row("require-change-id-other", "a receipt for another change",
            With(json!({"change_id": d("change gate-1")})), failed("policy.change_id"))
            .gate(json!({"require": {"change_id": d("change gate-2")}})),
        row("require-policy-id-met", "policy v1 among those required", Payload::Base, VERIFIED)
            .gate(json!({"require": {"policy_id": [d("policy v0"), d("policy v1")]}})),
        row("require-policy-id-not-met", "only policy v2 accepted", Payload::Base, failed("policy.policy_id"))
            .gate(json!({"require": {"policy_id": [d("policy v2")]}})),
        row("require-applied-met", "applied required, applied", Payload::Base, VERIFIED)
            .gate(json!({"require": {"applied": true}})),
        row("require-applied-not-met", "applied required, escalated and not applied",
            With(json!({"verdict": {"escalate": {"ticket": "OPS-8"}}, "applied": false})), failed("policy.applied"))
            .gate(json!({"require": {"applied": true}})),
        // Age, with a fixed clock.
        row("require-age-met", "issued an hour before now, 1 h allowed",
            With(json!({"issued_at": t0})), VERIFIED)
            .gate(json!({"require": {"max_age_s": 3600}, "now": t0 + 3600})),
        row("require-age-too-old", "issued an hour and a second before now, 1 h allowed",
            With(json!({"issued_at": t0})), failed("policy.age"))
            .gate(json!({"require": {"max_age_s": 3600}, "now": t0 + 3601})),
        row("require-age-future", "issued 301 s after now",
            With(json!({"issued_at": t0})), failed("policy.age"))
            .gate(json!({"require": {"max_age_s": 3600}, "now": t0 - 301})),
        // Not checkable: a future receipt version.
        row("require-version-2", "version 2 with a verdict required: not evaluated",
            With(json!({"version": 2})), error("payload.version_unsupported"))
            .gate(json!({"require": {"verdict": ["admit"]}})),
        // Freshness against root/.
        row("fresh-read-set", "every read-set file has its recorded digest", With(fs(&fresh_set)), VERIFIED)
            .gate(json!({"fresh": "root"})),
        row("fresh-stale-file", "config.toml changed since the receipt", With(fs(&stale_set)), failed("policy.fresh"))
            .gate(json!({"fresh": "root"})),
        row("fresh-missing-file", "removed.txt vanished since the receipt", With(fs(&missing_set)), failed("policy.fresh"))
            .gate(json!({"fresh": "root"})),
        row("fresh-unsupported-substrate", "postgresql has no freshness rule",
            With(json!({"substrate": "postgresql", "read_set": fresh_set})), error("policy.fresh_unsupported"))
            .gate(json!({"fresh": "root"})),
    ]
}

/// The `v1` series' README, written with it.
const V1_README: &str = "# Frozen receipt corpus\n\n\
Written once by `cargo run --example gen_frozen -- fixtures/frozen-receipts` \
(examples/gen_frozen.rs: fixed keys, no clock, no randomness) and never \
regenerated. `rcpt verify --corpus fixtures/frozen-receipts` checks every \
case of `manifest.json` (expected outcome and primary reason code) and every \
line of `SHA256SUMS`; tests/frozen.rs does the same and fails if any file \
changed.\n\n\
- `manifest.json`: the cases; `trust.json`: the trust (one issuer, one log).\n\
- `keys/`: public keys only (`issuer.pub`, `untrusted-issuer.pub`, \
`log.vkey`). Private keys are derived from fixed labels in the generator.\n\
- `log/`: the public files (checkpoint, tiles) of the main log the bundles \
were proven from.\n\
- `bundles/`: one bundle per case; receipts that break an invariant or the \
canonical form are still correctly signed and logged.\n";

/// Origin of a log no trust file names (shared by every series).
const UNKNOWN_ORIGIN: &str = "unknown.example/other-log";
/// Issuer name in every base receipt and trust file.
const ISSUER_NAME: &str = "gate.example/frozen";

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

/// One case: what is signed, how, into which log, how the correct bundle is
/// then edited, and what the verifier must say.
struct Row {
    /// File stem under `bundles/`.
    stem: &'static str,
    comment: &'static str,
    payload: Payload,
    signing: Signing,
    log: LogChoice,
    edit: Edit,
    expect: Expect,
    /// The manifest's `"gate"` object: the gating flags the case runs with.
    gate: Option<J>,
}

/// A row signed by the issuer, in the main log, with the bundle unedited.
fn row(stem: &'static str, comment: &'static str, payload: Payload, expect: Expect) -> Row {
    Row {
        stem,
        comment,
        payload,
        signing: Signing::Issuer,
        log: LogChoice::Main,
        edit: Edit::Keep,
        expect,
        gate: None,
    }
}

impl Row {
    fn gate(self, gate: J) -> Self {
        Row {
            gate: Some(gate),
            ..self
        }
    }
    fn edit(self, edit: Edit) -> Self {
        Row { edit, ..self }
    }
    fn signing(self, signing: Signing) -> Self {
        Row { signing, ..self }
    }
    fn log(self, log: LogChoice) -> Self {
        Row { log, ..self }
    }
}

/// The payload bytes of a row with key number `n`.
enum Payload {
    /// `base(n)`, canonical.
    Base,
    /// `base(n)` with these top-level fields replaced or added, canonical.
    With(J),
    /// `base(n)` without this field, canonical.
    Without(&'static str),
    /// `base(n)` with one departure from canonical DAG-CBOR.
    Quirk(Quirk),
    /// Bytes from a helper, for payloads the variants above cannot say.
    Raw(fn(i64) -> Result<Vec<u8>>),
}

/// Who signs the envelope (before it is logged: the log holds what is signed here).
enum Signing {
    /// The trusted issuer.
    Issuer,
    /// The trusted issuer, with the signature's keyid left empty.
    IssuerNoKeyid,
    /// The trusted issuer, then bits `mask` of signature byte `at` flipped.
    IssuerFlipped { at: usize, mask: u8 },
    /// As `IssuerFlipped`, with the keyid left empty too.
    IssuerNoKeyidFlipped { at: usize, mask: u8 },
    /// The untrusted issuer's signature first, then the trusted one's.
    StrangerThenIssuer,
    /// Only the untrusted issuer.
    Stranger,
    /// The trusted issuer, under another payload type.
    IssuerAs(&'static str),
    /// An empty signatures list.
    Unsigned,
}

/// The log a row's envelope is appended to.
#[derive(Clone, Copy, PartialEq)]
enum LogChoice {
    /// The series' main log, named in trust.json; proven at its final size.
    Main,
    /// A log no trust file names; proven at its final size.
    Unknown,
}

/// How the correct bundle becomes the row's bundle.
enum Edit {
    /// Written as `Bundle::to_json` prints it.
    Keep,
    // JSON edits: the bundle is parsed, edited and pretty-printed again.
    /// Set the value at a JSON pointer.
    Set(&'static str, J),
    /// Add to the integer at a JSON pointer.
    Add(&'static str, u64),
    /// Copy the value at one JSON pointer over another.
    CopyValue {
        from: &'static str,
        to: &'static str,
    },
    /// Remove a top-level field.
    Remove(&'static str),
    /// Replace `receipt_id`'s `blake3:` prefix, keeping the hex.
    ReceiptIdPrefix(&'static str),
    /// Flip one bit of an inclusion proof hash.
    FlipProofHash(Nth),
    /// Drop the last inclusion proof hash.
    DropLastProofHash,
    /// Append an inclusion proof hash.
    PushProofHash(Vec<u8>),
    /// Re-encode standard base64 strings as URL-safe without padding.
    UrlSafeBase64(&'static [&'static str]),
    /// Edit the checkpoint note's text.
    Checkpoint(NoteEdit),
    // Byte edits: applied to the bytes `Bundle::to_json` prints.
    /// Keep only the first half of the bytes.
    TruncateHalf,
    /// Give `key` a second time, first with `value`.
    DuplicateKey { key: &'static str, value: String },
    /// Append this many spaces.
    PadSpaces(usize),
    /// Edit the checkpoint note, then write the bundle as a C2SP
    /// tlog-proof (the log entry in `extra`), as `rcpt log prove --format
    /// tlog-proof` does.
    TlogProof(NoteEdit),
}

/// Which inclusion proof hash.
enum Nth {
    First,
    Last,
}

/// An edit of a checkpoint note's text.
enum NoteEdit {
    /// Flip one bit in the last signature line's signature.
    FlipLastSignature,
    /// Replace line `i` (0-based), keeping the signatures.
    ReplaceLine(usize, String),
    /// One unknown-key signature line before the real one, two after.
    Grease,
    /// Keep only the body: no signature lines.
    DropSignatures,
    /// Sign the body under the same name with the key of this label instead.
    ResignBy(&'static str),
    /// Append this many unknown-key signature lines.
    AppendGreaseLines(usize),
    /// Append these lines (cosignatures, grease) after the log's signature.
    Cosign(Vec<Cosig>),
}

/// What a case expects.
struct Expect {
    outcome: &'static str,
    reason: Option<&'static str>,
}

const VERIFIED: Expect = Expect {
    outcome: "verified",
    reason: None,
};
const fn failed(reason: &'static str) -> Expect {
    Expect {
        outcome: "failed",
        reason: Some(reason),
    }
}
const fn error(reason: &'static str) -> Expect {
    Expect {
        outcome: "error",
        reason: Some(reason),
    }
}

// ---------------------------------------------------------------------------
// The v1 table
// ---------------------------------------------------------------------------

/// The `v1` cases, in log order (row `i` has key number `101 + i`).
///
/// Columns: file stem, comment, payload, expectation; then, where they
/// differ from the default, `.signing(..)`, `.log(..)` and `.edit(..)`.
#[rustfmt::skip]
fn v1_table() -> Vec<Row> {
    use Edit::{Add, Checkpoint, CopyValue, DropLastProofHash, DuplicateKey, FlipProofHash, PadSpaces};
    use Edit::{PushProofHash, ReceiptIdPrefix, Remove, Set, TruncateHalf, UrlSafeBase64};
    use NoteEdit::{AppendGreaseLines, DropSignatures, FlipLastSignature, Grease, ReplaceLine, ResignBy};
    use Payload::{Base, Quirk as NonCanonical, Raw, With, Without};
    let deny_two = json!({"deny": {"reasons": ["policy: deploy window closed", "reads stale"]}});
    vec![
        // Every verdict arm and replay shape, verified.
        row("verdict-admit", "admit verdict, applied", Base, VERIFIED),
        row("verdict-deny", "deny verdict with two sorted reasons",
            With(json!({"verdict": deny_two, "applied": false})), VERIFIED),
        row("verdict-escalate", "escalate verdict, not applied",
            With(json!({"verdict": {"escalate": {"ticket": "OPS-1234"}}, "applied": false})), VERIFIED),
        row("replay-llm_originated", "replay class llm_originated",
            With(json!({"replay": {"class": "llm_originated"}})), VERIFIED),
        row("replay-unknown", "replay class unknown", With(json!({"replay": {"class": "unknown"}})), VERIFIED),
        row("replay-mixed-deterministic-llm", "replay mixed(deterministic, llm)",
            With(mixed("deterministic", "llm")), VERIFIED),
        row("replay-mixed-deterministic-unknown", "replay mixed(deterministic, unknown)",
            With(mixed("deterministic", "unknown")), VERIFIED),
        row("replay-mixed-llm-deterministic", "replay mixed(llm, deterministic)",
            With(mixed("llm", "deterministic")), VERIFIED),
        row("replay-mixed-llm-unknown", "replay mixed(llm, unknown)", With(mixed("llm", "unknown")), VERIFIED),
        row("replay-mixed-unknown-deterministic", "replay mixed(unknown, deterministic)",
            With(mixed("unknown", "deterministic")), VERIFIED),
        row("replay-mixed-unknown-llm", "replay mixed(unknown, llm)", With(mixed("unknown", "llm")), VERIFIED),
        row("reversibility-null", "reversibility not established, no inverse",
            With(json!({"reversibility": null, "inverse_delta_id": null})), VERIFIED),
        row("reversibility-false", "irreversible change, no inverse",
            With(json!({"reversibility": false, "inverse_delta_id": null})), VERIFIED),
        row("read-set-empty-no-precondition", "empty read set, null precondition, postgresql",
            With(json!({"read_set": [], "precondition": null, "substrate": "postgresql"})), VERIFIED),
        row("substrate-filesystem", "substrate filesystem", With(json!({"substrate": "filesystem"})), VERIFIED),
        row("substrate-tool-proxy", "substrate tool-proxy", With(json!({"substrate": "tool-proxy"})), VERIFIED),
        row("substrate-mysql", "substrate mysql", With(json!({"substrate": "mysql"})), VERIFIED),

        // Invariants broken in correctly signed and logged receipts.
        row("invariant-reversibility-true-null-inverse", "reversibility true with a null inverse_delta_id",
            With(json!({"reversibility": true, "inverse_delta_id": null})), failed("invariant.reversibility")),
        row("invariant-reversibility-false-with-inverse", "reversibility false with an inverse_delta_id",
            With(json!({"reversibility": false})), failed("invariant.reversibility")),
        row("invariant-reversibility-null-with-inverse", "reversibility null with an inverse_delta_id",
            With(json!({"reversibility": null})), failed("invariant.reversibility")),
        row("invariant-verdict-deny-empty", "deny with no reasons",
            With(json!({"verdict": {"deny": {"reasons": []}}, "applied": false})), failed("invariant.verdict")),
        row("invariant-verdict-deny-unsorted", "deny reasons not sorted",
            With(json!({"verdict": {"deny": {"reasons": ["b", "a"]}}, "applied": false})),
            failed("invariant.verdict")),
        row("invariant-verdict-deny-duplicate", "deny reasons repeated",
            With(json!({"verdict": {"deny": {"reasons": ["a", "a"]}}, "applied": false})),
            failed("invariant.verdict")),
        row("invariant-verdict-escalate-empty-ticket", "escalate with an empty ticket",
            With(json!({"verdict": {"escalate": {"ticket": ""}}, "applied": false})), failed("invariant.verdict")),
        row("invariant-applied-deny", "applied true with a deny verdict",
            With(json!({"verdict": {"deny": {"reasons": ["no"]}}, "applied": true})), failed("invariant.applied")),
        row("invariant-applied-escalate", "applied true with an escalate verdict",
            With(json!({"verdict": {"escalate": {"ticket": "T-1"}}, "applied": true})),
            failed("invariant.applied")),
        row("invariant-read-set-unsorted", "read_set not sorted by resource",
            With(json!({"read_set": [{"resource": "b", "digest": d("b")}, {"resource": "a", "digest": d("a")}]})),
            failed("invariant.read_set")),
        row("invariant-read-set-duplicate", "read_set names a resource twice",
            With(json!({"read_set": [{"resource": "a", "digest": d("a")}, {"resource": "a", "digest": d("a2")}]})),
            failed("invariant.read_set")),
        row("invariant-replay-mixed-deterministic", "mixed with equal deterministic stages",
            With(mixed("deterministic", "deterministic")), failed("invariant.replay")),
        row("invariant-replay-mixed-llm", "mixed with equal llm stages",
            With(mixed("llm", "llm")), failed("invariant.replay")),
        row("invariant-replay-mixed-unknown", "mixed with equal unknown stages (laundering)",
            With(mixed("unknown", "unknown")), failed("invariant.replay")),

        // Schema errors.
        row("schema-unknown-field", "an unknown field", With(json!({"note": "extra"})), failed("payload.schema")),
        row("schema-missing-field", "policy_id missing", Without("policy_id"), failed("payload.schema")),
        row("schema-wrong-type", "issued_at as text",
            With(json!({"issued_at": "2026-11-29"})), failed("payload.schema")),
        row("schema-uppercase-digest", "a digest in uppercase hex",
            With(json!({"policy_id": d("policy v1").to_uppercase().replacen("BLAKE3", "blake3", 1)})),
            failed("payload.schema")),
        row("schema-bad-substrate", "substrate not in the list",
            With(json!({"substrate": "svn"})), failed("payload.schema")),
        row("schema-two-verdicts", "verdict with two arms",
            With(json!({"verdict": {"admit": {"proof": d("p")}, "escalate": {"ticket": "x"}}})),
            failed("payload.schema")),
        row("payload-version-2", "version 2: not evaluated",
            With(json!({"version": 2})), error("payload.version_unsupported")),

        // Non-canonical and malformed payloads, correctly signed and logged.
        row("noncanonical-bytewise-keys", "map keys in bytewise, not length-first, order",
            NonCanonical(Quirk::BytewiseKeys), failed("payload.non_canonical")),
        row("noncanonical-long-integer", "issued_at in an 8-byte integer",
            NonCanonical(Quirk::LongInteger), failed("payload.non_canonical")),
        row("noncanonical-indefinite-array", "arrays of indefinite length",
            NonCanonical(Quirk::IndefiniteArrays), failed("payload.non_canonical")),
        row("malformed-trailing-byte", "a byte after the payload value",
            Raw(trailing_byte), failed("payload.malformed")),
        row("malformed-float", "issued_at as a float", Raw(issued_at_float), failed("payload.malformed")),
        row("malformed-integer-over-2-53", "issued_at = 2^53, outside the data model",
            Raw(issued_at_2_pow_53), failed("payload.malformed")),
        row("malformed-not-cbor", "payload is JSON text, not CBOR", Raw(json_text), failed("payload.malformed")),

        // Identity.
        row("receipt-id-mismatch", "claimed id is another receipt's", Base, failed("receipt_id.mismatch"))
            .edit(Set("/receipt_id", json!(d("someone else")))),
        row("receipt-id-sha256", "claimed id uses the interop prefix", Base, failed("receipt_id.mismatch"))
            .edit(ReceiptIdPrefix("sha256:")),

        // Inclusion proofs.
        row("inclusion-wrong-sibling", "one bit of the first proof hash flipped",
            Base, failed("inclusion.invalid"))
            .edit(FlipProofHash(Nth::First)),
        row("inclusion-wrong-last-sibling", "one bit of the last proof hash flipped",
            Base, failed("inclusion.invalid"))
            .edit(FlipProofHash(Nth::Last)),
        row("inclusion-wrong-index", "index + 1", Base, failed("inclusion.invalid"))
            .edit(Add("/log/index", 1)),
        row("inclusion-index-beyond-size", "index = tree size", Base, failed("inclusion.invalid"))
            .edit(CopyValue { from: "/log/tree_size", to: "/log/index" }),
        row("inclusion-wrong-size", "tree_size + 1 (checkpoint says otherwise)",
            Base, failed("checkpoint.size_mismatch"))
            .edit(Add("/log/tree_size", 1)),
        row("inclusion-truncated", "last proof hash dropped", Base, failed("inclusion.invalid"))
            .edit(DropLastProofHash),
        row("inclusion-extended", "a proof hash appended", Base, failed("inclusion.invalid"))
            .edit(PushProofHash(vec![7; 32])),
        row("inclusion-short-hash", "a proof hash of 31 bytes", Base, failed("inclusion.malformed"))
            .edit(Set("/log/inclusion/0", json!(STANDARD.encode([7u8; 31])))),

        // Checkpoints.
        row("checkpoint-signature-flipped", "one bit of the checkpoint signature flipped",
            Base, failed("checkpoint.signature_invalid"))
            .edit(Checkpoint(FlipLastSignature)),
        row("checkpoint-root-altered", "checkpoint root replaced, old signature kept",
            Base, failed("checkpoint.signature_invalid"))
            .edit(Checkpoint(ReplaceLine(2, STANDARD.encode([9u8; 32])))),
        row("checkpoint-size-altered", "checkpoint size line changed, old signature kept",
            Base, failed("checkpoint.signature_invalid"))
            .edit(Checkpoint(ReplaceLine(1, "5".into()))),
        row("checkpoint-grease", "checkpoint with three unknown-key signature lines (grease): still verifies",
            Base, VERIFIED)
            .edit(Checkpoint(Grease)),
        row("checkpoint-origin-other", "bundle origin names the unknown log; checkpoint is the main log's",
            Base, failed("checkpoint.origin_mismatch"))
            .edit(Set("/log/origin", json!(UNKNOWN_ORIGIN))),
        row("checkpoint-not-a-note", "checkpoint text without signature lines",
            Base, failed("checkpoint.malformed"))
            .edit(Checkpoint(DropSignatures)),

        // Bundle and envelope shape.
        row("bundle-not-json", "bundle file is not JSON", Base, failed("bundle.malformed"))
            .edit(TruncateHalf),
        row("bundle-duplicate-key", "receipt_id given twice (JSON readers disagree on which wins)",
            Base, failed("bundle.malformed"))
            .edit(DuplicateKey { key: "receipt_id", value: d("other") }),
        row("bundle-missing-log", "no log object", Base, failed("bundle.malformed"))
            .edit(Remove("log")),
        row("bundle-media-type-v2", "a future bundle version: not evaluated", Base, error("bundle.unsupported"))
            .edit(Set("/media_type", json!("application/vnd.rcpt.bundle.v2+json"))),
        row("bundle-too-large", "bundle padded past 256 KiB", Base, failed("bundle.too_large"))
            .edit(PadSpaces(256 * 1024)),
        row("envelope-bad-base64", "envelope payload is not base64", Base, failed("envelope.malformed"))
            .edit(Set("/envelope/payload", json!("%%%not base64%%%"))),
        row("envelope-url-safe-base64", "envelope payload and sig in URL-safe base64 without padding",
            Base, VERIFIED)
            .edit(UrlSafeBase64(&["/envelope/payload", "/envelope/signatures/0/sig"])),
        row("envelope-empty-keyid", "signature without keyid: tried against every trusted key",
            Base, VERIFIED)
            .signing(Signing::IssuerNoKeyid),

        // Signatures, payload type and log (the envelope is changed before it is logged).
        row("signature-flipped",
            "one bit of the trusted signature flipped (the flipped envelope is what was logged)",
            Base, failed("signature.invalid"))
            .signing(Signing::IssuerFlipped { at: 10, mask: 0x04 }),
        row("signature-two-one-untrusted", "signed by an untrusted key and the trusted key",
            Base, VERIFIED)
            .signing(Signing::StrangerThenIssuer),
        row("signature-untrusted-only", "signed only by a key the trust file does not name",
            Base, error("signature.untrusted"))
            .signing(Signing::Stranger),
        row("payload-type-other", "payload type of another format: not evaluated",
            Base, error("envelope.payload_type_unsupported"))
            .signing(Signing::IssuerAs("application/vnd.in-toto+json")),
        row("log-unknown-origin", "logged in a log the trust file does not name",
            Base, error("log.untrusted"))
            .log(LogChoice::Unknown),
        row("envelope-no-signatures", "an envelope with an empty signatures list: malformed DSSE",
            Base, failed("envelope.malformed"))
            .signing(Signing::Unsigned),
        row("envelope-empty-keyid-bad-signature",
            "a signature without keyid that verifies under no trusted key: skipped",
            Base, error("signature.untrusted"))
            .signing(Signing::IssuerNoKeyidFlipped { at: 3, mask: 0x10 }),
        row("checkpoint-other-key-same-name",
            "checkpoint signed under the log's name by another key (key hash differs): no trusted key signed",
            Base, error("log.untrusted"))
            .edit(Checkpoint(ResignBy("impostor log"))),
        row("checkpoint-101-signatures", "checkpoint with 101 signature lines (limit 100): malformed",
            Base, failed("checkpoint.malformed"))
            .edit(Checkpoint(AppendGreaseLines(100))),
    ]
}

/// A `mixed` replay with these proposal and execution stages.
fn mixed(proposal: &str, execution: &str) -> J {
    json!({"replay": {"class": "mixed", "proposal": proposal, "execution": execution}})
}

// ---------------------------------------------------------------------------
// Payloads
// ---------------------------------------------------------------------------

/// A fixed key from a label: seed = SHA-256("rcpt frozen corpus v1: " || label).
fn key(label: &str) -> SigningKey {
    let seed = Digest::sha256(format!("rcpt frozen corpus v1: {label}").as_bytes()).bytes;
    SigningKey::from_bytes(&seed)
}

/// A `blake3:` digest of a label (stand-in for real change/policy ids).
fn d(label: &str) -> String {
    Digest::blake3(label.as_bytes()).to_string()
}

/// `issued_at` of the base receipt with key number `n`.
fn issued_at(n: i64) -> i64 {
    1_790_000_000 + n
}

/// The valid base receipt, with `issued_at` varied by `n`.
fn base(n: i64) -> J {
    json!({
        "version": 1,
        "issuer": ISSUER_NAME,
        "issued_at": issued_at(n),
        "substrate": "git",
        "change_id": d(&format!("change {n}")),
        "inverse_delta_id": d(&format!("inverse {n}")),
        "reversibility": true,
        "read_set": [
            {"resource": "refs/heads/main", "digest": d("main")},
            {"resource": "src/lib.rs", "digest": d("lib.rs")}
        ],
        "precondition": d(&format!("precondition {n}")),
        "policy_id": d("policy v1"),
        "verdict": {"admit": {"proof": d(&format!("proof {n}"))}},
        "applied": true,
        "replay": {"class": "deterministic_replay"}
    })
}

/// `base(n)` with top-level fields replaced or added.
fn with(n: i64, changes: &J) -> J {
    let mut v = base(n);
    if let (Some(obj), Some(ch)) = (v.as_object_mut(), changes.as_object()) {
        for (k, val) in ch {
            obj.insert(k.clone(), val.clone());
        }
    }
    v
}

/// Canonical DAG-CBOR of a JSON receipt (data model only; schema and invariants unchecked).
fn cbor(j: &J) -> Result<Vec<u8>> {
    let value = json::from_json(&serde_json::to_vec(j)?).context("generator JSON")?;
    Ok(dagcbor::encode(&value))
}

impl Payload {
    /// The bytes for key number `n`.
    fn bytes(&self, n: i64) -> Result<Vec<u8>> {
        match self {
            Payload::Base => cbor(&base(n)),
            Payload::With(changes) => cbor(&with(n, changes)),
            Payload::Without(field) => {
                let mut v = base(n);
                if let Some(o) = v.as_object_mut() {
                    o.remove(*field).context("field to remove")?;
                }
                cbor(&v)
            }
            Payload::Quirk(quirk) => non_canonical(n, *quirk),
            Payload::Raw(make) => make(n),
        }
    }
}

/// The base receipt followed by one stray byte.
fn trailing_byte(n: i64) -> Result<Vec<u8>> {
    let mut bytes = cbor(&base(n))?;
    bytes.push(0x00);
    Ok(bytes)
}

/// The base receipt with `issued_at` as a float64 (0xfb): outside the data model.
fn issued_at_float(n: i64) -> Result<Vec<u8>> {
    let float = [&[0xfb][..], &(issued_at(n) as f64).to_be_bytes()].concat();
    replace_issued_at(n, &float)
}

/// The base receipt with `issued_at` = 2^53: outside the data model.
fn issued_at_2_pow_53(n: i64) -> Result<Vec<u8>> {
    replace_issued_at(n, &[&[0x1b][..], &(1u64 << 53).to_be_bytes()].concat())
}

/// The base receipt as JSON text, not CBOR.
fn json_text(n: i64) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(&base(n))?)
}

/// The base receipt's bytes with the encoded `issued_at` replaced by `to`.
fn replace_issued_at(n: i64, to: &[u8]) -> Result<Vec<u8>> {
    let mut from = Vec::new();
    head(&mut from, 0, issued_at(n) as u64, None);
    let mut bytes = cbor(&base(n))?;
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .context("issued_at not found")?;
    bytes.splice(at..at + from.len(), to.iter().copied());
    Ok(bytes)
}

/// A CBOR head (major type, argument), shortest form unless `width` forces one.
fn head(out: &mut Vec<u8>, major: u8, n: u64, width: Option<u8>) {
    let m = major << 5;
    match width {
        Some(8) => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
        _ if n < 24 => out.push(m | n as u8),
        _ if n <= 0xff => out.extend_from_slice(&[m | 24, n as u8]),
        _ if n <= 0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ if n <= 0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// How the hand-written encoder departs from canonical form.
#[derive(Clone, Copy, PartialEq)]
enum Quirk {
    /// Map keys in plain bytewise order (DAG-CBOR wants length first).
    BytewiseKeys,
    /// `issued_at` as an 8-byte integer.
    LongInteger,
    /// Arrays with indefinite length.
    IndefiniteArrays,
}

/// Encode a value with one deliberate departure from canonical DAG-CBOR.
fn quirky(v: &Value, quirk: Quirk, key: &str, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(0xf6),
        Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        Value::Integer(i) if *i >= 0 => {
            let width = (quirk == Quirk::LongInteger && key == "issued_at").then_some(8);
            head(out, 0, *i as u64, width)
        }
        Value::Integer(i) => head(out, 1, (-1 - *i) as u64, None),
        Value::Text(s) => {
            head(out, 3, s.len() as u64, None);
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bytes(b) => {
            head(out, 2, b.len() as u64, None);
            out.extend_from_slice(b);
        }
        Value::Array(items) => {
            if quirk == Quirk::IndefiniteArrays {
                out.push(0x9f);
            } else {
                head(out, 4, items.len() as u64, None);
            }
            for item in items {
                quirky(item, quirk, key, out);
            }
            if quirk == Quirk::IndefiniteArrays {
                out.push(0xff);
            }
        }
        Value::Map(m) => {
            head(out, 5, m.len() as u64, None);
            let mut keys: Vec<&String> = m.keys().collect();
            if quirk != Quirk::BytewiseKeys {
                keys.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
            }
            for k in keys {
                head(out, 3, k.len() as u64, None);
                out.extend_from_slice(k.as_bytes());
                if let Some(val) = m.get(k) {
                    quirky(val, quirk, k, out);
                }
            }
        }
    }
}

/// Non-canonical bytes of the base receipt.
fn non_canonical(n: i64, quirk: Quirk) -> Result<Vec<u8>> {
    let value = json::from_json(&serde_json::to_vec(&base(n))?).context("generator JSON")?;
    let mut out = Vec::new();
    quirky(&value, quirk, "", &mut out);
    if out == dagcbor::encode(&value) {
        bail!("quirk {} produced canonical bytes", quirk as u8);
    }
    Ok(out)
}

/// A filler receipt for growing the log.
fn filler(i: usize, issuer: &SigningKey) -> Result<Envelope> {
    let payload = cbor(&with(
        10_000 + i as i64,
        &json!({"change_id": d(&format!("filler {i}"))}),
    ))?;
    Ok(Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload, issuer))
}

// ---------------------------------------------------------------------------
// Envelopes
// ---------------------------------------------------------------------------

/// The issuer keys every series signs with.
struct Issuers {
    /// Named in trust.json.
    trusted: SigningKey,
    /// Named nowhere.
    stranger: SigningKey,
}

impl Signing {
    /// The envelope of `payload` signed as this says.
    fn envelope(&self, payload: Vec<u8>, keys: &Issuers) -> Result<Envelope> {
        let by = |k: &SigningKey| Envelope::sign(RECEIPT_PAYLOAD_TYPE, payload.clone(), k);
        let mut env = by(&keys.trusted);
        match self {
            Signing::Issuer => {}
            Signing::IssuerNoKeyid => first_signature(&mut env)?.keyid = String::new(),
            Signing::IssuerFlipped { at, mask } => flip_sig(&mut env, *at, *mask)?,
            Signing::IssuerNoKeyidFlipped { at, mask } => {
                first_signature(&mut env)?.keyid = String::new();
                flip_sig(&mut env, *at, *mask)?;
            }
            Signing::StrangerThenIssuer => {
                let other = by(&keys.stranger).signatures;
                env.signatures.splice(0..0, other);
            }
            Signing::Stranger => env = by(&keys.stranger),
            Signing::IssuerAs(payload_type) => {
                env = Envelope::sign(payload_type, payload.clone(), &keys.trusted)
            }
            Signing::Unsigned => env.signatures.clear(),
        }
        Ok(env)
    }
}

/// The envelope's first signature.
fn first_signature(env: &mut Envelope) -> Result<&mut rcpt::receipt::dsse::Signature> {
    env.signatures.first_mut().context("no signature")
}

/// Flip bits `mask` of byte `at` of the first signature.
fn flip_sig(env: &mut Envelope, at: usize, mask: u8) -> Result<()> {
    *first_signature(env)?
        .sig
        .get_mut(at)
        .context("signature too short")? ^= mask;
    Ok(())
}

// ---------------------------------------------------------------------------
// Bundle edits
// ---------------------------------------------------------------------------

impl Edit {
    /// The bytes of the case's bundle, from the correct bundle's text.
    fn apply(&self, text: String) -> Result<Vec<u8>> {
        Ok(match self {
            Edit::Keep => text.into_bytes(),
            Edit::TruncateHalf => text
                .as_bytes()
                .get(..text.len() / 2)
                .context("half")?
                .to_vec(),
            Edit::DuplicateKey { key, value } => {
                let quoted = format!("\"{key}\"");
                if !text.contains(&quoted) {
                    bail!("no key {key} to duplicate");
                }
                let twice = format!("{quoted}: \"{value}\", {quoted}");
                text.replacen(&quoted, &twice, 1).into_bytes()
            }
            Edit::PadSpaces(count) => {
                let mut bytes = text.into_bytes();
                bytes.extend(std::iter::repeat_n(b' ', *count));
                bytes
            }
            Edit::TlogProof(edit) => {
                let bundle = Bundle::from_json(text.as_bytes())?;
                let note = edit.apply(&bundle.log.checkpoint, &bundle.log.origin)?;
                let proof = rcpt::tlog::proof::TlogProof::new(
                    Some(bundle.envelope.to_entry()),
                    bundle.log.index,
                    bundle.log.inclusion.clone(),
                    &note,
                )?;
                proof.to_text().into_bytes()
            }
            json_edit => {
                let mut bundle: J = serde_json::from_str(&text)?;
                json_edit.apply_json(&mut bundle)?;
                serde_json::to_vec_pretty(&bundle)?
            }
        })
    }

    /// Apply a JSON edit to the parsed bundle.
    fn apply_json(&self, b: &mut J) -> Result<()> {
        match self {
            Edit::Set(ptr, value) => *at(b, ptr)? = value.clone(),
            Edit::Add(ptr, by) => {
                let v = at(b, ptr)?;
                *v = json!(v.as_u64().context("not an integer")? + by);
            }
            Edit::CopyValue { from, to } => *at(b, to)? = at(b, from)?.clone(),
            Edit::Remove(field) => {
                let obj = b.as_object_mut().context("bundle not an object")?;
                obj.remove(*field).context("field to remove")?;
            }
            Edit::ReceiptIdPrefix(prefix) => {
                let id = at(b, "/receipt_id")?;
                let hex = id.as_str().and_then(|s| s.strip_prefix("blake3:"));
                *id = json!(format!("{prefix}{}", hex.context("receipt_id")?));
            }
            Edit::FlipProofHash(nth) => {
                let proof = proof_mut(b)?;
                let hash = match nth {
                    Nth::First => proof.first_mut(),
                    Nth::Last => proof.last_mut(),
                };
                let hash = hash.context("empty proof")?;
                let mut bytes = STANDARD.decode(hash.as_str().context("proof hash")?)?;
                *bytes.get_mut(5).context("short proof hash")? ^= 0x01;
                *hash = json!(STANDARD.encode(bytes));
            }
            Edit::DropLastProofHash => {
                proof_mut(b)?.pop().context("empty proof")?;
            }
            Edit::PushProofHash(bytes) => proof_mut(b)?.push(json!(STANDARD.encode(bytes))),
            Edit::UrlSafeBase64(ptrs) => {
                for ptr in *ptrs {
                    let v = at(b, ptr)?;
                    let bytes = STANDARD.decode(v.as_str().context("base64 string")?)?;
                    *v = json!(URL_SAFE_NO_PAD.encode(bytes));
                }
            }
            Edit::Checkpoint(edit) => {
                let origin = at(b, "/log/origin")?
                    .as_str()
                    .context("origin")?
                    .to_string();
                let note = at(b, "/log/checkpoint")?;
                *note = json!(edit.apply(note.as_str().context("checkpoint")?, &origin)?);
            }
            Edit::Keep
            | Edit::TruncateHalf
            | Edit::DuplicateKey { .. }
            | Edit::PadSpaces(_)
            | Edit::TlogProof(_) => {
                bail!("not a JSON edit")
            }
        }
        Ok(())
    }
}

/// The value at a JSON pointer (must exist).
fn at<'a>(b: &'a mut J, ptr: &str) -> Result<&'a mut J> {
    b.pointer_mut(ptr)
        .with_context(|| format!("no {ptr} in bundle"))
}

/// The bundle's inclusion proof hashes.
fn proof_mut(b: &mut J) -> Result<&mut Vec<J>> {
    at(b, "/log/inclusion")?
        .as_array_mut()
        .context("inclusion not an array")
}

impl NoteEdit {
    /// The edited note text; `name` is the log's origin.
    fn apply(&self, note: &str, name: &str) -> Result<String> {
        let (body, sigs) = note.split_once("\n\n").context("note without signatures")?;
        Ok(match self {
            NoteEdit::FlipLastSignature => {
                let mut lines: Vec<String> = sigs.lines().map(str::to_string).collect();
                let last = lines.last_mut().context("no signature line")?;
                let (prefix, b64) = last.rsplit_once(' ').context("signature line")?;
                let mut bytes = STANDARD.decode(b64)?;
                *bytes.get_mut(20).context("short signature")? ^= 0x80;
                *last = format!("{prefix} {}", STANDARD.encode(bytes));
                format!("{body}\n\n{}\n", lines.join("\n"))
            }
            NoteEdit::ReplaceLine(i, with) => {
                let mut lines: Vec<&str> = note.split('\n').collect();
                *lines.get_mut(*i).context("no such line")? = with;
                lines.join("\n")
            }
            NoteEdit::Grease => format!(
                "{body}\n\n{}\n{sigs}{}\n{}\n",
                grease_line("a"),
                grease_line("b"),
                grease_line("c")
            ),
            NoteEdit::DropSignatures => format!("{body}\n"),
            NoteEdit::ResignBy(label) => {
                rcpt::tlog::note::sign(&format!("{body}\n"), name, &key(label))?
            }
            NoteEdit::AppendGreaseLines(count) => {
                let extra: String = (0..*count)
                    .map(|i| grease_line(&format!("g{i}")) + "\n")
                    .collect();
                format!("{note}{extra}")
            }
            NoteEdit::Cosign(lines) => {
                let body = format!("{body}\n");
                let extra: String = lines.iter().map(|c| c.line(&body)).collect::<Result<_>>()?;
                format!("{note}{extra}")
            }
        })
    }
}

/// A signature line of an unknown key (deterministic bytes).
fn grease_line(label: &str) -> String {
    let bytes: Vec<u8> = [
        Digest::sha256(label.as_bytes()).bytes,
        Digest::sha256(&[1]).bytes,
        Digest::sha256(&[2]).bytes,
    ]
    .concat()
    .into_iter()
    .take(68)
    .collect();
    format!("— grease.example/{label} {}", STANDARD.encode(bytes))
}

// ---------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------

/// One bundle to write: an envelope, where it was logged, and how to edit it.
struct Case {
    /// Path under the series directory.
    file: String,
    comment: String,
    envelope: Envelope,
    log: LogChoice,
    /// Prove at this size (None: the log's final size).
    size: Option<u64>,
    edit: Edit,
    expect: Expect,
    gate: Option<J>,
}

impl Row {
    /// The case of the row with key number `n` (envelope not yet logged).
    fn case(self, n: i64, keys: &Issuers) -> Result<Case> {
        let payload = self.payload.bytes(n)?;
        let extension = match self.edit {
            Edit::TlogProof(_) => "tlog-proof",
            _ => "json",
        };
        Ok(Case {
            file: format!("bundles/{}.{extension}", self.stem),
            comment: self.comment.to_string(),
            envelope: self.signing.envelope(payload, keys)?,
            log: self.log,
            size: None,
            edit: self.edit,
            expect: self.expect,
            gate: self.gate,
        })
    }
}

/// A log being written, with the indexes its cases were appended at.
struct Writing {
    writer: LogWriter,
    indexes: std::vec::IntoIter<u64>,
}

impl Writing {
    /// Append every case of `choice` in one batch (so the log holds few partial tiles).
    fn append_cases(&mut self, cases: &[Case], choice: LogChoice) -> Result<()> {
        let entries: Vec<Vec<u8>> = cases
            .iter()
            .filter(|c| c.log == choice)
            .map(|c| c.envelope.to_entry())
            .collect();
        let appended = self.writer.append(&entries)?;
        if appended.len() != entries.len() || appended.iter().any(|a| !a.new) {
            bail!("every case must be a new entry");
        }
        self.indexes = appended
            .iter()
            .map(|a| a.index)
            .collect::<Vec<_>>()
            .into_iter();
        Ok(())
    }
}

/// Write `series` into `out`, which must not hold a manifest yet.
fn generate(series: &Series, out: &Path) -> Result<()> {
    if out.join("manifest.json").exists() {
        bail!(
            "{} already holds a frozen corpus: frozen files are never regenerated",
            out.display()
        );
    }
    let keys = Issuers {
        trusted: key("issuer"),
        stranger: key("untrusted issuer"),
    };
    let log_key = key(series.log_key);
    let other_log_key = key("unknown log");
    let work = std::env::temp_dir().join(format!("rcpt-gen-frozen-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let (main_dir, other_dir) = (work.join("main"), work.join("other"));
    Log::init(&main_dir, series.origin, &log_key)?;
    Log::init(&other_dir, UNKNOWN_ORIGIN, &other_log_key)?;
    let mut main = Writing {
        writer: LogWriter::open(&main_dir, &log_key, false)?,
        indexes: Vec::new().into_iter(),
    };
    let mut other = Writing {
        writer: LogWriter::open(&other_dir, &other_log_key, false)?,
        indexes: Vec::new().into_iter(),
    };

    // Grow the main log so checkpoints exist at the small sizes.
    let mut fillers = 0;
    let mut size_cases = BTreeSet::new();
    for &size in series.small_sizes {
        let mut batch = Vec::new();
        while (fillers as u64) < size {
            batch.push(filler(fillers, &keys.trusted)?.to_entry());
            fillers += 1;
        }
        main.writer.append(&batch)?;
        size_cases.insert((size, 0));
        size_cases.insert((size, size - 1));
        if size > 2 {
            size_cases.insert((size, size / 2));
        }
    }
    // The table's cases, then fillers up to the final size.
    let mut cases = Vec::new();
    for (i, row) in (series.table)().into_iter().enumerate() {
        cases.push(row.case(series.first_n + i as i64, &keys)?);
    }
    main.append_cases(&cases, LogChoice::Main)?;
    other.append_cases(&cases, LogChoice::Unknown)?;
    let mut index_of = Vec::new();
    for case in &cases {
        let w = match case.log {
            LogChoice::Main => &mut main,
            LogChoice::Unknown => &mut other,
        };
        index_of.push(w.indexes.next().context("index for case")?);
    }
    let mut batch = Vec::new();
    while fillers < series.final_filler {
        batch.push(filler(fillers, &keys.trusted)?.to_entry());
        fillers += 1;
    }
    main.writer.append(&batch)?;
    let final_size = main.writer.log().size();
    for &index in series.final_indexes.iter().chain([final_size - 1].iter()) {
        size_cases.insert((final_size, index));
    }
    // Bundles of log entries at various sizes: all verified.
    for (size, index) in size_cases {
        let entry = main.writer.log().entry(index)?;
        cases.push(Case {
            file: format!("bundles/size-{size}-index-{index}.json"),
            comment: format!("entry {index} of a log of {size}"),
            envelope: Envelope::from_entry(&entry)?,
            log: LogChoice::Main,
            size: Some(size),
            edit: Edit::Keep,
            expect: VERIFIED,
            gate: None,
        });
        index_of.push(index);
    }

    let mut manifest_cases = Vec::new();
    let mut seen = BTreeSet::new();
    for (case, index) in cases.iter().zip(index_of) {
        if !seen.insert(case.file.clone()) {
            bail!("two cases write {}", case.file);
        }
        let log = match case.log {
            LogChoice::Main => main.writer.log(),
            LogChoice::Unknown => other.writer.log(),
        };
        let size = case.size.unwrap_or(log.size());
        let bundle = Bundle {
            receipt_id: rcpt::receipt::canonical::identity(&case.envelope.payload).to_string(),
            envelope: case.envelope.clone(),
            log: LogProof {
                origin: log.origin().to_string(),
                index,
                tree_size: size,
                inclusion: log.inclusion_proof(index, size)?,
                checkpoint: log.checkpoint_at(size)?,
            },
        };
        let bytes = case
            .edit
            .apply(bundle.to_json())
            .with_context(|| format!("editing {}", case.file))?;
        write_new(&out.join(&case.file), &bytes)?;
        let mut entry = json!({
            "file": case.file, "expect": case.expect.outcome, "reason": case.expect.reason, "comment": case.comment,
        });
        if let (Some(gate), Some(obj)) = (&case.gate, entry.as_object_mut()) {
            obj.insert("gate".into(), gate.clone());
        }
        manifest_cases.push(entry);
    }

    // Keys (public only), trust, the main log's public files, manifest, checksums.
    let issuer_pub = keys.trusted.verifying_key();
    write_new(
        &out.join("keys/issuer.pub"),
        keys::verifying_key_to_pem(&issuer_pub).as_bytes(),
    )?;
    write_new(
        &out.join("keys/untrusted-issuer.pub"),
        keys::verifying_key_to_pem(&keys.stranger.verifying_key()).as_bytes(),
    )?;
    let log_vkey = NoteVerifier::new(series.origin, log_key.verifying_key())?.to_string();
    write_new(
        &out.join("keys/log.vkey"),
        format!("{log_vkey}\n").as_bytes(),
    )?;
    let trust = json!({
        "issuers": [{"name": ISSUER_NAME, "public_key": STANDARD.encode(issuer_pub.as_bytes())}],
        "logs": [{"verifier_key": log_vkey}],
    });
    write_new(
        &out.join("trust.json"),
        serde_json::to_string_pretty(&trust)?.as_bytes(),
    )?;
    fs::create_dir_all(out.join("log"))?;
    copy_public(&main_dir, &out.join("log"))?;
    let manifest = json!({"trust": "trust.json", "cases": manifest_cases});
    write_new(
        &out.join("manifest.json"),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    write_new(&out.join("README.md"), series.readme.as_bytes())?;
    for (path, contents) in series.fixtures {
        write_new(&out.join(path), contents.as_bytes())?;
    }
    for (path, contents) in (series.computed)(series)? {
        write_new(&out.join(path), contents.as_bytes())?;
    }
    let mut files = Vec::new();
    list_files(out, "", &mut files)?;
    let mut sums = String::new();
    for f in files.iter().filter(|f| *f != "SHA256SUMS") {
        sums.push_str(&format!(
            "{}  {f}\n",
            to_hex(&Digest::sha256(&fs::read(out.join(f))?).bytes)
        ));
    }
    write_new(&out.join("SHA256SUMS"), sums.as_bytes())?;
    let _ = fs::remove_dir_all(&work);
    println!(
        "wrote series {} ({} cases) to {} (issuer keyid {})",
        series.name,
        manifest_cases.len(),
        out.display(),
        keys::keyid(&issuer_pub)
    );
    Ok(())
}

/// Write a file, refusing to overwrite.
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut f, bytes)?;
    Ok(())
}

/// Copy the public part of a log (checkpoint and tiles) into the corpus.
fn copy_public(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".rcpt" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type()?.is_dir() {
            fs::create_dir_all(&dst)?;
            copy_public(&src, &dst)?;
        } else {
            write_new(&dst, &fs::read(&src)?)?;
        }
    }
    Ok(())
}

/// Files under `dir`, sorted, relative paths with '/'; subdirectories holding
/// their own SHA256SUMS are other series and are left out.
fn list_files(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.file_type()?.is_dir() {
            if !e.path().join("SHA256SUMS").exists() {
                list_files(&e.path(), &format!("{name}/"), out)?;
            }
        } else {
            out.push(name);
        }
    }
    Ok(())
}

const USAGE: &str = "usage: gen_frozen [--series NAME] CORPUS_DIR";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut name = None;
    let mut root = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--series" => name = Some(args.next().context(USAGE)?),
            _ if root.is_none() && !arg.starts_with('-') => root = Some(PathBuf::from(arg)),
            _ => bail!("unexpected argument {arg:?}\n{USAGE}"),
        }
    }
    let root = root.context(USAGE)?;
    let series = match &name {
        None => SERIES.first().context("no series")?,
        Some(name) => SERIES.iter().find(|s| s.name == name).with_context(|| {
            let names: Vec<&str> = SERIES.iter().map(|s| s.name).collect();
            format!("no series {name:?}; known: {}", names.join(", "))
        })?,
    };
    let out = if series.dir.is_empty() {
        root
    } else {
        root.join(series.dir)
    };
    generate(series, &out)
}
