//! The version-1 receipt model: schema, invariants with their reason codes,
//! the combining function, and round trips through both encodings.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod support;
use support::canonical as canonical_support;

use canonical_support::*;
use ipld_core::ipld::Ipld;
use proptest::prelude::*;
use rcpt::digest::Digest;
use rcpt::receipt::canonical::{dagcbor, jcs, json};
use rcpt::receipt::*;
use serde_json::json;

fn refuse(payload: &serde_json::Value) -> PayloadError {
    payload_from_json(&serde_json::to_vec(payload).unwrap()).unwrap_err()
}

#[test]
fn sample_payload_issues_and_verifies() {
    let p = payload_from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    assert_eq!(p.id, Digest::blake3(&p.bytes));
    assert_eq!(p.value, json::from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap());
    assert_eq!(p.receipt.to_value(), p.value);
    // The independent codec reads the same value and writes the same bytes.
    let theirs: Ipld = serde_ipld_dagcbor::from_slice(&p.bytes).unwrap();
    assert_eq!(from_ipld(&theirs), Ok(p.value.clone()));
    assert_eq!(serde_ipld_dagcbor::to_vec(&theirs).unwrap(), p.bytes);
    let again = payload_from_cbor(&p.bytes).unwrap();
    assert_eq!((again.receipt, again.id), (p.receipt, p.id));
}

/// spec/receipt.md invariant 5 ("The combining function"), all nine (proposal, execution) pairs, written out.
#[test]
fn combine_over_all_nine_pairs() {
    use Stage::*;
    let mixed = |proposal, execution| Replay::Mixed {
        proposal,
        execution,
    };
    let table = [
        (Deterministic, Deterministic, Replay::DeterministicReplay),
        (Deterministic, Llm, mixed(Deterministic, Llm)),
        (Deterministic, Unknown, mixed(Deterministic, Unknown)),
        (Llm, Deterministic, mixed(Llm, Deterministic)),
        (Llm, Llm, Replay::LlmOriginated),
        (Llm, Unknown, mixed(Llm, Unknown)),
        (Unknown, Deterministic, mixed(Unknown, Deterministic)),
        (Unknown, Llm, mixed(Unknown, Llm)),
        (Unknown, Unknown, Replay::Unknown),
    ];
    for (p, e, expected) in table {
        assert_eq!(combine(p, e), expected, "combine({p:?}, {e:?})");
        assert_eq!(expected.stages(), (p, e));
        // The written mixed form passes invariant 5 exactly when it is normal.
        let mut v = sample_json();
        v["replay"] = json!({"class": "mixed", "proposal": p.as_str(), "execution": e.as_str()});
        let result = payload_from_json(&serde_json::to_vec(&v).unwrap());
        if p == e {
            assert_eq!(result.unwrap_err().reason_code(), "invariant.replay");
        } else {
            assert_eq!(result.unwrap().receipt.replay, expected);
        }
    }
}

/// One mutation of the sample per invariant; each breaks exactly that one.
/// A change to the sample payload.
type Mutation = Box<dyn Fn(&mut serde_json::Value)>;

fn invariant_breakers() -> Vec<(&'static str, Mutation)> {
    let deny = |r: serde_json::Value| {
        move |v: &mut serde_json::Value| {
            v["verdict"] = json!({"deny": {"reasons": r.clone()}});
            v["applied"] = json!(false);
        }
    };
    vec![
        (
            "invariant.reversibility",
            Box::new(|v| v["inverse_delta_id"] = json!(null)),
        ),
        (
            "invariant.reversibility",
            Box::new(|v| v["reversibility"] = json!(false)),
        ),
        (
            "invariant.reversibility",
            Box::new(|v| v["reversibility"] = json!(null)),
        ),
        ("invariant.verdict", Box::new(deny(json!([])))),
        ("invariant.verdict", Box::new(deny(json!(["b", "a"])))),
        ("invariant.verdict", Box::new(deny(json!(["a", "a"])))),
        (
            "invariant.verdict",
            Box::new(|v| {
                v["verdict"] = json!({"escalate": {"ticket": ""}});
                v["applied"] = json!(false);
            }),
        ),
        (
            "invariant.applied",
            Box::new(|v| v["verdict"] = json!({"escalate": {"ticket": "T-1"}})),
        ),
        (
            "invariant.applied",
            Box::new(|v| v["verdict"] = json!({"deny": {"reasons": ["x"]}})),
        ),
        (
            "invariant.read_set",
            Box::new(|v| {
                let rs = v["read_set"].as_array_mut().unwrap();
                rs.reverse();
            }),
        ),
        (
            "invariant.read_set",
            Box::new(|v| {
                let first = v["read_set"][0].clone();
                v["read_set"].as_array_mut().unwrap().insert(0, first);
            }),
        ),
        (
            "invariant.replay",
            Box::new(|v| {
                v["replay"] = json!({"class": "mixed", "proposal": "llm", "execution": "llm"})
            }),
        ),
    ]
}

#[test]
fn each_invariant_broken_gives_exactly_its_code() {
    for (i, (code, mutate)) in invariant_breakers().into_iter().enumerate() {
        let mut v = sample_json();
        mutate(&mut v);
        let err = refuse(&v);
        assert_eq!(err.reason_code(), code, "case {i}: {err}");
        let PayloadError::Invariants(list) = &err else {
            panic!("case {i}: {err}")
        };
        assert_eq!(list.len(), 1, "case {i}: {list:?}");
        assert!(!list[0].detail.is_empty());
        // The same violation is found on the verifying path (CBOR).
        let value = json::from_json(&serde_json::to_vec(&v).unwrap()).unwrap();
        let err = payload_from_cbor(&dagcbor::encode(&value)).unwrap_err();
        assert_eq!(err.reason_code(), code, "case {i} (cbor)");
    }
}

#[test]
fn reversibility_message_says_what_to_do() {
    let mut v = sample_json();
    v["inverse_delta_id"] = json!(null);
    let msg = refuse(&v).to_string();
    assert!(msg.contains("invariant.reversibility"), "{msg}");
    assert!(msg.contains("set inverse_delta_id"), "{msg}");
}

/// Schema refusals: (mutation, reason code, field named).
#[test]
fn schema_errors_name_the_field() {
    let long = "x".repeat(rcpt::limits::MAX_TEXT_BYTES + 1);
    let many: Vec<String> = (0..=rcpt::limits::MAX_DENY_REASONS)
        .map(|i| format!("{i:04}"))
        .collect();
    let cases: Vec<(Mutation, &str, &str)> = vec![
        (
            Box::new(|v| v["extra"] = json!(1)),
            "payload.schema",
            "extra",
        ),
        (
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("precondition");
            }),
            "payload.schema",
            "precondition",
        ),
        (
            Box::new(|v| v["version"] = json!(2)),
            "payload.version_unsupported",
            "",
        ),
        (
            Box::new(|v| v["version"] = json!("1")),
            "payload.schema",
            "version",
        ),
        (
            Box::new(|v| v["issuer"] = json!(7)),
            "payload.schema",
            "issuer",
        ),
        (
            Box::new(move |v| v["issuer"] = json!(long.clone())),
            "payload.schema",
            "issuer",
        ),
        (
            Box::new(|v| v["issued_at"] = json!(-1)),
            "payload.schema",
            "issued_at",
        ),
        (
            Box::new(|v| v["substrate"] = json!("svn")),
            "payload.schema",
            "substrate",
        ),
        (
            Box::new(|v| v["change_id"] = json!("blake3:ABC")),
            "payload.schema",
            "change_id",
        ),
        (
            Box::new(|v| v["policy_id"] = json!(format!("sha256:{}", "A".repeat(64)))),
            "payload.schema",
            "policy_id",
        ),
        (
            Box::new(|v| v["reversibility"] = json!("yes")),
            "payload.schema",
            "reversibility",
        ),
        (
            Box::new(|v| v["read_set"][1]["extra"] = json!(1)),
            "payload.schema",
            "read_set[1].extra",
        ),
        (
            Box::new(|v| v["read_set"][0]["digest"] = json!("md5:00")),
            "payload.schema",
            "read_set[0].digest",
        ),
        (
            Box::new(|v| {
                v["verdict"] = json!({"admit": {"proof": "blake3:00"}, "deny": {"reasons": ["a"]}})
            }),
            "payload.schema",
            "verdict",
        ),
        (
            Box::new(|v| v["verdict"] = json!({"maybe": {}})),
            "payload.schema",
            "verdict.maybe",
        ),
        (
            Box::new(|v| v["verdict"] = json!({"admit": {}})),
            "payload.schema",
            "verdict.admit.proof",
        ),
        (
            Box::new(move |v| {
                v["verdict"] = json!({"deny": {"reasons": many.clone()}});
                v["applied"] = json!(false);
            }),
            "payload.schema",
            "verdict.deny.reasons",
        ),
        (
            Box::new(|v| v["replay"] = json!({"class": "unknown", "proposal": "llm"})),
            "payload.schema",
            "replay.proposal",
        ),
        (
            Box::new(|v| v["replay"] = json!({"class": "mixed", "proposal": "llm"})),
            "payload.schema",
            "replay.execution",
        ),
        (
            Box::new(|v| {
                v["replay"] = json!({"class": "mixed", "proposal": "llm", "execution": "human"})
            }),
            "payload.schema",
            "replay.execution",
        ),
        (
            Box::new(|v| v["replay"] = json!({"class": "sometimes"})),
            "payload.schema",
            "replay.class",
        ),
        (
            Box::new(|v| v["applied"] = json!(null)),
            "payload.schema",
            "applied",
        ),
        (Box::new(|v| *v = json!([1])), "payload.schema", "payload"),
    ];
    let n = cases.len();
    for (i, (mutate, code, field)) in cases.into_iter().enumerate() {
        let mut v = sample_json();
        mutate(&mut v);
        let err = refuse(&v);
        assert_eq!(err.reason_code(), code, "case {i}: {err}");
        if let PayloadError::Schema(SchemaError::Field { field: f, .. }) = &err {
            assert_eq!(f, field, "case {i}: {err}");
        }
    }
    assert_eq!(n, 23);
}

#[test]
fn malformed_inputs_are_refused_before_the_schema() {
    let dup = SAMPLE_PAYLOAD.replacen(
        "\"issuer\": \"gate.example\",",
        "\"issuer\": \"a\", \"issuer\": \"b\",",
        1,
    );
    let err = payload_from_json(dup.as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            PayloadError::Json(json::JsonError::DuplicateKey { .. })
        ),
        "{err}"
    );
    assert_eq!(err.reason_code(), "payload.malformed");
    let float = SAMPLE_PAYLOAD.replace("1767225600", "1767225600.0");
    assert_eq!(
        payload_from_json(float.as_bytes())
            .unwrap_err()
            .reason_code(),
        "payload.malformed"
    );
    // A byte string in place of text: inside the codec's model, not a receipt's.
    let mut value = json::from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    if let rcpt::receipt::canonical::Value::Map(m) = &mut value {
        m.insert(
            "issuer".into(),
            rcpt::receipt::canonical::Value::Bytes(b"gate".to_vec()),
        );
    }
    let err = payload_from_cbor(&dagcbor::encode(&value)).unwrap_err();
    assert_eq!(err.reason_code(), "payload.schema");
    // Non-canonical CBOR of a valid receipt: the same map, keys reversed.
    let good = payload_from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    let theirs: Ipld = serde_ipld_dagcbor::from_slice(&good.bytes).unwrap();
    let mut reordered = vec![0xad]; // map(13)
    if let Ipld::Map(m) = theirs {
        for (k, v) in m.iter().rev() {
            reordered.extend(serde_ipld_dagcbor::to_vec(&Ipld::String(k.clone())).unwrap());
            reordered.extend(serde_ipld_dagcbor::to_vec(v).unwrap());
        }
    }
    let err = payload_from_cbor(&reordered).unwrap_err();
    assert_eq!(err.reason_code(), "payload.non_canonical", "{err}");
    let big = vec![0u8; rcpt::limits::MAX_PAYLOAD_BYTES + 1];
    assert_eq!(
        payload_from_cbor(&big).unwrap_err(),
        PayloadError::TooLarge(big.len())
    );
}

/// The `{"resource", "digest"}` item, and the whole receipt, as strategies
/// that satisfy every invariant by construction.
fn arb_digest() -> impl Strategy<Value = Digest> {
    (any::<bool>(), any::<[u8; 32]>()).prop_map(|(b, bytes)| Digest {
        algorithm: if b {
            rcpt::digest::Algorithm::Blake3
        } else {
            rcpt::digest::Algorithm::Sha256
        },
        bytes,
    })
}

fn arb_stage() -> impl Strategy<Value = Stage> {
    prop::sample::select(Stage::ALL.to_vec())
}

fn arb_receipt() -> impl Strategy<Value = Receipt> {
    let verdict = prop_oneof![
        arb_digest().prop_map(|proof| Verdict::Admit { proof }),
        prop::collection::btree_set("\\PC{0,10}", 1..5).prop_map(|r| Verdict::Deny {
            reasons: r.into_iter().collect()
        }),
        "\\PC{1,10}".prop_map(|ticket| Verdict::Escalate { ticket }),
    ];
    let read_set = prop::collection::btree_map("\\PC{0,12}", arb_digest(), 0..5).prop_map(|m| {
        m.into_iter()
            .map(|(resource, digest)| ReadItem { resource, digest })
            .collect()
    });
    let reversible = prop_oneof![
        arb_digest().prop_map(|d| (Some(true), Some(d))),
        Just((Some(false), None)),
        Just((None, None)),
    ];
    (
        (
            "\\PC{0,16}",
            0..=rcpt::receipt::canonical::MAX_SAFE_INTEGER,
            prop::sample::select(Substrate::ALL.to_vec()),
        ),
        (
            arb_digest(),
            reversible,
            read_set,
            prop::option::of(arb_digest()),
            arb_digest(),
        ),
        (verdict, any::<bool>(), arb_stage(), arb_stage()),
    )
        .prop_map(
            |(
                (issuer, issued_at, substrate),
                (change_id, rev, read_set, precondition, policy_id),
                (verdict, applied, p, e),
            )| {
                let applied = applied && matches!(verdict, Verdict::Admit { .. });
                Receipt {
                    issuer,
                    issued_at,
                    substrate,
                    change_id,
                    inverse_delta_id: rev.1,
                    reversibility: rev.0,
                    read_set,
                    precondition,
                    policy_id,
                    verdict,
                    applied,
                    replay: combine(p, e),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// value → cbor → value → receipt, and JSON → the same bytes and id
    /// whatever the key order and spacing of the JSON text.
    #[test]
    fn valid_receipts_round_trip(r in arb_receipt(), pretty in any::<bool>()) {
        prop_assert!(r.violations().is_empty());
        let value = r.to_value();
        let bytes = dagcbor::encode(&value);
        let back = payload_from_cbor(&bytes).unwrap();
        prop_assert_eq!(&back.receipt, &r);
        prop_assert_eq!(back.id, Digest::blake3(&bytes));
        let theirs: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
        prop_assert_eq!(from_ipld(&theirs), Ok(value.clone()));
        let text = if pretty {
            serde_json::to_vec_pretty(&json::to_json(&value)).unwrap()
        } else {
            jcs::canonical_json(&value).unwrap()
        };
        let issued = payload_from_json(&text).unwrap();
        prop_assert_eq!(issued.bytes, bytes);
        prop_assert_eq!(issued.receipt, r);
    }

    /// Any two distinct stages in `mixed` pass; equal ones never do.
    #[test]
    fn mixed_is_normal_exactly_when_stages_differ(p in arb_stage(), e in arb_stage(), r in arb_receipt()) {
        let r = Receipt { replay: Replay::Mixed { proposal: p, execution: e }, ..r };
        prop_assert_eq!(r.check(Invariant::Replay).is_ok(), p != e);
    }
}

/// The JSON key order and whitespace of the input do not change the bytes.
#[test]
fn key_order_and_whitespace_do_not_matter() {
    let v = sample_json();
    let obj = v.as_object().unwrap();
    let mut parts: Vec<String> = obj
        .iter()
        .map(|(k, x)| format!("\n\t {} :  {} ", json!(k), x))
        .collect();
    parts.reverse();
    let text = format!("  {{{}}}\n", parts.join(","));
    let a = payload_from_json(SAMPLE_PAYLOAD.as_bytes()).unwrap();
    let b = payload_from_json(text.as_bytes()).unwrap();
    assert_eq!((a.bytes, a.id), (b.bytes, b.id));
}
