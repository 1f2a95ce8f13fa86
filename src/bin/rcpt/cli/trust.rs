//! `rcpt trust new`: write a trust file from verifier keys.
//!
//! Each `--issuer` and `--log` file holds a key in any form a key flag
//! takes ([`super::keyarg`]) that carries a name: the `.vkey` file `rcpt key
//! generate` wrote is the usual one. The file written holds the keys as
//! `{"verifier_key": ...}` entries (spec/verify.md "Trust file").

use super::{EXIT_OK, UsageError, keyarg, write_target};
use clap::Subcommand;
use rcpt::io::{Source, Target};
use rcpt::trust::Trust;

#[derive(Subcommand)]
pub enum TrustCommand {
    /// Write a trust file trusting these issuer and log keys.
    #[command(after_help = "Examples:
  rcpt trust new --issuer gate.vkey --log logkey.vkey -o trust.json
  rcpt verify --trust trust.json bundle.json")]
    New {
        /// A file holding a trusted issuer's key with its name (a .vkey);
        /// repeat for more issuers.
        #[arg(long = "issuer", value_name = "VKEYFILE")]
        issuers: Vec<Source>,
        /// A file holding a trusted log's key, named by the log's origin
        /// (a .vkey); repeat for more logs.
        #[arg(long = "log", value_name = "VKEYFILE")]
        logs: Vec<Source>,
        /// Where to write the trust file ('-': standard output).
        #[arg(short = 'o', long = "out", value_name = "FILE", default_value = "-")]
        out: Target,
    },
}

pub fn run(cmd: TrustCommand) -> anyhow::Result<u8> {
    match cmd {
        TrustCommand::New { issuers, logs, out } => new(&issuers, &logs, &out),
    }
}

fn new(issuers: &[Source], logs: &[Source], out: &Target) -> anyhow::Result<u8> {
    super::stdin_at_most_once(issuers.iter().chain(logs))?;
    if issuers.is_empty() && logs.is_empty() {
        return Err(UsageError(
            "give the keys to trust: --issuer VKEYFILE and --log VKEYFILE (the .vkey files \
             `rcpt key generate` wrote)"
                .into(),
        )
        .into());
    }
    let mut trust = Trust::default();
    for source in issuers {
        let parsed = keyarg::from_file("--issuer", source)?;
        let Some(name) = parsed.name else {
            return Err(UsageError(format!(
                "--issuer {source}: this key carries no name, and a trust file's issuer entry \
                 binds one: give the .vkey file `rcpt key generate` wrote, or a file holding \
                 NAME=KEY (e.g. gate.example/ci=KEY)"
            ))
            .into());
        };
        trust.add_issuer(&name, parsed.key);
    }
    for source in logs {
        let parsed = keyarg::from_file("--log", source)?;
        trust.add_log(keyarg::named_log_key(&format!("--log {source}"), &parsed)?);
    }
    let text = trust
        .to_json()
        .map_err(|e| super::usage("writing the trust file", e))?;
    write_target(out, text.as_bytes())?;
    Ok(EXIT_OK)
}
