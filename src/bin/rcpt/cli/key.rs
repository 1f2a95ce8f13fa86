//! `rcpt key`: generate and show keys.
//!
//! `generate` writes PREFIX.key (PKCS#8 PEM, created with mode 0600, never
//! overwriting) and PREFIX.pub (SPKI PEM), and prints the keyid, the public
//! key and the C2SP verifier key. `show` prints every form a user needs of
//! the public key of a .key or .pub file: the keyid, the raw base64 public
//! key, the trust-file issuer entry, and with `--name` the verifier key and
//! the trust-file log entry (spec/keys.md "Showing a key").

use crate::cli::{EXIT_OK, UsageError, read_input};
use anyhow::Context as _;
use clap::Subcommand;
use rcpt::io::{OutputError, Source};
use rcpt::keys::{self, NoteVerifier, VerifyingKey};
use rcpt::limits::MAX_KEY_FILE_BYTES;
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write PREFIX.key (PKCS#8 PEM, mode 0600) and PREFIX.pub (SPKI PEM).
    #[command(after_help = "Example:
  rcpt key generate --name log.example/receipts --out logkey")]
    Generate {
        /// Key name (for a log key: the log's origin).
        #[arg(long)]
        name: String,
        /// Output path prefix: writes PREFIX.key and PREFIX.pub, never over existing files.
        #[arg(long, value_name = "PREFIX")]
        out: std::path::PathBuf,
        /// Also print the witness (cosignature/v1, type 0x04) verifier key.
        #[arg(long)]
        witness: bool,
    },
    /// Print every form of a key: keyid, public key, trust-file entries, verifier key.
    #[command(after_help = "Examples:
  rcpt key show gate.pub
  rcpt key show logkey.pub --name log.example/receipts")]
    Show {
        /// A .key or .pub PEM file, or '-' for standard input.
        #[arg(value_name = "FILE")]
        file: Source,
        /// Key name: for the verifier key and the trust-file entries (default
        /// for the issuer entry: the file name without its extension).
        #[arg(long)]
        name: Option<String>,
        /// Print the witness (cosignature/v1, type 0x04) verifier key instead.
        #[arg(long, requires = "name")]
        witness: bool,
    },
}

pub fn run(cmd: KeyCommand) -> anyhow::Result<u8> {
    match cmd {
        KeyCommand::Generate { name, out, witness } => generate(&name, &out, witness),
        KeyCommand::Show {
            file,
            name,
            witness,
        } => show(&file, name.as_deref(), witness),
    }
}

/// PREFIX + extension (`log` → `log.key`; `dir/log` → `dir/log.key`).
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn generate(name: &str, out: &Path, witness: bool) -> anyhow::Result<u8> {
    if !keys::is_valid_key_name(name) {
        return Err(UsageError(format!(
            "key name {name:?} is invalid: use a non-empty name without spaces or '+', \
             such as example.com/log"
        ))
        .into());
    }
    if out.as_os_str() == "-" {
        return Err(UsageError(
            "--out is a path prefix for two files; '-' (standard output) cannot hold them".into(),
        )
        .into());
    }
    let key_path = with_suffix(out, ".key");
    let pub_path = with_suffix(out, ".pub");
    let key = keys::generate()?;
    let public = key.verifying_key();
    let verifier = NoteVerifier::new(name, public)?;
    write_new(&key_path, keys::signing_key_to_pem(&key).as_bytes(), 0o600)?;
    write_new(
        &pub_path,
        keys::verifying_key_to_pem(&public).as_bytes(),
        0o644,
    )?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "keyid: {}", keys::keyid(&public))?;
    writeln!(stdout, "public key: {}", keys::public_key_base64(&public))?;
    writeln!(stdout, "verifier key: {verifier}")?;
    if witness {
        writeln!(
            stdout,
            "witness verifier key: {}",
            witness_vkey(name, public)?
        )?;
    }
    writeln!(
        stdout,
        "wrote {} and {}",
        key_path.display(),
        pub_path.display()
    )?;
    Ok(EXIT_OK)
}

/// Create `path` with `mode` from the start; refuse to replace a file.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    rcpt::io::create_new(path, bytes, mode).map_err(|e| match &e {
        OutputError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            anyhow::anyhow!(
                "{} already exists; refusing to overwrite a key (choose another --out or move it away)",
                path.display()
            )
        }
        _ => anyhow::Error::new(e),
    })
}

fn show(file: &Source, name: Option<&str>, witness: bool) -> anyhow::Result<u8> {
    let text = read_input(file, MAX_KEY_FILE_BYTES, "key file")?;
    let text = String::from_utf8(text).map_err(|_| anyhow::anyhow!("{file} is not text"))?;
    let public = public_key_of(&text).with_context(|| format!("reading {file}"))?;
    let verifier = name
        .map(|n| NoteVerifier::new(n, public).map_err(|e| UsageError(e.to_string())))
        .transpose()?;
    let issuer_name = match (name, file) {
        (Some(n), _) => n.to_string(),
        (None, Source::Path(p)) => p
            .file_stem()
            .map_or_else(|| "issuer".into(), |s| s.to_string_lossy().into_owned()),
        (None, Source::Stdin) => "issuer".into(),
    };
    let b64 = keys::public_key_base64(&public);
    let issuer_entry = serde_json::json!({"name": issuer_name, "public_key": b64});
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "keyid: {}", keys::keyid(&public))?;
    writeln!(stdout, "public key: {b64}")?;
    writeln!(stdout, "trust issuer entry: {issuer_entry}")?;
    if let (Some(name), true) = (name, witness) {
        writeln!(
            stdout,
            "witness verifier key: {}",
            witness_vkey(name, public)?
        )?;
    }
    if let (Some(verifier), false) = (verifier, witness) {
        let log_entry = serde_json::json!({"verifier_key": verifier.to_string()});
        writeln!(stdout, "verifier key: {verifier}")?;
        writeln!(stdout, "trust log entry: {log_entry}")?;
    }
    Ok(EXIT_OK)
}

/// The public key of a private-key PEM, or of any public-key text
/// ([`keys::parse_public_key`]).
fn public_key_of(text: &str) -> anyhow::Result<VerifyingKey> {
    if text.trim_start().starts_with("-----BEGIN PRIVATE KEY-----") {
        Ok(keys::signing_key_from_pem(text)?.verifying_key())
    } else {
        Ok(keys::parse_public_key(text)?.key)
    }
}

/// The C2SP cosignature/v1 (type 0x04) verifier key of `public` under `name`.
fn witness_vkey(name: &str, public: VerifyingKey) -> anyhow::Result<String> {
    let v = rcpt::tlog::cosig::WitnessVerifier::new(name, public)
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(v.to_string())
}
