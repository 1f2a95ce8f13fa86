//! `rcpt log init`: create a log (directory or s3://) with its key and accepted issuers.

use super::args::EndpointArg;
use crate::cli::EXIT_OK;
use anyhow::Context;
use rcpt::keys::SigningKey;
use rcpt::limits::MAX_KEY_FILE_BYTES;
use rcpt::log::admit::AcceptedIssuers;
use rcpt::log::{InitOptions, Log};
use std::io::Write;
use std::path::Path;

/// Read a PKCS#8 PEM signing key.
pub(super) fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let pem = rcpt::keys::read_key_file(path)?;
    rcpt::keys::signing_key_from_pem(&pem)
        .with_context(|| format!("reading the private key {}", path.display()))
}

/// Read a trust file and keep its issuers as the accepted ones.
pub(super) fn read_accepted(path: &Path) -> anyhow::Result<AcceptedIssuers> {
    // The one reader: a FIFO or a device is refused at once (exit 2).
    let bytes = rcpt::io::read_path(path, MAX_KEY_FILE_BYTES)
        .with_context(|| format!("reading the trust file {}", path.display()))?;
    AcceptedIssuers::from_json(&bytes).with_context(|| format!("trust file {}", path.display()))
}

pub(super) fn init(
    dir: &Path,
    at: &EndpointArg,
    origin: &str,
    key_path: &Path,
    trust: Option<&Path>,
) -> anyhow::Result<u8> {
    let key = read_key(key_path)?;
    let beside = crate::cli::keyarg::vkey_name_beside(key_path, &key.verifying_key());
    if let Some(name) = beside.filter(|n| n != origin) {
        eprintln!(
            "rcpt: warning: {} is the key of {name:?} (its .vkey says so), not of a log named \
             {origin:?}: readers given that .vkey will not trust this log's checkpoints; use \
             the log's own key (rcpt key generate --name {origin} --prefix logkey)",
            key_path.display()
        );
    }
    let accepted = trust.map(read_accepted).transpose()?;
    let log = if dir.to_str().is_some_and(|d| d.starts_with("s3://")) {
        // The key file's path is recorded as given, made absolute: it is
        // on this machine, the log is not.
        let key_file = std::path::absolute(key_path)
            .with_context(|| format!("reading the path {}", key_path.display()))?;
        Log::init_store(
            at.store(dir)?,
            origin,
            &key,
            Some(key_file),
            accepted.as_ref(),
        )?
    } else {
        at.store(dir)?; // refuses --endpoint with a directory
        let opts = InitOptions {
            key_file: Some(key_path),
            accepted: accepted.as_ref(),
        };
        Log::create_with(dir, origin, &key, opts)?
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "initialised log {} at {}",
        log.origin(),
        log.location()
    )?;
    writeln!(out, "verifier key: {}", log.verifier())?;
    match &accepted {
        Some(a) => writeln!(out, "accepted issuers: {}", issuer_names(a))?,
        None => writeln!(
            out,
            "accepted issuers: none (envelope signatures will not be checked)"
        )?,
    }
    Ok(EXIT_OK)
}

/// The accepted issuers' names, comma-separated.
pub(super) fn issuer_names(accepted: &AcceptedIssuers) -> String {
    let names: Vec<&str> = accepted
        .issuers()
        .iter()
        .filter_map(|i| i.name.as_deref())
        .collect();
    names.join(", ")
}
