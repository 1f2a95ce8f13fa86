//! `rcpt key`: generate and show keys.
//!
//! `generate` writes PREFIX.key (PKCS#8 PEM, created with mode 0600, never
//! overwriting) and PREFIX.pub (SPKI PEM), and prints the keyid and the
//! C2SP verifier key. `show` prints the keyid of a .key or .pub file, and
//! with `--name` its verifier key.

use crate::cli::{EXIT_OK, UsageError};
use anyhow::Context as _;
use clap::Subcommand;
use rcpt::keys::{self, NoteVerifier, VerifyingKey};
use std::io::Write as _;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write PREFIX.key (PKCS#8 PEM, mode 0600) and PREFIX.pub (SPKI PEM).
    Generate {
        /// Key name (for a log key: the log's origin).
        #[arg(long)]
        name: String,
        /// Output path prefix.
        #[arg(long)]
        out: std::path::PathBuf,
        /// Also print the witness (cosignature/v1, type 0x04) verifier key.
        #[arg(long)]
        witness: bool,
    },
    /// Print the keyid of a .key or .pub file (and the verifier key with --name).
    Show {
        /// A .key or .pub PEM file.
        file: std::path::PathBuf,
        /// Key name, for the verifier key.
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
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow::anyhow!(
                "{} already exists; refusing to overwrite a key (choose another --out or move it away)",
                path.display()
            )
        } else {
            anyhow::anyhow!("cannot create {}: {e}", path.display())
        }
    })?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

fn show(file: &Path, name: Option<&str>, witness: bool) -> anyhow::Result<u8> {
    let text = keys::read_key_file(file)?;
    let public = public_key_of(&text).with_context(|| format!("reading {}", file.display()))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "keyid: {}", keys::keyid(&public))?;
    if let (Some(name), true) = (name, witness) {
        writeln!(
            stdout,
            "witness verifier key: {}",
            witness_vkey(name, public)?
        )?;
    } else if let Some(name) = name {
        let verifier = NoteVerifier::new(name, public).map_err(|e| UsageError(e.to_string()))?;
        writeln!(stdout, "verifier key: {verifier}")?;
    }
    Ok(EXIT_OK)
}

/// The public key of a private-key PEM, or the key of a public-key text.
fn public_key_of(text: &str) -> anyhow::Result<VerifyingKey> {
    if text.contains("-----BEGIN PRIVATE KEY-----") {
        Ok(keys::signing_key_from_pem(text)?.verifying_key())
    } else {
        Ok(keys::verifying_key_from_text(text)?)
    }
}

/// The C2SP cosignature/v1 (type 0x04) verifier key of `public` under `name`.
fn witness_vkey(name: &str, public: VerifyingKey) -> anyhow::Result<String> {
    let v =
        rcpt::cosig::WitnessVerifier::new(name, public).map_err(|e| UsageError(e.to_string()))?;
    Ok(v.to_string())
}
