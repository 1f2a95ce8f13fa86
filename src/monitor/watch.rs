//! watch: what a monitor looks for (spec/monitor.md "Watch file").
//!
//! ```json
//! {"issuers": [{"name": "gate-a", "keys": ["<base64 raw key>", "<PEM>", "<vkey>"]}],
//!  "change_ids": ["blake3:..."],
//!  "authorized": ["blake3:..."]}            // or "authorized_file": "issued.txt"
//! ```
//!
//! Issuers of a trust file are watched as well ([`Watch::add_trust`]).
//! Every file is read through [`crate::io`], capped.

use crate::digest::Digest;
use crate::io::InputError;
use crate::keys::{self, KeyError, VerifyingKey};
use crate::limits::{MAX_AUTHORIZED_FILE_BYTES, MAX_JSON_DEPTH, MAX_WATCH_FILE_BYTES};
use crate::receipt::dsse::TrustedKeys;
use crate::trust::Trust;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// One watched issuer name and the keys that may sign for it.
#[derive(Clone, Debug)]
pub(crate) struct WatchedIssuer {
    pub(crate) name: String,
    pub(crate) keys: Vec<VerifyingKey>,
    pub(crate) trusted: TrustedKeys,
}

/// Everything a monitor watches.
#[derive(Clone, Debug, Default)]
pub struct Watch {
    pub(crate) issuers: Vec<WatchedIssuer>,
    pub(crate) change_ids: HashSet<Digest>,
    /// `None`: no authorized list given (every signed receipt is matched).
    pub(crate) authorized: Option<HashSet<String>>,
}

/// Why a watch file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// A file could not be read.
    #[error("reading {what}")]
    Read {
        /// Which file.
        what: String,
        /// The cause.
        #[source]
        source: InputError,
    },
    /// Not the watch-file JSON shape.
    #[error("the watch file is not valid")]
    Json(#[source] crate::strictjson::StrictJsonError),
    /// A key that is not a public key.
    #[error("issuer {name:?}, key {index}")]
    Key {
        /// The issuer.
        name: String,
        /// Position in its `keys`.
        index: usize,
        /// The cause.
        #[source]
        source: KeyError,
    },
    /// A key whose own name (a verifier key, or `NAME=KEY`) is not the
    /// issuer it is listed under.
    #[error("issuer {name:?}, key {index}: the key names {inner:?}, not {name:?}")]
    KeyName {
        /// The issuer.
        name: String,
        /// Position in its `keys`.
        index: usize,
        /// The name the key text carries.
        inner: String,
    },
    /// A change id that is not a digest.
    #[error("change_ids[{index}] {text:?} is not a digest (blake3:<hex> or sha256:<hex>)")]
    ChangeId {
        /// Position.
        index: usize,
        /// The text.
        text: String,
    },
    /// Both `authorized` and `authorized_file`.
    #[error("the watch file gives both \"authorized\" and \"authorized_file\"; give one")]
    TwoLists,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchFile {
    #[serde(default)]
    issuers: Vec<IssuerEntry>,
    #[serde(default)]
    change_ids: Vec<String>,
    authorized: Option<Vec<String>>,
    authorized_file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IssuerEntry {
    name: String,
    keys: Vec<String>,
}

impl Watch {
    /// Read a watch file; an `authorized_file` is relative to its directory.
    pub fn read(path: &Path) -> Result<Watch, WatchError> {
        let bytes = crate::io::read_path(path, MAX_WATCH_FILE_BYTES).map_err(|source| {
            WatchError::Read {
                what: format!("the watch file {}", path.display()),
                source,
            }
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Watch::from_json(&bytes, base)
    }

    /// Parse a watch file whose relative paths start at `base`.
    pub fn from_json(bytes: &[u8], base: &Path) -> Result<Watch, WatchError> {
        let file: WatchFile =
            crate::strictjson::from_slice(bytes, MAX_JSON_DEPTH).map_err(WatchError::Json)?;
        let mut watch = Watch::default();
        for entry in file.issuers {
            let mut keys = Vec::with_capacity(entry.keys.len());
            for (index, text) in entry.keys.iter().enumerate() {
                // Every form `--issuer-key` takes (spec/keys.md "Giving a key").
                let key = keys::parse_key_arg(text).map_err(|source| WatchError::Key {
                    name: entry.name.clone(),
                    index,
                    source,
                })?;
                if let Some(inner) = key.name.filter(|n| *n != entry.name) {
                    return Err(WatchError::KeyName {
                        name: entry.name.clone(),
                        index,
                        inner,
                    });
                }
                keys.push(key.key);
            }
            watch.add_issuer(&entry.name, &keys);
        }
        for (index, text) in file.change_ids.into_iter().enumerate() {
            let id = text
                .parse::<Digest>()
                .map_err(|_| WatchError::ChangeId { index, text })?;
            watch.change_ids.insert(id);
        }
        watch.authorized = match (file.authorized, file.authorized_file) {
            (Some(_), Some(_)) => return Err(WatchError::TwoLists),
            (Some(list), None) => Some(list.into_iter().map(|s| s.trim().to_string()).collect()),
            (None, Some(rel)) => Some(read_authorized(&base.join(rel))?),
            (None, None) => None,
        };
        Ok(watch)
    }

    /// Watch the named issuers of a trust file too (their keys join any
    /// the watch file gives for the same name).
    pub fn add_trust(&mut self, trust: &Trust) {
        for issuer in &trust.issuers {
            if let Some(name) = &issuer.name {
                self.add_issuer(name, &[issuer.key]);
            }
        }
    }

    /// Add keys that sign for `name` (merged with that name's keys).
    pub fn add_issuer(&mut self, name: &str, keys: &[VerifyingKey]) {
        let at = match self.issuers.iter().position(|i| i.name == name) {
            Some(at) => at,
            None => {
                self.issuers.push(WatchedIssuer {
                    name: name.to_string(),
                    keys: Vec::new(),
                    trusted: TrustedKeys::default(),
                });
                self.issuers.len() - 1
            }
        };
        if let Some(issuer) = self.issuers.get_mut(at) {
            for k in keys {
                if !issuer.keys.contains(k) {
                    issuer.keys.push(*k);
                }
            }
            issuer.trusted = TrustedKeys::new(&issuer.keys);
        }
    }

    /// How many issuer names are watched.
    pub fn issuer_count(&self) -> usize {
        self.issuers.len()
    }

    /// The issuer watched under `name`.
    pub(crate) fn issuer(&self, name: &str) -> Option<&WatchedIssuer> {
        self.issuers.iter().find(|i| i.name == name)
    }
}

/// The authorized list: one receipt id a line (blank lines and `#`
/// comments skipped).
fn read_authorized(path: &Path) -> Result<HashSet<String>, WatchError> {
    let text = crate::io::read_path_text(path, MAX_AUTHORIZED_FILE_BYTES).map_err(|source| {
        WatchError::Read {
            what: format!("the authorized list {}", path.display()),
            source,
        }
    })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn issuers_merge_and_bad_fields_are_named() {
        let k1 = crate::keys::SigningKey::from_bytes(&[1; 32]).verifying_key();
        let k2 = crate::keys::SigningKey::from_bytes(&[2; 32]).verifying_key();
        let b = |k: &VerifyingKey| base64::engine::general_purpose::STANDARD.encode(k.as_bytes());
        let json = format!(
            r#"{{"issuers":[{{"name":"a","keys":["{}"]}},{{"name":"a","keys":["{}"]}}],
               "change_ids":["blake3:{}"],"authorized":["x"]}}"#,
            b(&k1),
            b(&k2),
            "ab".repeat(32)
        );
        let w = Watch::from_json(json.as_bytes(), Path::new(".")).unwrap();
        assert_eq!(w.issuer_count(), 1);
        assert_eq!(w.issuer("a").unwrap().keys, vec![k1, k2]);
        assert_eq!(w.change_ids.len(), 1);
        assert!(w.authorized.unwrap().contains("x"));
        let bad = Watch::from_json(br#"{"change_ids":["nope"]}"#, Path::new(".")).unwrap_err();
        assert!(
            matches!(bad, WatchError::ChangeId { index: 0, .. }),
            "{bad}"
        );
        let both = br#"{"authorized":[],"authorized_file":"f"}"#;
        assert!(matches!(
            Watch::from_json(both, Path::new(".")),
            Err(WatchError::TwoLists)
        ));
        assert!(Watch::from_json(br#"{"other":1}"#, Path::new(".")).is_err());
    }

    /// A watch file takes every key form `--issuer-key` takes: raw base64,
    /// SPKI PEM, a verifier key, `NAME=KEY`; a key that names another
    /// issuer than the one it is listed under is refused, named.
    #[test]
    fn every_key_form_of_issuer_key_and_the_name_must_agree() {
        let k = crate::keys::SigningKey::from_bytes(&[3; 32]).verifying_key();
        let raw = base64::engine::general_purpose::STANDARD.encode(k.as_bytes());
        let vkey = crate::keys::NoteVerifier::new("gate.example", k)
            .unwrap()
            .to_string();
        let pem = crate::keys::verifying_key_to_pem(&k);
        let forms = [raw.clone(), format!("gate.example={raw}"), vkey, pem];
        for form in &forms {
            let json = serde_json::json!({"issuers": [{"name": "gate.example", "keys": [form]}]});
            let w = Watch::from_json(json.to_string().as_bytes(), Path::new("."))
                .unwrap_or_else(|e| panic!("{form}: {e}"));
            assert_eq!(w.issuer("gate.example").unwrap().keys, vec![k], "{form}");
        }
        for other in [
            format!("other.example={raw}"),
            crate::keys::NoteVerifier::new("other.example", k)
                .unwrap()
                .to_string(),
        ] {
            let json = serde_json::json!({"issuers": [{"name": "gate.example", "keys": [other]}]});
            let err = Watch::from_json(json.to_string().as_bytes(), Path::new(".")).unwrap_err();
            assert!(
                matches!(&err, WatchError::KeyName { inner, .. } if inner == "other.example"),
                "{err}"
            );
        }
    }
}
