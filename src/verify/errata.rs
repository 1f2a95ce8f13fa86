//! errata: expectations of a frozen corpus that a later decision superseded.
//!
//! A frozen corpus is never rewritten (its `SHA256SUMS` guards every byte),
//! so when a rule changes on purpose, the cases it moves are listed in an
//! errata file that lives outside the corpus: by default the sibling
//! `<DIR>.errata.json` of the corpus directory `DIR`
//! (spec/verify.md "Errata"). Each erratum names one case, the frozen
//! expectation it supersedes, the new one, and why:
//!
//! ```json
//! {"errata": [{"case": "bundles/signature-untrusted-only.json",
//!              "supersedes": {"expect": "error", "reason": "signature.untrusted"},
//!              "now": {"expect": "failed", "reason": "signature.impersonation"},
//!              "why": "issue 34 defect 2: ..."}]}
//! ```
//!
//! `"series"` (a series' directory name) places the case in a series; the
//! root corpus without it. An erratum is applied only when its
//! `"supersedes"` equals what the frozen manifest says, so an erratum can
//! never silently drift from the corpus it corrects: a mismatch, an unknown
//! case or series, or two errata for one case refuse the whole run.

use super::corpus::{Case, CorpusError, Manifest};
use super::{Outcome, Reason};
use crate::io;
use crate::limits::{MAX_JSON_DEPTH, MAX_MANIFEST_BYTES};
use crate::strictjson;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// An expected outcome and primary reason, as a manifest case states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// `verified`, `failed` or `error`.
    pub expect: Outcome,
    /// The primary reason (null for verified).
    pub reason: Option<Reason>,
}

impl Expectation {
    /// What `case` expects.
    pub fn of(case: &Case) -> Expectation {
        Expectation {
            expect: case.expect,
            reason: case.reason,
        }
    }
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}]",
            self.expect.as_str(),
            self.reason.map_or("-", |r| r.as_str())
        )
    }
}

/// One superseded expectation.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Erratum {
    /// The series' directory name; absent for the root corpus.
    #[serde(default)]
    pub series: Option<String>,
    /// The case's `"file"`, as its manifest spells it.
    pub case: String,
    /// The frozen expectation: must equal the manifest's.
    pub supersedes: Expectation,
    /// The expectation that holds now.
    pub now: Expectation,
    /// Why (the decision, with its issue).
    pub why: String,
}

/// An errata file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Errata {
    /// The errata, in file order.
    pub errata: Vec<Erratum>,
    /// The file they were read from.
    #[serde(skip)]
    pub path: PathBuf,
}

/// The errata file a corpus directory has by default: `<DIR>.errata.json`
/// beside it (outside the frozen directory, which is never written).
pub fn default_path(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?;
    let mut file = name.to_os_string();
    file.push(".errata.json");
    Some(dir.with_file_name(file))
}

impl Errata {
    /// Read and check the shape of an errata file (capped reader, strict
    /// JSON): each erratum states a reason exactly when its outcome is not
    /// verified, and says why.
    pub fn load(path: &Path) -> Result<Errata, CorpusError> {
        let bytes = io::read_path(path, MAX_MANIFEST_BYTES)?;
        let bad = |detail: String| CorpusError::Errata {
            path: path.to_path_buf(),
            detail,
        };
        let mut errata: Errata =
            strictjson::from_slice(&bytes, MAX_JSON_DEPTH).map_err(|source| {
                CorpusError::ErrataJson {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        errata.path = path.to_path_buf();
        for (i, e) in errata.errata.iter().enumerate() {
            for (what, x) in [("supersedes", e.supersedes), ("now", e.now)] {
                if x.reason.is_none() != (x.expect == Outcome::Verified) {
                    return Err(bad(format!(
                        "erratum {i} ({}): \"{what}\" gives a reason exactly when it is not \
                         verified",
                        e.case
                    )));
                }
            }
            if e.why.trim().is_empty() {
                return Err(bad(format!("erratum {i} ({}): \"why\" is empty", e.case)));
            }
            if e.supersedes == e.now {
                return Err(bad(format!(
                    "erratum {i} ({}): \"now\" is what it supersedes",
                    e.case
                )));
            }
            let twice = errata
                .errata
                .iter()
                .take(i)
                .any(|o| o.series == e.series && o.case == e.case);
            if twice {
                return Err(bad(format!("erratum {i}: a second erratum for {}", e.case)));
            }
        }
        Ok(errata)
    }

    /// The errata of one part of a corpus (`None`: the root).
    pub fn of_series<'a>(&'a self, series: Option<&'a str>) -> impl Iterator<Item = &'a Erratum> {
        self.errata
            .iter()
            .filter(move |e| e.series.as_deref() == series)
    }

    /// Apply this part's errata to its manifest: each names a case of it
    /// and supersedes exactly what the manifest says, or nothing is
    /// applied. Returns how many expectations were superseded.
    pub fn apply(&self, series: Option<&str>, manifest: &mut Manifest) -> Result<usize, String> {
        let mut applied = 0;
        for e in self.of_series(series) {
            let Some(case) = manifest.cases.iter_mut().find(|c| c.file == e.case) else {
                return Err(format!(
                    "erratum for {} names no case of the {} manifest",
                    e.case,
                    part_name(series)
                ));
            };
            let frozen = Expectation::of(case);
            if frozen != e.supersedes {
                return Err(format!(
                    "erratum for {} supersedes {}, but the {} manifest says {frozen}: the \
                     erratum no longer describes the frozen case",
                    e.case,
                    e.supersedes,
                    part_name(series)
                ));
            }
            case.expect = e.now.expect;
            case.reason = e.now.reason;
            case.superseded = Some(frozen);
            applied += 1;
        }
        Ok(applied)
    }

    /// The series named by errata that are not among `known`.
    pub fn unknown_series<'a>(&'a self, known: &[String]) -> Vec<&'a str> {
        let mut out: Vec<&str> = self
            .errata
            .iter()
            .filter_map(|e| e.series.as_deref())
            .filter(|s| !known.iter().any(|k| k == s))
            .collect();
        out.dedup();
        out
    }
}

fn part_name(series: Option<&str>) -> String {
    match series {
        Some(s) => format!("series {s:?}"),
        None => "root".to_string(),
    }
}
