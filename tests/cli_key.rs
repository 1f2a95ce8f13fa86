//! `rcpt key generate` and `rcpt key show`, run as a user would; and the
//! key files checked against openssl when it is installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use predicates::prelude::*;
use rcpt::keys::{self, NoteVerifier};
use std::path::Path;
use support::rcpt;

/// `keyid: X` and `verifier key: Y` from the command's stdout.
fn field(stdout: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_owned))
}

/// The raw base64 public key inside a verifier key `NAME+HASH+base64(0x01 || key)`.
fn vkey_public_b64(vkey: &str) -> String {
    use base64::Engine as _;
    let b64 = vkey.splitn(3, '+').nth(2).unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(raw.get(1..).unwrap())
}

fn generate(dir: &Path, name: &str) -> (String, String) {
    let out = rcpt()
        .args(["key", "generate", "--name", name, "--out"])
        .arg(dir.join("k"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    (
        field(&out, "keyid").unwrap(),
        field(&out, "verifier key").unwrap(),
    )
}

#[test]
fn generate_writes_keys_and_prints_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (keyid, vkey) = generate(dir.path(), "example.com/log");
    let key =
        keys::signing_key_from_pem(&std::fs::read_to_string(dir.path().join("k.key")).unwrap())
            .unwrap();
    let public =
        keys::verifying_key_from_text(&std::fs::read_to_string(dir.path().join("k.pub")).unwrap())
            .unwrap();
    assert_eq!(key.verifying_key(), public);
    assert_eq!(keyid, keys::keyid(&public));
    assert_eq!(
        NoteVerifier::parse(&vkey).unwrap(),
        NoteVerifier::new("example.com/log", public).unwrap()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("k.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn generate_refuses_to_overwrite_and_bad_names() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        generate(dir.path(), "a");
        std::fs::read(dir.path().join("k.key")).unwrap()
    };
    rcpt()
        .args(["key", "generate", "--name", "a", "--out"])
        .arg(dir.path().join("k"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "already exists; refusing to overwrite",
        ));
    assert_eq!(std::fs::read(dir.path().join("k.key")).unwrap(), before);
    for bad in ["has space", "a+b", ""] {
        rcpt()
            .args(["key", "generate", "--name", bad, "--out"])
            .arg(dir.path().join("other"))
            .assert()
            .code(2)
            .stderr(predicate::str::contains("invalid"));
    }
    assert!(!dir.path().join("other.key").exists());
}

#[test]
fn show_prints_the_same_ids_for_key_and_pub() {
    let dir = tempfile::tempdir().unwrap();
    let (keyid, vkey) = generate(dir.path(), "example.com/log");
    let b64 = vkey_public_b64(&vkey);
    for file in ["k.key", "k.pub"] {
        rcpt()
            .args(["key", "show"])
            .arg(dir.path().join(file))
            .args(["--name", "example.com/log"])
            .assert()
            .success()
            .stdout(format!(
                "keyid: {keyid}\npublic key: {b64}\n\
                 trust issuer entry: {{\"name\":\"example.com/log\",\"public_key\":\"{b64}\"}}\n\
                 verifier key: {vkey}\n\
                 trust log entry: {{\"verifier_key\":\"{vkey}\"}}\n"
            ));
    }
    rcpt()
        .args(["key", "show"])
        .arg(dir.path().join("k.pub"))
        .assert()
        .success()
        .stdout(format!(
            "keyid: {keyid}\npublic key: {b64}\n\
             name: none (a PEM or raw key carries no name: add --name NAME for the verifier \
             key and the trust-file entries)\n"
        ));
}

#[test]
fn show_refuses_junk_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pub");
    std::fs::write(&junk, "not a key\n").unwrap();
    rcpt()
        .args(["key", "show"])
        .arg(&junk)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a public key"));
    // A missing input file is a bad invocation, as in every command.
    rcpt()
        .args(["key", "show"])
        .arg(dir.path().join("missing.pub"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing.pub"));
    let big = dir.path().join("big.pub");
    std::fs::write(&big, vec![b'A'; rcpt::limits::MAX_KEY_FILE_BYTES + 1]).unwrap();
    rcpt()
        .args(["key", "show"])
        .arg(&big)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("over the limit"));
}

fn openssl() -> Option<std::process::Command> {
    let found = std::process::Command::new("openssl")
        .arg("version")
        .output();
    match found {
        Ok(out) if out.status.success() => Some(std::process::Command::new("openssl")),
        _ => {
            support::skip("openssl not found: the openssl interoperability test");
            None
        }
    }
}

#[test]
fn openssl_reads_our_keys_and_we_read_its_keys() {
    let Some(_) = openssl() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (keyid, _) = generate(dir.path(), "x");
    // openssl derives the same public key from our private key file.
    let derived = support::succeeded(
        openssl()
            .unwrap()
            .args(["pkey", "-pubout", "-in"])
            .arg(dir.path().join("k.key"))
            .output()
            .unwrap(),
    );
    assert_eq!(
        derived.stdout,
        std::fs::read(dir.path().join("k.pub")).unwrap()
    );
    // openssl reads our public key file.
    let read_pub = openssl()
        .unwrap()
        .args(["pkey", "-pubin", "-noout", "-in"])
        .arg(dir.path().join("k.pub"))
        .status()
        .unwrap();
    assert!(read_pub.success());
    // We read a key openssl generated, and agree on its public key.
    let theirs = dir.path().join("o.key");
    let gen_ok = openssl()
        .unwrap()
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(gen_ok.success());
    let their_pub = openssl()
        .unwrap()
        .args(["pkey", "-pubout", "-in"])
        .arg(&theirs)
        .output()
        .unwrap();
    let key = keys::signing_key_from_pem(&std::fs::read_to_string(&theirs).unwrap()).unwrap();
    let public =
        keys::verifying_key_from_text(std::str::from_utf8(&their_pub.stdout).unwrap()).unwrap();
    assert_eq!(key.verifying_key(), public);
    // Our PEM of their key is byte-identical to theirs.
    assert_eq!(
        keys::signing_key_to_pem(&key).as_bytes(),
        std::fs::read(&theirs).unwrap()
    );
    assert_ne!(keys::keyid(&public), keyid);
}

#[test]
fn openssl_verifies_our_envelope_signature_over_pae() {
    let Some(_) = openssl() else { return };
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), "x");
    let key =
        keys::signing_key_from_pem(&std::fs::read_to_string(dir.path().join("k.key")).unwrap())
            .unwrap();
    let env = rcpt::receipt::dsse::Envelope::sign("application/x", b"payload bytes".to_vec(), &key);
    let pae = rcpt::receipt::dsse::pae(&env.payload_type, &env.payload);
    std::fs::write(dir.path().join("pae"), &pae).unwrap();
    std::fs::write(dir.path().join("sig"), &env.signatures[0].sig).unwrap();
    let verify = |file: &str| {
        openssl()
            .unwrap()
            .args(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey"])
            .arg(dir.path().join("k.pub"))
            .arg("-in")
            .arg(dir.path().join(file))
            .arg("-sigfile")
            .arg(dir.path().join("sig"))
            .output()
            .unwrap()
    };
    let ok = verify("pae");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The bare payload is not what was signed.
    std::fs::write(dir.path().join("payload"), &env.payload).unwrap();
    assert!(!verify("payload").status.success());
}
