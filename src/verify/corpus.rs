//! corpus: a frozen corpus of bundles with expected outcomes.
//!
//! `DIR/manifest.json` = `{"trust": "trust.json", "cases": [{"file": ...,
//! "expect": "verified|failed|error", "reason": code or null, "comment":
//! ..., "gate": {...}}]}`. Optionally `DIR/SHA256SUMS` (sha256sum format)
//! guards every frozen file against silent regeneration.
//!
//! A case's optional `"gate"` object states the gating flags it is run
//! with (spec/gate.md): `"require"` (the trust file's `"require"` keys),
//! `"now"` (Unix seconds), `"fresh"` (a directory inside DIR) and
//! `"policy"` (a tlog-policy file inside DIR, as `--policy` takes it;
//! spec/witness.md).
//!
//! A corpus grows by series: a subdirectory of DIR holding its own
//! `manifest.json` and `SHA256SUMS` is a series, frozen on its own, so new
//! cases never rewrite an old file ([`series`]).

use super::errata::{Errata, Expectation};
use super::{Gate, Outcome, Reason, Report, Verifier, VerifierError};
use crate::digest::to_hex;
use crate::io::{self, InputError};
use crate::limits::{
    MAX_CORPUS_FILE_BYTES, MAX_JSON_DEPTH, MAX_KEY_FILE_BYTES, MAX_MANIFEST_BYTES, MAX_POLICY_BYTES,
};
use crate::receipt::require::RequireFile;
use crate::strictjson;
use crate::tlog::policy::TlogPolicy;
use crate::trust::{Trust, TrustError};
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};

/// One case of the manifest.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Bundle path relative to the corpus directory.
    pub file: String,
    /// `verified`, `failed` or `error`.
    pub expect: Outcome,
    /// Expected primary reason code (null for verified).
    #[serde(default)]
    pub reason: Option<Reason>,
    /// What the case is about.
    #[serde(default)]
    pub comment: String,
    /// The gating flags the case is run with.
    #[serde(default)]
    pub gate: Option<CaseGate>,
    /// The frozen expectation an erratum superseded (never read from a
    /// manifest: [`super::errata`]).
    #[serde(skip)]
    pub superseded: Option<Expectation>,
}

/// The gating flags of one case, as `rcpt verify` would take them.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseGate {
    /// Requirements, with the trust file's `"require"` keys.
    #[serde(default)]
    pub require: Option<RequireFile>,
    /// `--now`.
    #[serde(default)]
    pub now: Option<i64>,
    /// `--fresh`: a directory relative to the corpus directory.
    #[serde(default)]
    pub fresh: Option<String>,
    /// `--policy`: a tlog-policy file relative to the corpus directory.
    #[serde(default)]
    pub policy: Option<String>,
}

impl CaseGate {
    /// The [`Gate`] for a case of the corpus in `dir`.
    fn to_gate(&self, dir: &Path) -> Result<Gate, CaseGateError> {
        let requirements = match &self.require {
            Some(r) => r.clone().into_requirements()?,
            None => Default::default(),
        };
        let fresh = match &self.fresh {
            Some(rel) => {
                Some(inside(dir, rel).ok_or_else(|| CaseGateError::FreshOutside(rel.clone()))?)
            }
            None => None,
        };
        Ok(Gate {
            requirements,
            fresh,
            now: self.now,
        })
    }

    /// The case's `--policy`, read (capped) and parsed, when it names one.
    fn to_policy(&self, dir: &Path) -> Result<Option<TlogPolicy>, CaseGateError> {
        let Some(rel) = &self.policy else {
            return Ok(None);
        };
        let path = inside(dir, rel).ok_or_else(|| CaseGateError::PolicyOutside(rel.clone()))?;
        let bytes = io::read_path(&path, MAX_POLICY_BYTES)?;
        TlogPolicy::parse(&bytes)
            .map(Some)
            .map_err(|e| CaseGateError::Policy(rel.clone(), e))
    }
}

/// Why a case's gate options are not usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseGateError {
    /// `require` is not valid.
    #[error(transparent)]
    Require(#[from] crate::receipt::require::RequireError),
    /// `fresh` names a path outside the corpus.
    #[error("fresh path {0:?} leaves the corpus")]
    FreshOutside(String),
    /// `policy` names a path outside the corpus.
    #[error("policy path {0:?} leaves the corpus")]
    PolicyOutside(String),
    /// The policy file could not be read.
    #[error(transparent)]
    PolicyRead(#[from] InputError),
    /// The policy file is not a tlog-policy.
    #[error("policy {0}")]
    Policy(String, #[source] crate::tlog::policy::TlogPolicyError),
}

/// The manifest.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Trust file path relative to the corpus directory.
    pub trust: String,
    /// The cases.
    pub cases: Vec<Case>,
}

/// Why a corpus could not be run (a bad invocation).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A corpus file could not be read (missing, not a regular file, over
    /// its limit).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The manifest is not valid.
    #[error("{path}: {detail}")]
    Manifest {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The manifest is not the JSON of a manifest.
    #[error("{path}")]
    ManifestJson {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: strictjson::StrictJsonError,
    },
    /// The errata file is not the JSON of errata.
    #[error("errata {path}")]
    ErrataJson {
        /// The errata file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: strictjson::StrictJsonError,
    },
    /// A case's gate options are not usable.
    #[error("{path}: case {file}: gate")]
    CaseGate {
        /// The manifest path.
        path: PathBuf,
        /// The case.
        file: String,
        /// What is wrong.
        #[source]
        source: Box<CaseGateError>,
    },
    /// The trust file is not valid.
    #[error("trust file: {0}")]
    Trust(#[from] TrustError),
    /// The trust file trusts nothing usable.
    #[error(transparent)]
    Verifier(#[from] VerifierError),
    /// The errata file is not valid, or does not describe this corpus.
    #[error("errata {path}: {detail}")]
    Errata {
        /// The errata file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// How one case came out.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// The verifier's report.
    pub report: Report,
    /// Outcome and primary reason both as expected.
    pub matched: bool,
}

/// A checksum line whose file is missing or changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChecksumMismatch {
    /// The file named in SHA256SUMS.
    pub file: String,
    /// What was found.
    pub detail: String,
}

/// The whole corpus run.
#[derive(Clone, Debug)]
pub struct CorpusResult {
    /// Each case, in manifest order.
    pub cases: Vec<CaseResult>,
    /// SHA256SUMS problems (empty when the list is absent or all match).
    pub checksums: Vec<ChecksumMismatch>,
    /// Whether a SHA256SUMS list was present and checked.
    pub checksums_checked: usize,
    /// How many expectations errata superseded.
    pub superseded: usize,
}

impl CorpusResult {
    /// Every case matched and every checksum held.
    pub fn all_matched(&self) -> bool {
        self.checksums.is_empty() && self.cases.iter().all(|c| c.matched)
    }
}

/// A manifest path must stay inside the corpus directory.
fn inside(dir: &Path, relative: &str) -> Option<PathBuf> {
    let rel = Path::new(relative);
    let safe = rel.components().all(|c| matches!(c, Component::Normal(_)));
    safe.then(|| dir.join(rel))
}

/// Load the manifest and the trust it names.
pub fn load(dir: &Path) -> Result<(Manifest, Trust), CorpusError> {
    let path = dir.join("manifest.json");
    let bytes = io::read_path(&path, MAX_MANIFEST_BYTES)?;
    let bad = |detail: String| CorpusError::Manifest {
        path: path.clone(),
        detail,
    };
    let manifest: Manifest = strictjson::from_slice(&bytes, MAX_JSON_DEPTH).map_err(|source| {
        CorpusError::ManifestJson {
            path: path.clone(),
            source,
        }
    })?;
    let trust_path = inside(dir, &manifest.trust).ok_or_else(|| {
        bad(format!(
            "trust path \"{}\" leaves the corpus directory",
            manifest.trust
        ))
    })?;
    let trust = Trust::from_json(&io::read_path(&trust_path, MAX_KEY_FILE_BYTES)?)?;
    for case in &manifest.cases {
        if let Some(gate) = &case.gate {
            let case_gate = |source| CorpusError::CaseGate {
                path: path.clone(),
                file: case.file.clone(),
                source: Box::new(source),
            };
            gate.to_gate(dir).map_err(case_gate)?;
            gate.to_policy(dir).map_err(case_gate)?;
        }
    }
    Ok((manifest, trust))
}

/// One part of a corpus: the root or one series, its manifest with the
/// errata applied.
#[derive(Clone, Debug)]
pub struct Part {
    /// Its directory.
    pub dir: PathBuf,
    /// The series' directory name; `None` for the root.
    pub series: Option<String>,
    /// The manifest, errata applied.
    pub manifest: Manifest,
    /// The trust it names.
    pub trust: Trust,
    /// How many expectations errata superseded.
    pub superseded: usize,
}

/// Load the corpus in `dir` and each of its series, `errata` applied:
/// every erratum must name a case of a part and supersede exactly what
/// that part's manifest says (spec/verify.md "Errata").
pub fn load_parts(dir: &Path, errata: &Errata) -> Result<Vec<Part>, CorpusError> {
    let bad = |detail: String| CorpusError::Errata {
        path: errata.path.clone(),
        detail,
    };
    let mut parts = vec![(dir.to_path_buf(), None)];
    for path in series(dir)? {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        parts.push((path, name));
    }
    let names: Vec<String> = parts.iter().filter_map(|(_, n)| n.clone()).collect();
    let unknown = errata.unknown_series(&names);
    if !unknown.is_empty() {
        return Err(bad(format!(
            "errata name series the corpus does not have: {}",
            unknown.join(", ")
        )));
    }
    let mut out = Vec::with_capacity(parts.len());
    for (dir, series) in parts {
        let (mut manifest, trust) = load(&dir)?;
        let superseded = errata
            .apply(series.as_deref(), &mut manifest)
            .map_err(bad)?;
        out.push(Part {
            dir,
            series,
            manifest,
            trust,
            superseded,
        });
    }
    Ok(out)
}

/// The series of the corpus in `dir`: its subdirectories that hold their
/// own `manifest.json` and `SHA256SUMS`, sorted by name.
pub fn series(dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|source| {
        CorpusError::Input(InputError::Open {
            path: dir.to_path_buf(),
            source,
        })
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && path.join("manifest.json").is_file() && path.join("SHA256SUMS").is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Check `DIR/SHA256SUMS` if present: (mismatches, lines checked).
pub fn check_sums(dir: &Path) -> Result<(Vec<ChecksumMismatch>, usize), CorpusError> {
    let path = dir.join("SHA256SUMS");
    if !path.exists() {
        return Ok((Vec::new(), 0));
    }
    let text = String::from_utf8_lossy(&io::read_path(&path, MAX_MANIFEST_BYTES)?).into_owned();
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        checked += 1;
        let Some((hex, file)) = line.split_once("  ") else {
            mismatches.push(ChecksumMismatch {
                file: line.to_string(),
                detail: "not a sha256sum line".into(),
            });
            continue;
        };
        // Hashed as a stream, capped; a FIFO or device is refused, not read.
        let found = inside(dir, file)
            .map(|p| io::sha256_capped(&p, MAX_CORPUS_FILE_BYTES).map(|d| to_hex(&d.bytes)));
        let detail = match found {
            None => Some("path leaves the corpus directory".to_string()),
            Some(Err(e)) => Some(io::error_chain(&e)),
            Some(Ok(actual)) if actual != hex => {
                Some(format!("sha256 is {actual}, SHA256SUMS says {hex}"))
            }
            Some(Ok(_)) => None,
        };
        if let Some(detail) = detail {
            mismatches.push(ChecksumMismatch {
                file: file.to_string(),
                detail,
            });
        }
    }
    Ok((mismatches, checked))
}

/// Run one case: with `verifier`, or when the case states gating flags,
/// with a verifier of `trust` gated as it says.
pub fn run_case(dir: &Path, trust: &Trust, verifier: &Verifier, case: &Case) -> CaseResult {
    let gated = case.gate.as_ref().and_then(|g| {
        let gate = g.to_gate(dir).ok()?;
        let verifier = Verifier::new(trust.clone(), None).ok()?.with_gate(gate);
        Some(match g.to_policy(dir).ok()? {
            Some(policy) => verifier.with_policy(policy),
            None => verifier,
        })
    });
    let verifier = gated.as_ref().unwrap_or(verifier);
    let report = match inside(dir, &case.file) {
        Some(path) => verifier.verify_file(&path),
        None => verifier.verify_file(Path::new("/nonexistent/path/leaves/corpus")),
    };
    let matched = report.outcome() == case.expect && report.primary_reason() == case.reason;
    CaseResult {
        case: case.clone(),
        report,
        matched,
    }
}
