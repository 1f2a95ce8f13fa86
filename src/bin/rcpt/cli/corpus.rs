//! `rcpt verify --corpus DIR [--errata FILE]`: every case of a frozen
//! corpus and of each of its series comes out as its manifest says (or as
//! an erratum that supersedes it says), and every checksum holds.

use super::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context as _;
use rayon::prelude::*;
use rcpt::text::escape;
use rcpt::verify::corpus::{self, CorpusResult, Part};
use rcpt::verify::errata::{self, Errata};
use rcpt::verify::{Summary, Verifier};
use std::io::Write;
use std::path::Path;

/// `--corpus DIR`: the errata given, else `DIR.errata.json` when it
/// exists, else none; then each part of the corpus.
pub fn run(dir: &Path, errata_file: Option<&Path>) -> anyhow::Result<u8> {
    let usage = |e: corpus::CorpusError| UsageError(super::render_error(&anyhow::Error::new(e)));
    let path = errata_file
        .map(Path::to_path_buf)
        .or_else(|| errata::default_path(dir).filter(|p| p.exists()));
    let errata = match &path {
        Some(p) => Errata::load(p).map_err(usage)?,
        None => Errata::default(),
    };
    let parts = corpus::load_parts(dir, &errata).map_err(usage)?;
    let mut all_matched = true;
    let mut total = Totals::default();
    for (i, part) in parts.iter().enumerate() {
        let result = run_part(part)?;
        let mut out = std::io::stdout().lock();
        if i > 0 {
            writeln!(
                out,
                "\n== series {}",
                escape(&part.dir.display().to_string())
            )?;
        }
        let part_total = print_corpus(&result, &mut out)?;
        total.add(&part_total);
        all_matched &= result.all_matched();
    }
    if let Some(p) = &path {
        let superseded: usize = parts.iter().map(|p| p.superseded).sum();
        writeln!(
            std::io::stdout().lock(),
            "\nerrata {}: {superseded} expectations superseded by errata",
            p.display()
        )?;
    }
    if parts.len() > 1 {
        writeln!(
            std::io::stdout().lock(),
            "\ntotal: {} parts; {}",
            parts.len(),
            total.line()
        )?;
    }
    Ok(if all_matched { EXIT_OK } else { EXIT_FAILED })
}

/// One part of the corpus (the root, or one series).
fn run_part(part: &Part) -> anyhow::Result<CorpusResult> {
    let verifier =
        Verifier::new(part.trust.clone(), None).map_err(|e| UsageError(e.to_string()))?;
    let (checksums, checksums_checked) = corpus::check_sums(&part.dir)
        .with_context(|| format!("checking {}/SHA256SUMS", part.dir.display()))?;
    let cases = part
        .manifest
        .cases
        .par_iter()
        .map(|c| corpus::run_case(&part.dir, &part.trust, &verifier, c))
        .collect();
    Ok(CorpusResult {
        cases,
        checksums,
        checksums_checked,
        superseded: part.superseded,
    })
}

/// What one part, or all of them, came to.
#[derive(Default)]
struct Totals {
    cases: usize,
    matched: usize,
    outcomes: Summary,
    checked: usize,
    changed: usize,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.cases += other.cases;
        self.matched += other.matched;
        self.outcomes.verified += other.outcomes.verified;
        self.outcomes.failed += other.outcomes.failed;
        self.outcomes.not_evaluated += other.outcomes.not_evaluated;
        self.checked += other.checked;
        self.changed += other.changed;
    }

    fn line(&self) -> String {
        format!(
            "{} cases, {} as expected, {} not ({} verified, {} failed, {} not evaluated); \
             SHA256SUMS: {} files checked, {} changed",
            self.cases,
            self.matched,
            self.cases - self.matched,
            self.outcomes.verified,
            self.outcomes.failed,
            self.outcomes.not_evaluated,
            self.checked,
            self.changed
        )
    }
}

/// One line per case, the checksum problems, and a summary; file names
/// and details are peer text, escaped.
fn print_corpus(result: &CorpusResult, out: &mut impl Write) -> std::io::Result<Totals> {
    let mut outcomes = Summary::default();
    for r in &result.cases {
        outcomes.add(r.report.outcome());
        let got = format!(
            "{} [{}]",
            r.report.outcome().as_str(),
            r.report.primary_reason().map_or("-", |r| r.as_str())
        );
        let erratum = r
            .case
            .superseded
            .map(|old| format!(" (erratum: supersedes {old})"))
            .unwrap_or_default();
        if r.matched {
            writeln!(out, "ok        {:<48} {got}{erratum}", escape(&r.case.file))?;
        } else {
            let want = format!(
                "{} [{}]",
                r.case.expect.as_str(),
                r.case.reason.map_or("-", |r| r.as_str())
            );
            writeln!(
                out,
                "MISMATCH  {:<48} expected {want}{erratum}, got {got}",
                escape(&r.case.file)
            )?;
        }
    }
    for m in &result.checksums {
        writeln!(
            out,
            "CHANGED   {:<48} {}",
            escape(&m.file),
            escape(&m.detail)
        )?;
    }
    let total = Totals {
        cases: result.cases.len(),
        matched: result.cases.iter().filter(|c| c.matched).count(),
        outcomes,
        checked: result.checksums_checked,
        changed: result.checksums.len(),
    };
    let superseded = if result.superseded > 0 {
        format!("; {} expectations superseded by errata", result.superseded)
    } else {
        String::new()
    };
    writeln!(out, "corpus: {}{superseded}", total.line())?;
    Ok(total)
}
