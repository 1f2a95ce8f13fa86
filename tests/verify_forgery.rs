//! Issue 34 defect 2: a forgery is "failed" (impersonation), never "not
//! evaluated". A receipt that claims an issuer name the trust set trusts,
//! or a checkpoint of an origin it trusts, with no trusted key of that name
//! among its signers, fails `signature.impersonation` / `log.impersonation`
//! whatever `--not-evaluated` says; "not evaluated" stays for names and
//! origins nobody trusts; the hint never says to trust the forger's key.
//!
//! Every input is really signed and logged: keys, logs and bundles made by
//! the CLI (and, for the envelopes with a chosen signer or keyid, signed by
//! the library), then judged by `rcpt verify`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use rcpt::constants::RECEIPT_PAYLOAD_TYPE;
use rcpt::keys::SigningKey;
use rcpt::receipt::dsse::Envelope;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{World, payload, rcpt, signed_envelope, write_key};

/// The trusted issuer's name, and the trusted log's origin (World's).
const ISSUER: &str = "gate-a";
const ORIGIN: &str = "log.example/test";

/// Exit statuses (spec/cli.md): failed 1, not evaluated 3.
const FAILED: i32 = 1;
const NOT_EVALUATED: i32 = 3;

/// The forger's signing key (not in any trust file).
fn forger() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32])
}

/// Write `envelope` (JSON text), append it to the world's log and prove
/// it; the bundle's path.
fn logged(world: &World, name: &str, envelope: &str) -> PathBuf {
    let env = world.dir().join(format!("{name}.envelope.json"));
    std::fs::write(&env, envelope).unwrap();
    prove_into(
        &world.log,
        &env,
        &world.dir().join(format!("{name}.bundle.json")),
    )
}

/// `rcpt log append LOG ENV` then `rcpt log prove LOG --receipt ENV -o OUT`.
fn prove_into(log: &Path, env: &Path, out: &Path) -> PathBuf {
    rcpt()
        .args(["log", "append"])
        .arg(log)
        .arg(env)
        .assert()
        .success();
    rcpt()
        .args(["log", "prove"])
        .arg(log)
        .arg("--receipt")
        .arg(env)
        .arg("-o")
        .arg(out)
        .assert()
        .success();
    out.to_path_buf()
}

/// `rcpt verify --trust TRUST --format json [EXTRA...] BUNDLE`: exit status
/// and the bundle's result.
fn verify(world: &World, bundle: &Path, extra: &[&str]) -> (i32, Value) {
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&world.trust)
        .args(["--format", "json"])
        .args(extra)
        .arg(bundle)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), doc["results"][0].clone())
}

/// The human output of `rcpt verify --trust TRUST BUNDLE`.
fn human(world: &World, bundle: &Path) -> String {
    let out = rcpt()
        .arg("verify")
        .arg("--trust")
        .arg(&world.trust)
        .arg(bundle)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn check<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {result}"))
}

/// A forgery fails, and `--not-evaluated pass` does not let it through.
fn assert_forgery(world: &World, bundle: &Path, check_name: &str, reason: &str) -> String {
    let (code, result) = verify(world, bundle, &[]);
    assert_eq!(code, FAILED, "{result}");
    assert_eq!(result["outcome"], "failed", "{result}");
    let c = check(&result, check_name);
    assert_eq!(c["status"], "fail", "{result}");
    assert_eq!(c["reason"], reason, "{result}");
    for policy in ["pass", "error", "fail"] {
        let (code, _) = verify(world, bundle, &["--not-evaluated", policy]);
        assert_eq!(code, FAILED, "--not-evaluated {policy} admitted a forgery");
    }
    c["detail"].as_str().unwrap().to_string()
}

/// The hint names the forgery and never says to trust the signing key.
fn assert_no_add_key_hint(detail: &str) {
    assert!(detail.contains("Do not add the signing key"), "{detail}");
    assert!(detail.contains("impersonation"), "{detail}");
    for bad in [
        "--issuer-key",
        "--log-key",
        "add the issuer",
        "add its verifier key",
    ] {
        assert!(!detail.contains(bad), "{bad:?} in {detail}");
    }
}

#[test]
fn a_receipt_claiming_a_trusted_issuer_signed_by_another_key_fails() {
    let world = World::new(ISSUER);
    let genuine = logged(&world, "genuine", &{
        let env = world.dir().join("genuine-src.json");
        std::fs::write(world.dir().join("p.json"), payload(ISSUER, 1).to_string()).unwrap();
        rcpt()
            .args(["receipt", "issue", "--key"])
            .arg(world.dir().join("issuer.key"))
            .arg("-o")
            .arg(&env)
            .arg(world.dir().join("p.json"))
            .assert()
            .success();
        std::fs::read_to_string(&env).unwrap()
    });
    assert_eq!(verify(&world, &genuine, &[]).0, 0);

    // Signed by the forger, keyid the forger's: the complete forgery.
    let forged = logged(
        &world,
        "forged",
        &signed_envelope(&payload(ISSUER, 2), &forger()),
    );
    let detail = assert_forgery(&world, &forged, "signature", "signature.impersonation");
    assert_no_add_key_hint(&detail);
    // The monitor's words for the same thing.
    assert!(
        detail.contains("claims the issuer \"gate-a\" but no signature verifies under its keys"),
        "{detail}"
    );
    let text = human(&world, &forged);
    assert!(
        text.contains("fail signature [signature.impersonation]"),
        "{text}"
    );
    assert!(!text.contains("--issuer-key"), "{text}");

    // The same, the keyid left empty: tried against every trusted key,
    // none verifies, and the name is trusted: an impersonation.
    let mut env: Value =
        serde_json::from_str(&signed_envelope(&payload(ISSUER, 3), &forger())).unwrap();
    env["signatures"][0]["keyid"] = json!("");
    let empty_keyid = logged(&world, "empty-keyid", &env.to_string());
    let detail = assert_forgery(&world, &empty_keyid, "signature", "signature.impersonation");
    assert_no_add_key_hint(&detail);
    assert!(detail.contains("(none)"), "{detail}");

    // An empty keyid whose signature is garbage: the same.
    env["signatures"][0]["sig"] = json!("AAAA");
    let garbage = logged(&world, "garbage", &env.to_string());
    assert_forgery(&world, &garbage, "signature", "signature.impersonation");
}

#[test]
fn a_receipt_of_a_name_nobody_trusts_stays_not_evaluated() {
    let world = World::new(ISSUER);
    let stranger = logged(
        &world,
        "stranger",
        &signed_envelope(&payload("stranger.example", 1), &forger()),
    );
    let (code, result) = verify(&world, &stranger, &[]);
    assert_eq!(code, NOT_EVALUATED, "{result}");
    let c = check(&result, "signature");
    assert_eq!(c["status"], "error", "{result}");
    assert_eq!(c["reason"], "signature.untrusted", "{result}");
    // Trusting that key contradicts nothing: the hint may say so.
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.contains("--issuer-key"), "{detail}");
    assert!(!detail.contains("Do not add"), "{detail}");
    // The caller's policy for what cannot be judged applies here only.
    assert_eq!(verify(&world, &stranger, &["--not-evaluated", "pass"]).0, 0);
}

#[test]
fn the_trusted_issuers_signature_beside_a_strangers_passes() {
    let world = World::new(ISSUER);
    // The trusted signature, made by the CLI with the issuer's key.
    std::fs::write(world.dir().join("p.json"), payload(ISSUER, 1).to_string()).unwrap();
    let src = world.dir().join("trusted-src.json");
    rcpt()
        .args(["receipt", "issue", "--key"])
        .arg(world.dir().join("issuer.key"))
        .arg("-o")
        .arg(&src)
        .arg(world.dir().join("p.json"))
        .assert()
        .success();
    let trusted = Envelope::from_json(&std::fs::read(&src).unwrap()).unwrap();
    let stranger = Envelope::sign(RECEIPT_PAYLOAD_TYPE, trusted.payload.clone(), &forger());
    let mut env: Value = serde_json::from_str(&trusted.to_json()).unwrap();
    let mut sigs: Vec<Value> =
        serde_json::from_str::<Value>(&stranger.to_json()).unwrap()["signatures"]
            .as_array()
            .unwrap()
            .clone();
    sigs.extend(env["signatures"].as_array().unwrap().iter().cloned());
    env["signatures"] = Value::Array(sigs);
    assert_eq!(env["signatures"].as_array().unwrap().len(), 2);
    let both = logged(&world, "both", &env.to_string());
    let (code, result) = verify(&world, &both, &[]);
    assert_eq!(code, 0, "{result}");
    assert_eq!(check(&result, "signature")["status"], "pass");
}

/// A second log of the trusted origin, under another key: its checkpoints
/// are forgeries of the trusted log.
fn impostor_log(world: &World) -> PathBuf {
    let key = world.dir().join("impostor-log.key");
    write_key(&key, 0x6b);
    let log = world.dir().join("impostor-log");
    rcpt()
        .args(["log", "init"])
        .arg(&log)
        .args(["--origin", ORIGIN, "--key"])
        .arg(&key)
        .assert()
        .success();
    log
}

/// The issuer's genuine envelope of `payload(ISSUER, n)`, issued by the CLI.
fn genuine_envelope(world: &World, n: i64) -> PathBuf {
    let p = world.dir().join(format!("g{n}.json"));
    std::fs::write(&p, payload(ISSUER, n).to_string()).unwrap();
    let env = world.dir().join(format!("g{n}.envelope.json"));
    rcpt()
        .args(["receipt", "issue", "--key"])
        .arg(world.dir().join("issuer.key"))
        .arg("-o")
        .arg(&env)
        .arg(&p)
        .assert()
        .success();
    env
}

#[test]
fn a_checkpoint_of_a_trusted_origin_signed_by_another_key_fails() {
    let world = World::new(ISSUER);
    let env = genuine_envelope(&world, 1);
    let log = impostor_log(&world);
    let forged = prove_into(&log, &env, &world.dir().join("forged-cp.json"));
    let detail = assert_forgery(&world, &forged, "checkpoint.signature", "log.impersonation");
    assert_no_add_key_hint(&detail);
    assert!(
        detail.contains("claims the origin \"log.example/test\" but no signature verifies"),
        "{detail}"
    );
    // Every other check of the bundle passes: the checkpoint alone decides.
    let (_, result) = verify(&world, &forged, &[]);
    for c in result["checks"].as_array().unwrap() {
        if c["name"] != "checkpoint.signature" {
            assert_eq!(c["status"], "pass", "{result}");
        }
    }

    // A --policy that lists the trusted log: check 13 fails on the forgery,
    // and the witness check is not run (never a second "not evaluated").
    let policy = world.dir().join("log.policy");
    std::fs::write(&policy, format!("log {}\nquorum none\n", world.log_vkey)).unwrap();
    let policy_arg = policy.to_str().unwrap();
    let (code, result) = verify(&world, &forged, &["--policy", policy_arg]);
    assert_eq!(code, FAILED, "{result}");
    assert_eq!(
        check(&result, "checkpoint.signature")["reason"],
        "log.impersonation"
    );
    assert_eq!(
        check(&result, "checkpoint.witnesses")["reason"],
        "check.skipped",
        "{result}"
    );
    let genuine = prove_into(&world.log, &env, &world.dir().join("genuine-cp.json"));
    assert_eq!(verify(&world, &genuine, &["--policy", policy_arg]).0, 0);
}

#[test]
fn a_trusted_checkpoint_with_a_second_untrusted_signature_line_passes() {
    let world = World::new(ISSUER);
    let env = genuine_envelope(&world, 1);
    let bundle = prove_into(&world.log, &env, &world.dir().join("b.json"));
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let cp = doc["log"]["checkpoint"].as_str().unwrap().to_string();
    let (body, _) = cp.split_once("\n\n").unwrap();
    let text = format!("{body}\n");
    // The same checkpoint text signed under the log's name by another key.
    let impostor = SigningKey::from_bytes(&[0x6b; 32]);
    let signed = rcpt::tlog::note::sign(&text, ORIGIN, &impostor).unwrap();
    let line = signed.lines().last().unwrap();
    assert!(line.starts_with("\u{2014} log.example/test "), "{line}");

    // Beside the trusted line: ignored (an unknown key), the trusted one verifies.
    doc["log"]["checkpoint"] = json!(format!("{cp}{line}\n"));
    let two = world.dir().join("two-lines.json");
    std::fs::write(&two, doc.to_string()).unwrap();
    let (code, result) = verify(&world, &two, &[]);
    assert_eq!(code, 0, "{result}");

    // Alone: the same text, no trusted line: an impersonation.
    doc["log"]["checkpoint"] = json!(format!("{text}\n{line}\n"));
    let alone = world.dir().join("impostor-line-only.json");
    std::fs::write(&alone, doc.to_string()).unwrap();
    let detail = assert_forgery(&world, &alone, "checkpoint.signature", "log.impersonation");
    assert_no_add_key_hint(&detail);
}

#[test]
fn a_checkpoint_of_an_origin_nobody_trusts_stays_not_evaluated() {
    let world = World::new(ISSUER);
    let env = genuine_envelope(&world, 1);
    let key = world.dir().join("other-log.key");
    write_key(&key, 0x6c);
    let log = world.dir().join("other-log");
    rcpt()
        .args(["log", "init"])
        .arg(&log)
        .args(["--origin", "other.example/log", "--key"])
        .arg(&key)
        .assert()
        .success();
    let bundle = prove_into(&log, &env, &world.dir().join("other.json"));
    let (code, result) = verify(&world, &bundle, &[]);
    assert_eq!(code, NOT_EVALUATED, "{result}");
    let c = check(&result, "checkpoint.signature");
    assert_eq!(c["reason"], "log.untrusted", "{result}");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.contains("--log-key"), "{detail}");
    assert!(!detail.contains("Do not add"), "{detail}");
    assert_eq!(verify(&world, &bundle, &["--not-evaluated", "pass"]).0, 0);
}

/// The `--since` checkpoint is judged by the same rule: one of the trusted
/// origin signed by another key fails `log.impersonation` at `consistency`
/// (it was not evaluated), even when its tree is the trusted log's.
#[test]
fn a_since_checkpoint_of_the_trusted_origin_signed_by_another_key_fails() {
    let world = World::new(ISSUER);
    let (first, second) = (genuine_envelope(&world, 1), genuine_envelope(&world, 2));
    // The impostor's log holds the same first entry: the same root at size 1.
    let impostor = impostor_log(&world);
    rcpt()
        .args(["log", "append"])
        .arg(&impostor)
        .arg(&first)
        .assert()
        .success();
    let checkpoint = |log: &Path, name: &str| {
        let out = rcpt()
            .args(["log", "checkpoint"])
            .arg(log)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let path = world.dir().join(name);
        std::fs::write(&path, out).unwrap();
        path
    };
    let forged_old = checkpoint(&impostor, "impostor-1.checkpoint");
    rcpt()
        .args(["log", "append"])
        .arg(&world.log)
        .arg(&first)
        .assert()
        .success();
    let genuine_old = checkpoint(&world.log, "genuine-1.checkpoint");
    let bundle = prove_into(&world.log, &second, &world.dir().join("second.json"));
    let proof = world.dir().join("proof-1-2.json");
    std::fs::write(&proof, support::consistency_json(&world.log, 1, 2)).unwrap();
    let (proof_arg, genuine_arg) = (proof.to_str().unwrap(), genuine_old.to_str().unwrap());
    let (code, result) = verify(
        &world,
        &bundle,
        &["--since", genuine_arg, "--consistency", proof_arg],
    );
    assert_eq!(code, 0, "{result}");
    let forged_arg = forged_old.to_str().unwrap();
    for policy in ["error", "pass"] {
        let (code, result) = verify(
            &world,
            &bundle,
            &[
                "--since",
                forged_arg,
                "--consistency",
                proof_arg,
                "--not-evaluated",
                policy,
            ],
        );
        assert_eq!(code, FAILED, "{result}");
        let c = check(&result, "consistency");
        assert_eq!(c["reason"], "log.impersonation", "{result}");
        assert_no_add_key_hint(c["detail"].as_str().unwrap());
    }
}
