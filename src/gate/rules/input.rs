//! input: the document a rules module reads as `input` for the git
//! substrate (spec/gate.md "Rules"):
//!
//! ```text
//! {"substrate": "git", "issuer": NAME, "now": UNIX, "base": OID, "patch": BOOL,
//!  "files": [{"path", "status", "digest" | null, "mode" | null, "size" | null}, ...]}
//! ```
//!
//! `files` is the change (`gate check`) or the patch's change (`gate
//! apply`), sorted by path; `size` is the new file's bytes, null when
//! deleted. The tool proxy builds its own `input` (spec/gate-mcp.md).

use crate::gate::change::Change;
use crate::receipt::canonical::Value;
use std::collections::BTreeMap;

/// One file of the change as the rules see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFile<'a> {
    /// Its path.
    pub path: &'a str,
    /// git's word.
    pub status: &'static str,
    /// Its new digest, null when deleted.
    pub digest: Option<String>,
    /// `100644` or `100755`, null when deleted.
    pub mode: Option<&'static str>,
    /// Its new size in bytes, null when deleted.
    pub size: Option<u64>,
}

/// The files of `change` with their sizes (`size_of(path)`, read by the
/// caller from where the new bytes are).
pub fn files_of<'a>(
    change: &'a Change,
    size_of: impl Fn(&str) -> Option<u64>,
) -> Vec<InputFile<'a>> {
    change
        .files
        .iter()
        .map(|f| InputFile {
            path: &f.path,
            status: f.status.as_str(),
            digest: f.digest.map(|d| d.to_string()),
            mode: f
                .digest
                .map(|_| if f.executable { "100755" } else { "100644" }),
            size: f.digest.and_then(|_| size_of(&f.path)),
        })
        .collect()
}

/// The `input` of the git substrate.
pub fn git_input(
    issuer: &str,
    now: i64,
    base: &str,
    patch: bool,
    files: &[InputFile<'_>],
) -> Value {
    let text = |s: &str| Value::Text(s.to_string());
    let or_null = |v: Option<Value>| v.unwrap_or(Value::Null);
    let files = files
        .iter()
        .map(|f| {
            Value::Map(BTreeMap::from([
                ("path".to_string(), text(f.path)),
                ("status".to_string(), text(f.status)),
                ("digest".to_string(), or_null(f.digest.as_deref().map(text))),
                ("mode".to_string(), or_null(f.mode.map(text))),
                (
                    "size".to_string(),
                    or_null(
                        f.size
                            .map(|n| Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))),
                    ),
                ),
            ]))
        })
        .collect();
    Value::Map(BTreeMap::from([
        ("substrate".to_string(), text("git")),
        ("issuer".to_string(), text(issuer)),
        ("now".to_string(), Value::Integer(now)),
        ("base".to_string(), text(base)),
        ("patch".to_string(), Value::Bool(patch)),
        ("files".to_string(), Value::Array(files)),
    ]))
}
