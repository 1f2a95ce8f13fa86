//! `rcpt key`: generate and show keys.
//!
//! `generate` writes PREFIX.key (PKCS#8 PEM, created with mode 0600, never
//! overwriting), PREFIX.pub (SPKI PEM) and PREFIX.vkey (the C2SP verifier
//! key line: the named public key), and prints the keyid, the public key
//! and the verifier key. `show` prints the forms of a key: the keyid, the
//! raw base64 public key, and when the key has a name (a .vkey carries
//! one; `--name` gives one to a PEM) the verifier key and the trust-file
//! entries (spec/keys.md "Showing a key"). No name is taken from a file name.

use crate::cli::{EXIT_OK, UsageError, read_input};
use anyhow::Context as _;
use clap::Subcommand;
use rcpt::io::{OutputError, Source};
use rcpt::keys::{self, NoteVerifier, VerifyingKey};
use rcpt::limits::MAX_KEY_FILE_BYTES;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Write PREFIX.key (PKCS#8 PEM, mode 0600), PREFIX.pub (SPKI PEM) and
    /// PREFIX.vkey (the named verifier key, one line).
    #[command(after_help = "Examples:
  rcpt key generate --name gate.example/ci --prefix gate
  rcpt key generate --name log.example/receipts --prefix logkey
  rcpt verify --issuer-key-file gate.vkey --log-key-file logkey.vkey bundle.json")]
    Generate {
        /// Key name: for an issuer key the payloads' `issuer`, for a log key
        /// the log's origin. It is written into PREFIX.vkey.
        #[arg(long)]
        name: String,
        /// Output path prefix: writes PREFIX.key, PREFIX.pub and PREFIX.vkey,
        /// never over existing files.
        #[arg(long = "prefix", alias = "out", value_name = "PREFIX")]
        out: std::path::PathBuf,
        /// Also print the witness (cosignature/v1, type 0x04) verifier key.
        #[arg(long)]
        witness: bool,
    },
    /// Print the forms of a public key: keyid, public key, verifier key, trust-file entries.
    #[command(after_help = "Examples:
  rcpt key show gate.vkey
  rcpt key show logkey.pub --name log.example/receipts --format vkey
  rcpt key show gate.vkey --format trust-entry")]
    Show {
        /// A .vkey, .pub or .key file, or '-' for standard input: any form a
        /// key flag takes (NAME+HASH+KEY, NAME=KEY, raw base64, PEM).
        #[arg(value_name = "FILE")]
        file: Source,
        /// Key name, for a key that carries none (a PEM or raw key); a
        /// .vkey carries its own. Never taken from the file name.
        #[arg(long)]
        name: Option<String>,
        /// Print the witness (cosignature/v1, type 0x04) verifier key instead.
        #[arg(long)]
        witness: bool,
        /// What to print: every form (human), one JSON object (json), only
        /// the verifier key line (vkey), or only the trust-file entry
        /// {"verifier_key": ...} (trust-entry).
        #[arg(long, value_enum, default_value = "human")]
        format: ShowFormat,
    },
}

/// `key show --format`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    /// Every form, one `label: value` line each.
    Human,
    /// One JSON object with every form.
    Json,
    /// The verifier key line only (what a .vkey file holds).
    Vkey,
    /// The trust-file entry only, for "issuers" or "logs".
    TrustEntry,
}

pub fn run(cmd: KeyCommand) -> anyhow::Result<u8> {
    match cmd {
        KeyCommand::Generate { name, out, witness } => generate(&name, &out, witness),
        KeyCommand::Show {
            file,
            name,
            witness,
            format,
        } => show(&file, name.as_deref(), witness, format),
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
            "--prefix names three files; '-' (standard output) cannot hold them".into(),
        )
        .into());
    }
    let key_path = with_suffix(out, ".key");
    let pub_path = with_suffix(out, ".pub");
    let vkey_path = with_suffix(out, ".vkey");
    // All three names are looked at first, so an existing one leaves no
    // half-written set behind.
    for path in [&key_path, &pub_path, &vkey_path] {
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(exists(path));
        }
    }
    let key = keys::generate()?;
    let public = key.verifying_key();
    let verifier = NoteVerifier::new(name, public)?;
    write_new(&key_path, keys::signing_key_to_pem(&key).as_bytes(), 0o600)?;
    write_new(
        &pub_path,
        keys::verifying_key_to_pem(&public).as_bytes(),
        0o644,
    )?;
    write_new(&vkey_path, format!("{verifier}\n").as_bytes(), 0o644)?;
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
        "wrote {}, {} and {}",
        key_path.display(),
        pub_path.display(),
        vkey_path.display()
    )?;
    Ok(EXIT_OK)
}

/// Create `path` with `mode` from the start (`O_EXCL | O_NOFOLLOW`, synced:
/// [`rcpt::io::create_new`]); refuse to replace a file.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    rcpt::io::create_new(path, bytes, mode).map_err(|e| match &e {
        OutputError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            exists(path)
        }
        _ => anyhow::Error::new(e),
    })
}

/// The error for a key file that is already there.
fn exists(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} already exists; refusing to overwrite a key (choose another --out or move it away)",
        path.display()
    )
}

fn show(
    file: &Source,
    name: Option<&str>,
    witness: bool,
    format: ShowFormat,
) -> anyhow::Result<u8> {
    let text = read_input(file, MAX_KEY_FILE_BYTES, "key file")?;
    let text = String::from_utf8(text).map_err(|_| anyhow::anyhow!("{file} is not text"))?;
    let (public, carried) = public_key_of(&text).with_context(|| format!("reading {file}"))?;
    let name = match (name, carried.as_deref()) {
        (Some(n), Some(c)) if n != c => {
            return Err(UsageError(format!(
                "{file} names its key {c:?}; --name {n:?} differs (a verifier key's name is \
                 part of its hash: leave --name out)"
            ))
            .into());
        }
        (Some(n), _) => Some(n.to_string()),
        (None, c) => c.map(str::to_string),
    };
    if witness && name.is_none() {
        return Err(UsageError(format!(
            "--witness prints the witness verifier key, which carries a name: {file} names none, \
             so add --name NAME (the witness's name in the logs' policies)"
        ))
        .into());
    }
    let forms = Forms::new(public, name, witness)?;
    let mut stdout = std::io::stdout().lock();
    match format {
        ShowFormat::Human => forms.human(&mut stdout)?,
        ShowFormat::Json => writeln!(stdout, "{}", forms.json())?,
        ShowFormat::Vkey => writeln!(stdout, "{}", forms.vkey_line(file)?)?,
        ShowFormat::TrustEntry if witness => {
            return Err(UsageError(
                "a witness key has no trust-file entry: it goes in a policy's `witness NAME \
                 VKEY URL` line (use --format vkey)"
                    .into(),
            )
            .into());
        }
        ShowFormat::TrustEntry => {
            let vkey = forms.vkey_line(file)?;
            writeln!(stdout, "{}", serde_json::json!({"verifier_key": vkey}))?;
        }
    }
    Ok(EXIT_OK)
}

/// Every form of one public key, with its name when it has one.
struct Forms {
    public: VerifyingKey,
    name: Option<String>,
    /// The note verifier key (type 0x01), or with --witness the
    /// cosignature one (0x04); `None` without a name.
    vkey: Option<String>,
    witness: bool,
}

impl Forms {
    fn new(public: VerifyingKey, name: Option<String>, witness: bool) -> anyhow::Result<Forms> {
        let vkey = match &name {
            Some(n) if witness => Some(witness_vkey(n, public)?),
            Some(n) => Some(
                NoteVerifier::new(n, public)
                    .map_err(|e| UsageError(e.to_string()))?
                    .to_string(),
            ),
            None => None,
        };
        Ok(Forms {
            public,
            name,
            vkey,
            witness,
        })
    }

    /// The verifier key line, or an error that says how to name the key.
    fn vkey_line(&self, file: &Source) -> anyhow::Result<&str> {
        self.vkey.as_deref().ok_or_else(|| {
            UsageError(format!(
                "{file} carries no name, and a verifier key needs one: add --name NAME (the \
                 issuer's name, or the log's origin), or show the .vkey file instead"
            ))
            .into()
        })
    }

    fn human(&self, out: &mut impl Write) -> std::io::Result<()> {
        let b64 = keys::public_key_base64(&self.public);
        writeln!(out, "keyid: {}", keys::keyid(&self.public))?;
        writeln!(out, "public key: {b64}")?;
        let (Some(name), Some(vkey)) = (&self.name, &self.vkey) else {
            return writeln!(
                out,
                "name: none (a PEM or raw key carries no name: add --name NAME for the \
                 verifier key and the trust-file entries)"
            );
        };
        if self.witness {
            return writeln!(out, "witness verifier key: {vkey}");
        }
        let issuer_entry = serde_json::json!({"name": name, "public_key": b64});
        writeln!(out, "trust issuer entry: {issuer_entry}")?;
        writeln!(out, "verifier key: {vkey}")?;
        let log_entry = serde_json::json!({"verifier_key": vkey});
        writeln!(out, "trust log entry: {log_entry}")
    }

    fn json(&self) -> serde_json::Value {
        let label = if self.witness {
            "witness_verifier_key"
        } else {
            "verifier_key"
        };
        let entry = (!self.witness)
            .then_some(self.vkey.as_ref())
            .flatten()
            .map(|v| serde_json::json!({"verifier_key": v}));
        serde_json::json!({
            "keyid": keys::keyid(&self.public),
            "public_key": keys::public_key_base64(&self.public),
            "name": self.name,
            label: self.vkey,
            "trust_entry": entry,
        })
    }
}

/// The public key of a private-key PEM, or of any key-flag text
/// ([`keys::parse_key_arg`]), with the name it carries.
fn public_key_of(text: &str) -> anyhow::Result<(VerifyingKey, Option<String>)> {
    if text.trim_start().starts_with("-----BEGIN PRIVATE KEY-----") {
        Ok((keys::signing_key_from_pem(text)?.verifying_key(), None))
    } else {
        let parsed = keys::parse_key_arg(text)?;
        Ok((parsed.key, parsed.name))
    }
}

/// The C2SP cosignature/v1 (type 0x04) verifier key of `public` under `name`.
fn witness_vkey(name: &str, public: VerifyingKey) -> anyhow::Result<String> {
    let v = rcpt::tlog::cosig::WitnessVerifier::new(name, public)
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(v.to_string())
}
