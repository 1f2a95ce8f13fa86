//! keyarg: the one way every command reads a public key given on the
//! command line (spec/keys.md "Giving a key").
//!
//! Text flags (`--issuer-key`, `--log-key`) take key text and never read a
//! file; their `-file` twins read one file. Both accept every form
//! ([`keys::parse_key_arg`]): a verifier key `NAME+HASH+KEY`, `NAME=KEY`
//! (raw base64 or SPKI PEM), or an unnamed raw base64 key or SPKI PEM.
//! Nothing is guessed from a file name. A log key needs its name (the
//! log's origin); an issuer key without one binds no issuer name.

use super::{UsageError, read_input, usage};
use rcpt::io::Source;
use rcpt::keys::{self, NoteVerifier, PublicKeyText};
use rcpt::limits::MAX_KEY_FILE_BYTES;
use std::path::Path;

/// A key given as text (`flag` names it in errors). When the text is not a
/// key but names a file, the error says to use the `-file` twin.
pub fn from_text(flag: &str, text: &str) -> anyhow::Result<PublicKeyText> {
    keys::parse_key_arg(text).map_err(|e| {
        let hint = if Path::new(text.trim()).exists() {
            format!(
                "; \"{}\" names a file, and {flag} never reads files: pass it with {flag}-file",
                text.trim()
            )
        } else {
            String::new()
        };
        let what = format!("{flag} \"{}\"", shorten(text));
        if hint.is_empty() {
            usage(what, e)
        } else {
            // The hint goes last, after the whole cause.
            UsageError(format!("{what}: {}{hint}", rcpt::io::error_chain(&e))).into()
        }
    })
}

/// A key read from the file `source` (`flag` names it in errors).
pub fn from_file(flag: &str, source: &Source) -> anyhow::Result<PublicKeyText> {
    let bytes = read_input(source, MAX_KEY_FILE_BYTES, &format!("{flag} file"))
        .map_err(|e| UsageError(super::render_error(&e)))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        UsageError(format!(
            "{flag} {source}: not text (give a .vkey or .pub file)"
        ))
    })?;
    keys::parse_key_arg(&text).map_err(|e| usage(format!("{flag} {source}"), e))
}

/// A log key from `--log-key TEXT` or `--log-key-file FILE` (one of them;
/// `flag` is the text flag's name). It must carry a name.
pub fn log_key(
    flag: &str,
    text: Option<&str>,
    file: Option<&Source>,
) -> anyhow::Result<NoteVerifier> {
    let (parsed, what) = match (text, file) {
        (Some(t), None) => (from_text(flag, t)?, format!("{flag} \"{}\"", shorten(t))),
        (None, Some(f)) => (
            from_file(&format!("{flag}-file"), f)?,
            format!("{flag}-file {f}"),
        ),
        _ => {
            return Err(UsageError(format!(
                "give the log's key: {flag} VKEY or {flag}-file FILE (the .vkey file `rcpt key \
                 generate` wrote)"
            ))
            .into());
        }
    };
    named_log_key(&what, &parsed)
}

/// The verifier key of a log key already read; `what` names it in errors.
pub fn named_log_key(what: &str, parsed: &PublicKeyText) -> anyhow::Result<NoteVerifier> {
    parsed.note_verifier().map_err(|e| usage(what, e))
}

/// Key text for a message: a PEM's first line, a long text cut.
fn shorten(text: &str) -> String {
    let text = text.trim();
    let first = text.lines().next().unwrap_or_default();
    if first.len() < text.len() {
        return format!("{first}...");
    }
    text.to_string()
}

/// The name in the `.vkey` beside a private key file (`PREFIX.key` →
/// `PREFIX.vkey`), when that file exists, holds a verifier key, and is of
/// the same key: what the key is for. `None` otherwise (no guess is made).
pub fn vkey_name_beside(key_path: &Path, public: &keys::VerifyingKey) -> Option<String> {
    if key_path.extension()? != "key" {
        return None;
    }
    let text = keys::read_key_file(&key_path.with_extension("vkey")).ok()?;
    let v = NoteVerifier::parse(&text).ok()?;
    (v.key == *public).then_some(v.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pem_is_named_by_its_first_line_only() {
        assert_eq!(
            shorten("-----BEGIN PUBLIC KEY-----\nMCow\n-----END PUBLIC KEY-----\n"),
            "-----BEGIN PUBLIC KEY-----..."
        );
        assert_eq!(shorten(" abc \n"), "abc");
    }
}
