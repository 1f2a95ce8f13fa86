//! sandbox: a rules evaluation in a confined child process.
//!
//! The parent ([`run`]) starts the evaluator (the program an [`Evaluator`]
//! names: `rcpt gate rules --evaluator`, which calls [`confine`] and
//! [`serve`]) with no environment, writes one request `{"module", "input"}`
//! on its standard input, reads one answer from its standard output (at
//! most [`MAX_RULES_ANSWER_BYTES`]), and kills it at [`RULES_DEADLINE`].
//! The child limits itself before it reads anything: address space
//! [`MAX_RULES_MEMORY_BYTES`], CPU time [`RULES_CPU_LIMIT_S`], no file
//! written, few descriptors. A module that exhausts memory, recurses until
//! the stack overflows or crashes the interpreter ends that child, never
//! the gate: the parent reports it as no verdict.

use super::bounds::{
    MAX_RULES_ANSWER_BYTES, MAX_RULES_MEMORY_BYTES, MAX_RULES_REQUEST_BYTES, RULES_CPU_LIMIT_S,
    RULES_DEADLINE,
};
use super::error::RulesError;
use super::vm::{self, Answer};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// How to start the evaluator process: a program and its arguments (for
/// `rcpt`: its own executable with `gate rules --evaluator`).
#[derive(Clone, Debug)]
pub struct Evaluator {
    program: PathBuf,
    args: Vec<OsString>,
}

impl Evaluator {
    /// The evaluator `program ARGS...`.
    pub fn new(program: PathBuf, args: Vec<OsString>) -> Evaluator {
        Evaluator { program, args }
    }
}

/// Most bytes of the child's standard error kept for a message.
const MAX_STDERR_BYTES: usize = 4096;

/// The answer to one request, as the child wrote it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Wire {
    Sets {
        deny: Vec<String>,
        escalate: Vec<String>,
    },
    Refused(String),
    NotEvaluated(String),
}

/// Evaluate `module` against `input` (JSON: a tool call's arguments may
/// hold numbers the receipt data model has not) in a child started by
/// `evaluator`.
pub fn run(
    evaluator: &Evaluator,
    module: &str,
    input: &serde_json::Value,
) -> Result<Answer, RulesError> {
    let request = serde_json::json!({"module": module, "input": input}).to_string();
    if request.len() > MAX_RULES_REQUEST_BYTES {
        return Err(RulesError::InputTooLarge(request.len()));
    }
    let mut child = Command::new(&evaluator.program)
        .args(&evaluator.args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RulesError::Spawn {
            program: evaluator.program.clone(),
            source,
        })?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // A child that stops reading must not block the parent: write apart.
    let writer = std::thread::spawn(move || {
        if let Some(mut w) = stdin {
            let _ = w.write_all(request.as_bytes());
        }
    });
    let err_reader = std::thread::spawn(move || capped(stderr, MAX_STDERR_BYTES));
    let (done, finished) = std::sync::mpsc::channel();
    let out_reader = std::thread::spawn(move || {
        let out = capped(stdout, MAX_RULES_ANSWER_BYTES);
        let _ = done.send(());
        out
    });
    let timed_out = finished.recv_timeout(RULES_DEADLINE).is_err();
    if timed_out {
        let _ = child.kill();
    }
    let status = child.wait().map_err(RulesError::Io)?;
    let _ = writer.join();
    let out = out_reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    if timed_out {
        return Err(RulesError::TimedOut(RULES_DEADLINE));
    }
    match serde_json::from_slice::<Wire>(&out) {
        Ok(wire) if status.success() => Ok(match wire {
            Wire::Sets { deny, escalate } => Answer::Sets { deny, escalate },
            Wire::Refused(why) => Answer::Refused(why),
            Wire::NotEvaluated(why) => Answer::NotEvaluated(why),
        }),
        _ => Err(RulesError::Crashed {
            status: status.to_string(),
            stderr: String::from_utf8_lossy(&err)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
                .collect::<Vec<_>>()
                .join(" / "),
        }),
    }
}

/// At most `cap` bytes of `from`, the rest read and dropped.
fn capped(from: Option<impl Read>, cap: usize) -> Vec<u8> {
    let Some(mut from) = from else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf) {
        let Some(chunk) = buf.get(..n).filter(|_| n > 0) else {
            break;
        };
        let room = cap.saturating_sub(kept.len()).min(chunk.len());
        kept.extend_from_slice(chunk.get(..room).unwrap_or_default());
    }
    kept
}

/// In the evaluator process, before it reads anything: limit its address
/// space, CPU time, file writes and descriptors.
pub fn confine() -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let limit = |n: u64| Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    setrlimit(Resource::As, limit(MAX_RULES_MEMORY_BYTES))?;
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(RULES_CPU_LIMIT_S),
            maximum: Some(RULES_CPU_LIMIT_S.saturating_add(1)),
        },
    )?;
    setrlimit(Resource::Fsize, limit(0))?;
    setrlimit(Resource::Nofile, limit(8))?;
    Ok(())
}

/// In the evaluator process: the answer (JSON) to one request.
pub fn serve(request: &[u8]) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        module: String,
        input: Box<serde_json::value::RawValue>,
    }
    let answer = match serde_json::from_slice::<Request>(request) {
        Ok(r) => vm::evaluate_here(&r.module, r.input.get()),
        Err(e) => Answer::NotEvaluated(format!("the request is not understood: {e}")),
    };
    let wire = match answer {
        Answer::Sets { deny, escalate } => {
            serde_json::json!({"sets": {"deny": deny, "escalate": escalate}})
        }
        Answer::Refused(why) => serde_json::json!({"refused": why}),
        Answer::NotEvaluated(why) => serde_json::json!({"not_evaluated": why}),
    };
    let mut bytes = wire.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}
