//! External signed-note and checkpoint vectors (tests/vectors/signed-note,
//! origins in its README): every file is run, the count is asserted.
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcpt::keys::{KeyError, NoteVerifier, SigningKey};
use rcpt::tlog::note::{self, Checkpoint, Note, NoteCheck, NoteError};
use std::path::{Path, PathBuf};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/signed-note");

/// sum.golang.org's key, from golang/go `src/cmd/go/internal/modfetch/key.go`.
const SUM_GOLANG: &str = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8";
const PETER: &str = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const ENOCH: &str = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop";
const PETER_PRIVATE: &str =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
const C2SP_EXAMPLE: &str = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
/// Sunlight test witness: a type 0x04 (cosignature) key, not Ed25519 0x01.
const SUNLIGHT_WITNESS: &str =
    "witness.example.org+b8a2cf20+BFLN3yikSfFkVAJtrnh/CiY3Zozkoy7clp+P7XB28qUN";

fn files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(DIR)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(DIR).join(name)).unwrap()
}

fn vkey(text: &str) -> NoteVerifier {
    NoteVerifier::parse(text).unwrap()
}

/// What the vectors' origins say each signed file must do. `None` for a
/// file the table does not know: the harness then fails, so no file is
/// skipped silently.
fn expected(file: &str) -> Option<(Vec<NoteVerifier>, NoteCheck)> {
    let verified = |names: &[&str]| NoteCheck::Verified {
        names: names.iter().map(|n| n.to_string()).collect(),
    };
    if file.starts_with("sum.golang.org-") {
        return Some((vec![vkey(SUM_GOLANG)], verified(&["sum.golang.org"])));
    }
    match file {
        "go-note-peterneumann-enochroot.note" => Some((
            vec![vkey(PETER), vkey(ENOCH)],
            verified(&["PeterNeumann", "EnochRoot"]),
        )),
        "c2sp-signed-note-example.note" => {
            Some((vec![vkey(C2SP_EXAMPLE)], verified(&["example.com/foo"])))
        }
        "sigsum-go-checkpoint_test.checkpoint" => {
            let v = vkey(std::str::from_utf8(&read("sigsum-go-checkpoint_test.vkey")).unwrap());
            let name = v.name.clone();
            Some((vec![v], NoteCheck::Verified { names: vec![name] }))
        }
        // Only non-Ed25519 lines (0x05 log, 0x04 witness): all ignored.
        "sunlight-skylight-witness-cosigned.checkpoint" => Some((
            vec![vkey(SUM_GOLANG), vkey(C2SP_EXAMPLE)],
            NoteCheck::NotEvaluated,
        )),
        // Format example: no public key published, parse only.
        "tlog-cosignature-example.checkpoint" => Some((vec![], NoteCheck::NotEvaluated)),
        _ => None,
    }
}

/// Parse, check, and for verified notes prove that a flipped text byte and
/// a flipped signature byte both fail.
fn run_note(file: &str, bytes: &[u8]) {
    let note = Note::parse(bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (verifiers, want) = expected(file).unwrap_or_else(|| panic!("{file}: no expectation"));
    assert_eq!(note::check(&note, &verifiers), want, "{file}");
    if file.ends_with(".checkpoint") {
        let cp = Checkpoint::parse(&note.text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(cp.to_text(), note.text, "{file}: checkpoint round trip");
        if let Some(size) = file.strip_prefix("sum.golang.org-") {
            assert_eq!(cp.size.to_string(), size.trim_end_matches(".checkpoint"));
            assert_eq!(cp.origin, "go.sum database tree");
        }
    }
    if matches!(want, NoteCheck::Verified { .. }) {
        let mut bad = note.clone();
        bad.text
            .replace_range(0..1, if bad.text.starts_with('X') { "Y" } else { "X" });
        assert!(
            matches!(note::check(&bad, &verifiers), NoteCheck::Failed { .. }),
            "{file}"
        );
        let mut bad = note.clone();
        bad.signatures[0].sig[0] ^= 1;
        assert!(
            matches!(note::check(&bad, &verifiers), NoteCheck::Failed { .. }),
            "{file}"
        );
    }
}

/// tlog-witness add-checkpoint request: header lines, a blank line, then a
/// checkpoint note (whose own signatures use keys not published).
fn run_request(bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap();
    let (header, body) = text.split_once("\n\n").unwrap();
    assert!(header.starts_with("old 20852014\n"));
    let note = Note::parse(body.as_bytes()).unwrap();
    assert_eq!(note.signatures.len(), 2);
    let cp = Checkpoint::parse(&note.text).unwrap();
    assert_eq!(
        (cp.origin.as_str(), cp.size),
        ("example.com/behind-the-sofa", 20852163)
    );
}

#[test]
fn every_vector_file_runs() {
    let mut ran = 0;
    for path in files() {
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        let bytes = std::fs::read(&path).unwrap();
        match file.rsplit_once('.').map(|(_, ext)| ext) {
            Some("note" | "checkpoint") => run_note(&file, &bytes),
            Some("txt") => run_request(&bytes),
            // The sigsum vkey is used by its checkpoint; check it parses here.
            Some("vkey") => drop(vkey(std::str::from_utf8(&bytes).unwrap())),
            Some("md") => continue,
            _ => panic!("unexpected vector file {file}"),
        }
        ran += 1;
    }
    // 7 sum.golang.org + Go note + C2SP example + sigsum (checkpoint, vkey)
    // + Sunlight + 2 C2SP format examples.
    assert_eq!(ran, 14);
}

#[test]
fn go_note_signing_is_byte_exact() {
    let bytes = read("go-note-peterneumann-enochroot.note");
    let note = Note::parse(&bytes).unwrap();
    // PRIVATE+KEY+<name>+<hash>+base64(0x01 || seed): split on the first four '+'.
    let parts: Vec<&str> = PETER_PRIVATE.splitn(5, '+').collect();
    assert_eq!(parts[2], "PeterNeumann");
    let raw = STANDARD.decode(parts[4]).unwrap();
    assert_eq!(raw[0], 0x01);
    let key = SigningKey::from_bytes(&raw[1..].try_into().unwrap());
    assert_eq!(
        NoteVerifier::new("PeterNeumann", key.verifying_key()).unwrap(),
        vkey(PETER)
    );
    let signed = note::sign(&note.text, "PeterNeumann", &key).unwrap();
    let first_line = std::str::from_utf8(&bytes).unwrap().lines().nth(3).unwrap();
    assert_eq!(signed, format!("{}\n{first_line}\n", note.text));
}

#[test]
fn grease_lines_are_ignored() {
    let text = String::from_utf8(read("sum.golang.org-65209736.checkpoint")).unwrap();
    let v = vkey(SUM_GOLANG);
    // An unknown name, the same name with another key hash, and another
    // name with sum.golang.org's key hash: all unknown keys, all ignored.
    let junk = STANDARD.encode([0x5a; 68]);
    let mut same_name = vec![0u8; 68];
    same_name[..4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let mut same_hash = vec![0u8; 68];
    same_hash[..4].copy_from_slice(&v.key_hash);
    let grease = format!(
        "\u{2014} grease.example/x {junk}\n\u{2014} sum.golang.org {}\n\u{2014} other.example {}\n",
        STANDARD.encode(&same_name),
        STANDARD.encode(&same_hash),
    );
    let greased = format!("{text}{grease}");
    let note = Note::parse(greased.as_bytes()).unwrap();
    assert_eq!(note.signatures.len(), 4);
    assert_eq!(
        note::check(&note, &[v]),
        NoteCheck::Verified {
            names: vec!["sum.golang.org".into()]
        }
    );
}

#[test]
fn signature_line_cap_is_100() {
    let text = String::from_utf8(read("sum.golang.org-65209736.checkpoint")).unwrap();
    let line = format!("\u{2014} grease.example/x {}\n", STANDARD.encode([1u8; 68]));
    let at_cap = format!("{text}{}", line.repeat(99));
    assert_eq!(
        Note::parse(at_cap.as_bytes()).unwrap().signatures.len(),
        100
    );
    let over = format!("{text}{}", line.repeat(100));
    assert_eq!(
        Note::parse(over.as_bytes()),
        Err(NoteError::TooManySignatures {
            count: 101,
            limit: 100
        })
    );
}

#[test]
fn verifier_key_strings_are_checked() {
    // A mistyped sum.golang.org key (quoted in a brief): its 32 bytes are
    // not a curve point (and would not match the key hash 033de0ae either).
    let wrong = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ze6bCwzEsKvUXDWG";
    let err = NoteVerifier::parse(wrong).unwrap_err();
    assert!(matches!(err, KeyError::NotOnCurve), "{err:?}");
    // A valid key under the right name but with a wrong hash field.
    let mismatched = SUM_GOLANG.replace("+033de0ae+", "+033de0af+");
    let err = NoteVerifier::parse(&mismatched).unwrap_err();
    assert!(matches!(err, KeyError::KeyHashMismatch { .. }), "{err:?}");
    assert!(matches!(
        NoteVerifier::parse(SUNLIGHT_WITNESS),
        Err(KeyError::UnsupportedType { found: 0x04, .. })
    ));
    // The base64 part contains '+': printing gives back the same string.
    assert_eq!(vkey(SUM_GOLANG).to_string(), SUM_GOLANG);
}
