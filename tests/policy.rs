//! tlog-policy: every refusal of the parser, the limits, the charset rules,
//! and the evaluation of cosigned checkpoints (quorum met, not met, a
//! listed witness's bad cosignature, grease).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use rcpt::keys::{NoteVerifier, SigningKey};
use rcpt::limits::{MAX_POLICY_BYTES, MAX_POLICY_GROUPS, MAX_POLICY_LOGS, MAX_POLICY_WITNESSES};
use rcpt::tlog::cosig::{self, CosigStatus, WitnessVerifier};
use rcpt::tlog::note::{self, Checkpoint, Note, NoteError};
use rcpt::tlog::policy::{
    LogStatus, Member, Name, Quorum, QuorumVerdict, TlogPolicy, TlogPolicyError,
};

const ORIGIN: &str = "example.com/log";

fn key(n: u32) -> SigningKey {
    let mut seed = [0u8; 32];
    seed[..4].copy_from_slice(&n.to_be_bytes());
    seed[31] = 0x5a;
    SigningKey::from_bytes(&seed)
}

fn log_vkey(n: u32) -> String {
    NoteVerifier::new(&format!("log{n}.example"), key(n).verifying_key())
        .unwrap()
        .to_string()
}

fn origin_vkey() -> String {
    NoteVerifier::new(ORIGIN, key(0).verifying_key())
        .unwrap()
        .to_string()
}

fn wkey(n: u32) -> String {
    WitnessVerifier::new(&format!("w{n}.example"), key(1000 + n).verifying_key())
        .unwrap()
        .to_string()
}

fn parse(text: &str) -> Result<TlogPolicy, TlogPolicyError> {
    TlogPolicy::parse(text.as_bytes())
}

fn err(text: &str) -> TlogPolicyError {
    parse(text).expect_err(text)
}

/// Three witnesses A B C, a group of two of them, quorum the group.
fn three() -> String {
    format!(
        "log {}\nwitness A {}\nwitness B {}\nwitness C {}\n",
        origin_vkey(),
        wkey(1),
        wkey(2),
        wkey(3)
    )
}

#[test]
fn accepted_syntax() {
    let text = format!(
        "# a comment\n   # an indented comment\n\t\n   \n\
         log {} https://log.example/\n\
         \twitness   A\t{}   https://a.example/  \n\
         witness B {}\n\
         group G any A B\n\
         quorum G\n\
         group Later all G\n",
        origin_vkey(),
        wkey(1),
        wkey(2)
    );
    let p = parse(&text).unwrap();
    assert_eq!(p.logs[0].url.as_deref(), Some(&b"https://log.example/"[..]));
    assert_eq!(
        p.witnesses[0].url.as_deref(),
        Some(&b"https://a.example/"[..])
    );
    assert_eq!(p.witnesses[1].url, None);
    assert_eq!(p.witnesses[0].name, Name(b"A".to_vec()));
    assert_eq!(p.quorum, Quorum::Member(Member::Group(0)));
    assert_eq!(p.groups[1].members, vec![Member::Group(0)]);
    // An empty policy of logs is fine: only the quorum is mandatory.
    assert!(parse("quorum none\n").unwrap().logs.is_empty());
    // The quorum may name a witness directly.
    let p = parse(&format!("witness A {}\nquorum A\n", wkey(1))).unwrap();
    assert_eq!(p.quorum, Quorum::Member(Member::Witness(0)));
    // A '#' inside a line is not a comment: it is part of the item.
    assert!(matches!(
        err(&format!("log {} # note\nquorum none\n", origin_vkey())),
        TlogPolicyError::Arity { keyword: "log", .. }
    ));
}

#[test]
fn names_are_opaque_octets() {
    // "the name 0x4B (ASCII "K") is different from the name 0xE2 0x84 0xAA
    // (a Kelvin sign encoded using UTF-8)".
    let text = format!(
        "witness K {}\nwitness \u{212a} {}\ngroup g all K \u{212a}\nquorum g\n",
        wkey(1),
        wkey(2)
    );
    let p = parse(&text).unwrap();
    assert_eq!(p.witnesses[1].name, Name("\u{212a}".as_bytes().to_vec()));
    // Non-UTF-8 octets in names, URLs and comments are allowed.
    let mut bytes = "# caf\u{e9}\nwitness ".as_bytes().to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(format!(" {} http://\u{e9}.example/", wkey(1)).as_bytes());
    bytes.extend_from_slice(&[0x80, b'\n']);
    bytes.extend_from_slice(b"quorum ");
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    let p = TlogPolicy::parse(&bytes).unwrap();
    assert_eq!(p.witnesses[0].name, Name(vec![0xff, 0xfe]));
}

#[test]
fn refused_characters() {
    for byte in [0x00u8, 0x01, 0x0b, 0x0c, 0x0d, 0x1b, 0x1f, 0x7f] {
        let mut text = b"quorum none\n# x".to_vec();
        text.push(byte);
        text.push(b'\n');
        assert_eq!(
            TlogPolicy::parse(&text),
            Err(TlogPolicyError::Charset { line: 2, byte }),
            "byte {byte:#04x}"
        );
    }
    // A CRLF file is refused (CR is a control character).
    assert!(matches!(
        err("quorum none\r\n"),
        TlogPolicyError::Charset { byte: 0x0d, .. }
    ));
}

#[test]
fn refused_structure() {
    assert_eq!(err(""), TlogPolicyError::NoQuorum);
    assert_eq!(err("# only a comment\n"), TlogPolicyError::NoQuorum);
    assert_eq!(err("quorum none"), TlogPolicyError::NoFinalNewline(1));
    assert_eq!(err("quorum none\n# x"), TlogPolicyError::NoFinalNewline(2));
    assert!(matches!(
        err("Log x\nquorum none\n"),
        TlogPolicyError::UnknownKeyword { line: 1, .. }
    ));
    assert!(matches!(
        err("quorum none\nwitnesses A b\n"),
        TlogPolicyError::UnknownKeyword { line: 2, .. }
    ));
    assert_eq!(
        err("quorum none\nquorum none\n"),
        TlogPolicyError::QuorumTwice { line: 2, first: 1 }
    );
}

#[test]
fn refused_arity() {
    let cases = [
        ("log\nquorum none\n", "log"),
        (
            &*format!("log {} url extra\nquorum none\n", origin_vkey()),
            "log",
        ),
        (&*format!("witness {}\nquorum none\n", wkey(1)), "witness"),
        (
            &*format!("witness A {} url extra\nquorum none\n", wkey(1)),
            "witness",
        ),
        (
            &*format!("witness A {}\ngroup G any\nquorum none\n", wkey(1)),
            "group",
        ),
        (
            &*format!("witness A {}\ngroup G\nquorum none\n", wkey(1)),
            "group",
        ),
        ("quorum\n", "quorum"),
        ("quorum none none\n", "quorum"),
    ];
    for (text, kw) in cases {
        assert!(
            matches!(err(text), TlogPolicyError::Arity { keyword, .. } if keyword == kw),
            "{text:?}: {:?}",
            err(text)
        );
    }
}

#[test]
fn refused_keys() {
    // A witness key as a log key, a log key as a witness key.
    assert!(matches!(
        err(&format!("log {}\nquorum none\n", wkey(1))),
        TlogPolicyError::LogKey { line: 1, .. }
    ));
    assert!(matches!(
        err(&format!("witness A {}\nquorum none\n", log_vkey(1))),
        TlogPolicyError::WitnessKey { line: 1, .. }
    ));
    // Not a vkey; a wrong key ID.
    assert!(matches!(
        err("log example.com\nquorum none\n"),
        TlogPolicyError::LogKey { .. }
    ));
    let mut bad = wkey(1);
    let at = bad.find('+').unwrap() + 1;
    bad.replace_range(at..at + 8, "00000000");
    assert!(matches!(
        err(&format!("witness A {bad}\nquorum none\n")),
        TlogPolicyError::WitnessKey { .. }
    ));
    // Duplicates: the same public key under another name is still a duplicate.
    let other_name = NoteVerifier::new("other.example", key(0).verifying_key()).unwrap();
    assert_eq!(
        err(&format!(
            "log {}\n\nlog {other_name}\nquorum none\n",
            origin_vkey()
        )),
        TlogPolicyError::DuplicateLog { line: 3, first: 1 }
    );
    let other_w = WitnessVerifier::new("other.example", key(1001).verifying_key()).unwrap();
    assert_eq!(
        err(&format!(
            "witness A {}\nwitness B {other_w}\nquorum none\n",
            wkey(1)
        )),
        TlogPolicyError::DuplicateWitness { line: 2, first: 1 }
    );
    // One key as a log and as a witness is not a duplicate (different types).
    let both = WitnessVerifier::new(ORIGIN, key(0).verifying_key()).unwrap();
    parse(&format!(
        "log {}\nwitness A {both}\nquorum A\n",
        origin_vkey()
    ))
    .unwrap();
}

#[test]
fn refused_names_and_members() {
    let base = three();
    let name = |s: &str| Name(s.as_bytes().to_vec());
    assert_eq!(
        err(&format!("{base}witness A {}\nquorum none\n", wkey(4))),
        TlogPolicyError::DuplicateName {
            line: 5,
            name: name("A")
        }
    );
    assert_eq!(
        err(&format!("{base}group A any B\nquorum none\n")),
        TlogPolicyError::DuplicateName {
            line: 5,
            name: name("A")
        }
    );
    assert_eq!(
        err(&format!("witness none {}\nquorum none\n", wkey(1))),
        TlogPolicyError::DuplicateName {
            line: 1,
            name: name("none")
        }
    );
    assert_eq!(
        err(&format!("{base}group none any A\nquorum none\n")),
        TlogPolicyError::DuplicateName {
            line: 5,
            name: name("none")
        }
    );
    assert_eq!(
        err(&format!(
            "{base}group G any A D\nwitness D {}\nquorum G\n",
            wkey(4)
        )),
        TlogPolicyError::Undefined {
            line: 5,
            name: name("D")
        }
    );
    assert_eq!(
        err(&format!("{base}quorum G\ngroup G any A\n")),
        TlogPolicyError::Undefined {
            line: 5,
            name: name("G")
        }
    );
    assert_eq!(
        err(&format!("{base}group G any A none\nquorum G\n")),
        TlogPolicyError::NoneMember(5)
    );
    assert_eq!(
        err(&format!("{base}group G any A A\nquorum G\n")),
        TlogPolicyError::MemberTwice {
            line: 5,
            name: name("A")
        }
    );
    // "Each defined name can be listed as a group member at most once": across groups too.
    assert_eq!(
        err(&format!(
            "{base}group G any A B\ngroup H any A C\nquorum G\n"
        )),
        TlogPolicyError::MemberTwice {
            line: 6,
            name: name("A")
        }
    );
    // A group name can itself be a member once.
    parse(&format!(
        "{base}group G any A B\ngroup H all G C\nquorum H\n"
    ))
    .unwrap();
    assert!(matches!(
        err(&format!(
            "{base}group G any A\ngroup H all G\ngroup I all G\nquorum H\n"
        )),
        TlogPolicyError::MemberTwice { .. }
    ));
}

#[test]
fn refused_thresholds() {
    let base = three();
    for k in [
        "0",
        "4",
        "01",
        "-1",
        "+2",
        "2.0",
        "some",
        "ALL",
        "18446744073709551617",
    ] {
        assert!(
            matches!(
                err(&format!("{base}group G {k} A B C\nquorum G\n")),
                TlogPolicyError::Threshold { line: 5, .. }
            ),
            "k = {k}"
        );
    }
    for (k, want) in [("1", 1), ("3", 3), ("any", 1), ("all", 3)] {
        let p = parse(&format!("{base}group G {k} A B C\nquorum G\n")).unwrap();
        assert_eq!(p.groups[0].threshold, want);
    }
}

#[test]
fn limits_support_at_least_32_of_each_and_refuse_past_the_named_constants() {
    fn build(logs: u32, witnesses: u32, groups: u32) -> String {
        let mut t = String::new();
        for i in 0..logs {
            t.push_str(&format!("log {}\n", log_vkey(i)));
        }
        for i in 0..witnesses {
            t.push_str(&format!("witness W{i} {}\n", wkey(i)));
        }
        // A chain: G0 = any W0, G(i) = all G(i-1) W(i).
        for i in 0..groups {
            if i == 0 {
                t.push_str("group G0 any W0\n");
            } else {
                t.push_str(&format!("group G{i} all G{} W{i}\n", i - 1));
            }
        }
        t
    }
    const { assert!(MAX_POLICY_LOGS >= 32 && MAX_POLICY_WITNESSES >= 32 && MAX_POLICY_GROUPS >= 32) };
    let n = MAX_POLICY_GROUPS as u32;
    let full = format!("{}quorum G{}\n", build(MAX_POLICY_LOGS as u32, n, n), n - 1);
    assert!(full.len() <= MAX_POLICY_BYTES, "{} bytes", full.len());
    let p = parse(&full).unwrap();
    assert_eq!(
        (p.logs.len(), p.witnesses.len(), p.groups.len()),
        (256, 256, 256)
    );
    // The chain needs every witness: all true meets it, one false does not.
    let mut all = vec![true; 256];
    assert!(p.quorum_met(&all));
    all[200] = false;
    assert!(!p.quorum_met(&all));
    let too_many_logs = format!("{}quorum none\n", build(MAX_POLICY_LOGS as u32 + 1, 0, 0));
    assert!(matches!(
        err(&too_many_logs),
        TlogPolicyError::TooMany { what: "logs", .. }
    ));
    let too_many_w = format!(
        "{}quorum none\n",
        build(0, MAX_POLICY_WITNESSES as u32 + 1, 0)
    );
    assert!(matches!(
        err(&too_many_w),
        TlogPolicyError::TooMany {
            what: "witnesses",
            ..
        }
    ));
    let mut too_many_g = build(0, 1, 1);
    for i in 1..=n {
        too_many_g.push_str(&format!("group G{i} any G{}\n", i - 1));
    }
    too_many_g.push_str("quorum none\n");
    assert!(matches!(
        err(&too_many_g),
        TlogPolicyError::TooMany { what: "groups", .. }
    ));
    let huge = format!("quorum none\n#{}\n", "x".repeat(MAX_POLICY_BYTES));
    assert!(matches!(err(&huge), TlogPolicyError::TooLarge { .. }));
}

// ---- evaluation ------------------------------------------------------------

const ROOT: [u8; 32] = [9; 32];

fn body() -> String {
    Checkpoint {
        origin: ORIGIN.into(),
        size: 7,
        root_hash: ROOT,
        extensions: vec![],
    }
    .to_text()
}

/// The checkpoint signed by the log, plus cosignature lines of witnesses `ws`.
fn cosigned(ws: &[u32]) -> String {
    let mut t = note::sign(&body(), ORIGIN, &key(0)).unwrap();
    for &w in ws {
        t.push_str(
            &cosig::sign(
                &body(),
                &format!("w{w}.example"),
                &key(1000 + w),
                1_700_000_000 + u64::from(w),
            )
            .unwrap(),
        );
    }
    t
}

fn evaluate(policy: &str, note_text: &str) -> rcpt::tlog::policy::Evaluation {
    let p = parse(policy).unwrap();
    p.evaluate(&Note::parse(note_text.as_bytes()).unwrap())
        .unwrap()
}

#[test]
fn quorum_met_and_not_met() {
    let policy = format!("{}group two 2 A B C\nquorum two\n", three());
    let e = evaluate(&policy, &cosigned(&[1, 3]));
    assert_eq!(
        e.log,
        LogStatus::Verified {
            names: vec![ORIGIN.into()]
        }
    );
    assert_eq!(
        e.witnesses,
        vec![
            CosigStatus::Verified {
                timestamp: 1_700_000_001
            },
            CosigStatus::Absent,
            CosigStatus::Verified {
                timestamp: 1_700_000_003
            }
        ]
    );
    assert!(e.quorum_met);
    assert_eq!(e.verdict(), QuorumVerdict::Verified);
    let e = evaluate(&policy, &cosigned(&[2]));
    assert!(!e.quorum_met);
    assert_eq!(e.verdict(), QuorumVerdict::QuorumNotMet);
    // Unknown cosigners do not count, and are ignored.
    let e = evaluate(&policy, &cosigned(&[2, 4, 5]));
    assert_eq!(e.verdict(), QuorumVerdict::QuorumNotMet);
    // quorum none: the log signature alone.
    let e = evaluate(&format!("{}quorum none\n", three()), &cosigned(&[]));
    assert_eq!(e.verdict(), QuorumVerdict::Verified);
}

#[test]
fn a_listed_witness_bad_cosignature_fails_even_when_the_quorum_is_met() {
    let policy = format!("{}group one any A B C\nquorum one\n", three());
    // Witness B's line over another checkpoint, pasted on this one.
    let other = Checkpoint {
        origin: ORIGIN.into(),
        size: 8,
        root_hash: ROOT,
        extensions: vec![],
    }
    .to_text();
    let foreign = cosig::sign(&other, "w2.example", &key(1002), 5).unwrap();
    let e = evaluate(&policy, &format!("{}{foreign}", cosigned(&[1])));
    assert!(e.quorum_met);
    assert!(matches!(e.witnesses[1], CosigStatus::Failed(_)));
    assert_eq!(e.verdict(), QuorumVerdict::CosignatureFailed(vec![1]));
}

#[test]
fn log_signature_outcomes() {
    let policy = format!("{}quorum none\n", three());
    // Signed by another key under the origin's name only: not signed by a listed log.
    let stranger = note::sign(&body(), ORIGIN, &key(77)).unwrap();
    let e = evaluate(&policy, &stranger);
    assert_eq!(e.log, LogStatus::NotSigned);
    assert_eq!(e.verdict(), QuorumVerdict::LogNotEvaluated);
    // The listed log's line altered: failed.
    let mut n = Note::parse(cosigned(&[]).as_bytes()).unwrap();
    n.signatures[0].sig[3] ^= 1;
    let e = parse(&policy).unwrap().evaluate(&n).unwrap();
    assert!(matches!(e.log, LogStatus::Failed { .. }));
    assert_eq!(e.verdict(), QuorumVerdict::LogFailed);
    // An origin with no listed log.
    let other = Checkpoint {
        origin: "example.com/other".into(),
        size: 1,
        root_hash: ROOT,
        extensions: vec![],
    }
    .to_text();
    let e = evaluate(
        &policy,
        &note::sign(&other, "example.com/other", &key(0)).unwrap(),
    );
    assert_eq!(e.log, LogStatus::UnknownOrigin);
    assert_eq!(e.verdict(), QuorumVerdict::LogNotEvaluated);
    // A note whose text is not a checkpoint is an error.
    let p = parse(&policy).unwrap();
    let not_cp = Note::parse(note::sign("hello\n", ORIGIN, &key(0)).unwrap().as_bytes()).unwrap();
    assert!(matches!(
        p.evaluate(&not_cp),
        Err(NoteError::CheckpointTooShort(1))
    ));
}

#[test]
fn grease_up_to_the_note_cap_is_ignored() {
    let policy = format!("{}group two 2 A B C\nquorum two\n", three());
    let mut t = cosigned(&[1, 2]);
    // 97 grease lines: 100 signature lines in all, the cap.
    for i in 0..97u32 {
        let mut raw = i.to_be_bytes().to_vec();
        raw.extend_from_slice(&[0xee; 72]);
        use base64::Engine as _;
        t.push_str(&format!(
            "\u{2014} grease{i}.example {}\n",
            base64::engine::general_purpose::STANDARD.encode(raw)
        ));
    }
    assert_eq!(evaluate(&policy, &t).verdict(), QuorumVerdict::Verified);
    t.push_str("\u{2014} one.more AAAAAAA=\n");
    assert!(matches!(
        Note::parse(t.as_bytes()),
        Err(NoteError::TooManySignatures {
            count: 101,
            limit: 100
        })
    ));
}
