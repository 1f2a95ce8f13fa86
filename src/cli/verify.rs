//! `rcpt verify`: offline verification of bundles, or of a frozen corpus.
//!
//! Reads only the files named on the command line; opens no socket.

use super::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError};
use anyhow::Context as _;
use clap::{Args, ValueEnum};
use rayon::prelude::*;
use rcpt::keys::{self, NoteVerifier};
use rcpt::limits::MAX_KEY_FILE_BYTES;
use rcpt::trust::Trust;
use rcpt::verify::corpus::{self, CorpusResult};
use rcpt::verify::report::{Format, Renderer};
use rcpt::verify::{ConsistencyInput, Outcome, Summary, Verifier};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Bundles verified in parallel per chunk; memory is bounded by one chunk.
const CHUNK: usize = 512;

#[derive(Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// One line per bundle and a summary.
    Human,
    /// One JSON document with every check.
    Json,
    /// JUnit XML for CI systems.
    Junit,
}

#[derive(Args)]
pub struct VerifyArgs {
    /// Bundle files (JSON, one receipt each).
    #[arg(required_unless_present = "corpus", conflicts_with = "corpus")]
    pub bundles: Vec<PathBuf>,
    /// Trust file: {"issuers": [{"name", "public_key"}], "logs": [{"verifier_key"}]}.
    #[arg(long, value_name = "FILE")]
    pub trust: Option<PathBuf>,
    /// A trusted issuer public key: SPKI PEM, or a file holding base64 of the raw 32 bytes.
    #[arg(long = "issuer-key", value_name = "PUB")]
    pub issuer_keys: Vec<PathBuf>,
    /// A trusted log key: a signed-note verifier key string, or a file holding one.
    #[arg(long = "log-key", value_name = "VKEY")]
    pub log_keys: Vec<String>,
    /// An older checkpoint the bundles' checkpoints must extend (needs --consistency).
    #[arg(long, value_name = "CHECKPOINT", requires = "consistency")]
    pub since: Option<PathBuf>,
    /// Consistency proof JSON from `rcpt log consistency --json` (needs --since).
    #[arg(long, value_name = "PROOF", requires = "since")]
    pub consistency: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "human")]
    pub format: FormatArg,
    /// Verify a frozen corpus: DIR/manifest.json lists each case and its expected outcome.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["trust", "issuer_keys", "log_keys", "since"])]
    pub corpus: Option<PathBuf>,
}

/// Read a small input file given on the command line (a usage error if unreadable).
fn read_small(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path)
        .map_err(|e| UsageError(format!("cannot read {what} {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| UsageError(format!("cannot read {what} {}: {e}", path.display())))?;
    if bytes.len() > MAX_KEY_FILE_BYTES {
        return Err(UsageError(format!(
            "{what} {} is over {MAX_KEY_FILE_BYTES} bytes",
            path.display()
        ))
        .into());
    }
    Ok(bytes)
}

/// Trust from --trust, --issuer-key and --log-key together.
fn load_trust(args: &VerifyArgs) -> anyhow::Result<Trust> {
    let mut trust = match &args.trust {
        Some(path) => Trust::from_json(&read_small(path, "trust file")?)
            .map_err(|e| UsageError(format!("trust file {}: {e}", path.display())))?,
        None => Trust::default(),
    };
    for path in &args.issuer_keys {
        let text = String::from_utf8_lossy(&read_small(path, "issuer key")?).into_owned();
        let key = keys::verifying_key_from_text(&text)
            .map_err(|e| UsageError(format!("issuer key {}: {e}", path.display())))?;
        trust.add_issuer(&path.display().to_string(), key);
    }
    for arg in &args.log_keys {
        let path = Path::new(arg);
        let text = if path.is_file() {
            String::from_utf8_lossy(&read_small(path, "log key")?)
                .trim()
                .to_string()
        } else {
            arg.trim().to_string()
        };
        let verifier = NoteVerifier::parse(&text)
            .map_err(|e| UsageError(format!("log key \"{arg}\": {e}")))?;
        trust.add_log(verifier);
    }
    Ok(trust)
}

/// The --since / --consistency pair, if given.
fn load_since(args: &VerifyArgs) -> anyhow::Result<Option<ConsistencyInput>> {
    let (Some(since), Some(proof)) = (&args.since, &args.consistency) else {
        return Ok(None);
    };
    let old = read_small(since, "--since checkpoint")?;
    let proof = read_small(proof, "--consistency proof")?;
    let input = ConsistencyInput::parse(&old, &proof).map_err(|e| UsageError(e.to_string()))?;
    Ok(Some(input))
}

/// Exit status of a set of outcomes: 0, 1 or 3.
fn exit_status(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Verified => EXIT_OK,
        Outcome::Failed => EXIT_FAILED,
        Outcome::NotEvaluated => EXIT_NOT_EVALUATED,
    }
}

pub fn run(args: VerifyArgs) -> anyhow::Result<u8> {
    if let Some(dir) = &args.corpus {
        return run_corpus(dir);
    }
    let verifier = Verifier::new(load_trust(&args)?, load_since(&args)?)
        .map_err(|e| UsageError(e.to_string()))?;
    let format = match args.format {
        FormatArg::Human => Format::Human,
        FormatArg::Json => Format::Json,
        FormatArg::Junit => Format::Junit,
    };
    let stdout = std::io::stdout().lock();
    let mut renderer = Renderer::new(std::io::BufWriter::new(stdout), format);
    let mut summary = Summary::default();
    renderer.begin()?;
    for chunk in args.bundles.chunks(CHUNK) {
        let reports: Vec<_> = chunk.par_iter().map(|p| verifier.verify_file(p)).collect();
        for (path, report) in chunk.iter().zip(&reports) {
            summary.add(report.outcome());
            renderer.bundle(&path.display().to_string(), report)?;
        }
    }
    renderer.end(&summary)?;
    Ok(exit_status(summary.outcome()))
}

/// `--corpus DIR`: every case must come out as its manifest says.
fn run_corpus(dir: &Path) -> anyhow::Result<u8> {
    let (manifest, trust) = corpus::load(dir).map_err(|e| UsageError(e.to_string()))?;
    let verifier = Verifier::new(trust, None).map_err(|e| UsageError(e.to_string()))?;
    let (checksums, checksums_checked) = corpus::check_sums(dir)
        .with_context(|| format!("checking {}/SHA256SUMS", dir.display()))?;
    let cases = manifest
        .cases
        .par_iter()
        .map(|c| corpus::run_case(dir, &verifier, c))
        .collect();
    let result = CorpusResult {
        cases,
        checksums,
        checksums_checked,
    };
    print_corpus(&result);
    Ok(if result.all_matched() {
        EXIT_OK
    } else {
        EXIT_FAILED
    })
}

/// One line per case, the checksum problems, and a summary.
fn print_corpus(result: &CorpusResult) {
    let mut outcomes = Summary::default();
    for r in &result.cases {
        outcomes.add(r.report.outcome());
        let got = format!(
            "{} [{}]",
            r.report.outcome().as_str(),
            r.report.primary_reason().map_or("-", |r| r.as_str())
        );
        if r.matched {
            println!("ok        {:<48} {got}", r.case.file);
        } else {
            let want = format!(
                "{} [{}]",
                r.case.expect.as_str(),
                r.case.reason.map_or("-", |r| r.as_str())
            );
            println!("MISMATCH  {:<48} expected {want}, got {got}", r.case.file);
        }
    }
    for m in &result.checksums {
        println!("CHANGED   {:<48} {}", m.file, m.detail);
    }
    let matched = result.cases.iter().filter(|c| c.matched).count();
    println!(
        "corpus: {} cases, {matched} as expected, {} not ({} verified, {} failed, {} not evaluated); \
         SHA256SUMS: {} files checked, {} changed",
        result.cases.len(),
        result.cases.len() - matched,
        outcomes.verified,
        outcomes.failed,
        outcomes.not_evaluated,
        result.checksums_checked,
        result.checksums.len()
    );
}
