//! contract: a demonstrated run, kept as one file (spec/gate-mcp.md
//! "Contracts from a demonstrated run").
//!
//! ```text
//! DIR/NAME.json  {"format": "rcpt.contract/1", "name": NAME, "version": n,
//!                 "server": text, "max_age": seconds, "check_evidence": bool,
//!                 "bound": bool, "rebind": bool, "status": "proven"|"unproven",
//!                 "unproven": null | {"at", "call", "tool", "arguments", "demonstrated", "now"},
//!                 "calls": [{"tool": text, "arguments": {...}, "arguments_digest": "sha256:…",
//!                            "reads": [{"tool", "arguments": "sha256:…", "answer": "sha256:…"}]}]}
//! DIR/NAME.recording  the token of the proxy recording NAME (removed by `cancel`)
//! ```
//!
//! Read through the crate's one reader (capped, a regular file, no link
//! followed: [`crate::io::read_at`]) and strict JSON (duplicate keys
//! refused); every field checked, no other field; the arguments' digest
//! recomputed (RFC 8785) and compared with the one written. Written through
//! the one atomic writer ([`crate::io::write_atomic`]). The contract's
//! identity covers what was demonstrated (name, version, server, `max_age`,
//! `check_evidence`, the calls with their arguments' digests and reads),
//! never its mutable state (bound, rebind, status).

use super::table::jcs_sha256;
use crate::digest::Digest;
use crate::receipt::canonical::{Value, dagcbor, identity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The format tag of a contract file.
pub const FORMAT: &str = "rcpt.contract/1";
/// Largest contract file read (the exact arguments of every call are in it).
pub const MAX_CONTRACT_BYTES: usize = 16 * 1024 * 1024;
/// Most contracts in one directory.
pub const MAX_CONTRACTS: usize = 256;
/// Most step calls one contract holds (and `learn --last` takes).
pub const MAX_CONTRACT_CALLS: usize = 100;
/// Most reads one call depends on.
pub const MAX_CALL_READS: usize = 64;
/// Longest contract name (bytes).
pub const MAX_NAME_BYTES: usize = 64;
/// Deepest JSON nesting of a contract file.
pub const MAX_CONTRACT_DEPTH: usize = 64;
/// Largest `max_age` (seconds): one day.
pub const MAX_MAX_AGE: u64 = 86_400;
/// The `max_age` of a recording that names none (seconds).
pub const DEFAULT_MAX_AGE: u64 = 60;
/// Highest version (a rebind past it is refused).
pub const MAX_VERSION: u64 = 1 << 32;
/// Mode of a contract file.
pub const CONTRACT_MODE: u32 = 0o644;

/// Why a contract could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The directory could not be opened or listed.
    #[error("the contracts directory {0}")]
    Dir(String, #[source] crate::io::DirError),
    /// A file could not be read.
    #[error("reading the contract {0}")]
    Read(String, #[source] crate::io::InputError),
    /// A file is not a contract.
    #[error("the contract {0} is not valid: {1}")]
    Invalid(String, String),
    /// A file is not the JSON of a contract.
    #[error("the contract {0} is not valid")]
    Json(String, #[source] crate::strictjson::StrictJsonError),
    /// A file could not be written.
    #[error("writing the contract {0}")]
    Write(String, #[source] crate::io::OutputError),
    /// A name is not one.
    #[error(
        "{0:?} is not a contract name (1 to {MAX_NAME_BYTES} of A-Z a-z 0-9 . _ -, not starting with '.')"
    )]
    Name(String),
    /// No such contract.
    #[error("no contract {0} in {1}")]
    Missing(String, String),
    /// Too many contracts.
    #[error("{0} holds over {MAX_CONTRACTS} contracts")]
    TooMany(String),
    /// A contract of that name exists, and no rebind was asked.
    #[error(
        "the contract {name} exists (version {version}): `rcpt gate contract rebind {name}` \
         first to re-demonstrate it"
    )]
    Exists {
        /// The contract.
        name: String,
        /// Its version.
        version: u64,
    },
    /// The recording marker of that name is there already.
    #[error(
        "a recording of {0} is under way, or was left by a proxy that ended \
         (`rcpt gate contract cancel {0}` drops it)"
    )]
    RecordingUnderWay(String),
    /// `--max-age` out of its range.
    #[error("--max-age {0}: 1 to {MAX_MAX_AGE} s")]
    MaxAge(u64),
    /// No randomness for a recording's marker.
    #[error("no randomness for the recording marker")]
    Randomness(#[source] std::io::Error),
    /// A recording kept no step.
    #[error(
        "the recording of {0} kept no step (none was admitted and answered without error): \
         nothing written"
    )]
    NothingKept(String),
    /// A recording made more steps than a contract holds.
    #[error("the recording of {0} made over {MAX_CONTRACT_CALLS} steps: nothing written")]
    TooManySteps(String),
}

impl ContractError {
    /// True when the invocation is what is wrong (a name, a contract that
    /// is missing or exists, a recording under way, `--max-age`), not the
    /// disk or a file: the binary's exit 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ContractError::Name(_)
                | ContractError::Missing(..)
                | ContractError::Exists { .. }
                | ContractError::RecordingUnderWay(_)
                | ContractError::MaxAge(_)
        )
    }
}

/// A read a call depended on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoRead {
    /// The read tool.
    pub tool: String,
    /// `sha256:` over the RFC 8785 form of its arguments.
    #[serde(with = "text")]
    pub arguments: Digest,
    /// `sha256:` over the RFC 8785 form of its answer.
    #[serde(with = "text")]
    pub answer: Digest,
}

impl DemoRead {
    /// The read as a data-model value: `{"tool", "arguments", "answer"}`.
    pub fn value(&self) -> Value {
        Value::Map(BTreeMap::from([
            ("tool".to_string(), t(self.tool.clone())),
            ("arguments".to_string(), t(self.arguments.to_string())),
            ("answer".to_string(), t(self.answer.to_string())),
        ]))
    }
}

/// A demonstrated step call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoCall {
    /// The step tool.
    pub tool: String,
    /// The arguments, exactly (an object).
    pub arguments: serde_json::Value,
    /// `sha256:` over their RFC 8785 form.
    #[serde(with = "text")]
    pub arguments_digest: Digest,
    /// The reads made before it (since the step before it).
    pub reads: Vec<DemoRead>,
}

/// Why a contract is unproven.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unproven {
    /// When (Unix seconds).
    pub at: i64,
    /// The index of the call whose read differed.
    pub call: usize,
    /// The read tool.
    pub tool: String,
    /// Its arguments' digest.
    #[serde(with = "text")]
    pub arguments: Digest,
    /// The answer demonstrated.
    #[serde(with = "text")]
    pub demonstrated: Digest,
    /// The answer seen.
    #[serde(with = "text")]
    pub now: Digest,
}

/// Whether the demonstrated answers still hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing contradicted it.
    Proven,
    /// A replayed read answered otherwise: its steps are denied until a rebind.
    Unproven,
}

/// A contract file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// [`FORMAT`].
    pub format: String,
    /// The name (the file's, without `.json`).
    pub name: String,
    /// 1, then one more at each rebind.
    pub version: u64,
    /// The server's name (the policy's).
    pub server: String,
    /// Seconds a read counts as fresh.
    pub max_age: u64,
    /// Compare a replayed read's answer with the demonstrated one.
    pub check_evidence: bool,
    /// Enforced (false after `unbind`).
    pub bound: bool,
    /// A `rebind` was asked: the next recording of this name replaces it.
    pub rebind: bool,
    /// Proven or unproven.
    pub status: Status,
    /// Why it is unproven.
    pub unproven: Option<Unproven>,
    /// The demonstrated step calls, in order.
    pub calls: Vec<DemoCall>,
}

/// A digest as its text (`sha256:…`).
mod text {
    use crate::digest::Digest;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Digest, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a digest")))
    }
}

fn t(s: impl Into<String>) -> Value {
    Value::Text(s.into())
}

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Check a contract name.
pub fn check_name(name: &str) -> Result<(), ContractError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ContractError::Name(name.to_string()))
    }
}

impl Contract {
    /// A new contract from a recording.
    pub fn new(name: &str, version: u64, server: &str, max_age: u64, calls: Vec<DemoCall>) -> Self {
        Contract {
            format: FORMAT.to_string(),
            name: name.to_string(),
            version,
            server: server.to_string(),
            max_age,
            check_evidence: true,
            bound: true,
            rebind: false,
            status: Status::Proven,
            unproven: None,
            calls,
        }
    }

    /// Parse and check a contract file's bytes (`file`: its name, for errors).
    pub fn parse(bytes: &[u8], file: &str) -> Result<Contract, ContractError> {
        let bad = |why: String| ContractError::Invalid(file.to_string(), why);
        let c: Contract = crate::strictjson::from_slice(bytes, MAX_CONTRACT_DEPTH)
            .map_err(|e| ContractError::Json(file.to_string(), e))?;
        c.check().map_err(bad)?;
        Ok(c)
    }

    /// Every field in range; every arguments digest recomputed.
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!("format {:?}, expected {FORMAT:?}", self.format));
        }
        check_name(&self.name).map_err(|e| e.to_string())?;
        if self.version == 0 || self.version > MAX_VERSION {
            return Err(format!("version {} (1 to {MAX_VERSION})", self.version));
        }
        if self.max_age == 0 || self.max_age > MAX_MAX_AGE {
            return Err(format!("max_age {} (1 to {MAX_MAX_AGE} s)", self.max_age));
        }
        if self.calls.is_empty() || self.calls.len() > MAX_CONTRACT_CALLS {
            return Err(format!(
                "{} calls (1 to {MAX_CONTRACT_CALLS})",
                self.calls.len()
            ));
        }
        if (self.status == Status::Unproven) != self.unproven.is_some() {
            return Err("status and unproven disagree".into());
        }
        for (i, c) in self.calls.iter().enumerate() {
            if !c.arguments.is_object() {
                return Err(format!("calls[{i}].arguments is not an object"));
            }
            if c.tool.is_empty() || c.tool.len() > super::policy::MAX_TOOL_NAME_BYTES {
                return Err(format!("calls[{i}].tool is empty or too long"));
            }
            let d = jcs_sha256(&c.arguments).map_err(|e| format!("calls[{i}].arguments: {e}"))?;
            if d != c.arguments_digest {
                return Err(format!(
                    "calls[{i}].arguments_digest is {}, the arguments' RFC 8785 digest {d}",
                    c.arguments_digest
                ));
            }
            if c.reads.len() > MAX_CALL_READS {
                return Err(format!("calls[{i}] depends on over {MAX_CALL_READS} reads"));
            }
        }
        Ok(())
    }

    /// The file's bytes (pretty JSON, a final newline).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Whether a call of `tool` is covered by it.
    pub fn covers(&self, tool: &str) -> bool {
        self.calls.iter().any(|c| c.tool == tool)
    }

    /// The contract's identity: what was demonstrated, not its state.
    pub fn identity(&self) -> Digest {
        let calls = self
            .calls
            .iter()
            .map(|c| {
                let reads = c.reads.iter().map(DemoRead::value).collect();
                Value::Map(BTreeMap::from([
                    ("tool".to_string(), t(c.tool.clone())),
                    ("arguments".to_string(), t(c.arguments_digest.to_string())),
                    ("reads".to_string(), Value::Array(reads)),
                ]))
            })
            .collect();
        identity(&dagcbor::encode(&Value::Map(BTreeMap::from([
            ("contract".to_string(), t(self.name.clone())),
            ("version".to_string(), int(self.version)),
            ("server".to_string(), t(self.server.clone())),
            ("max_age".to_string(), int(self.max_age)),
            (
                "check_evidence".to_string(),
                Value::Bool(self.check_evidence),
            ),
            ("calls".to_string(), Value::Array(calls)),
        ]))))
    }
}

/// The directory of contracts.
#[derive(Clone, Debug)]
pub struct Contracts {
    dir: PathBuf,
}

impl Contracts {
    /// The contracts in `dir` (created when absent).
    pub fn open(dir: &Path) -> Result<Contracts, ContractError> {
        crate::io::Dir::create(dir, 0o755)
            .map_err(|e| ContractError::Dir(dir.display().to_string(), e))?;
        Ok(Contracts {
            dir: dir.to_path_buf(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn opened(&self) -> Result<crate::io::Dir, ContractError> {
        crate::io::Dir::open(&self.dir)
            .map_err(|e| ContractError::Dir(self.dir.display().to_string(), e))
    }

    /// The path of contract `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// Every contract, by name.
    pub fn all(&self) -> Result<Vec<Contract>, ContractError> {
        let dir = self.opened()?;
        let mut names: Vec<String> = dir
            .names()
            .map_err(|e| ContractError::Dir(self.dir.display().to_string(), e))?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        if names.len() > MAX_CONTRACTS {
            return Err(ContractError::TooMany(self.dir.display().to_string()));
        }
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for file in names {
            out.push(self.read_file(&dir, &file)?);
        }
        Ok(out)
    }

    fn read_file(&self, dir: &crate::io::Dir, file: &str) -> Result<Contract, ContractError> {
        let shown = self.dir.join(file).display().to_string();
        let bytes = crate::io::read_at(dir, file, MAX_CONTRACT_BYTES)
            .map_err(|e| ContractError::Read(shown.clone(), e))?;
        let c = Contract::parse(&bytes, &shown)?;
        if format!("{}.json", c.name) != file {
            return Err(ContractError::Invalid(
                shown,
                format!("it names {:?}, not its file", c.name),
            ));
        }
        Ok(c)
    }

    /// Contract `name`, or `None` when there is none.
    pub fn find(&self, name: &str) -> Result<Option<Contract>, ContractError> {
        check_name(name)?;
        let dir = self.opened()?;
        let file = format!("{name}.json");
        match dir.kind(&file) {
            Ok(None) => Ok(None),
            Ok(Some(_)) => self.read_file(&dir, &file).map(Some),
            Err(e) => Err(ContractError::Dir(self.dir.display().to_string(), e)),
        }
    }

    /// Contract `name` (an error when there is none).
    pub fn get(&self, name: &str) -> Result<Contract, ContractError> {
        self.find(name)?
            .ok_or_else(|| ContractError::Missing(name.to_string(), self.dir.display().to_string()))
    }

    /// Write `c` atomically over `DIR/NAME.json`.
    pub fn write(&self, c: &Contract) -> Result<(), ContractError> {
        check_name(&c.name)?;
        let path = self.path(&c.name);
        c.check()
            .map_err(|why| ContractError::Invalid(path.display().to_string(), why))?;
        crate::io::write_atomic(&path, &c.to_bytes(), CONTRACT_MODE)
            .map_err(|e| ContractError::Write(path.display().to_string(), e))
    }

    /// The path of the recording marker of `name`.
    pub fn marker(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.recording"))
    }

    /// Start recording `name`: its marker created exclusively with `token`.
    /// An existing contract is replaced only when a rebind was asked.
    pub fn start_recording(&self, name: &str, token: &str) -> Result<(), ContractError> {
        check_name(name)?;
        if let Some(c) = self.find(name)?
            && !c.rebind
        {
            return Err(ContractError::Exists {
                name: name.to_string(),
                version: c.version,
            });
        }
        let marker = self.marker(name);
        crate::io::create_new(&marker, token.as_bytes(), CONTRACT_MODE).map_err(|e| match e {
            crate::io::OutputError::Io { ref source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                ContractError::RecordingUnderWay(name.to_string())
            }
            e => ContractError::Write(marker.display().to_string(), e),
        })
    }

    /// Whether the marker of `name` still holds `token` (not cancelled).
    pub fn still_recording(&self, name: &str, token: &str) -> bool {
        let Ok(dir) = self.opened() else { return false };
        crate::io::read_at(&dir, &format!("{name}.recording"), 256)
            .is_ok_and(|b| b == token.as_bytes())
    }

    /// Drop the marker of `name`; whether there was one.
    pub fn cancel(&self, name: &str) -> Result<bool, ContractError> {
        check_name(name)?;
        self.opened()?
            .remove_file(format!("{name}.recording"))
            .map_err(|e| ContractError::Dir(self.dir.display().to_string(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(args: serde_json::Value) -> DemoCall {
        DemoCall {
            tool: "write".into(),
            arguments_digest: jcs_sha256(&args).unwrap(),
            arguments: args,
            reads: vec![DemoRead {
                tool: "read".into(),
                arguments: Digest::sha256(b"a"),
                answer: Digest::sha256(b"b"),
            }],
        }
    }

    #[test]
    fn a_contract_round_trips_and_bad_files_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let cs = Contracts::open(&tmp.path().join("c")).unwrap();
        let c = Contract::new("deploy", 1, "fs", 60, vec![call(json!({"n": 1}))]);
        cs.write(&c).unwrap();
        assert_eq!(cs.get("deploy").unwrap(), c);
        assert_eq!(cs.all().unwrap().len(), 1);
        assert!(cs.find("other").unwrap().is_none());
        assert!(matches!(cs.get("../x"), Err(ContractError::Name(_))));
        // A tampered argument: its digest no longer matches.
        let text = String::from_utf8(c.to_bytes()).unwrap();
        let bad = text.replace("\"n\": 1", "\"n\": \"1\"");
        assert_ne!(bad, text);
        let e = Contract::parse(bad.as_bytes(), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("arguments_digest"), "{e}");
        // Duplicate keys, unknown fields, zero max_age.
        let dup = text.replacen("\"bound\": true", "\"bound\": true, \"bound\": false", 1);
        assert!(Contract::parse(dup.as_bytes(), "f").is_err());
        let unknown = text.replacen("\"bound\": true", "\"bound\": true, \"x\": 1", 1);
        assert!(Contract::parse(unknown.as_bytes(), "f").is_err());
        let zero = text.replacen("\"max_age\": 60", "\"max_age\": 0", 1);
        let e = Contract::parse(zero.as_bytes(), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_age"), "{e}");
        // A file whose name is not its contract's.
        std::fs::write(cs.path("other"), c.to_bytes()).unwrap();
        assert!(cs.all().is_err());
    }

    #[test]
    fn the_identity_covers_what_was_demonstrated_not_the_state() {
        let a = Contract::new("d", 1, "fs", 60, vec![call(json!({"n": 1}))]);
        let mut b = a.clone();
        b.bound = false;
        b.rebind = true;
        assert_eq!(a.identity(), b.identity());
        let c = Contract::new("d", 1, "fs", 60, vec![call(json!({"n": "1"}))]);
        assert_ne!(a.identity(), c.identity());
        let mut d = a.clone();
        d.version = 2;
        assert_ne!(a.identity(), d.identity());
    }

    #[test]
    fn a_recording_needs_a_rebind_to_replace_a_contract_and_can_be_cancelled() {
        let tmp = tempfile::tempdir().unwrap();
        let cs = Contracts::open(tmp.path()).unwrap();
        cs.start_recording("d", "t1").unwrap();
        let twice = cs.start_recording("d", "t2").unwrap_err();
        assert!(
            matches!(&twice, ContractError::RecordingUnderWay(n) if n == "d") && twice.is_usage(),
            "{twice}"
        );
        assert!(cs.still_recording("d", "t1"));
        assert!(cs.cancel("d").unwrap());
        assert!(!cs.still_recording("d", "t1"));
        let mut c = Contract::new("d", 1, "fs", 60, vec![call(json!({}))]);
        cs.write(&c).unwrap();
        let exists = cs.start_recording("d", "t3").unwrap_err();
        assert!(
            matches!(exists, ContractError::Exists { version: 1, .. })
                && exists.to_string().contains("rebind")
                && exists.is_usage(),
            "{exists}"
        );
        c.rebind = true;
        cs.write(&c).unwrap();
        cs.start_recording("d", "t3").unwrap();
    }
}
