//! report: render verification results for people (human), programs (json)
//! and CI systems (junit). Rendering writes to a caller's `Write`; the
//! library never chooses stdout or an exit status.

use super::{Check, CheckVerdict, Outcome, Reason, Report, Summary};
use crate::text::Escaped;
use serde_json::json;
use std::io::{self, Write};

/// Version of the JSON document's shape (spec/verify.md "JSON"): raised
/// when a field changes meaning or goes away, not when one is added.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// The output formats of `rcpt verify`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One line per bundle, a line per problem, a summary line.
    Human,
    /// One JSON document: `{"results": [...], "summary": {...}}`.
    Json,
    /// JUnit XML: one testcase per bundle.
    Junit,
}

/// `pass`, `fail` or `error`.
fn status(check: &Check) -> &'static str {
    match &check.result {
        Ok(CheckVerdict::Pass) => "pass",
        Ok(CheckVerdict::Fail(_)) => "fail",
        Err(_) => "error",
    }
}

/// (reason, detail) of a check that did not pass.
fn reason_detail(check: &Check) -> Option<(Reason, &str)> {
    match &check.result {
        Ok(CheckVerdict::Pass) => None,
        Ok(CheckVerdict::Fail(f)) => Some((f.reason, &f.detail)),
        Err(e) => Some((e.reason, &e.detail)),
    }
}

/// One bundle's part of the document, rendered on its own (so that many
/// can be rendered in parallel) and added in order with [`Renderer::push`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    bytes: Vec<u8>,
}

impl Rendered {
    /// The part of `report` (for the bundle named `file`) in `format`.
    pub fn new(format: Format, file: &str, report: &Report) -> io::Result<Rendered> {
        let mut bytes = Vec::with_capacity(256);
        match format {
            Format::Human => human(&mut bytes, file, report)?,
            Format::Json => json_result(&mut bytes, file, report)?,
            Format::Junit => junit_case(&mut bytes, file, report)?,
        }
        Ok(Rendered { bytes })
    }
}

/// Streams reports in one format: `begin`, then `bundle` per file, then `end`.
pub struct Renderer<W: Write> {
    out: W,
    format: Format,
    count: u64,
    /// JUnit needs the counts in its opening tag, so its cases are held back.
    junit_cases: Vec<u8>,
}

impl<W: Write> Renderer<W> {
    /// A renderer writing `format` to `out`.
    pub fn new(out: W, format: Format) -> Self {
        Renderer {
            out,
            format,
            count: 0,
            junit_cases: Vec::new(),
        }
    }

    /// Start the document.
    pub fn begin(&mut self) -> io::Result<()> {
        match self.format {
            Format::Json => writeln!(
                self.out,
                "{{\"format_version\": {JSON_FORMAT_VERSION}, \"results\": ["
            ),
            Format::Human | Format::Junit => Ok(()),
        }
    }

    /// Render one bundle's report.
    pub fn bundle(&mut self, file: &str, report: &Report) -> io::Result<()> {
        let rendered = Rendered::new(self.format, file, report)?;
        self.push(&rendered)
    }

    /// Add one bundle's part rendered apart ([`Rendered::new`] with this
    /// renderer's format), in input order: the same bytes as
    /// [`Renderer::bundle`] of the report.
    pub fn push(&mut self, rendered: &Rendered) -> io::Result<()> {
        self.count += 1;
        match self.format {
            Format::Human => self.out.write_all(&rendered.bytes),
            Format::Json => {
                if self.count > 1 {
                    self.out.write_all(b",\n")?;
                }
                self.out.write_all(&rendered.bytes)
            }
            Format::Junit => {
                self.junit_cases.extend_from_slice(&rendered.bytes);
                Ok(())
            }
        }
    }

    /// Finish the document with the summary.
    pub fn end(&mut self, summary: &Summary) -> io::Result<()> {
        match self.format {
            Format::Human => writeln!(
                self.out,
                "{} verified, {} failed, {} not evaluated",
                summary.verified, summary.failed, summary.not_evaluated
            ),
            Format::Json => {
                let s = json!({"verified": summary.verified, "failed": summary.failed,
                               "error": summary.not_evaluated});
                writeln!(self.out, "\n], \"summary\": {s}}}")
            }
            Format::Junit => {
                let total = summary.verified + summary.failed + summary.not_evaluated;
                writeln!(self.out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>")?;
                writeln!(
                    self.out,
                    "<testsuites name=\"rcpt verify\" tests=\"{total}\" failures=\"{}\" errors=\"{}\">",
                    summary.failed, summary.not_evaluated
                )?;
                writeln!(
                    self.out,
                    "  <testsuite name=\"rcpt verify\" tests=\"{total}\" failures=\"{}\" errors=\"{}\" skipped=\"0\">",
                    summary.failed, summary.not_evaluated
                )?;
                self.out.write_all(&self.junit_cases)?;
                writeln!(self.out, "  </testsuite>\n</testsuites>")
            }
        }?;
        self.out.flush()
    }
}

/// `VERIFIED file  id` or `FAILED file` / `ERROR file` with a line per problem.
fn human(out: &mut impl Write, file: &str, report: &Report) -> io::Result<()> {
    let outcome = report.outcome();
    let word = match outcome {
        Outcome::Verified => "VERIFIED",
        Outcome::Failed => "FAILED  ",
        Outcome::NotEvaluated => "ERROR   ",
    };
    match &report.receipt_id {
        Some(id) => writeln!(out, "{word} {}  {}", Escaped(file), Escaped(id))?,
        None => writeln!(out, "{word} {}", Escaped(file))?,
    }
    // A change applied with no inverse stored cannot be undone: say so
    // where a person reads the result.
    if let Some(p) = report.summary.as_ref().filter(|p| p.applied) {
        match p.reversibility {
            Some(true) => {}
            Some(false) => writeln!(
                out,
                "    note: applied irreversibly (reversibility false, no inverse stored)"
            )?,
            None => writeln!(out, "    note: applied; reversibility not known (null)")?,
        }
    }
    if let Some(d) = report.summary.as_ref().and_then(|p| p.decision.as_ref()) {
        writeln!(out, "    note: {}", Escaped(d))?;
    }
    for check in &report.checks {
        // Skipped checks follow from a problem already listed: keep the output short.
        if let Some((reason, detail)) =
            reason_detail(check).filter(|(r, _)| *r != Reason::CheckSkipped)
        {
            let tag = if status(check) == "fail" {
                "fail"
            } else {
                "not evaluated"
            };
            if reason.as_str() == check.name {
                writeln!(out, "    {tag} [{reason}]: {}", Escaped(detail))?;
            } else {
                writeln!(
                    out,
                    "    {tag} {} [{reason}]: {}",
                    check.name,
                    Escaped(detail)
                )?;
            }
        }
    }
    Ok(())
}

/// A JSON string (serde_json's escaping).
fn json_str(out: &mut Vec<u8>, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

/// A JSON string, or `null`.
fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) -> io::Result<()> {
    match s {
        Some(s) => json_str(out, s),
        None => {
            out.extend_from_slice(b"null");
            Ok(())
        }
    }
}

/// The JSON object of one bundle, written as it is read, without building
/// a `serde_json::Value`. The bytes are those of serializing the object
/// `{"file", "outcome", "reason", "receipt_id", "payload", "checks"}` with
/// serde_json's compact printer (keys in sorted order, as its map sorts
/// them; the test `streamed_json_is_the_value_json` holds the two equal).
fn json_result(out: &mut Vec<u8>, file: &str, report: &Report) -> io::Result<()> {
    out.extend_from_slice(b"{\"checks\":[");
    for (i, c) in report.checks.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let (reason, detail) = reason_detail(c).map_or((None, None), |(r, d)| (Some(r), Some(d)));
        out.extend_from_slice(b"{\"detail\":");
        json_opt_str(out, detail)?;
        out.extend_from_slice(b",\"name\":");
        json_str(out, c.name)?;
        out.extend_from_slice(b",\"reason\":");
        json_opt_str(out, reason.map(Reason::as_str))?;
        out.extend_from_slice(b",\"status\":");
        json_str(out, status(c))?;
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"file\":");
    json_str(out, file)?;
    out.extend_from_slice(b",\"outcome\":");
    json_str(out, report.outcome().as_str())?;
    out.extend_from_slice(b",\"payload\":");
    match &report.summary {
        None => out.extend_from_slice(b"null"),
        Some(p) => {
            out.extend_from_slice(if p.applied {
                b"{\"applied\":true,\"change_id\":"
            } else {
                b"{\"applied\":false,\"change_id\":"
            });
            json_str(out, &p.change_id)?;
            write!(out, ",\"issued_at\":{},\"issuer\":", p.issued_at)?;
            json_str(out, &p.issuer)?;
            out.extend_from_slice(b",\"policy_id\":");
            json_str(out, &p.policy_id)?;
            out.extend_from_slice(b",\"reasons\":[");
            for (i, r) in p.reasons.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json_str(out, r)?;
            }
            out.extend_from_slice(match p.reversibility {
                Some(true) => b"],\"reversibility\":true,\"substrate\":".as_slice(),
                Some(false) => b"],\"reversibility\":false,\"substrate\":".as_slice(),
                None => b"],\"reversibility\":null,\"substrate\":".as_slice(),
            });
            json_str(out, p.substrate)?;
            out.extend_from_slice(b",\"verdict\":");
            json_str(out, p.verdict)?;
            out.push(b'}');
        }
    }
    out.extend_from_slice(b",\"reason\":");
    json_opt_str(out, report.primary_reason().map(Reason::as_str))?;
    out.extend_from_slice(b",\"receipt_id\":");
    json_opt_str(out, report.receipt_id.as_deref())?;
    out.push(b'}');
    Ok(())
}

/// XML 1.0 (Fifth Edition) section 2.2, production [2]:
/// `Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]`.
/// (Surrogates cannot occur in a Rust string.)
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}')
        || c >= '\u{10000}'
}

/// Escape text for XML 1.0 content (`attribute` false) or a double-quoted
/// attribute value (`attribute` true).
///
/// A character XML 1.0 forbids (C0 controls other than tab, newline and
/// carriage return; U+FFFE; U+FFFF) cannot appear even as a character
/// reference, so it is replaced by U+FFFD. In attributes, tab, newline and
/// carriage return are written as character references, which attribute-
/// value normalisation (section 3.3.3) keeps, instead of turning them into
/// spaces. The result is well-formed in either place whatever `s` holds.
fn xml_escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            // Kept as a reference in content too: a literal CR would be
            // normalised away by the XML parser (section 2.11).
            '\r' => out.push_str("&#13;"),
            c if !is_xml_char(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// One `<testcase>`: `<failure>` for failed, `<error>` for not evaluated.
/// Every text in it (the file name, the details) passes [`xml_escape`].
fn junit_case(out: &mut Vec<u8>, file: &str, report: &Report) -> io::Result<()> {
    let name = xml_escape(file, true);
    let outcome = report.outcome();
    if outcome == Outcome::Verified {
        return writeln!(
            out,
            "    <testcase classname=\"rcpt.verify\" name=\"{name}\"/>"
        );
    }
    writeln!(
        out,
        "    <testcase classname=\"rcpt.verify\" name=\"{name}\">"
    )?;
    let element = if outcome == Outcome::Failed {
        "failure"
    } else {
        "error"
    };
    let reason = report.primary_reason().map_or("unknown", Reason::as_str);
    // The message names the check that decided (a failed requirement reads
    // `policy.verdict: verdict is "deny", not one of those required`).
    let message = report
        .checks
        .iter()
        .filter_map(reason_detail)
        .find(|(r, _)| r.as_str() == reason)
        .map_or_else(|| reason.to_string(), |(r, d)| format!("{r}: {d}"));
    let mut body: Vec<String> = report
        .checks
        .iter()
        .filter_map(|c| reason_detail(c).map(|(r, d)| format!("{} [{r}]: {d}", c.name)))
        .collect();
    if let Some(p) = &report.summary {
        body.push(format!(
            "payload: issuer {} issued_at {} substrate {} verdict {}{} applied {} reversibility {} change_id {} policy_id {}",
            p.issuer,
            p.issued_at,
            p.substrate,
            p.verdict,
            if p.reasons.is_empty() {
                String::new()
            } else {
                format!(" (reasons: {})", p.reasons.join(", "))
            },
            p.applied,
            p.reversibility
                .map_or_else(|| "null".to_string(), |r| r.to_string()),
            p.change_id,
            p.policy_id
        ));
    }
    writeln!(
        out,
        "      <{element} type=\"{}\" message=\"{}\">{}</{element}>",
        xml_escape(reason, true),
        xml_escape(&message, true),
        xml_escape(&body.join("\n"), false)
    )?;
    writeln!(out, "    </testcase>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{Failure, NotEvaluated, PayloadSummary};

    /// The JSON object of one bundle built as a `serde_json::Value` (the
    /// way it was printed before it was streamed): the oracle.
    fn value_json(file: &str, report: &Report) -> Vec<u8> {
        let checks: Vec<_> = report
            .checks
            .iter()
            .map(|c| {
                let (reason, detail) =
                    reason_detail(c).map_or((None, None), |(r, d)| (Some(r), Some(d)));
                json!({"name": c.name, "status": status(c), "reason": reason, "detail": detail})
            })
            .collect();
        let payload = report.summary.as_ref().map(|p| {
            json!({"issuer": p.issuer, "issued_at": p.issued_at, "substrate": p.substrate,
                   "change_id": p.change_id, "policy_id": p.policy_id, "verdict": p.verdict,
                   "applied": p.applied, "reasons": p.reasons,
                   "reversibility": p.reversibility})
        });
        let v = json!({
            "file": file,
            "outcome": report.outcome().as_str(),
            "reason": report.primary_reason(),
            "receipt_id": report.receipt_id,
            "payload": payload,
            "checks": checks,
        });
        serde_json::to_vec(&v).unwrap()
    }

    fn reports() -> Vec<Report> {
        let summary = |applied, issued_at: i64| PayloadSummary {
            issuer: "ci \"gate\" \u{1}\u{e9}\u{1F600}".into(),
            issued_at,
            substrate: "git",
            change_id: "blake3:00ff".into(),
            policy_id: "sha256:\\x".into(),
            verdict: "deny",
            applied,
            reasons: vec!["a \"b\"".into(), "c".into()],
            // Each of the three values across the reports.
            reversibility: match issued_at.rem_euclid(3) {
                0 => Some(true),
                1 => Some(false),
                _ => None,
            },
            decision: None,
        };
        vec![
            Report {
                receipt_id: None,
                checks: vec![],
                summary: None,
            },
            Report {
                receipt_id: Some("blake3:abc".into()),
                checks: vec![
                    Check {
                        name: "bundle",
                        result: Ok(CheckVerdict::Pass),
                    },
                    Check {
                        name: "signature",
                        result: Ok(CheckVerdict::Fail(Failure {
                            reason: Reason::SignatureInvalid,
                            detail: "line\nbreak\t\"quoted\" \\ \u{7f}\u{2028}".into(),
                        })),
                    },
                    Check {
                        name: "inclusion",
                        result: Err(NotEvaluated {
                            reason: Reason::CheckSkipped,
                            detail: String::new(),
                        }),
                    },
                ],
                summary: Some(summary(true, -5)),
            },
            Report {
                receipt_id: Some("blake3:def".into()),
                checks: vec![Check {
                    name: "checkpoint.signature",
                    result: Err(NotEvaluated {
                        reason: Reason::LogUntrusted,
                        detail: "no key".into(),
                    }),
                }],
                summary: Some(summary(false, i64::MAX)),
            },
        ]
    }

    #[test]
    fn streamed_json_is_the_value_json() {
        for (i, report) in reports().iter().enumerate() {
            let file = format!("dir/\"{i}\"\u{0}.json");
            let mut streamed = Vec::new();
            json_result(&mut streamed, &file, report).unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                String::from_utf8(value_json(&file, report)).unwrap()
            );
        }
    }

    /// Peer text (a detail quoting a receipt, its decision, the file name)
    /// is escaped in the human report: every line is one of the report's,
    /// and no control or bidirectional override reaches the terminal.
    #[test]
    fn the_human_report_escapes_peer_text() {
        let mut report = reports().swap_remove(1);
        if let Some(p) = report.summary.as_mut() {
            p.decision = Some("escalated\nVERIFIED forged.json\u{1b}[2J\u{202e}".into());
        }
        let part = Rendered::new(Format::Human, "x\ny.json", &report).unwrap();
        let text = String::from_utf8(part.bytes).unwrap();
        for line in text.lines() {
            assert!(
                line.starts_with("FAILED   x\\ny.json") || line.starts_with("    "),
                "{text}"
            );
            assert!(
                !line
                    .contains(|c: char| c.is_control()
                        || matches!(c, '\u{2028}' | '\u{202a}'..='\u{202e}')),
                "{line:?}"
            );
        }
        assert!(
            text.contains("note: escalated\\nVERIFIED forged.json\\e[2J\\u{202e}"),
            "{text}"
        );
        assert!(
            text.contains("line\\nbreak\\t\"quoted\" \\\\ \\x7f\\u{2028}"),
            "{text}"
        );
    }

    #[test]
    fn pushed_parts_are_the_bundle_output() {
        for format in [Format::Human, Format::Json, Format::Junit] {
            let mut one = Renderer::new(Vec::new(), format);
            let mut parts = Renderer::new(Vec::new(), format);
            let summary = Summary::default();
            for r in [&mut one, &mut parts] {
                r.begin().unwrap();
            }
            for (i, report) in reports().iter().enumerate() {
                let file = format!("{i}.json");
                one.bundle(&file, report).unwrap();
                let part = Rendered::new(format, &file, report).unwrap();
                parts.push(&part).unwrap();
            }
            one.end(&summary).unwrap();
            parts.end(&summary).unwrap();
            assert_eq!(one.out, parts.out);
            assert!(!one.out.is_empty());
        }
    }
}
