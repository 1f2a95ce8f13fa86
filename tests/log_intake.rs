//! The log's one intake (`rcpt::log::intake`, spec/log.md "The intake"):
//! the same envelopes through every way into a log (`rcpt log append DIR`,
//! the gate's hand-off, the tool-call proxy's sink, `rcpt log serve`
//! reached by `rcpt log append URL`) give logs `rcpt log check` passes and
//! bundles `rcpt verify` passes; the logs written in the same order are
//! the same log, checkpoint for checkpoint. `gate check --log` takes a
//! directory and `s3://BUCKET/PREFIX` (radosgw; skipped, said on stderr,
//! without `RCPT_S3_ENDPOINT`), and a location that cannot be a log is a
//! usage error (exit 2) that says its cause once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::log::intake::{Intake, IntakeError, Location, Options, StoreSettings};
use rcpt::mcp::sink::ReceiptLog;
use rcpt::storage::posix::PosixStore;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use support::serve::{self as ss, ORIGIN};

/// Five distinct envelopes, then the third again (a duplicate keeps its index).
fn envelopes() -> Vec<String> {
    let mut all: Vec<String> = (0..5).map(ss::envelope).collect();
    all.push(all[2].clone());
    all
}

/// Each envelope in its own file; their paths.
fn envelope_files(dir: &Path, envelopes: &[String]) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let files: Vec<PathBuf> = (0..envelopes.len())
        .map(|i| dir.join(format!("envelope-{i}.json")))
        .collect();
    for (f, e) in files.iter().zip(envelopes) {
        std::fs::write(f, e).unwrap();
    }
    files
}

fn rcpt() -> Command {
    Command::new(support::bin())
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `rcpt log checkpoint DIR`.
fn checkpoint(dir: &Path) -> String {
    let out = ok(
        rcpt()
            .args(["log", "checkpoint"])
            .arg(dir)
            .output()
            .unwrap(),
        "log checkpoint",
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `rcpt verify --trust TRUST BUNDLES...` passes every bundle.
fn verified(trust: &Path, bundles: &[PathBuf]) {
    let out = ok(
        rcpt()
            .arg("verify")
            .arg("--trust")
            .arg(trust)
            .args(bundles)
            .output()
            .unwrap(),
        "verify",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{} verified, 0 failed", bundles.len())),
        "{text}"
    );
}

/// Every bundle of `log`, written by `rcpt log prove --all --out-dir`.
fn prove_all(log: &Path, out_dir: &Path) -> Vec<PathBuf> {
    ok(
        rcpt()
            .args(["log", "prove"])
            .arg(log)
            .args(["--all", "--out-dir"])
            .arg(out_dir)
            .output()
            .unwrap(),
        "log prove --all",
    );
    let mut files = support::files_under(out_dir);
    files.sort();
    files
}

/// The gate's hand-off, as `gate check|apply|undo --log DIR` makes it:
/// the intake of the log opened with the key it records, one envelope
/// appended, its bundle taken from the intake.
fn through_gate_hand_off(log: &Path, envelopes: &[String], out: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(out).unwrap();
    let mut bundles = Vec::new();
    for (i, e) in envelopes.iter().enumerate() {
        let store = Arc::new(PosixStore::new(log));
        let mut intake = Intake::open(store, Options::recorded(true)).unwrap();
        let bundle = intake.append_for_bundle(e.as_bytes()).unwrap();
        let path = out.join(format!("bundle-{i}.json"));
        std::fs::write(&path, bundle.to_json()).unwrap();
        bundles.push(path);
    }
    bundles
}

#[test]
fn the_same_envelopes_through_every_way_in_give_logs_that_check_and_bundles_that_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let trust = ss::write_trust(dir);
    let all = envelopes();
    let files = envelope_files(&dir.join("in"), &all);
    let key = ss::log_key();

    // `rcpt log append DIR`.
    let appended = ss::init_log_as(dir, &dir.join("appended"), &key, ORIGIN);
    let out = ok(
        rcpt()
            .args(["log", "append"])
            .arg(&appended)
            .arg("--trust")
            .arg(&trust)
            .args(&files)
            .output()
            .unwrap(),
        "log append",
    );
    let lines = String::from_utf8(out.stdout).unwrap();
    let indexes: Vec<&str> = lines
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(indexes, ["0", "1", "2", "3", "4", "2"], "{lines}");

    // The gate's hand-off, one envelope at a time.
    let handed = ss::init_log_as(dir, &dir.join("handed"), &key, ORIGIN);
    let gate_bundles = through_gate_hand_off(&handed, &all, &dir.join("gate-bundles"));

    // The tool-call proxy's sink: one batch.
    let sunk = ss::init_log_as(dir, &dir.join("sunk"), &key, ORIGIN);
    let store = Arc::new(PosixStore::new(&sunk));
    let mut intake = Intake::open(store, Options::recorded(true)).unwrap();
    let batch: Vec<&str> = all.iter().map(String::as_str).collect();
    ReceiptLog::append(&mut intake, &batch).unwrap();
    ReceiptLog::idle(&mut intake);

    // `rcpt log serve`, reached by `rcpt log append URL`.
    let served_dir = ss::init_log_as(dir, &dir.join("served"), &key, ORIGIN);
    let served = ss::Served::start(&served_dir, &trust, &["--batch-wait", "5ms"]);
    let out = ok(
        rcpt()
            .args(["log", "append", &served.url(), "--log-key"])
            .arg(ss::log_verifier().to_string())
            .args(&files)
            .output()
            .unwrap(),
        "log append URL",
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 6);
    assert!(served.stop().success());

    // Every log checks; the three written in input order are one log.
    for log in [&appended, &handed, &sunk, &served_dir] {
        ss::log_check(log);
    }
    let first = checkpoint(&appended);
    assert!(first.lines().nth(1) == Some("5"), "{first}");
    assert_eq!(checkpoint(&handed), first);
    assert_eq!(checkpoint(&sunk), first);
    assert_eq!(checkpoint(&served_dir).lines().nth(1), Some("5"));

    // Every bundle verifies: the gate's (its last is at the final size),
    // and every entry of the appended and served logs.
    verified(&trust, &gate_bundles);
    verified(&trust, &prove_all(&appended, &dir.join("appended-bundles")));
    verified(&trust, &prove_all(&served_dir, &dir.join("served-bundles")));
}

/// `rcpt gate check --policy P --key K --log LOG -o OUT` in `g`'s work tree.
fn gate_check(g: &support::gate::Gate, log: &str, out: &Path) -> Output {
    let policy = g.policy(&[("true", &["true"], 30)], &[]);
    g.rcpt()
        .args(["gate", "check", "--policy"])
        .arg(&policy)
        .arg("--key")
        .arg(&g.key)
        .args(["--log", log, "-o"])
        .arg(out)
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("AWS_ENDPOINT_URL")
        .output()
        .unwrap()
}

#[test]
fn gate_check_hands_off_to_a_log_directory_and_its_bundle_verifies() {
    let g = support::gate::Gate::new(&[("a.txt", "one\n")]);
    let out = g.world.dir().join("bundle.json");
    let log = g.world.log.to_str().unwrap().to_string();
    let run = ok(gate_check(&g, &log, &out), "gate check --log DIR");
    assert!(String::from_utf8_lossy(&run.stderr).contains("log: log.example/test index 0"));
    verified(&g.world.trust, &[out]);
    ss::log_check(&g.world.log);
}

#[cfg(feature = "s3")]
#[test]
fn gate_check_hands_off_to_a_log_on_object_storage() {
    let Some((_, bucket)) = support::s3::server() else {
        return;
    };
    let endpoint = std::env::var("RCPT_S3_ENDPOINT").unwrap();
    let location = support::s3::fresh_location(&bucket, "gate-intake");
    let log = format!("s3://{}/{}", location.bucket, location.prefix);
    let g = support::gate::Gate::new(&[("a.txt", "one\n")]);
    let key = g.world.dir().join("logkey.key");
    ok(
        rcpt()
            .args(["log", "init", &log, "--origin", "log.example/test", "--key"])
            .arg(&key)
            .args(["--endpoint", &endpoint])
            .output()
            .unwrap(),
        "log init s3://",
    );
    let out = g.world.dir().join("bundle.json");
    let policy = g.policy(&[("true", &["true"], 30)], &[]);
    let run = g
        .rcpt()
        .args(["gate", "check", "--policy"])
        .arg(&policy)
        .arg("--key")
        .arg(&g.key)
        .args(["--log", &log, "-o"])
        .arg(&out)
        .env("AWS_ENDPOINT_URL_S3", &endpoint)
        .output()
        .unwrap();
    ok(run, "gate check --log s3://");
    verified(&g.world.trust, &[out]);
    ok(
        rcpt()
            .args(["log", "check", &log, "--endpoint", &endpoint])
            .output()
            .unwrap(),
        "log check s3://",
    );
}

/// The run failed as a bad invocation, and its one error line says
/// `needle` once.
fn refused_once(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("rcpt: error: "))
        .unwrap_or_else(|| panic!("no error line: {stderr}"));
    assert_eq!(line.matches(needle).count(), 1, "{line}");
}

#[test]
fn bad_locations_are_usage_errors_that_say_their_cause_once() {
    let g = support::gate::Gate::new(&[("a.txt", "one\n")]);
    let dir = g.world.dir();
    let out = dir.join("bundle.json");
    // A log without a key file to append with.
    let keyless = ss::init_log_as(dir, &dir.join("keyless"), &ss::log_key(), ORIGIN);
    let settings = keyless.join(".rcpt/settings.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("key_file");
    std::fs::write(&settings, json.to_string()).unwrap();
    let keyless = keyless.to_str().unwrap().to_string();
    let run = gate_check(&g, &keyless, &out);
    refused_once(&run, &keyless);
    assert!(String::from_utf8_lossy(&run.stderr).contains("records no key file"));
    // A directory that is not there.
    let missing = dir.join("missing").to_str().unwrap().to_string();
    let run = gate_check(&g, &missing, &out);
    refused_once(&run, "no such directory");
    // Object storage without an endpoint.
    let run = gate_check(&g, "s3://rcpt-test/intake", &out);
    refused_once(&run, "no object-storage endpoint");
    // The gate takes the endpoint from the environment only: the hint
    // names the variables, not a flag it does not take.
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("set AWS_ENDPOINT_URL_S3"), "{stderr}");
    assert!(!stderr.contains("--endpoint"), "{stderr}");
    // A malformed bucket.
    let run = gate_check(&g, "s3://b/p", &out);
    refused_once(&run, "s3://b");
    // A service without its key.
    let run = gate_check(&g, "http://127.0.0.1:9", &out);
    refused_once(&run, "needs the log's key");
    assert!(!out.exists(), "nothing was issued past a refused --log");
    // `log append` of a service without its key.
    let env = envelope_files(&dir.join("in"), &envelopes()[..1]);
    let run = rcpt()
        .args(["log", "append", "http://127.0.0.1:9"])
        .args(&env)
        .output()
        .unwrap();
    refused_once(&run, "http://127.0.0.1:9");
}

#[test]
fn a_service_url_is_not_a_store_and_an_endpoint_is_not_for_a_directory() {
    let url = Location::parse("https://log.example/");
    let e = url.store(&StoreSettings::default()).err().unwrap();
    assert!(matches!(e, IntakeError::Service { .. }) && e.is_bad_invocation());
    let dir = Location::parse("log/");
    let settings = StoreSettings {
        endpoint: Some("http://127.0.0.1:7480"),
        ..StoreSettings::default()
    };
    let e = dir.store(&settings).err().unwrap();
    assert!(matches!(e, IntakeError::EndpointForDirectory { .. }));
}

/// A witness that answers the note as the log signed it (no cosigner
/// needed: what is tested is the storing of the note it answers), and
/// keeps each report: (published, storing failed).
struct Echo(Arc<std::sync::Mutex<Vec<(bool, bool)>>>);

impl rcpt::log::intake::Witness for Echo {
    fn quorum_in(&self, _note: &str) -> Option<Vec<String>> {
        None
    }

    fn cosign(
        &self,
        checkpoint: &str,
        _size: u64,
        _log: Arc<rcpt::log::Log>,
    ) -> Result<rcpt::log::intake::Cosigned, rcpt::log::intake::NotCosigned> {
        Ok(rcpt::log::intake::Cosigned {
            note: checkpoint.to_string(),
            cosigners: Vec::new(),
        })
    }

    fn witnessed(&self, r: &rcpt::log::intake::Witnessed<'_>) {
        let failed = matches!(r.stored, Some(Err(_)));
        self.0.lock().unwrap().push((r.published, failed));
    }
}

/// A cosigned checkpoint is published only once it is stored: with the
/// store stopping after each number of its changing calls in turn
/// (tests/support/failstop.rs), an append whose cosigned note could not be
/// stored is an error (`NotStored`), reported unpublished, never a
/// published checkpoint (#33 item 1).
#[test]
fn a_cosigned_checkpoint_that_could_not_be_stored_is_not_published() {
    use support::failstop::FailStop;
    let tmp = tempfile::tempdir().unwrap();
    let template = ss::init_log_as(tmp.path(), &tmp.path().join("log"), &ss::log_key(), ORIGIN);
    let envelope = envelopes().remove(0);
    let mut unstored = 0;
    for budget in 0.. {
        let dir = tmp.path().join(format!("b{budget}"));
        let st = Command::new("cp")
            .arg("-a")
            .arg(&template)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success());
        let store = FailStop::new(Arc::new(PosixStore::new(&dir)), budget);
        let Ok(intake) = Intake::open(store.clone(), Options::recorded(true)) else {
            continue;
        };
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut intake = intake.with_witness(Box::new(Echo(Arc::clone(&reports))));
        let appended = intake.append_envelopes(&[envelope.as_bytes()]);
        let error = appended.as_ref().err().map(|e| format!("{e:?}"));
        match reports.lock().unwrap().as_slice() {
            [] => assert!(appended.is_err(), "budget {budget}"),
            [(published, true)] => {
                unstored += 1;
                assert!(!published, "budget {budget}");
                assert!(
                    matches!(appended, Err(IntakeError::NotStored(_))),
                    "budget {budget}: {error:?}"
                );
            }
            [(published, false)] => {
                assert!(published, "budget {budget}");
                assert!(appended.is_ok(), "budget {budget}: {error:?}");
            }
            more => panic!("budget {budget}: {more:?}"),
        }
        if appended.is_ok() {
            assert!(!store.stopped(), "budget {budget}");
            break;
        }
    }
    assert!(unstored > 0, "no budget stopped the store at the storing");
}
