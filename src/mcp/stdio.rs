//! stdio: the proxy on standard streams, with threads (spec/gate-mcp.md
//! "stdio").
//!
//! The server is started as a child: its stdin and stdout are the proxy's
//! to relay, its stderr is inherited (passed through as it comes). One
//! thread reads each side, one writes each side; messages are one line
//! each, at most [`MAX_FRAME_BYTES`](super::MAX_FRAME_BYTES), queued at
//! most [`MAX_QUEUE_FRAMES`](super::MAX_QUEUE_FRAMES) deep. A line over
//! the limit, not UTF-8 or not a JSON-RPC message is refused with an error
//! to its sender and never passed on.
//!
//! Between the readers and the writers sits the committer
//! ([`super::commit`]): a reader stages what each message makes durable
//! and hands it over; the committer makes every message that waited
//! durable in one group commit, then sends their messages in the order
//! read. Readers stage the next messages while a group is being synced,
//! a burst of steps pays one sync, and no step reaches the server before
//! its decision is durable.
//!
//! Shutdown: when the client closes its side, the server's stdin is
//! closed; a server still running [`SHUTDOWN_GRACE`] later gets SIGTERM,
//! and SIGKILL after as long again (MCP stdio "Shutdown"). When the server
//! ends (or crashes), every call in flight is answered with an error, each
//! forwarded step gets its receipt, and the proxy ends.

use super::commit::Job;
use super::frame;
use super::relay::{Out, Relay};
use super::{MAX_FRAME_BYTES, MAX_QUEUE_FRAMES};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Duration;

/// How long the server may take to exit once its stdin is closed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Most messages read and waiting for the committer, and most it commits
/// as one group (each holds the files it staged open until then).
pub const MAX_GROUP_JOBS: usize = 64;

/// Why the proxy could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// The server could not be started.
    #[error("starting the server {program:?}")]
    Spawn {
        /// The program.
        program: OsString,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No command.
    #[error("no server command given (after --)")]
    NoCommand,
}

/// How the session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// True when the client closed its side first.
    pub by_client: bool,
    /// The server's exit code, if it exited.
    pub code: Option<i32>,
}

/// One line read: a message, or why it is refused.
#[derive(Debug)]
pub enum Line {
    /// A line (without its newline).
    Text(String),
    /// Over the limit (the rest of it was skipped).
    TooLong,
    /// Not UTF-8.
    NotUtf8,
}

/// Read the next non-blank line of at most `limit` bytes; `None` at end.
pub fn read_line(reader: &mut impl BufRead, limit: usize) -> Option<Line> {
    loop {
        let mut buf = Vec::new();
        let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        match reader.by_ref().take(cap).read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if buf.len() > limit && buf.last() != Some(&b'\n') {
            let mut sink = Vec::new();
            while matches!(reader.by_ref().take(cap).read_until(b'\n', &mut sink), Ok(n) if n > 0)
                && sink.last() != Some(&b'\n')
            {
                sink.clear();
            }
            return Some(Line::TooLong);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return Some(match String::from_utf8(buf) {
            Ok(s) => Line::Text(s),
            Err(_) => Line::NotUtf8,
        });
    }
}

/// What the writer of the server's stdin is told.
enum ToServer {
    Frame(String),
    Close,
}

enum Event {
    ClientEof,
    ServerEof,
}

/// What a reader hands the committer: a message's job, or its end.
enum Work {
    Job(Job),
    End(Event),
}

/// Queues towards both sides.
#[derive(Clone)]
struct Queues {
    server: SyncSender<ToServer>,
    client: SyncSender<String>,
}

impl Queues {
    fn send(&self, outs: Vec<Out>) {
        for o in outs {
            let _ = match o {
                Out::Server(s) => self.server.send(ToServer::Frame(s)).map_err(drop),
                Out::Client(s) => self.client.send(s).map_err(drop),
            };
        }
    }
}

/// The refusal of a line that is not a message.
fn refused(line: &Line) -> String {
    let (code, what) = match line {
        Line::TooLong => (
            frame::code::INVALID_REQUEST,
            format!("a message of over {MAX_FRAME_BYTES} bytes"),
        ),
        _ => (
            frame::code::PARSE_ERROR,
            "a message that is not UTF-8".to_string(),
        ),
    };
    frame::error_response(None, code, &format!("rcpt gate mcp refused {what}"), None)
}

/// Start the server `program` with `args`, its standard input and output
/// piped to the proxy and its standard error the proxy's own.
pub(super) fn spawn_server(program: &OsString, args: &[OsString]) -> std::io::Result<Child> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
}

/// Run the proxy: the server `command` as a child, the client on `input`
/// and `output`. Returns when the session is over, every receipt stored
/// and logged.
pub fn run(
    relay: Relay,
    command: &[OsString],
    input: impl Read + Send + 'static,
    output: impl Write + Send + 'static,
) -> Result<Ended, StdioError> {
    let (program, args) = command.split_first().ok_or(StdioError::NoCommand)?;
    let mut child = spawn_server(program, args).map_err(|source| StdioError::Spawn {
        program: program.clone(),
        source,
    })?;
    let relay = Arc::new(relay);
    let (to_server, server_rx) = sync_channel(MAX_QUEUE_FRAMES);
    let (to_client, client_rx) = sync_channel(MAX_QUEUE_FRAMES);
    let queues = Queues {
        server: to_server,
        client: to_client,
    };
    let (events, event_rx) = sync_channel(4);
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let server_writer = std::thread::spawn(move || write_server(stdin, &server_rx));
    let client_writer = std::thread::spawn(move || write_client(output, &client_rx));
    let (work, work_rx) = sync_channel(MAX_GROUP_JOBS);
    spawn_committer(Arc::clone(&relay), work_rx, queues.clone(), events);
    spawn_reader(input, Arc::clone(&relay), work.clone(), Side::Client);
    if let Some(out) = stdout {
        spawn_reader(out, Arc::clone(&relay), work, Side::Server);
    }
    let ended = wait(&mut child, &event_rx, &queues);
    let why = match ended.code {
        Some(c) => format!("the server exited with status {c}"),
        None => "the server was ended by a signal".to_string(),
    };
    queues.send(relay.server_gone(&why));
    let _ = queues.server.send(ToServer::Close);
    drop(queues);
    let _ = server_writer.join();
    let _ = client_writer.join();
    relay.close();
    Ok(ended)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// The committer: the jobs the readers staged, committed in groups (all
/// that waited while the previous group was made durable), their messages
/// sent in the order read; a reader's end passed on after its last job.
fn spawn_committer(
    relay: Arc<Relay>,
    work: Receiver<Work>,
    queues: Queues,
    events: SyncSender<Event>,
) {
    let _ = std::thread::Builder::new()
        .name("rcpt-mcp-commit".into())
        .spawn(move || {
            while let Ok(first) = work.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP_JOBS
                    && let Ok(w) = work.try_recv()
                {
                    group.push(w);
                }
                let mut jobs = Vec::with_capacity(group.len());
                for w in group {
                    match w {
                        Work::Job(j) => jobs.push(j),
                        Work::End(e) => {
                            queues.send(relay.commit(std::mem::take(&mut jobs)));
                            let _ = events.send(e);
                        }
                    }
                }
                queues.send(relay.commit(jobs));
            }
        });
}

/// A side's reader: each message staged and handed to the committer.
fn spawn_reader(
    input: impl Read + Send + 'static,
    relay: Arc<Relay>,
    work: SyncSender<Work>,
    side: Side,
) {
    let name = if side == Side::Client {
        "rcpt-mcp-client"
    } else {
        "rcpt-mcp-server"
    };
    let _ = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut reader = BufReader::with_capacity(64 * 1024, input);
            while let Some(line) = read_line(&mut reader, MAX_FRAME_BYTES) {
                let job = match (&line, side) {
                    (Line::Text(t), Side::Client) => relay.stage_from_client(t),
                    (Line::Text(t), Side::Server) => relay.stage_from_server(t),
                    (_, Side::Client) => Job::now(vec![Out::Client(refused(&line))]),
                    (_, Side::Server) => Job::now(vec![Out::Server(refused(&line))]),
                };
                if work.send(Work::Job(job)).is_err() {
                    break;
                }
            }
            let _ = work.send(Work::End(if side == Side::Client {
                Event::ClientEof
            } else {
                Event::ServerEof
            }));
        });
}

fn write_server(stdin: Option<std::process::ChildStdin>, rx: &Receiver<ToServer>) {
    let Some(stdin) = stdin else { return };
    let mut w = std::io::BufWriter::new(stdin);
    while let Ok(ToServer::Frame(f)) = rx.recv() {
        let mut ok = w
            .write_all(f.as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .is_ok();
        while ok {
            match rx.try_recv() {
                Ok(ToServer::Frame(f)) => {
                    ok = w
                        .write_all(f.as_bytes())
                        .and_then(|()| w.write_all(b"\n"))
                        .is_ok();
                }
                Ok(ToServer::Close) => {
                    let _ = w.flush();
                    return;
                }
                Err(_) => break,
            }
        }
        if !ok || w.flush().is_err() {
            return;
        }
    }
}

fn write_client(output: impl Write, rx: &Receiver<String>) {
    let mut w = std::io::BufWriter::new(output);
    while let Ok(f) = rx.recv() {
        let mut ok = w
            .write_all(f.as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .is_ok();
        while ok && let Ok(f) = rx.try_recv() {
            ok = w
                .write_all(f.as_bytes())
                .and_then(|()| w.write_all(b"\n"))
                .is_ok();
        }
        if !ok || w.flush().is_err() {
            // The client is gone: keep draining so no sender blocks.
            while rx.recv().is_ok() {}
            return;
        }
    }
}

/// Wait for the end: the client closing (then the server is asked to
/// exit, and made to), or the server ending by itself.
fn wait(child: &mut Child, events: &Receiver<Event>, queues: &Queues) -> Ended {
    let by_client = matches!(events.recv(), Ok(Event::ClientEof));
    if by_client {
        let _ = queues.server.send(ToServer::Close);
        if events.recv_timeout(SHUTDOWN_GRACE).is_err() {
            terminate(child);
        }
    }
    let code = child.wait().ok().and_then(|s| s.code());
    Ended { by_client, code }
}

/// Wait for a child whose stdin was closed to exit: SIGTERM after
/// [`SHUTDOWN_GRACE`], SIGKILL after as long again.
pub fn stop(child: &mut Child) {
    if !exited_within(child, SHUTDOWN_GRACE) {
        terminate(child);
    }
    let _ = child.wait();
}

fn exited_within(child: &mut Child, grace: Duration) -> bool {
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// SIGTERM, then SIGKILL after the grace.
fn terminate(child: &mut Child) {
    if let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if exited_within(child, SHUTDOWN_GRACE) {
        return;
    }
    let _ = child.kill();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_bounded_and_blank_ones_skipped() {
        let text = b"\n{\"a\":1}\r\n   \nxxxxxxxxxxxxxxxxxxxxxxxxxx\n\xff\nlast";
        let mut r = BufReader::new(&text[..]);
        assert!(matches!(read_line(&mut r, 16), Some(Line::Text(t)) if t == "{\"a\":1}\r"));
        assert!(matches!(read_line(&mut r, 16), Some(Line::TooLong)));
        assert!(matches!(read_line(&mut r, 16), Some(Line::NotUtf8)));
        assert!(matches!(read_line(&mut r, 16), Some(Line::Text(t)) if t == "last"));
        assert!(read_line(&mut r, 16).is_none());
    }
}
