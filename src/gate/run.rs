//! run: one check of a policy, run in the clean copy, its evidence
//! stored (spec/gate.md "Evidence").
//!
//! The check's argv runs with no shell, standard input closed, in its own
//! process group, its stdout and stderr written to files in the gate's
//! private directory and stored whole in the store afterwards. At the
//! timeout, on an interrupt, or once an output passes
//! [`MAX_CHECK_OUTPUT_BYTES`], the whole process group is killed (SIGKILL)
//! and the check is not evaluated; when the check ends by itself, whatever
//! it left running in its group is killed too. On Linux the gate adopts
//! the orphans of its checks (it is their child subreaper) and reaps the
//! killed group before it goes on, so no process of a check outlives its
//! verdict; elsewhere the group is signalled and not waited for. A check that could not be
//! started, was killed by a signal, timed out or was interrupted is a
//! [`NotRun`]: never a pass, never a failure.

use super::policy::Check;
use super::store::{GateStore, StoreError};
use crate::digest::Digest;
use crate::limits::MAX_CHECK_OUTPUT_BYTES;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest pause between two looks at a running check.
const MAX_POLL: Duration = Duration::from_millis(20);

/// Longest wait for a killed check's process group to be reaped: a process
/// in an uninterruptible system call dies only when the call returns.
const GROUP_REAP_WAIT: Duration = Duration::from_secs(10);

/// What one check that ran to its end did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    /// The check's name.
    pub name: String,
    /// Its argv as the policy gives it.
    pub run: Vec<String>,
    /// Its exit status.
    pub exit: i32,
    /// Wall-clock time, milliseconds.
    pub duration_ms: u64,
    /// Its stdout, stored.
    pub stdout: Digest,
    /// Bytes of stdout.
    pub stdout_bytes: u64,
    /// Its stderr, stored.
    pub stderr: Digest,
    /// Bytes of stderr.
    pub stderr_bytes: u64,
}

/// Why a check has no result: not a verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotRun {
    /// The program does not exist.
    #[error("check {name}: program {program:?} not found")]
    NotFound {
        /// The check.
        name: String,
        /// argv\[0\].
        program: String,
    },
    /// The program could not be started for another reason.
    #[error("check {name}: cannot start {program:?}")]
    Spawn {
        /// The check.
        name: String,
        /// argv\[0\].
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// It ran past its timeout; its process group was killed.
    #[error("check {name}: timed out after {timeout_s} s; its process group was killed")]
    TimedOut {
        /// The check.
        name: String,
        /// The timeout.
        timeout_s: u64,
    },
    /// A signal ended it.
    #[error("check {name}: killed by signal {signal}")]
    Killed {
        /// The check.
        name: String,
        /// The signal number.
        signal: i32,
    },
    /// It wrote more than the output limit; its process group was killed.
    #[error("check {name}: wrote more than {MAX_CHECK_OUTPUT_BYTES} bytes of output; stopped")]
    OutputTooLarge {
        /// The check.
        name: String,
    },
    /// The gate was interrupted (SIGINT or SIGTERM); the check was killed.
    #[error("interrupted during check {name}; its process group was killed")]
    Interrupted {
        /// The check.
        name: String,
    },
    /// Waiting for it or capturing its output failed.
    #[error("check {name}: capturing its result")]
    Io {
        /// The check.
        name: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Its captured output could not be read back.
    #[error("check {name}: reading its captured output")]
    Capture {
        /// The check.
        name: String,
        /// Why.
        #[source]
        source: crate::io::InputError,
    },
    /// Its output could not be stored or read back.
    #[error("check {name}: storing its output")]
    Store {
        /// The check.
        name: String,
        /// Why.
        #[source]
        source: StoreError,
    },
}

/// Environment variables of the gate's own git not passed to checks.
const CHECK_ENV_REMOVED: [&str; 4] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
];

/// Run `check` in `clean`, capture files under `scratch` (`index` tells
/// them apart), store its outputs in `store`.
pub fn run_check(
    check: &Check,
    clean: &Path,
    scratch: &Path,
    index: usize,
    store: &GateStore,
    interrupted: &AtomicBool,
) -> Result<Ran, NotRun> {
    let name = check.name.clone();
    let out_path = scratch.join(format!("{index}.stdout"));
    let err_path = scratch.join(format!("{index}.stderr"));
    let start = Instant::now();
    adopt_orphans();
    let mut child = spawn(check, clean, &out_path, &err_path)?;
    let status = wait(
        check,
        &mut child,
        start,
        [&out_path, &err_path],
        interrupted,
    )?;
    let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let exit = match status.code() {
        Some(code) => code,
        None => {
            return Err(NotRun::Killed {
                name,
                signal: signal_of(&status),
            });
        }
    };
    let (stdout, stdout_bytes) = keep(&out_path, store, &name)?;
    let (stderr, stderr_bytes) = keep(&err_path, store, &name)?;
    Ok(Ran {
        name,
        run: check.run.clone(),
        exit,
        duration_ms,
        stdout,
        stdout_bytes,
        stderr,
        stderr_bytes,
    })
}

/// Start the check in `clean`, its own process group, output to the files.
fn spawn(
    check: &Check,
    clean: &Path,
    out_path: &Path,
    err_path: &Path,
) -> Result<std::process::Child, NotRun> {
    let name = check.name.clone();
    let io = |source| NotRun::Io {
        name: name.clone(),
        source,
    };
    // The capture files are new in the run's own temporary directory:
    // created exclusively, never through a planted link.
    let mode = crate::io::OUTPUT_FILE_MODE;
    let stdout = crate::io::create_exclusive(out_path, mode).map_err(io)?;
    let stderr = crate::io::create_exclusive(err_path, mode).map_err(io)?;
    let (program, args) = match check.run.split_first() {
        Some((p, a)) => (p.clone(), a),
        None => (String::new(), &[][..]),
    };
    let mut cmd = Command::new(program_path(clean, &program));
    cmd.args(args)
        .current_dir(clean)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    for var in CHECK_ENV_REMOVED {
        cmd.env_remove(var);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => NotRun::NotFound { name, program },
        _ => NotRun::Spawn {
            name,
            program,
            source,
        },
    })
}

/// Wait for the check; kill its group at the timeout, on an interrupt or
/// when an output grows past the limit, and after it ends by itself.
fn wait(
    check: &Check,
    child: &mut std::process::Child,
    start: Instant,
    outputs: [&Path; 2],
    interrupted: &AtomicBool,
) -> Result<std::process::ExitStatus, NotRun> {
    let name = || check.name.clone();
    let group = child.id();
    let stop = |child: &mut std::process::Child, why: NotRun| {
        kill_group(group);
        let _ = child.wait();
        reap_group(group);
        Err(why)
    };
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // Whatever the check left running in its group ends with it.
                kill_group(group);
                reap_group(group);
                return Ok(status);
            }
            Ok(None) => {}
            Err(source) => {
                return stop(
                    child,
                    NotRun::Io {
                        name: name(),
                        source,
                    },
                );
            }
        }
        if interrupted.load(Ordering::SeqCst) {
            return stop(child, NotRun::Interrupted { name: name() });
        }
        if start.elapsed() >= check.timeout {
            let timeout_s = check.timeout.as_secs();
            return stop(
                child,
                NotRun::TimedOut {
                    name: name(),
                    timeout_s,
                },
            );
        }
        if outputs.iter().any(|p| too_large(p)) {
            return stop(child, NotRun::OutputTooLarge { name: name() });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// argv\[0\]: a bare name is looked up on PATH; a relative path with a `/`
/// is relative to the clean copy, not to wherever the gate was started.
fn program_path(clean: &Path, program: &str) -> PathBuf {
    let p = Path::new(program);
    if program.contains('/') && p.is_relative() {
        clean.join(p)
    } else {
        p.to_path_buf()
    }
}

fn too_large(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_CHECK_OUTPUT_BYTES)
}

/// Store a capture file whole; its digest and size.
fn keep(path: &Path, store: &GateStore, name: &str) -> Result<(Digest, u64), NotRun> {
    let limit = usize::try_from(MAX_CHECK_OUTPUT_BYTES).unwrap_or(usize::MAX);
    let bytes = crate::io::read_path(path, limit).map_err(|source| NotRun::Capture {
        name: name.to_string(),
        source,
    })?;
    let digest = store.put(&bytes).map_err(|source| NotRun::Store {
        name: name.to_string(),
        source,
    })?;
    Ok((digest, bytes.len() as u64))
}

/// SIGKILL to the process group `group` (the check's pid); absence is fine.
#[cfg(unix)]
fn kill_group(group: u32) {
    let pid = i32::try_from(group)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_group: u32) {}

/// Make the gate the child subreaper of its checks, once per process: a
/// check's background process whose parent dies is the gate's to reap,
/// not init's, so [`reap_group`] can wait for it.
#[cfg(target_os = "linux")]
fn adopt_orphans() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    });
}

#[cfg(not(target_os = "linux"))]
fn adopt_orphans() {}

/// Reap every process of the killed group `group` (the gate's children or
/// adopted orphans) until none is left or [`GROUP_REAP_WAIT`] has passed.
#[cfg(target_os = "linux")]
fn reap_group(group: u32) {
    use rustix::process::{Pid, WaitOptions, waitpgid};
    let Some(pgid) = i32::try_from(group).ok().and_then(Pid::from_raw) else {
        return;
    };
    let deadline = Instant::now() + GROUP_REAP_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match waitpgid(pgid, WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => continue,
            // ECHILD: no process of the group is left.
            Err(_) => return,
        }
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_POLL);
    }
}

#[cfg(not(target_os = "linux"))]
fn reap_group(_group: u32) {}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> i32 {
    std::os::unix::process::ExitStatusExt::signal(status).unwrap_or(0)
}

#[cfg(not(unix))]
fn signal_of(_status: &std::process::ExitStatus) -> i32 {
    0
}
