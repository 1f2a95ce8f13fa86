//! session: what one proxy session has seen, bounded (spec/gate-mcp.md
//! "The session").
//!
//! Each `read` call the server answered is recorded: the tool, the
//! arguments' digest, the answer's digest, the time. The newest
//! [`MAX_SESSION_READS`] are kept, oldest dropped first, so memory stays
//! flat however long the session runs. The rules see them as
//! `input.reads`; contracts (a later issue) consume them.

use crate::digest::Digest;
use std::collections::VecDeque;

/// Most reads a session keeps.
pub const MAX_SESSION_READS: usize = 256;

/// One read call and its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The tool.
    pub tool: String,
    /// `sha256:` over the RFC 8785 form of its arguments.
    pub arguments: Digest,
    /// `sha256:` over the RFC 8785 form of its answer (the `result`, or the `error`).
    pub answer: Digest,
    /// When the answer came (Unix seconds).
    pub at: i64,
    /// The number of the session's call it was.
    pub call: u64,
}

/// The session's reads, newest last.
#[derive(Debug, Default)]
pub struct Session {
    reads: VecDeque<Read>,
    calls: u64,
}

impl Session {
    /// The number of the next call (counted from 0).
    pub fn next_call(&mut self) -> u64 {
        let n = self.calls;
        self.calls += 1;
        n
    }

    /// Record a read, dropping the oldest beyond the bound.
    pub fn record(&mut self, read: Read) {
        if self.reads.len() == MAX_SESSION_READS {
            self.reads.pop_front();
        }
        self.reads.push_back(read);
    }

    /// The reads kept, oldest first.
    pub fn reads(&self) -> impl Iterator<Item = &Read> {
        self.reads.iter()
    }

    /// The reads as the rules' `input.reads`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.reads
                .iter()
                .map(|r| {
                    serde_json::json!({"tool": r.tool, "arguments": r.arguments.to_string(),
                                       "answer": r.answer.to_string(), "at": r.at, "call": r.call})
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_keeps_the_newest_reads_only() {
        let mut s = Session::default();
        for i in 0..(MAX_SESSION_READS as u64 + 10) {
            let call = s.next_call();
            s.record(Read {
                tool: "read_file".into(),
                arguments: Digest::sha256(&i.to_be_bytes()),
                answer: Digest::sha256(b"a"),
                at: 1,
                call,
            });
        }
        assert_eq!(s.reads().count(), MAX_SESSION_READS);
        assert_eq!(s.reads().next().unwrap().call, 10);
        assert_eq!(s.to_json().as_array().unwrap().len(), MAX_SESSION_READS);
    }
}
