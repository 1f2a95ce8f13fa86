//! spec/reasons.md's table is the list of reason codes: it must name exactly
//! `Reason::ALL`, in order; the old ad-hoc codes are gone; the frozen
//! manifest reads into the typed outcome and reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rcpt::reason::Reason;

/// The codes of the table under `## Table` in spec/reasons.md: the first
/// cell of each row, in backquotes.
fn spec_codes() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/spec/reasons.md"))
        .expect("spec/reasons.md");
    let table = text
        .split_once("\n## Table\n")
        .expect("spec/reasons.md has a ## Table section")
        .1;
    table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cell = l.split('|').nth(1).expect("a first cell").trim();
            cell.trim_matches('`').to_string()
        })
        .collect()
}

#[test]
fn spec_table_lists_exactly_the_enum_in_order() {
    let spec = spec_codes();
    let code: Vec<String> = Reason::ALL.iter().map(|r| r.as_str().to_string()).collect();
    let missing: Vec<&String> = code.iter().filter(|c| !spec.contains(c)).collect();
    let extra: Vec<&String> = spec.iter().filter(|c| !code.contains(c)).collect();
    assert!(
        missing.is_empty(),
        "in Reason::ALL, not in spec/reasons.md: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in spec/reasons.md, not in Reason::ALL: {extra:?}"
    );
    assert_eq!(spec, code, "same codes, different order");
}

#[test]
fn every_code_parses_back_and_unknown_codes_are_refused() {
    for r in Reason::ALL {
        assert_eq!(r.as_str().parse::<Reason>(), Ok(*r));
    }
    for old in [
        "malformed_envelope",
        "wrong_payload_type",
        "payload.type",
        "entry_too_large",
    ] {
        assert!(old.parse::<Reason>().is_err(), "{old} must not be a code");
    }
}

#[test]
fn the_frozen_manifest_reads_into_typed_outcomes_and_reasons() {
    let dir = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/frozen-receipts"
    ));
    let (manifest, _) = rcpt::verify::corpus::load(dir).expect("the frozen manifest reads");
    assert!(
        manifest
            .cases
            .iter()
            .any(|c| c.reason == Some(Reason::PayloadVersionUnsupported))
    );
    assert!(
        manifest
            .cases
            .iter()
            .all(|c| (c.reason.is_none()) == (c.expect == rcpt::verify::Outcome::Verified))
    );
}
