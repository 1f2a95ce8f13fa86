//! `rcpt verify`: offline verification of bundles, or of a frozen corpus.
//!
//! Reads only the files named on the command line (and standard input for
//! `-`); opens no socket.

use super::inputs::{Input, Inputs, check_bundle_paths, expand_dirs};
use super::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError, keyarg};
use clap::{Args, ValueEnum};
use rayon::prelude::*;
use rcpt::io::Source;
use rcpt::limits::{MAX_KEY_FILE_BYTES, MAX_POLICY_BYTES, MAX_PROOF_FILE_BYTES};
use rcpt::receipt::require::{self, Requirements, VerdictArm};
use rcpt::tlog::policy::TlogPolicy;
use rcpt::trust::Trust;
use rcpt::verify::report::{Format, Rendered, Renderer};
use rcpt::verify::{ConsistencyInput, Gate, Outcome, Summary, Verifier};

/// Bundles verified in parallel per chunk; memory is bounded by the
/// chunk being verified, the one being read and `READ_AHEAD` queued.
const CHUNK: usize = 512;
/// Chunks read ahead of the one being verified.
const READ_AHEAD: usize = 2;

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
#[command(after_help = "Examples:
  rcpt verify --trust trust.json bundles/*.json
  rcpt verify --trust trust.json bundles/
  rcpt verify --issuer-key-file gate.vkey --log-key-file logkey.vkey bundle.json
  rcpt verify --issuer-key \"$(cat gate.vkey)\" --log-key \"$(cat logkey.vkey)\" bundle.json
  rcpt log prove log/ --index 3 | rcpt verify --trust trust.json -
  rcpt verify --corpus fixtures/frozen-receipts
  rcpt verify --trust trust.json --require-verdict admit --change-id \"$CHANGE\" --max-age 24h --fresh . bundle.json")]
pub struct VerifyArgs {
    /// Bundle files (JSON, one receipt each); a directory: its *.json and
    /// *.jsonl files, less those named as rcpt's other files (trust.json,
    /// *.trust.json, gate.json, ...: skipped, and said); a *.jsonl file: JSON Lines of bundles (one per line);
    /// '-' reads standard input: one bundle, or JSON Lines of bundles.
    #[arg(
        value_name = "BUNDLE",
        required_unless_present = "corpus",
        conflicts_with = "corpus"
    )]
    pub bundles: Vec<Source>,
    /// Trust file, as `rcpt trust new` writes it: {"issuers": [{"verifier_key": "NAME+HASH+KEY"}], "logs": [{"verifier_key": "ORIGIN+HASH+KEY"}]} (an issuer may also be {"name", "public_key"}).
    #[arg(long, value_name = "FILE")]
    pub trust: Option<Source>,
    /// A trusted issuer key as text: a verifier key NAME+HASH+KEY (the
    /// .vkey line), NAME=KEY (raw base64 or SPKI PEM), or an unnamed key,
    /// which binds no issuer name. Never read as a file name: use
    /// --issuer-key-file for a file.
    #[arg(long = "issuer-key", value_name = "KEY")]
    pub issuer_keys: Vec<String>,
    /// A file holding a trusted issuer key, in any --issuer-key form (the
    /// .vkey file `rcpt key generate` wrote carries the name).
    #[arg(long = "issuer-key-file", value_name = "FILE")]
    pub issuer_key_files: Vec<Source>,
    /// A trusted log key as text, named by the log's origin: a verifier key
    /// NAME+HASH+KEY or ORIGIN=KEY. Never read as a file name: use
    /// --log-key-file for a file.
    #[arg(long = "log-key", value_name = "VKEY")]
    pub log_keys: Vec<String>,
    /// A file holding a trusted log key, in any --log-key form (the .vkey
    /// file `rcpt key generate` wrote).
    #[arg(long = "log-key-file", value_name = "FILE")]
    pub log_key_files: Vec<Source>,
    /// An older checkpoint of the bundles' log, which their checkpoints
    /// must extend (needs --consistency).
    #[arg(long, value_name = "CHECKPOINT", requires = "consistency")]
    pub since: Option<Source>,
    /// Consistency proofs from `rcpt log consistency`, in its text form (one
    /// proof from the --since size, sizes not named) or its --json form (one
    /// proof or JSON Lines of proofs); repeat the flag for more; one proof
    /// per tree size (needs --since).
    #[arg(long, value_name = "PROOF", requires = "since")]
    pub consistency: Vec<Source>,
    /// A tlog-policy file (spec/witness.md): its `log` lines are trusted log
    /// keys too, and each checkpoint must be signed by a log it lists and
    /// cosigned by its quorum of witnesses (check `checkpoint.witnesses`).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<Source>,
    /// A log or mirror directory (`rcpt log mirror`): each bundle of its origin must be of
    /// its history (check `consistency.mirror`: failed `consistency.fork`, or not evaluated
    /// `consistency.mirror_behind`).
    #[arg(long, value_name = "DIR", conflicts_with = "corpus")]
    pub mirror: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "human")]
    pub format: FormatArg,
    /// Verify a frozen corpus: DIR/manifest.json lists each case and its expected outcome.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "trust", "issuer_keys", "issuer_key_files", "log_keys", "log_key_files", "since",
        "require_verdict", "issuer", "change_id", "policy_id", "applied", "max_age", "now",
        "fresh", "not_evaluated", "policy"
    ])]
    pub corpus: Option<std::path::PathBuf>,
    /// With --corpus: the errata file of expectations superseded since the corpus was frozen
    /// (default: DIR.errata.json beside DIR, when it exists).
    #[arg(long, value_name = "FILE", requires = "corpus")]
    pub errata: Option<std::path::PathBuf>,
    /// Require the verdict to be this arm (repeat: any of them); else failed `policy.verdict`.
    #[arg(long = "require-verdict", value_name = "ARM", value_parser = parse_arm)]
    pub require_verdict: Vec<VerdictArm>,
    /// Require the payload's issuer to be NAME (repeat: any of them); else failed `policy.issuer`.
    #[arg(long, value_name = "NAME")]
    pub issuer: Vec<String>,
    /// Require the receipt to be about exactly this change; else failed `policy.change_id`.
    #[arg(long = "change-id", value_name = "DIGEST", value_parser = parse_change_id)]
    pub change_id: Option<rcpt::digest::Digest>,
    /// Require the policy evaluated to be this one (repeat: any of them); else failed `policy.policy_id`.
    #[arg(long = "policy-id", value_name = "DIGEST", value_parser = parse_policy_id)]
    pub policy_id: Vec<rcpt::digest::Digest>,
    /// Require `applied` to be true or false; else failed `policy.applied`.
    #[arg(long, value_name = "BOOL", value_parser = clap::builder::BoolishValueParser::new())]
    pub applied: Option<bool>,
    /// Require the receipt to be issued within DURATION before now (30m, 24h, 7d; a bare
    /// number is seconds) and at most 300 s after; else failed `policy.age`. The trust
    /// file's "require" says it in seconds, "max_age_s".
    #[arg(long = "max-age", value_name = "DURATION", value_parser = parse_max_age)]
    pub max_age: Option<i64>,
    /// The clock for --max-age, as Unix seconds (reproducible runs); default: the system clock.
    #[arg(long, value_name = "UNIX")]
    pub now: Option<i64>,
    /// Re-read every read_set item under ROOT: a changed, vanished or escaping item fails
    /// `policy.fresh` (spec/gate.md).
    #[arg(long, value_name = "ROOT")]
    pub fresh: Option<std::path::PathBuf>,
    /// What a bundle that could not be evaluated means for the exit status: `error` (exit 3),
    /// `fail` (exit 1) or `pass` (exit 0). The reported outcome never changes.
    #[arg(long = "not-evaluated", value_enum, default_value = "error")]
    pub not_evaluated: NotEvaluatedArg,
}

/// `--not-evaluated`: the caller's policy for outcome 3.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NotEvaluatedArg {
    /// Exit 3 when nothing failed but something was not evaluated.
    Error,
    /// Count it as a failure for the exit status (exit 1).
    Fail,
    /// Count it as passing for the exit status (exit 0).
    Pass,
}

fn parse_arm(s: &str) -> Result<VerdictArm, String> {
    VerdictArm::parse(s).map_err(|e| e.to_string())
}

fn parse_change_id(s: &str) -> Result<rcpt::digest::Digest, String> {
    require::parse_digest("--change-id", s).map_err(|e| e.to_string())
}

fn parse_policy_id(s: &str) -> Result<rcpt::digest::Digest, String> {
    require::parse_digest("--policy-id", s).map_err(|e| e.to_string())
}

/// `--max-age`: a duration in s, m, h or d, or a bare number of seconds
/// (as every duration flag, spec/cli.md "Units").
fn parse_max_age(s: &str) -> Result<i64, String> {
    let with_unit;
    let s = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        with_unit = format!("{s}s");
        with_unit.as_str()
    } else {
        s
    };
    require::parse_duration(s).map_err(|e| match e {
        require::RequireError::Duration(_) => format!(
            "{s:?} is not a duration: give a whole number with s, m, h or d (30m, 24h, 7d), \
             or seconds"
        ),
        other => other.to_string(),
    })
}

/// A repeated flag as an "any of" list: `None` when not given.
fn some<T: Clone>(values: &[T]) -> Option<Vec<T>> {
    (!values.is_empty()).then(|| values.to_vec())
}

/// The requirements and freshness root given as flags.
fn gate_of(args: &VerifyArgs) -> anyhow::Result<Gate> {
    if let Some(root) = args.fresh.as_ref().filter(|r| !r.is_dir()) {
        return Err(UsageError(format!(
            "--fresh {}: not a directory (give the work tree the read set was read under)",
            root.display()
        ))
        .into());
    }
    Ok(Gate {
        requirements: Requirements {
            verdict: some(&args.require_verdict),
            issuer: some(&args.issuer),
            change_id: args.change_id,
            policy_id: some(&args.policy_id),
            applied: args.applied,
            max_age_s: args.max_age,
        },
        fresh: args.fresh.clone(),
        now: args.now,
    })
}

/// Read a trust, key, checkpoint or proof file named by a flag: any
/// problem with it is a bad invocation (exit 2).
fn read_input(source: &Source, limit: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    super::read_input(source, limit, what).map_err(|e| UsageError(super::render_error(&e)).into())
}

/// Trust from --trust, the key flags and the key-file flags together
/// (every flag takes every key form: [`super::keyarg`]).
fn load_trust(args: &VerifyArgs) -> anyhow::Result<Trust> {
    let mut trust = match &args.trust {
        Some(source) => {
            let bytes = read_input(source, MAX_KEY_FILE_BYTES, "trust file")?;
            Trust::from_json(&bytes).map_err(|e| super::usage(format!("trust file {source}"), e))?
        }
        None => Trust::default(),
    };
    // Log keys first: an issuer key that is one of them is named as such.
    for text in &args.log_keys {
        trust.add_log(keyarg::log_key("--log-key", Some(text), None)?);
    }
    for source in &args.log_key_files {
        trust.add_log(keyarg::log_key("--log-key", None, Some(source))?);
    }
    let issuers = args.issuer_keys.iter().map(|t| {
        let what = format!("--issuer-key \"{t}\"");
        (what, keyarg::from_text("--issuer-key", t))
    });
    let issuers = issuers.chain(args.issuer_key_files.iter().map(|f| {
        let what = format!("--issuer-key-file {f}");
        (what, keyarg::from_file("--issuer-key-file", f))
    }));
    for (what, parsed) in issuers {
        let parsed = parsed?;
        refuse_a_log_key(&trust, &what, &parsed)?;
        // A key without a name binds none (spec/gate.md "Issuer binding").
        match parsed.name {
            Some(name) => trust.add_issuer(&name, parsed.key),
            None => trust.add_unnamed_issuer(parsed.key),
        }
    }
    Ok(trust)
}

/// An issuer key that is a log's key (the same key, or a verifier key
/// named with a trusted log's origin) is a mix-up, said as such: a log key
/// signs checkpoints, never receipts (spec/keys.md "Giving a key").
fn refuse_a_log_key(
    trust: &Trust,
    what: &str,
    parsed: &rcpt::keys::PublicKeyText,
) -> anyhow::Result<()> {
    let log = trust
        .logs
        .iter()
        .find(|l| l.key == parsed.key || parsed.name.as_deref() == Some(l.name.as_str()));
    match log {
        Some(log) => Err(UsageError(format!(
            "{what} is the log's key ({}), not an issuer's: give the key that signed the \
             receipts (the issuer's .vkey) as the issuer key, and the log's with --log-key-file",
            log.name
        ))
        .into()),
        None => Ok(()),
    }
}

/// `--policy FILE`, read (capped) and parsed: any problem is a bad invocation.
fn load_policy(args: &VerifyArgs) -> anyhow::Result<Option<TlogPolicy>> {
    let Some(source) = &args.policy else {
        return Ok(None);
    };
    let bytes = read_input(source, MAX_POLICY_BYTES, "--policy file")?;
    let policy =
        TlogPolicy::parse(&bytes).map_err(|e| UsageError(format!("--policy {source}: {e}")))?;
    Ok(Some(policy))
}

/// The --since / --consistency input, if given.
fn load_since(args: &VerifyArgs) -> anyhow::Result<Option<ConsistencyInput>> {
    let Some(since) = &args.since else {
        return Ok(None);
    };
    let old = read_input(since, MAX_KEY_FILE_BYTES, "--since checkpoint")?;
    let files = args
        .consistency
        .iter()
        .map(|p| read_input(p, MAX_PROOF_FILE_BYTES, "--consistency proof"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let named: Vec<(String, &[u8])> = args
        .consistency
        .iter()
        .map(ToString::to_string)
        .zip(files.iter().map(Vec::as_slice))
        .collect();
    let input =
        ConsistencyInput::parse_named(&old, &named).map_err(|e| UsageError(e.to_string()))?;
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

/// The verifier the arguments ask for: trust, gate, policy, mirror,
/// `--since`.
fn verifier_of(args: &VerifyArgs) -> anyhow::Result<Verifier> {
    let gate = gate_of(args)?;
    let policy = load_policy(args)?;
    let mut trust = load_trust(args)?;
    for log in policy.iter().flat_map(|p| &p.logs) {
        trust.add_log(log.verifier.clone());
    }
    let mirror = match &args.mirror {
        Some(dir) => Some(
            rcpt::verify::mirror::Mirror::open(dir, &trust)
                .map_err(|e| UsageError(super::render_error(&anyhow::Error::new(e))))?,
        ),
        None => None,
    };
    let verifier = Verifier::new(trust, load_since(args)?)
        .map_err(|e| UsageError(e.to_string()))?
        .with_gate(gate);
    let verifier = match policy {
        Some(policy) => verifier.with_policy(policy),
        None => verifier,
    };
    let verifier = match mirror {
        Some(mirror) => verifier.with_mirror(mirror),
        None => verifier,
    };
    Ok(verifier)
}

pub fn run(args: VerifyArgs) -> anyhow::Result<u8> {
    if let Some(dir) = &args.corpus {
        return super::corpus::run(dir, args.errata.as_deref());
    }
    let sources = args
        .bundles
        .iter()
        .chain(&args.trust)
        .chain(&args.issuer_key_files);
    let sources = sources.chain(&args.log_key_files).chain(&args.since);
    let sources = sources.chain(&args.policy);
    super::stdin_at_most_once(sources.chain(&args.consistency))?;
    let bundles = expand_dirs(&args.bundles)?;
    let paths = check_bundle_paths(&bundles)?;
    let verifier = verifier_of(&args)?;
    let format = match args.format {
        FormatArg::Human => Format::Human,
        FormatArg::Json => Format::Json,
        FormatArg::Junit => Format::Junit,
    };
    let stdout = std::io::stdout().lock();
    let mut renderer = Renderer::new(std::io::BufWriter::new(stdout), format);
    let mut summary = Summary::default();
    renderer.begin()?;
    // Chunks are read on their own thread, one or two ahead of the chunk
    // being verified: a JSON Lines stream is read while the cores verify
    // (a bundle file is read by the core that verifies it).
    let (ahead, chunks) = std::sync::mpsc::sync_channel::<Vec<Input>>(READ_AHEAD);
    let mut inputs = Inputs::new(bundles, paths);
    std::thread::spawn(move || {
        loop {
            let chunk: Vec<Input> = inputs.by_ref().take(CHUNK).collect();
            if chunk.is_empty() || ahead.send(chunk).is_err() {
                return;
            }
        }
    });
    for chunk in chunks {
        // Verified and rendered on every core; only the copy to the output
        // is in order on this thread. A report lives until it is rendered.
        let parts: Vec<(Outcome, std::io::Result<Rendered>)> = chunk
            .par_iter()
            .map(|i| {
                let report = i.verify(&verifier);
                (report.outcome(), Rendered::new(format, &i.name, &report))
            })
            .collect();
        for (outcome, part) in parts {
            summary.add(outcome);
            renderer.push(&part?)?;
        }
    }
    renderer.end(&summary)?;
    Ok(match (summary.outcome(), args.not_evaluated) {
        (Outcome::NotEvaluated, NotEvaluatedArg::Fail) => EXIT_FAILED,
        (Outcome::NotEvaluated, NotEvaluatedArg::Pass) => EXIT_OK,
        (outcome, _) => exit_status(outcome),
    })
}
