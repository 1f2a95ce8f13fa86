//! Where `--log` sends a gate receipt: a log's store (through its intake)
//! or a log service (submitted to, checked under its key), and the hand-off.

use super::{CheckArgs, ServiceKey};
use crate::cli::UsageError;
use rcpt::log::intake::{self, Intake, Location, StoreSettings};
use rcpt::receipt::dsse::Envelope;
use rcpt::storage::Store;
use std::sync::Arc;

/// Where `--log` sends the receipt.
pub(super) enum LogTarget {
    /// A log's store (a directory or `s3://BUCKET/PREFIX`): appended to
    /// through its intake, with the key the log records.
    Store(Arc<dyn Store>),
    /// A log service: submitted to, the answer checked under its key.
    #[cfg(feature = "net")]
    Url(String, Box<rcpt::keys::NoteVerifier>),
}

pub(super) fn log_target(args: &CheckArgs) -> anyhow::Result<Option<LogTarget>> {
    log_target_of(&args.log, &args.service)
}

pub(super) fn log_target_of(
    log: &Option<String>,
    service: &ServiceKey,
) -> anyhow::Result<Option<LogTarget>> {
    let Some(log) = log else {
        return Ok(None);
    };
    let location = Location::parse(log);
    if location.is_service() {
        return service_target(log, service).map(Some);
    }
    let store = location
        .store(&StoreSettings::default())
        .map_err(crate::cli::log::endpoint_from_env)?;
    // Refuse a log that cannot take the receipt before any check runs.
    intake::probe(Arc::clone(&store))?;
    Ok(Some(LogTarget::Store(store)))
}

/// A log service's URL and its key (`--log-key`, `--log-key-file`).
#[cfg(feature = "net")]
fn service_target(url: &str, service: &ServiceKey) -> anyhow::Result<LogTarget> {
    let text = match (&service.log_key, &service.log_key_file) {
        (Some(t), None) => t.clone(),
        (None, Some(f)) => String::from_utf8_lossy(&crate::cli::read_input(
            &rcpt::io::Source::Path(f.clone()),
            rcpt::limits::MAX_KEY_FILE_BYTES,
            "log key file",
        )?)
        .into_owned(),
        _ => {
            let msg = "--log URL needs the log's key: --log-key VKEY or --log-key-file FILE";
            return Err(UsageError(msg.into()).into());
        }
    };
    let key = rcpt::keys::NoteVerifier::parse(&text)
        .map_err(|e| UsageError(format!("--log-key: {e}")))?;
    Ok(LogTarget::Url(url.to_string(), Box::new(key)))
}

/// Without `net` there is no HTTP client: a service's URL is refused.
#[cfg(not(feature = "net"))]
fn service_target(url: &str, _: &ServiceKey) -> anyhow::Result<LogTarget> {
    Err(UsageError(no_net(url)).into())
}

/// The refusal of a log service's URL by a build without `net`.
#[cfg(not(feature = "net"))]
pub(super) fn no_net(url: &str) -> String {
    format!(
        "--log {}: a log service is reached over HTTP, and this rcpt is built without \
         feature `net`; give a log directory (object storage needs `net` too)",
        rcpt::text::Escaped(url)
    )
}

/// Hand the envelope to the log: through its intake (a directory or a
/// bucket), or submitted to a service; the bundle JSON.
pub(super) fn publish(target: &LogTarget, envelope: &Envelope) -> anyhow::Result<String> {
    let json = envelope.to_json();
    match target {
        LogTarget::Store(store) => {
            let mut intake = Intake::open(Arc::clone(store), intake::Options::recorded(true))?;
            let bundle = intake.append_for_bundle(json.as_bytes())?;
            let origin = rcpt::text::Escaped(&bundle.log.origin);
            eprintln!("log: {origin} index {}", bundle.log.index);
            let mut text = bundle.to_json();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            Ok(text)
        }
        #[cfg(feature = "net")]
        LogTarget::Url(url, key) => {
            let client =
                rcpt::net::client::Client::new(url).map_err(|e| UsageError(e.to_string()))?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let logged = runtime.block_on(rcpt::net::client::submit::submit(
                &client,
                json.into_bytes().into(),
                key,
            ))?;
            eprintln!(
                "log: {} index {}",
                rcpt::text::Escaped(&logged.bundle.log.origin),
                logged.bundle.log.index
            );
            Ok(String::from_utf8_lossy(&logged.json).into_owned())
        }
    }
}
