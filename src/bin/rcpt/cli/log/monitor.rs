//! `rcpt log monitor`: watch a log (spec/monitor.md). The library
//! (`rcpt::monitor`) runs the rounds; this file picks the source, prints
//! the events, runs the hook, handles SIGTERM/SIGINT and the exit status.

use crate::cli::{EXIT_FAILED, EXIT_NOT_EVALUATED, EXIT_OK, UsageError};
use anyhow::Context as _;
use rcpt::keys::NoteVerifier;
use rcpt::limits::{MAX_KEY_FILE_BYTES, MAX_POLICY_BYTES};
use rcpt::monitor::{
    Alarm, Event, Monitor, RoundReport, Sink, SinkError, StateDir, StateError, Watch,
};
use rcpt::storage::PublicRead;
use rcpt::storage::posix::PosixStore;
use rcpt::tlog::policy::TlogPolicy;
use rcpt::trust::Trust;
use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `rcpt log monitor` arguments.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("keys").required(true).multiple(true)
    .args(["log_key", "log_key_file", "trust"])))]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(
    after_help = "Alarms stay open until acknowledged: every round while one is open exits 1
and lists it again (`alarm.open`), with its id.

Examples:
  rcpt log monitor http://127.0.0.1:8080 --state mon/ --trust trust.json --watch watch.json
  rcpt log monitor log/ --state mon/ --log-key \"$(cat log.vkey)\" --follow --interval 60s \\
      --hook ./alert.sh
  rcpt log monitor ack --state mon/ 3f9c0d2a71b4e856 --note \"rogue key revoked, INC-42\""
)]
pub struct MonitorArgs {
    #[command(subcommand)]
    action: Option<MonitorAction>,
    /// The log: a directory, an http:// URL, or s3://BUCKET/PREFIX.
    #[arg(required = true)]
    source: Option<String>,
    /// For a log at s3://BUCKET/PREFIX: the S3 endpoint, http://HOST:PORT
    /// (default: $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL).
    #[arg(
        long,
        value_name = "URL",
        help_heading = "Object storage (logs at s3://BUCKET/PREFIX)"
    )]
    endpoint: Option<String>,
    /// The monitor's state directory (created if absent; one monitor at a time).
    #[arg(long, value_name = "DIR", required = true)]
    state: Option<PathBuf>,
    /// The log's key as text (NAME+HASH+KEY, or ORIGIN=KEY; never a file name).
    #[arg(long, value_name = "VKEY", conflicts_with = "log_key_file")]
    log_key: Option<String>,
    /// A file holding the log's key (its .vkey), instead of --log-key.
    #[arg(long, value_name = "FILE")]
    log_key_file: Option<PathBuf>,
    /// A trust file: its log keys check the checkpoint, its named issuers are watched.
    /// The format `rcpt trust new` writes: {"issuers": [{"verifier_key": "NAME+HASH+KEY"}], "logs": [{"verifier_key": "ORIGIN+HASH+KEY"}]}.
    #[arg(long, value_name = "FILE")]
    trust: Option<PathBuf>,
    /// A tlog-policy file: the checkpoint must meet its witness quorum.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The watch file: issuers and their keys, change ids, the authorized list.
    #[arg(long, value_name = "FILE")]
    watch: Option<PathBuf>,
    /// Run a round every --interval until SIGTERM or SIGINT.
    #[arg(long)]
    follow: bool,
    /// Time between rounds with --follow (e.g. 500ms, 60s, 5m).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::cli::units::interval,
          requires = "follow")]
    interval: Duration,
    /// For a log this state directory has not seen: start at its current size.
    #[arg(long)]
    start_at_end: bool,
    /// Run CMD (with sh -c) once per event, RCPT_* variables set; a failure stops the round.
    #[arg(long, value_name = "CMD")]
    hook: Option<String>,
    /// Events as JSON Lines (default) or human lines.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
}

/// `rcpt log monitor ack`.
#[derive(clap::Subcommand)]
enum MonitorAction {
    /// Acknowledge open alarms (kept in the state with when, who and the note).
    Ack(super::ack::AckArgs),
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Json,
}

/// Prints each event and runs the hook.
struct Output {
    format: Format,
    hook: Option<String>,
    event_file: PathBuf,
    /// A progress bar on a terminal's stderr during a long scan.
    bar: Option<indicatif::ProgressBar>,
    /// Event lines not yet written to stdout (written at each flush: at
    /// the latest before the state is saved, so one write per entry
    /// bundle rather than one per event).
    out: Vec<u8>,
    /// A write to stdout failed: nothing more is delivered.
    out_failed: bool,
    /// Ids of the alarms delivered in this round (not listed again after it).
    delivered: std::collections::HashSet<String>,
}

/// Event lines held before they are written out anyway.
const OUTPUT_BUFFER_BYTES: usize = 256 * 1024;

/// Entries a round must have left before it shows a progress bar.
const PROGRESS_FROM: u64 = 10_000;

impl Sink for Output {
    fn emit(&mut self, event: &Event) -> Result<(), SinkError> {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| SinkError {
            event: event.kind.as_str(),
            source,
        };
        let line = match self.format {
            Format::Json => event.to_json(),
            Format::Human => event.to_human(),
        };
        self.out.extend_from_slice(line.as_bytes());
        self.out.push(b'\n');
        if event.kind.is_alarm() {
            self.delivered.insert(event.id.clone());
        }
        match self.hook.clone() {
            Some(cmd) => {
                // The line first, then the hook: what a hook is run for
                // is on stdout already.
                self.flush()?;
                self.run_hook(&cmd, event).map_err(fail)
            }
            None if self.out.len() >= OUTPUT_BUFFER_BYTES => self.flush(),
            None => Ok(()),
        }
    }

    fn hooked(&self) -> bool {
        self.hook.is_some()
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        let fail = |e: std::io::Error| SinkError {
            event: "buffered events",
            source: Box::new(e),
        };
        if self.out_failed {
            return Err(fail(std::io::Error::other(
                "an earlier write to stdout failed",
            )));
        }
        if self.out.is_empty() {
            return Ok(());
        }
        let mut out = std::io::stdout().lock();
        let written = out.write_all(&self.out).and_then(|()| out.flush());
        self.out.clear();
        written.map_err(|e| {
            self.out_failed = true;
            fail(e)
        })
    }

    fn progress(&mut self, done: u64, total: u64) {
        use std::io::IsTerminal as _;
        if self.bar.is_none() && total >= PROGRESS_FROM && std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "checking entries {bar:40} {pos}/{len} ({per_sec}, {eta})",
            ) {
                bar.set_style(style);
            }
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            if done >= total {
                bar.finish_and_clear();
                self.bar = None;
            }
        }
    }
}

impl Output {
    /// After a round: every open alarm it did not deliver, one line each
    /// (`alarm.open`; no hook: the hook ran when it was delivered).
    /// Returns how many it listed.
    fn list_open(&mut self, open: &[Alarm]) -> Result<usize, SinkError> {
        let mut listed = 0;
        for a in open.iter().filter(|a| !self.delivered.contains(&a.id)) {
            listed += 1;
            let since = rcpt::monitor::alarms::utc(a.opened_at);
            let line = match self.format {
                Format::Json => serde_json::json!({
                    "event": "alarm.open", "id": a.id, "opened_at": since,
                    "alarm": a.event.to_value(),
                })
                .to_string(),
                Format::Human => format!("alarm.open since {since}: {}", a.event.to_human()),
            };
            self.out.extend_from_slice(line.as_bytes());
            self.out.push(b'\n');
        }
        self.delivered.clear();
        self.flush().map(|()| listed)
    }

    /// `sh -c CMD` with the RCPT_* environment; its stdout goes to our
    /// stderr (stdout carries the events).
    fn run_hook(
        &self,
        cmd: &str,
        event: &Event,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let json = event.to_json();
        rcpt::io::write_atomic(
            &self.event_file,
            json.as_bytes(),
            rcpt::io::OUTPUT_FILE_MODE,
        )?;
        fn opt(v: &Option<String>) -> &str {
            v.as_deref().unwrap_or_default()
        }
        let index = event.index.map(|i| i.to_string()).unwrap_or_default();
        let mut command = std::process::Command::new("sh");
        command.arg("-c").arg(cmd);
        let mut escaped = Vec::new();
        for (name, value) in [
            ("RCPT_EVENT", event.kind.as_str()),
            ("RCPT_SUMMARY", &event.summary),
            ("RCPT_ORIGIN", &event.origin),
            ("RCPT_INDEX", &index),
            ("RCPT_RECEIPT_ID", opt(&event.receipt_id)),
            ("RCPT_ISSUER", opt(&event.issuer)),
            ("RCPT_VERDICT", opt(&event.verdict)),
            ("RCPT_EVENT_ID", &event.id),
        ] {
            match env_value(value) {
                Cow::Borrowed(v) => command.env(name, v),
                Cow::Owned(v) => {
                    escaped.push(name);
                    command.env(name, v)
                }
            };
        }
        let status = command
            .env("RCPT_ESCAPED", escaped.join(" "))
            .env("RCPT_EVENT_JSON", &self.event_file)
            .stdin(std::process::Stdio::null())
            .stdout(std::io::stderr())
            .status()
            .map_err(|e| format!("running the hook {cmd:?}: {e}"))?;
        if !status.success() {
            return Err(format!("the hook {cmd:?} failed ({status})").into());
        }
        Ok(())
    }
}

/// Longest value of a hook's environment variable passed as it is; a
/// longer one is passed escaped and cut (the event file has it whole).
const HOOK_ENV_MAX_BYTES: usize = 16 * 1024;

/// A value for the hook's environment: as it is, or, when the environment
/// cannot hold it (a NUL) or it is longer than [`HOOK_ENV_MAX_BYTES`],
/// escaped (`rcpt::text`) and cut to that length, ending in `...`. The
/// event file (`RCPT_EVENT_JSON`) always holds the exact text.
fn env_value(value: &str) -> Cow<'_, str> {
    if !value.contains('\0') && value.len() <= HOOK_ENV_MAX_BYTES {
        return Cow::Borrowed(value);
    }
    let mut shown = rcpt::text::escape(value);
    if shown.len() > HOOK_ENV_MAX_BYTES {
        let mut cut = HOOK_ENV_MAX_BYTES - 3;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    Cow::Owned(shown)
}

/// The source named on the command line.
fn open_source(source: &str, endpoint: Option<&str>) -> anyhow::Result<Arc<dyn PublicRead>> {
    if endpoint.is_some() && !source.starts_with("s3://") {
        return Err(UsageError(format!(
            "--endpoint is for a log at s3://BUCKET/PREFIX, not {source}"
        ))
        .into());
    }
    if source.starts_with("http://") || source.starts_with("https://") {
        #[cfg(feature = "net")]
        return Ok(Arc::new(
            rcpt::monitor::http::HttpSource::new(source).map_err(|e| UsageError(e.to_string()))?,
        ));
        #[cfg(not(feature = "net"))]
        return Err(UsageError(format!(
            "{source}: this rcpt was built without HTTP (feature net)"
        ))
        .into());
    }
    if source.starts_with("s3://") {
        let store =
            super::store::store_at(Path::new(source), endpoint, super::args::READ_LEASE_TTL)?;
        return Ok(store);
    }
    let dir = Path::new(source);
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "{source}: not a directory, an http:// URL or an s3:// location"
        ))
        .into());
    }
    Ok(Arc::new(PosixStore::new(dir)))
}

/// The log keys and the watch list from the flags.
fn keys_and_watch(args: &MonitorArgs) -> anyhow::Result<(Vec<NoteVerifier>, Watch)> {
    let mut logs = Vec::new();
    if args.log_key.is_some() || args.log_key_file.is_some() {
        let file = args.log_key_file.clone().map(rcpt::io::Source::Path);
        logs.push(crate::cli::keyarg::log_key(
            "--log-key",
            args.log_key.as_deref(),
            file.as_ref(),
        )?);
    }
    let mut watch = match &args.watch {
        Some(path) => Watch::read(path)
            .map_err(|e| UsageError(crate::cli::render_error(&anyhow::Error::new(e))))?,
        None => Watch::default(),
    };
    if let Some(path) = &args.trust {
        let bytes = rcpt::io::read_path(path, MAX_KEY_FILE_BYTES)
            .with_context(|| format!("reading the trust file {}", path.display()))?;
        let trust = Trust::from_json(&bytes).map_err(|e| crate::cli::usage(path.display(), e))?;
        logs.extend(trust.logs.iter().cloned());
        watch.add_trust(&trust);
    }
    if logs.is_empty() {
        return Err(
            UsageError("no log key: give --log-key, or a trust file with \"logs\"".into()).into(),
        );
    }
    Ok((logs, watch))
}

fn read_policy(path: &Path) -> anyhow::Result<TlogPolicy> {
    let bytes = rcpt::io::read_path(path, MAX_POLICY_BYTES)
        .with_context(|| format!("reading the policy {}", path.display()))?;
    Ok(TlogPolicy::parse(&bytes).map_err(|e| UsageError(format!("{}: {e}", path.display())))?)
}

/// `rcpt log monitor`.
pub fn run(args: MonitorArgs) -> anyhow::Result<u8> {
    if let Some(MonitorAction::Ack(ack)) = args.action {
        return super::ack::run(ack);
    }
    let (Some(source), Some(state)) = (&args.source, &args.state) else {
        return Err(UsageError("give SOURCE and --state DIR".into()).into());
    };
    let (logs, watch) = keys_and_watch(&args)?;
    let policy = args.policy.as_deref().map(read_policy).transpose()?;
    let source = open_source(source, args.endpoint.as_deref())?;
    let state = match StateDir::open(state) {
        Ok(s) => s,
        Err(e @ StateError::Locked { .. }) => {
            let _ = writeln!(std::io::stderr(), "rcpt: error: {e}");
            return Ok(EXIT_NOT_EVALUATED);
        }
        Err(e) => return Err(e.into()),
    };
    let mut output = Output {
        format: args.format,
        hook: args.hook.clone(),
        event_file: state.path().join("tmp").join("event.json"),
        bar: None,
        out: Vec::new(),
        out_failed: false,
        delivered: std::collections::HashSet::new(),
    };
    let monitor = Monitor::new(source, logs, policy, watch, state, args.start_at_end);
    let stop = stop_flag();
    let mut worst = Rank::Ok;
    loop {
        let started = Instant::now();
        let mut report = monitor.round(&mut output, &stop);
        if let Some(bar) = output.bar.take() {
            bar.finish_and_clear();
        }
        let earlier = output.list_open(&report.open).unwrap_or_else(|e| {
            report.error.get_or_insert(e.into());
            0
        });
        print_summary(&report, earlier, started.elapsed());
        worst = worst.max(status_of(&report));
        if !args.follow || stop.load(Ordering::Relaxed) {
            break;
        }
        let until = Instant::now() + args.interval;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(args.interval));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(match worst {
        Rank::Ok => EXIT_OK,
        Rank::Incomplete => EXIT_NOT_EVALUATED,
        Rank::Alarm => EXIT_FAILED,
    })
}

/// How a round ended, least serious first: an alarm outranks a round that
/// could not complete.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Ok,
    Incomplete,
    Alarm,
}

fn status_of(report: &RoundReport) -> Rank {
    if report.alarms > 0 || !report.open.is_empty() {
        Rank::Alarm
    } else if report.error.is_some() {
        Rank::Incomplete
    } else {
        Rank::Ok
    }
}

fn print_summary(r: &RoundReport, earlier: usize, took: Duration) {
    let origin = rcpt::text::escape(r.origin.as_deref().unwrap_or("?"));
    use crate::cli::units::count;
    let mut line = format!(
        "rcpt log monitor: {origin}: size {} -> {}, {} checked ({} concern nothing watched), \
         {}, {}, {:.1} s",
        r.old_size,
        r.new_size,
        count(r.scanned, "entry", "entries"),
        r.quiet,
        count(r.events, "event", "events"),
        count(r.alarms, "alarm", "alarms"),
        took.as_secs_f64()
    );
    if !r.open.is_empty() {
        line.push_str(&format!(
            "; {} open ({earlier} from earlier rounds): `rcpt log monitor ack --state DIR ID... \
             --note TEXT` closes them",
            count(r.open.len() as u64, "alarm", "alarms")
        ));
    }
    if r.stopped {
        line.push_str("; stopped by a signal, state saved");
    }
    if let Some(e) = &r.error {
        let why = rcpt::io::error_chain(e);
        line.push_str(&format!("; incomplete: {}", rcpt::text::Escaped(&why)));
    }
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Set once SIGTERM or SIGINT arrives (feature `net`: tokio's signal
/// handling; without it the default action ends the process, which the
/// state survives too).
fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    #[cfg(feature = "net")]
    {
        let set = Arc::clone(&flag);
        let (ready, wait) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("rcpt-signals".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    let _ = ready.send(());
                    return;
                };
                rt.block_on(async move {
                    use tokio::signal::unix::{SignalKind, signal};
                    let (Ok(mut term), Ok(mut int)) = (
                        signal(SignalKind::terminate()),
                        signal(SignalKind::interrupt()),
                    ) else {
                        let _ = ready.send(());
                        return;
                    };
                    let _ = ready.send(());
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    set.store(true, Ordering::Relaxed);
                });
            });
        if spawned.is_ok() {
            let _ = wait.recv();
        }
    }
    flag
}

#[cfg(test)]
mod tests {
    use super::{Cow, HOOK_ENV_MAX_BYTES, env_value};

    #[test]
    fn hook_values_the_environment_cannot_hold_are_escaped_and_cut() {
        assert!(matches!(env_value("gate-a\nx"), Cow::Borrowed("gate-a\nx")));
        assert_eq!(env_value("a\0b"), "a\\x00b");
        let long = "é".repeat(HOOK_ENV_MAX_BYTES);
        let shown = env_value(&long);
        assert!(shown.len() <= HOOK_ENV_MAX_BYTES && shown.ends_with("..."));
        assert!(long.starts_with(shown.trim_end_matches("...")));
        let exact = "x".repeat(HOOK_ENV_MAX_BYTES);
        assert!(matches!(env_value(&exact), Cow::Borrowed(_)));
    }
}
