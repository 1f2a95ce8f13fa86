//! The S3 client against a real server (radosgw from `.ci/radosgw/`):
//! every request kind, the conditional writes and what their refusals
//! mean, radosgw's quirks, limits and errors. Skipped, with the reason on
//! stderr, when `RCPT_S3_ENDPOINT` is not set.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;
use support::s3 as s3_support;

use bytes::Bytes;
use rcpt::storage::s3::sigv4::Credentials;
use rcpt::storage::s3::{BlockingClient, Created, Etag, S3Error, Settings};

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

#[test]
fn create_get_head_delete_round_trip() {
    let Some((s3, loc)) = s3_support::setup("roundtrip") else {
        return;
    };
    let key = loc.key("tile/0/000.p/3");
    assert!(s3.get(&key, 1024).unwrap().is_none());
    assert!(s3.head(&key).unwrap().is_none());
    let created = s3.create(&key, b("three hashes")).unwrap();
    let Created::New(etag) = created else {
        panic!("expected a new object, got {created:?}")
    };
    let got = s3.get(&key, 1024).unwrap().unwrap();
    assert_eq!(got.body, b("three hashes"));
    assert_eq!(got.etag, etag);
    let meta = s3.head(&key).unwrap().unwrap();
    assert_eq!((meta.etag, meta.len), (etag, 12));
    s3.delete(&key).unwrap();
    assert!(s3.get(&key, 1024).unwrap().is_none());
    // Deleting what is not there is not an error.
    s3.delete(&key).unwrap();
}

#[test]
fn create_of_identical_bytes_is_a_retried_write_and_different_bytes_are_refused() {
    let Some((s3, loc)) = s3_support::setup("create") else {
        return;
    };
    let key = loc.key("tile/entries/000");
    let first = s3.create(&key, b("bundle")).unwrap();
    assert!(matches!(first, Created::New(_)));
    // radosgw answers 412 to If-None-Match: * on an existing key; the same
    // bytes are ours (a retry, or the same write repeated).
    let again = s3.create(&key, b("bundle")).unwrap();
    assert_eq!(again, Created::Identical(first.etag().clone()));
    match s3.create(&key, b("another bundle")) {
        Err(S3Error::ExistsDifferent { key: k, current }) => {
            assert_eq!(k, key);
            assert_eq!(&current, first.etag());
        }
        other => panic!("expected ExistsDifferent, got {other:?}"),
    }
    // A shorter different body is refused too (the object is read past it).
    assert!(matches!(
        s3.create(&key, b("bund")),
        Err(S3Error::ExistsDifferent { .. })
    ));
    assert_eq!(s3.get(&key, 1024).unwrap().unwrap().body, b("bundle"));
}

#[test]
fn replace_needs_the_current_etag() {
    let Some((s3, loc)) = s3_support::setup("replace") else {
        return;
    };
    let key = loc.key("checkpoint");
    let v1 = s3.create(&key, b("size 1")).unwrap().etag().clone();
    let v2 = s3.replace(&key, b("size 2"), &v1).unwrap();
    assert_ne!(v1, v2);
    assert_eq!(s3.get(&key, 1024).unwrap().unwrap().body, b("size 2"));
    // A stale tag: refused, and the error names what is there now.
    match s3.replace(&key, b("size 3 from a stale writer"), &v1) {
        Err(S3Error::Conflict {
            expected, current, ..
        }) => {
            assert_eq!(expected, v1);
            assert_eq!(current, Some(v2.clone()));
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(s3.get(&key, 1024).unwrap().unwrap().body, b("size 2"));
}

#[test]
fn replace_that_finds_its_own_bytes_is_a_retried_write() {
    let Some((s3, loc)) = s3_support::setup("replace-retry") else {
        return;
    };
    let key = loc.key("checkpoint");
    let v1 = s3.create(&key, b("size 1")).unwrap().etag().clone();
    let v2 = s3.replace(&key, b("size 2"), &v1).unwrap();
    // As if the first answer had been lost and the request sent again: the
    // server refuses (the tag moved on), and the object holds our bytes.
    assert_eq!(s3.replace(&key, b("size 2"), &v1).unwrap(), v2);
}

/// radosgw 16 quirk 1: `If-Match` matches only the bare tag. The client
/// sends it bare; started in the quoted form, it is refused once, sees the
/// tag did match, and switches for good.
#[test]
fn radosgw_quirk_if_match_wants_the_etag_without_quotes() {
    let Some((s3, loc)) = s3_support::setup("quirk-quotes") else {
        return;
    };
    let key = loc.key("checkpoint");
    let v1 = s3.create(&key, b("one")).unwrap().etag().clone();
    assert!(!s3.client().quotes_if_match());
    let v2 = s3.replace(&key, b("two"), &v1).unwrap();
    assert!(
        !s3.client().quotes_if_match(),
        "the bare tag worked and is kept"
    );

    s3.client().set_quotes_if_match(true);
    let v3 = s3.replace(&key, b("three"), &v2).unwrap();
    let server_wants_quotes = s3.client().quotes_if_match();
    assert_eq!(s3.get(&key, 64).unwrap().unwrap().etag, v3);
    // Pin the quirk itself, so a server upgrade that fixes it is noticed
    // here (the client keeps working either way).
    assert!(
        !server_wants_quotes,
        "this server accepted the quoted tag: radosgw fixed its If-Match quirk"
    );
}

/// radosgw quirk 2: `If-Match` on a missing key is 412 (AWS: 404). Both are
/// a conflict with no current object.
#[test]
fn radosgw_quirk_if_match_on_a_missing_key_is_a_conflict_with_nothing() {
    let Some((s3, loc)) = s3_support::setup("quirk-missing") else {
        return;
    };
    let key = loc.key("checkpoint");
    let tag = Etag::from_unquoted("0cc175b9c0f1b6a831c399e269772661");
    match s3.replace(&key, b("a"), &tag) {
        Err(S3Error::Conflict { current: None, .. }) => {}
        other => panic!("expected Conflict with no current object, got {other:?}"),
    }
    assert!(s3.get(&key, 64).unwrap().is_none(), "nothing was written");
}

#[test]
fn concurrent_conditional_writers_exactly_one_wins() {
    let Some((s3, loc)) = s3_support::setup("race") else {
        return;
    };
    let client = s3.client().clone();
    for round in 0..5 {
        let key = loc.key(&format!("race-{round}"));
        // Eight writers of different bytes race to create the key.
        let results = s3.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|w| {
                    let (c, k) = (client.clone(), key.clone());
                    tokio::spawn(
                        async move { c.create(&k, Bytes::from(format!("writer {w}"))).await },
                    )
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        let winners = results
            .iter()
            .filter(|r| matches!(r, Ok(Created::New(_))))
            .count();
        let refused = results
            .iter()
            .filter(|r| matches!(r, Err(S3Error::ExistsDifferent { .. })))
            .count();
        assert_eq!((winners, refused), (1, 7), "round {round}: {results:?}");

        // Eight writers race to replace it, each conditioned on the same tag.
        let base = s3.head(&key).unwrap().unwrap().etag;
        let results = s3.block_on(async {
            let tasks: Vec<_> = (0..8)
                .map(|w| {
                    let (c, k, e) = (client.clone(), key.clone(), base.clone());
                    tokio::spawn(async move {
                        c.replace(&k, Bytes::from(format!("next {w}")), &e).await
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        let winners = results.iter().filter(|r| r.is_ok()).count();
        let refused = results
            .iter()
            .filter(|r| matches!(r, Err(S3Error::Conflict { .. })))
            .count();
        assert_eq!((winners, refused), (1, 7), "round {round}: {results:?}");
    }
}

#[test]
fn list_pages_through_every_key_under_a_prefix() {
    let Some((s3, loc)) = s3_support::setup("list") else {
        return;
    };
    let names = [
        "checkpoint",
        "tile/0/000",
        "tile/0/000.p/5",
        "tile/entries/000.p/5",
        ".rcpt/lease",
    ];
    for n in names {
        s3.create(&loc.key(n), b("x")).unwrap();
    }
    let prefix = loc.key("");
    let mut want: Vec<String> = names.iter().map(|n| loc.key(n)).collect();
    want.sort();
    let got = s3
        .block_on(s3.client().list_paged(&prefix, 100, 2))
        .unwrap();
    assert_eq!(got, want, "three pages of two");
    assert_eq!(s3.list(&loc.key("tile/"), 100).unwrap().len(), 3);
    match s3.block_on(s3.client().list_paged(&prefix, 4, 2)) {
        Err(S3Error::BadListing { detail, .. }) => {
            assert!(detail.contains("more than 4"), "{detail}")
        }
        other => panic!("expected the key cap to hold, got {other:?}"),
    }
}

#[test]
fn a_body_over_the_callers_limit_is_refused() {
    let Some((s3, loc)) = s3_support::setup("limit") else {
        return;
    };
    let key = loc.key("big");
    s3.create(&key, Bytes::from(vec![7u8; 10_000])).unwrap();
    assert!(matches!(
        s3.get(&key, 9_999),
        Err(S3Error::TooLarge { max: 9_999, .. })
    ));
    assert_eq!(s3.get(&key, 10_000).unwrap().unwrap().body.len(), 10_000);
}

#[test]
fn wrong_credentials_are_an_access_error_with_s3s_code() {
    let Some((settings, bucket)) = s3_support::server() else {
        return;
    };
    let loc = s3_support::fresh_location(&bucket, "badcreds");
    let wrong = Settings {
        credentials: Credentials {
            secret_access_key: "not-the-secret-0000000000000000000000000".into(),
            ..settings.credentials.clone()
        },
        ..settings
    };
    let s3 = BlockingClient::new(wrong, &loc).unwrap();
    match s3.get(&loc.key("checkpoint"), 64) {
        Err(S3Error::Status {
            status: 403, code, ..
        }) => assert_eq!(code, "SignatureDoesNotMatch"),
        other => panic!("expected 403 SignatureDoesNotMatch, got {other:?}"),
    }
}

#[test]
fn keys_with_reserved_characters_are_signed_and_stored_as_given() {
    let Some((s3, loc)) = s3_support::setup("chars") else {
        return;
    };
    // The log's own keys use only safe characters; the signer must still be
    // exact for any key the server accepts.
    for name in ["a b", "plus+sign", "dollar$", "tilde~/x", "é", "x=y&z"] {
        let key = loc.key(name);
        s3.create(&key, Bytes::from(name.as_bytes().to_vec()))
            .unwrap();
        assert_eq!(
            s3.get(&key, 64).unwrap().unwrap().body,
            name.as_bytes(),
            "{name:?}"
        );
    }
}
