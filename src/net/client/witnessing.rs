//! witnessing: the log's side of C2SP tlog-witness v1 (spec/witness.md
//! "Witnessed log").
//!
//! Boundary: a checkpoint note and a way to prove consistency in; the same
//! note with the cosignature lines of a policy quorum out. Each witness of
//! the policy that has a URL gets `POST <url>/add-checkpoint` with the old
//! size it last cosigned (remembered here, learnt from its 409 answer, 0 at
//! first), the consistency proof from that size, and the checkpoint. A
//! cosignature counts only once it verifies under the witness key the policy
//! names, and a witness adds at most one line. Requests have a timeout and
//! are retried with backoff; rounds repeat until the quorum is met or the
//! caller stops; once it is met, the others get a grace period. Nothing here is persisted:
//! after a restart the old sizes are learnt again from the 409 answers.
//! Progress and every failure go, one JSON line each, to a caller-given sink.

use super::{Client, ClientError};
use crate::net::server::accept::stopped;
use crate::tlog::cosig::{self, WitnessVerifier};
use crate::tlog::merkle::Hash;
use crate::tlog::note::Note;
use crate::tlog::policy::TlogPolicy;
use crate::witness::{AddCheckpointRequest, parse_size_body};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Time allowed for one `add-checkpoint` exchange with one witness.
pub const WITNESS_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts at one witness within a round (transport errors, 5xx, timeouts).
pub const WITNESS_ATTEMPTS: u32 = 3;
/// First pause between attempts; doubled each time up to [`WITNESS_BACKOFF_MAX`].
pub const WITNESS_BACKOFF_FIRST: Duration = Duration::from_millis(200);
/// Longest pause between attempts or rounds.
pub const WITNESS_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// 409 answers followed within one attempt (each teaches a new old size).
pub const WITNESS_MAX_CONFLICTS: u32 = 3;
/// Largest `add-checkpoint` answer read (a few cosignature lines).
pub const MAX_WITNESS_ANSWER_BYTES: usize = 16 * 1024;

/// Why witnessing could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessingError {
    /// A witness URL is not an `http://` URL.
    #[error("witness {name}: URL")]
    Url {
        /// The witness's name in the policy.
        name: String,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// Even every witness with a URL cosigning would not meet the quorum.
    #[error(
        "the policy's quorum cannot be met by the witnesses that have a URL \
         (a witness line needs a URL for the log to reach it)"
    )]
    Unreachable,
}

/// Computes a consistency proof from `old` to `new` (the log's tiles).
pub type Prover = Arc<dyn Fn(u64, u64) -> Result<Vec<Hash>, String> + Send + Sync>;
/// Receives one JSON line per witnessing event.
pub type EventSink = Arc<dyn Fn(&str) + Send + Sync>;

/// One witness the log asks.
#[derive(Debug)]
struct Target {
    /// Index into `TlogPolicy::witnesses`.
    index: usize,
    /// The witness's name in the policy (for messages).
    name: String,
    verifier: WitnessVerifier,
    client: Client,
    /// The size this witness last cosigned, as far as the log knows.
    known: Mutex<Option<u64>>,
    /// What this process saw of it: the size and time of the last
    /// cosignature it got, and the outcome of every request.
    seen: Mutex<Seen>,
}

/// What the log saw of one witness since it started (for metrics and the
/// status page).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    last_cosigned: Option<(u64, std::time::SystemTime)>,
    cosigned: u64,
    refused: u64,
    unreachable: u64,
}

/// One witness of the policy as the log saw it (`Witnessing::status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessStatus {
    /// The witness's name in the policy.
    pub name: String,
    /// The size it last cosigned, as the log knows it (from a cosignature
    /// or a 409 answer); `None` before it answered.
    pub known_size: Option<u64>,
    /// The size and time of the last cosignature this process got from it.
    pub last_cosigned: Option<(u64, std::time::SystemTime)>,
    /// Requests that ended cosigned, refused, unreachable.
    pub cosigned: u64,
    /// See `cosigned`.
    pub refused: u64,
    /// See `cosigned`.
    pub unreachable: u64,
}

/// The witnesses of a policy, with what the log learnt of each.
#[derive(Debug)]
pub struct Witnessing {
    policy: TlogPolicy,
    targets: Vec<Arc<Target>>,
    /// How long the witnesses beyond the quorum are waited for.
    grace: Duration,
}

/// Default of [`Witnessing::with_grace`] (`--witness-grace`).
pub const WITNESS_GRACE_DEFAULT: Duration = Duration::from_secs(1);

/// A checkpoint a quorum cosigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witnessed {
    /// The checkpoint note with the verified cosignature lines appended.
    pub note: String,
    /// The policy names of the witnesses whose lines were appended.
    pub cosigners: Vec<String>,
}

/// Witnessing ended without a quorum because the service is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the service stopped before a quorum of witnesses cosigned")]
pub struct Stopped;

/// How asking one witness ended.
enum Asked {
    /// Its cosignature line(s), verified under the policy key.
    Cosigned(String),
    /// It cannot cosign this checkpoint (a refusal or a bad answer).
    Refused(String),
    /// It could not be reached within the attempts.
    Unreachable(String),
}

impl Witnessing {
    /// Clients for the policy's witnesses that have a URL; the quorum must
    /// be reachable with them.
    pub fn new(policy: TlogPolicy) -> Result<Witnessing, WitnessingError> {
        let mut targets = Vec::new();
        for (index, w) in policy.witnesses.iter().enumerate() {
            let Some(url) = &w.url else { continue };
            let name = w.name.to_string();
            let url = String::from_utf8_lossy(url);
            let client = Client::new(&url).map_err(|source| WitnessingError::Url {
                name: name.clone(),
                source,
            })?;
            targets.push(Arc::new(Target {
                index,
                name,
                verifier: w.verifier.clone(),
                client,
                known: Mutex::new(None),
                seen: Mutex::new(Seen::default()),
            }));
        }
        let mut reachable = vec![false; policy.witnesses.len()];
        for t in &targets {
            if let Some(r) = reachable.get_mut(t.index) {
                *r = true;
            }
        }
        if !policy.quorum_met(&reachable) {
            return Err(WitnessingError::Unreachable);
        }
        Ok(Witnessing {
            policy,
            targets,
            grace: WITNESS_GRACE_DEFAULT,
        })
    }

    /// Once the quorum cosigned, wait up to `grace` for the other
    /// witnesses asked and publish their lines too (so a reader whose
    /// policy is stricter than the log's quorum verifies while they are up).
    pub fn with_grace(mut self, grace: Duration) -> Witnessing {
        self.grace = grace;
        self
    }

    /// The policy.
    pub fn policy(&self) -> &TlogPolicy {
        &self.policy
    }

    /// Every witness the log asks (those of the policy with a URL), in
    /// policy order, with what it saw of each.
    pub fn status(&self) -> Vec<WitnessStatus> {
        self.targets
            .iter()
            .map(|t| {
                let seen = t.seen.lock().map_or(Seen::default(), |s| *s);
                WitnessStatus {
                    name: t.name.clone(),
                    known_size: t.known.lock().map_or(None, |k| *k),
                    last_cosigned: seen.last_cosigned,
                    cosigned: seen.cosigned,
                    refused: seen.refused,
                    unreachable: seen.unreachable,
                }
            })
            .collect()
    }

    /// Get `note` (a signed checkpoint of `size` leaves) cosigned by a
    /// quorum: returns the note with the verified cosignature lines
    /// appended. Retries, round after round, until the quorum is met or
    /// `stop` is set.
    pub async fn witness(
        &self,
        note: &str,
        size: u64,
        prover: Prover,
        sink: EventSink,
        mut stop: watch::Receiver<bool>,
    ) -> Result<Witnessed, Stopped> {
        let mut got: Vec<Option<String>> = vec![None; self.policy.witnesses.len()];
        let note: Arc<str> = Arc::from(note);
        let mut round: u32 = 0;
        loop {
            if self.quorum(&got) {
                return Ok(self.cosigned(&note, &got));
            }
            let mut tasks = tokio::task::JoinSet::new();
            for t in self.targets.iter().filter(|t| got_none(&got, t.index)) {
                let (t, note, prover) = (Arc::clone(t), Arc::clone(&note), Arc::clone(&prover));
                let sink = Arc::clone(&sink);
                tasks.spawn(async move {
                    let asked = ask(&t, &note, size, &prover).await;
                    event(&sink, &t, size, &asked);
                    (t.index, asked)
                });
            }
            loop {
                let joined = tokio::select! {
                    j = tasks.join_next() => j,
                    _ = stopped(&mut stop) => return Err(Stopped),
                };
                let Some(joined) = joined else { break };
                if let Ok((i, Asked::Cosigned(lines))) = joined {
                    if let Some(slot) = got.get_mut(i) {
                        *slot = Some(lines);
                    }
                    if self.quorum(&got) {
                        // The others get the grace period; a request cut
                        // short is answered 409 next time, and re-learnt.
                        self.grace(&mut tasks, &mut got, &mut stop).await;
                        return Ok(self.cosigned(&note, &got));
                    }
                }
            }
            let wait = backoff(round);
            let line = serde_json::json!({"event": "quorum_not_met", "tree_size": size,
                "cosigned": got.iter().filter(|g| g.is_some()).count(),
                "retry_in_ms": wait.as_millis() as u64});
            sink(&line.to_string());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stopped(&mut stop) => return Err(Stopped),
            }
            round = round.saturating_add(1);
        }
    }

    /// Quorum met: keep collecting the witnesses still asked for
    /// [`Witnessing::grace`] (or until the service stops), then drop the rest.
    async fn grace(
        &self,
        tasks: &mut tokio::task::JoinSet<(usize, Asked)>,
        got: &mut [Option<String>],
        stop: &mut watch::Receiver<bool>,
    ) {
        let deadline = tokio::time::Instant::now() + self.grace;
        loop {
            let joined = tokio::select! {
                j = tasks.join_next() => j,
                _ = tokio::time::sleep_until(deadline) => None,
                _ = stopped(stop) => None,
            };
            let Some(joined) = joined else { break };
            if let Ok((i, Asked::Cosigned(lines))) = joined
                && let Some(slot) = got.get_mut(i)
            {
                *slot = Some(lines);
            }
        }
        tasks.abort_all();
    }

    /// The note with the cosignature lines appended, in policy order.
    fn cosigned(&self, note: &str, got: &[Option<String>]) -> Witnessed {
        let mut out = Witnessed {
            note: note.to_owned(),
            cosigners: Vec::new(),
        };
        for (w, lines) in self.policy.witnesses.iter().zip(got) {
            if let Some(lines) = lines {
                // Never past the C2SP note limits, whatever was collected.
                let longer = format!("{}{lines}", out.note);
                if Note::parse(longer.as_bytes()).is_ok() {
                    out.note = longer;
                    out.cosigners.push(w.name.to_string());
                }
            }
        }
        out
    }

    fn quorum(&self, got: &[Option<String>]) -> bool {
        let flags: Vec<bool> = got.iter().map(Option::is_some).collect();
        self.policy.quorum_met(&flags)
    }
}

fn got_none(got: &[Option<String>], i: usize) -> bool {
    got.get(i).is_some_and(Option::is_none)
}

/// `WITNESS_BACKOFF_FIRST · 2^n`, at most [`WITNESS_BACKOFF_MAX`].
fn backoff(n: u32) -> Duration {
    WITNESS_BACKOFF_FIRST
        .checked_mul(1u32.checked_shl(n.min(16)).unwrap_or(u32::MAX))
        .map_or(WITNESS_BACKOFF_MAX, |d| d.min(WITNESS_BACKOFF_MAX))
}

/// One witness event line, and the witness's counters.
fn event(sink: &EventSink, t: &Target, size: u64, asked: &Asked) {
    if let Ok(mut seen) = t.seen.lock() {
        match asked {
            Asked::Cosigned(_) => {
                seen.cosigned += 1;
                seen.last_cosigned = Some((size, std::time::SystemTime::now()));
            }
            Asked::Refused(_) => seen.refused += 1,
            Asked::Unreachable(_) => seen.unreachable += 1,
        }
    }
    let (outcome, detail) = match asked {
        Asked::Cosigned(_) => ("cosigned", None),
        Asked::Refused(d) => ("refused", Some(d.as_str())),
        Asked::Unreachable(d) => ("unreachable", Some(d.as_str())),
    };
    let line = serde_json::json!({"event": "witness", "witness": t.name,
        "url": t.client.base(), "tree_size": size, "outcome": outcome, "detail": detail});
    sink(&line.to_string());
}

/// Ask one witness to cosign, following its 409s and retrying what may pass.
async fn ask(t: &Target, note: &str, size: u64, prover: &Prover) -> Asked {
    let mut attempt: u32 = 0;
    let mut conflicts: u32 = 0;
    loop {
        let old = t.known.lock().map_or(None, |k| *k).unwrap_or(0);
        let transient = match once(t, note, size, old, prover).await {
            Once::Done(asked) => return asked,
            Once::Conflict(n) => {
                if let Ok(mut k) = t.known.lock() {
                    *k = Some(n);
                }
                conflicts += 1;
                if conflicts <= WITNESS_MAX_CONFLICTS {
                    continue;
                }
                format!("{conflicts} conflicting sizes in a row (last {n})")
            }
            Once::Transient(d) => d,
        };
        attempt += 1;
        if attempt >= WITNESS_ATTEMPTS {
            return Asked::Unreachable(format!("after {attempt} attempts: {transient}"));
        }
        tokio::time::sleep(backoff(attempt - 1)).await;
    }
}

/// One exchange.
enum Once {
    Done(Asked),
    /// 409: the size the witness last cosigned.
    Conflict(u64),
    Transient(String),
}

async fn once(t: &Target, note: &str, size: u64, old: u64, prover: &Prover) -> Once {
    if old > size {
        return Once::Done(Asked::Refused(format!(
            "the witness cosigned size {old} of this log, past this checkpoint's {size}: \
             another history of the log, or a log reset"
        )));
    }
    let proof = if old == 0 || old == size {
        Vec::new()
    } else {
        let p = Arc::clone(prover);
        match tokio::task::spawn_blocking(move || p(old, size)).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Once::Transient(format!("consistency proof {old}..{size}: {e}")),
            Err(_) => return Once::Transient("the proof task stopped".to_string()),
        }
    };
    let body = Bytes::from(AddCheckpointRequest::to_body(old, &proof, note));
    let send = t.client.send(
        Method::POST,
        "add-checkpoint",
        body,
        None,
        MAX_WITNESS_ANSWER_BYTES,
    );
    let answer = match tokio::time::timeout(WITNESS_REQUEST_TIMEOUT, send).await {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => return Once::Transient(e.to_string()),
        Err(_) => {
            return Once::Transient(format!(
                "no answer within {} s",
                WITNESS_REQUEST_TIMEOUT.as_secs()
            ));
        }
    };
    let text = String::from_utf8_lossy(&answer.body);
    let first_line = text.lines().next().unwrap_or_default().to_owned();
    match answer.status {
        StatusCode::OK => Once::Done(check_answer(t, note, &answer.body, size)),
        StatusCode::CONFLICT => match parse_size_body(&answer.body) {
            Some(n) if n != old => Once::Conflict(n),
            Some(n) => Once::Done(Asked::Refused(format!(
                "409 names size {n}, the old size sent"
            ))),
            None => Once::Done(Asked::Refused(format!(
                "409 without a size body: {first_line:?}"
            ))),
        },
        s if s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT => {
            Once::Transient(format!("HTTP {}: {first_line}", s.as_u16()))
        }
        s => Once::Done(Asked::Refused(format!("HTTP {}: {first_line}", s.as_u16()))),
    }
}

/// A 200 answer: at most one line is taken, the first of this witness's
/// key that verifies over the checkpoint body under the key the policy
/// names; a line of that key that fails refuses the answer, other lines are
/// ignored. However many lines a witness sends, it adds one to the note.
fn check_answer(t: &Target, note: &str, body: &[u8], size: u64) -> Asked {
    let Ok(lines) = std::str::from_utf8(body) else {
        return Asked::Refused("the answer is not UTF-8".to_string());
    };
    match pick_cosignature(&t.verifier, note, lines) {
        Ok(line) => {
            if let Ok(mut k) = t.known.lock() {
                *k = Some(size);
            }
            Asked::Cosigned(line)
        }
        Err(why) => Asked::Refused(why),
    }
}

/// The one verified cosignature line of `verifier` in `lines` (each
/// answer line is read against `note` on its own, so no count of lines a
/// peer sends can make a note over the limits).
fn pick_cosignature(verifier: &WitnessVerifier, note: &str, lines: &str) -> Result<String, String> {
    let mut mine: Option<String> = None;
    for line in lines.split_terminator('\n') {
        let Ok(parsed) = Note::parse(format!("{note}{line}\n").as_bytes()) else {
            return Err("the answer is not a list of signature lines".to_string());
        };
        let Some(sig) = parsed.signatures.last() else {
            continue;
        };
        if !verifier.matches(sig) {
            continue;
        }
        match cosig::verify(&parsed.text, sig, verifier) {
            Ok(_) if mine.is_none() => mine = Some(format!("{line}\n")),
            Ok(_) => {}
            Err(e) => {
                return Err(format!(
                    "its cosignature does not verify under the policy key {verifier}: {e}"
                ));
            }
        }
    }
    mine.ok_or_else(|| format!("no cosignature by the policy key {verifier} in the answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "example.com/log\n5\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";

    fn setup() -> (String, WitnessVerifier, crate::keys::SigningKey) {
        let log = crate::keys::SigningKey::from_bytes(&[1; 32]);
        let note = crate::tlog::note::sign(BODY, "example.com/log", &log).unwrap();
        let wk = crate::keys::SigningKey::from_bytes(&[2; 32]);
        let v = WitnessVerifier::new("w1.example", wk.verifying_key()).unwrap();
        (note, v, wk)
    }

    #[test]
    fn a_witness_that_repeats_its_line_adds_one_line() {
        let (note, v, wk) = setup();
        let line = cosig::sign(BODY, "w1.example", &wk, 1_700_000_000).unwrap();
        for n in [1, 2, 99, 100, 150] {
            let got = pick_cosignature(&v, &note, &line.repeat(n)).unwrap();
            assert_eq!(got, line, "{n} lines");
        }
        // Other keys' lines around it are ignored, not taken.
        let other = crate::keys::SigningKey::from_bytes(&[3; 32]);
        let foreign = cosig::sign(BODY, "w2.example", &other, 5).unwrap();
        let got = pick_cosignature(&v, &note, &format!("{}{line}", foreign.repeat(120))).unwrap();
        assert_eq!(got, line);
    }

    #[test]
    fn a_failing_line_of_the_witness_key_refuses_the_answer() {
        let (note, v, wk) = setup();
        let good = cosig::sign(BODY, "w1.example", &wk, 1_700_000_000).unwrap();
        let other_body = BODY.replace('5', "6");
        let bad = cosig::sign(&other_body, "w1.example", &wk, 1_700_000_000).unwrap();
        assert!(pick_cosignature(&v, &note, &format!("{good}{bad}")).is_err());
        assert!(pick_cosignature(&v, &note, "").is_err());
        assert!(pick_cosignature(&v, &note, "not a line\n").is_err());
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), WITNESS_BACKOFF_FIRST);
        assert_eq!(backoff(1), WITNESS_BACKOFF_FIRST * 2);
        assert_eq!(backoff(40), WITNESS_BACKOFF_MAX);
    }
}
