//! The parser of a tlog-policy file: line by line, the names defined
//! before use, the limits and the character set (C2SP tlog-policy; rules
//! and refusals: `spec/witness.md`).

use super::{
    Member, NONE, Name, PolicyGroup, PolicyLog, PolicyWitness, Quorum, TlogPolicy, TlogPolicyError,
};
use crate::keys::NoteVerifier;
use crate::limits::{MAX_POLICY_BYTES, MAX_POLICY_GROUPS, MAX_POLICY_LOGS, MAX_POLICY_WITNESSES};
use crate::tlog::cosig::{CosigError, WitnessVerifier};

/// The parser's working state: the policy so far and the names defined.
struct Builder {
    logs: Vec<(PolicyLog, usize)>,
    witnesses: Vec<(PolicyWitness, usize)>,
    groups: Vec<PolicyGroup>,
    /// Names of witnesses and groups, and what they name.
    names: Vec<(Name, Member)>,
    /// Names already listed as a group member.
    listed: Vec<Member>,
    quorum: Option<(Quorum, usize)>,
}

/// tlog-policy "Structure": whitespace is "sequences of ASCII space and tab
/// characters *only*".
fn words(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty())
        .collect()
}

/// tlog-policy "Character set": "the allowed octet values are 0x09 (tab),
/// 0x0A (newline), 0x20-0x7E, and 0x80-0xFF."
fn check_charset(bytes: &[u8]) -> Result<(), TlogPolicyError> {
    let mut line = 1;
    for &byte in bytes {
        match byte {
            b'\n' => line += 1,
            b'\t' | 0x20..=0x7e | 0x80..=0xff => {}
            _ => return Err(TlogPolicyError::Charset { line, byte }),
        }
    }
    Ok(())
}

impl TlogPolicy {
    /// Parse a policy file (size limit and character set first).
    pub fn parse(bytes: &[u8]) -> Result<TlogPolicy, TlogPolicyError> {
        crate::limits::check_size(bytes, MAX_POLICY_BYTES, |size, limit| {
            TlogPolicyError::TooLarge { size, limit }
        })?;
        check_charset(bytes)?;
        let mut b = Builder {
            logs: Vec::new(),
            witnesses: Vec::new(),
            groups: Vec::new(),
            names: Vec::new(),
            listed: Vec::new(),
            quorum: None,
        };
        let mut lines: Vec<&[u8]> = bytes.split(|&c| c == b'\n').collect();
        // Every line ends in a newline, so the text after the last is empty.
        if lines.pop().is_some_and(|rest| !rest.is_empty()) {
            return Err(TlogPolicyError::NoFinalNewline(lines.len() + 1));
        }
        for (i, line) in lines.iter().enumerate() {
            b.line(i + 1, line)?;
        }
        let (quorum, _) = b.quorum.ok_or(TlogPolicyError::NoQuorum)?;
        Ok(TlogPolicy {
            logs: b.logs.into_iter().map(|(l, _)| l).collect(),
            witnesses: b.witnesses.into_iter().map(|(w, _)| w).collect(),
            groups: b.groups,
            quorum,
        })
    }
}

impl Builder {
    /// One line: comment, blank, or a keyword line.
    fn line(&mut self, line: usize, text: &[u8]) -> Result<(), TlogPolicyError> {
        let items = words(text);
        let Some((&keyword, args)) = items.split_first() else {
            return Ok(()); // blank: whitespace only
        };
        if keyword.starts_with(b"#") {
            return Ok(()); // "lines starting with "#", possibly preceded by whitespace"
        }
        match keyword {
            b"log" => self.log(line, args),
            b"witness" => self.witness(line, args),
            b"group" => self.group(line, args),
            b"quorum" => self.quorum(line, args),
            _ => Err(TlogPolicyError::UnknownKeyword {
                line,
                word: String::from_utf8_lossy(keyword).into_owned(),
            }),
        }
    }

    /// `log <vkey> [<url>]`.
    fn log(&mut self, line: usize, args: &[&[u8]]) -> Result<(), TlogPolicyError> {
        let (vkey, url) = match args {
            [vkey] => (*vkey, None),
            [vkey, url] => (*vkey, Some(url.to_vec())),
            _ => return Err(arity(line, "log", "<vkey> [<url>]", args.len())),
        };
        if self.logs.len() >= MAX_POLICY_LOGS {
            return Err(too_many(line, "logs", MAX_POLICY_LOGS));
        }
        let verifier = std::str::from_utf8(vkey)
            .map_err(|_| "a vkey is UTF-8 text".to_owned())
            .and_then(|t| NoteVerifier::parse(t).map_err(|e| e.to_string()))
            .map_err(|detail| TlogPolicyError::LogKey { line, detail })?;
        if let Some((_, first)) = self
            .logs
            .iter()
            .find(|(l, _)| l.verifier.key == verifier.key)
        {
            let first = *first;
            return Err(TlogPolicyError::DuplicateLog { line, first });
        }
        self.logs.push((PolicyLog { verifier, url }, line));
        Ok(())
    }

    /// `witness <name> <vkey> [<url>]`.
    fn witness(&mut self, line: usize, args: &[&[u8]]) -> Result<(), TlogPolicyError> {
        let (name, vkey, url) = match args {
            [name, vkey] => (*name, *vkey, None),
            [name, vkey, url] => (*name, *vkey, Some(url.to_vec())),
            _ => return Err(arity(line, "witness", "<name> <vkey> [<url>]", args.len())),
        };
        if self.witnesses.len() >= MAX_POLICY_WITNESSES {
            return Err(too_many(line, "witnesses", MAX_POLICY_WITNESSES));
        }
        let name = self.new_name(line, name)?;
        let verifier = std::str::from_utf8(vkey)
            .map_err(|_| CosigError::VerifierFormat(String::from_utf8_lossy(vkey).into_owned()))
            .and_then(WitnessVerifier::parse)
            .map_err(|source| TlogPolicyError::WitnessKey { line, source })?;
        let same_key = |(w, _): &&(PolicyWitness, usize)| w.verifier.key == verifier.key;
        if let Some((_, first)) = self.witnesses.iter().find(same_key) {
            let first = *first;
            return Err(TlogPolicyError::DuplicateWitness { line, first });
        }
        let index = self.witnesses.len();
        self.names.push((name.clone(), Member::Witness(index)));
        self.witnesses.push((
            PolicyWitness {
                name,
                verifier,
                url,
            },
            line,
        ));
        Ok(())
    }

    /// `group <name> all|any|<k> <name>...`.
    fn group(&mut self, line: usize, args: &[&[u8]]) -> Result<(), TlogPolicyError> {
        let [name, threshold, members @ ..] = args else {
            return Err(arity(
                line,
                "group",
                "<name> all|any|<k> <name>...",
                args.len(),
            ));
        };
        if members.is_empty() {
            return Err(arity(
                line,
                "group",
                "<name> all|any|<k> <name>...",
                args.len(),
            ));
        }
        if self.groups.len() >= MAX_POLICY_GROUPS {
            return Err(too_many(line, "groups", MAX_POLICY_GROUPS));
        }
        let name = self.new_name(line, name)?;
        let threshold = parse_threshold(line, threshold, members.len())?;
        let mut resolved = Vec::with_capacity(members.len());
        for &member in members {
            if member == NONE {
                return Err(TlogPolicyError::NoneMember(line));
            }
            let m = self.resolve(line, member)?;
            if self.listed.contains(&m) {
                let name = Name(member.to_vec());
                return Err(TlogPolicyError::MemberTwice { line, name });
            }
            self.listed.push(m);
            resolved.push(m);
        }
        self.names
            .push((name.clone(), Member::Group(self.groups.len())));
        self.groups.push(PolicyGroup {
            name,
            threshold,
            members: resolved,
        });
        Ok(())
    }

    /// `quorum <name>`: exactly one, naming `none` or an earlier name.
    fn quorum(&mut self, line: usize, args: &[&[u8]]) -> Result<(), TlogPolicyError> {
        let [name] = args else {
            return Err(arity(line, "quorum", "<name>", args.len()));
        };
        if let Some((_, first)) = self.quorum {
            return Err(TlogPolicyError::QuorumTwice { line, first });
        }
        let quorum = if *name == NONE {
            Quorum::None
        } else {
            Quorum::Member(self.resolve(line, name)?)
        };
        self.quorum = Some((quorum, line));
        Ok(())
    }

    /// A name being defined: not `none`, not defined before.
    fn new_name(&self, line: usize, name: &[u8]) -> Result<Name, TlogPolicyError> {
        if name == NONE || self.names.iter().any(|(n, _)| n.0 == name) {
            let name = Name(name.to_vec());
            return Err(TlogPolicyError::DuplicateName { line, name });
        }
        Ok(Name(name.to_vec()))
    }

    /// A name defined on an earlier line.
    fn resolve(&self, line: usize, name: &[u8]) -> Result<Member, TlogPolicyError> {
        self.names
            .iter()
            .find(|(n, _)| n.0 == name)
            .map(|(_, m)| *m)
            .ok_or_else(|| TlogPolicyError::Undefined {
                line,
                name: Name(name.to_vec()),
            })
    }
}

/// `all` (k = n), `any` (k = 1), or decimal k, 1 <= k <= n. Decision: the
/// decimal has no sign and no leading zero (spec/witness.md).
pub(super) fn parse_threshold(
    line: usize,
    text: &[u8],
    n: usize,
) -> Result<usize, TlogPolicyError> {
    let bad = || TlogPolicyError::Threshold {
        line,
        found: String::from_utf8_lossy(text).into_owned(),
        n,
    };
    match text {
        b"all" => Ok(n),
        b"any" => Ok(1),
        [b'1'..=b'9', rest @ ..] if rest.iter().all(u8::is_ascii_digit) => {
            let k: usize = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(bad)?;
            if k > n { Err(bad()) } else { Ok(k) }
        }
        _ => Err(bad()),
    }
}

fn arity(
    line: usize,
    keyword: &'static str,
    expected: &'static str,
    found: usize,
) -> TlogPolicyError {
    TlogPolicyError::Arity {
        line,
        keyword,
        expected,
        found,
    }
}

fn too_many(line: usize, what: &'static str, limit: usize) -> TlogPolicyError {
    TlogPolicyError::TooMany { line, what, limit }
}
