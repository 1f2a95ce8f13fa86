//! `rcpt receipt template`: a payload to fill in for `rcpt receipt issue`.
//!
//! Every value the command cannot know is a string starting with
//! [`PLACEHOLDER`], saying what goes there; `receipt issue` refuses a
//! payload that still holds one, naming the field (so a template is never
//! signed by mistake).

use rcpt::receipt::TOP_FIELDS;
use rcpt::receipt::require::VerdictArm;
use serde_json::{Value, json};

/// How every value left to fill in starts.
pub const PLACEHOLDER: &str = "FILL IN:";

/// A digest to fill in, and where it comes from.
fn digest(what: &str) -> String {
    format!("{PLACEHOLDER} blake3: or sha256: and 64 hex digits, {what}")
}

/// The template as text: one field a line, in the order of spec/receipt.md.
pub fn template_text(issuer: Option<&str>, arm: VerdictArm, now: i64) -> String {
    let value = template(issuer, arm, now);
    let lines: Vec<String> = TOP_FIELDS
        .iter()
        .map(|k| format!("  {}: {}", json!(k), value.get(k).unwrap_or(&Value::Null)))
        .collect();
    format!("{{\n{}\n}}\n", lines.join(",\n"))
}

/// The payload template: version 1, issued now, the verdict arm asked for.
pub fn template(issuer: Option<&str>, arm: VerdictArm, now: i64) -> Value {
    let issuer = issuer.map_or_else(
        || format!("{PLACEHOLDER} the issuer's name, as its key's .vkey names it"),
        str::to_string,
    );
    let verdict = match arm {
        VerdictArm::Admit => json!({"admit": {"proof": digest("of the evidence admitted on")}}),
        VerdictArm::Deny => {
            json!({"deny": {"reasons": [format!("{PLACEHOLDER} a reason code, e.g. license.gpl")]}})
        }
        VerdictArm::Escalate => {
            json!({"escalate": {"ticket": format!("{PLACEHOLDER} the ticket id")}})
        }
    };
    json!({
        "version": 1,
        "issuer": issuer,
        "issued_at": now,
        "substrate": "git",
        "change_id": digest("of the change (rcpt gate id)"),
        "inverse_delta_id": null,
        "reversibility": null,
        "read_set": [],
        "precondition": null,
        "policy_id": digest("of the policy evaluated"),
        "verdict": verdict,
        "applied": false,
        "replay": {"class": "unknown"}
    })
}

/// The first value of `payload` (a JSON text) still holding a
/// placeholder: its JSON pointer and text.
pub fn unfilled(payload: &[u8]) -> Option<(String, String)> {
    if !payload
        .windows(PLACEHOLDER.len())
        .any(|w| w == PLACEHOLDER.as_bytes())
    {
        return None;
    }
    let value: Value = serde_json::from_slice(payload).ok()?;
    find(&value, String::new())
}

fn find(value: &Value, at: String) -> Option<(String, String)> {
    match value {
        Value::String(s) if s.starts_with(PLACEHOLDER) => Some((at, s.clone())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find(v, format!("{at}/{i}"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| find(v, format!("{at}/{k}"))),
        _ => None,
    }
}
