//! sandbox: a rules evaluation in a confined child process.
//!
//! The parent ([`run`]) starts the evaluator (the program an [`Evaluator`]
//! names: `rcpt gate rules --evaluator`, which calls [`confine`] and
//! [`serve`]) with no environment and writes its module, a line
//! `{"module"}` ([`start`]: the child compiles it while the gate reads the
//! change); then the input, a line `{"input"}` ([`Running::finish`]). It
//! reads one answer from the child's standard output (at most
//! [`MAX_RULES_ANSWER_BYTES`]) and kills it at [`RULES_DEADLINE`] after
//! the input was given.
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
use crate::io::LineReader;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

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

/// Evaluate `module` against `input` (JSON) in a child started by
/// `evaluator`.
pub fn run(
    evaluator: &Evaluator,
    module: &str,
    input: &serde_json::Value,
) -> Result<Answer, RulesError> {
    start(evaluator, module)?.finish(input)
}

/// An evaluator process started with its module, waiting for its input.
/// Dropped without [`Running::finish`], it is killed and reaped.
pub struct Running {
    child: Child,
    reaped: bool,
    module_bytes: usize,
    lines: Option<Sender<Vec<u8>>>,
    writer: Option<JoinHandle<()>>,
    finished: Receiver<()>,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

/// Start the evaluator and give it `module`: it compiles the module while
/// the caller makes the input (spec/gate.md "Rules": the evaluator is
/// started before the change is read).
pub fn start(evaluator: &Evaluator, module: &str) -> Result<Running, RulesError> {
    let mut first = serde_json::json!({ "module": module })
        .to_string()
        .into_bytes();
    first.push(b'\n');
    if first.len() > MAX_RULES_REQUEST_BYTES {
        return Err(RulesError::InputTooLarge(first.len()));
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
    let (lines, to_write) = mpsc::channel::<Vec<u8>>();
    let writer = std::thread::spawn(move || {
        if let Some(mut w) = stdin {
            for line in to_write {
                if w.write_all(&line).is_err() {
                    break;
                }
            }
        }
    });
    let err = std::thread::spawn(move || capped(stderr, MAX_STDERR_BYTES));
    let (done, finished) = mpsc::channel();
    let out = std::thread::spawn(move || {
        let out = capped(stdout, MAX_RULES_ANSWER_BYTES);
        let _ = done.send(());
        out
    });
    let module_bytes = first.len();
    let _ = lines.send(first);
    Ok(Running {
        child,
        reaped: false,
        module_bytes,
        lines: Some(lines),
        writer: Some(writer),
        finished,
        out: Some(out),
        err: Some(err),
    })
}

impl Running {
    /// The evaluator's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Give the evaluator `input` and read its answer, killing it at
    /// [`RULES_DEADLINE`].
    /// The input is JSON: a tool call's arguments may hold numbers the
    /// receipt data model has not.
    pub fn finish(mut self, input: &serde_json::Value) -> Result<Answer, RulesError> {
        let mut second = serde_json::json!({ "input": input })
            .to_string()
            .into_bytes();
        second.push(b'\n');
        let size = second.len().saturating_add(self.module_bytes);
        if size > MAX_RULES_REQUEST_BYTES {
            return Err(RulesError::InputTooLarge(size));
        }
        if let Some(lines) = self.lines.take() {
            let _ = lines.send(second);
        }
        let timed_out = self.finished.recv_timeout(RULES_DEADLINE).is_err();
        if timed_out {
            let _ = self.child.kill();
        }
        let status = self.child.wait().map_err(RulesError::Io)?;
        self.reaped = true;
        let _ = self.writer.take().map(JoinHandle::join);
        let out = self
            .out
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let err = self
            .err
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if timed_out {
            return Err(RulesError::TimedOut(RULES_DEADLINE));
        }
        answer(status, &out, &err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.lines = None;
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The answer the child wrote, or why there is none.
fn answer(status: ExitStatus, out: &[u8], err: &[u8]) -> Result<Answer, RulesError> {
    match serde_json::from_slice::<Wire>(out) {
        Ok(wire) if status.success() => Ok(match wire {
            Wire::Sets { deny, escalate } => Answer::Sets { deny, escalate },
            Wire::Refused(why) => Answer::Refused(why),
            Wire::NotEvaluated(why) => Answer::NotEvaluated(why),
        }),
        _ => Err(RulesError::Crashed {
            status: status.to_string(),
            stderr: String::from_utf8_lossy(err)
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

/// In the evaluator process: read the module's line, compile it, read the
/// input's line, write the answer (JSON) on `to`. Each line is capped at
/// [`MAX_RULES_REQUEST_BYTES`].
pub fn serve(from: impl BufRead, to: &mut impl Write) -> std::io::Result<()> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct First {
        module: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Second {
        input: Box<serde_json::value::RawValue>,
    }
    let mut lines = LineReader::new(from, "request", MAX_RULES_REQUEST_BYTES);
    let mut next = |what: &str| match lines.next().map(|l| l.bytes) {
        Some(Ok(bytes)) => Ok(bytes),
        Some(Err(e)) => Err(format!("the {what} is not understood: {e}")),
        None => Err(format!("the request ended before the {what}")),
    };
    let answer = match next("module").and_then(|b| {
        serde_json::from_slice::<First>(&b)
            .map_err(|e| format!("the module is not understood: {e}"))
    }) {
        Err(why) => Answer::NotEvaluated(why),
        Ok(first) => match vm::compile(&first.module) {
            Err(refused) => refused,
            Ok(loaded) => match next("input").and_then(|b| {
                serde_json::from_slice::<Second>(&b)
                    .map_err(|e| format!("the input is not understood: {e}"))
            }) {
                Ok(second) => loaded.evaluate(second.input.get()),
                Err(why) => Answer::NotEvaluated(why),
            },
        },
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
    to.write_all(&bytes)?;
    to.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(request: &str) -> serde_json::Value {
        let mut out = Vec::new();
        serve(request.as_bytes(), &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    const MODULE: &str = "package rcpt\ndeny contains \"big\" if { input.size > 1 }\n";

    #[test]
    fn the_module_line_then_the_input_line_give_the_sets() {
        let first = serde_json::json!({ "module": MODULE });
        let answer = served(&format!("{first}\n{{\"input\": {{\"size\": 2}}}}\n"));
        assert_eq!(
            answer,
            serde_json::json!({"sets": {"deny": ["big"], "escalate": []}})
        );
    }

    #[test]
    fn a_refused_module_is_answered_without_its_input() {
        let first =
            serde_json::json!({ "module": "package other\ndeny contains \"x\" if { true }" });
        let answer = served(&format!("{first}\n"));
        let why = answer["refused"].as_str().unwrap();
        assert!(why.contains("package rcpt"), "{why}");
    }

    #[test]
    fn a_request_cut_short_or_malformed_is_no_verdict() {
        let first = serde_json::json!({ "module": MODULE });
        for (request, says) in [
            (format!("{first}\n"), "ended before the input"),
            (
                format!("{first}\n{{\"input\": 1, \"x\": 2}}\n"),
                "input is not understood",
            ),
            (
                "{\"modul\": \"\"}\n".to_string(),
                "module is not understood",
            ),
            (String::new(), "ended before the module"),
        ] {
            let answer = served(&request);
            let why = answer["not_evaluated"].as_str().unwrap_or_default();
            assert!(why.contains(says), "{request:?}: {answer}");
        }
    }

    #[test]
    fn an_evaluator_never_given_its_input_is_killed_when_dropped() {
        let evaluator = Evaluator::new("sleep".into(), vec!["600".into()]);
        let running = start(&evaluator, MODULE).unwrap();
        let proc_dir = PathBuf::from(format!("/proc/{}", running.id()));
        assert!(proc_dir.exists());
        drop(running);
        assert!(!proc_dir.exists(), "the evaluator outlived its Running");
    }
}
