//! `rcpt verify --corpus DIR [--errata FILE]`: every case of a frozen
//! corpus and of each of its series comes out as its manifest says (or as
//! an erratum that supersedes it says), and every checksum holds.

use super::{EXIT_FAILED, EXIT_OK, UsageError};
use anyhow::Context as _;
use rayon::prelude::*;
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
    for (i, part) in parts.iter().enumerate() {
        let result = run_part(part)?;
        let mut out = std::io::stdout().lock();
        if i > 0 {
            writeln!(out, "\n== series {}", part.dir.display())?;
        }
        print_corpus(&result, &mut out)?;
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

/// One line per case, the checksum problems, and a summary.
fn print_corpus(result: &CorpusResult, out: &mut impl Write) -> std::io::Result<()> {
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
            writeln!(out, "ok        {:<48} {got}{erratum}", r.case.file)?;
        } else {
            let want = format!(
                "{} [{}]",
                r.case.expect.as_str(),
                r.case.reason.map_or("-", |r| r.as_str())
            );
            writeln!(
                out,
                "MISMATCH  {:<48} expected {want}{erratum}, got {got}",
                r.case.file
            )?;
        }
    }
    for m in &result.checksums {
        writeln!(out, "CHANGED   {:<48} {}", m.file, m.detail)?;
    }
    let matched = result.cases.iter().filter(|c| c.matched).count();
    writeln!(
        out,
        "corpus: {} cases, {matched} as expected, {} not ({} verified, {} failed, {} not evaluated); \
         SHA256SUMS: {} files checked, {} changed{}",
        result.cases.len(),
        result.cases.len() - matched,
        outcomes.verified,
        outcomes.failed,
        outcomes.not_evaluated,
        result.checksums_checked,
        result.checksums.len(),
        if result.superseded > 0 {
            format!("; {} expectations superseded by errata", result.superseded)
        } else {
            String::new()
        }
    )
}
