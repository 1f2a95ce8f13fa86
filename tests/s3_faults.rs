//! The S3 client against servers that misbehave: a closed port, 5xx
//! answers, oversized bodies, a missing ETag. Each "server" here is a few
//! lines on a loopback socket answering canned responses, so these tests
//! need no radosgw and always run.
#![cfg(feature = "s3")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use rcpt::storage::s3::client::MAX_ATTEMPTS;
use rcpt::storage::s3::sigv4::Credentials;
use rcpt::storage::s3::{BlockingClient, Endpoint, Location, S3Error, Settings};
use sha2::Digest;

fn settings(port: u16) -> Settings {
    Settings {
        endpoint: Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap(),
        region: "us-east-1".into(),
        credentials: Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "secret".into(),
            session_token: None,
        },
    }
}

fn client(port: u16) -> BlockingClient {
    let loc = Location::parse("s3://bucket/log").unwrap();
    BlockingClient::new(settings(port), &loc).unwrap()
}

/// A server that answers the i-th request with `responses[min(i, last)]`
/// (each a whole HTTP response, `Connection: close`), and records each
/// request's head.
struct Canned {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    count: Arc<AtomicUsize>,
}

fn canned(responses: Vec<Vec<u8>>) -> Canned {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let (seen2, count2) = (seen.clone(), count.clone());
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let head = read_request(&mut stream);
            let i = count2.fetch_add(1, Ordering::SeqCst);
            seen2.lock().unwrap().push(head);
            let response = &responses[i.min(responses.len() - 1)];
            let _ = stream.write_all(response);
        }
    });
    Canned { port, seen, count }
}

/// Reads one request head and its Content-Length body; returns the head.
fn read_request(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).unwrap_or(0) == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).unwrap();
    head
}

fn response(status: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn a_closed_port_is_a_transport_error_after_bounded_attempts() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    match client(port).get("log/checkpoint", 1024) {
        Err(S3Error::Transport {
            attempts,
            method: "GET",
            ..
        }) => assert_eq!(attempts, MAX_ATTEMPTS),
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[test]
fn server_errors_are_retried_until_an_answer() {
    let ok = response("200 OK", "ETag: \"abc\"\r\n", "hello");
    let unavailable = response(
        "503 Service Unavailable",
        "",
        "<Error><Code>SlowDown</Code></Error>",
    );
    let server = canned(vec![unavailable.clone(), unavailable, ok]);
    let got = client(server.port)
        .get("log/checkpoint", 1024)
        .unwrap()
        .unwrap();
    assert_eq!(&got.body[..], b"hello");
    assert_eq!(got.etag.as_str(), "abc");
    assert_eq!(server.count.load(Ordering::SeqCst), 3);
}

#[test]
fn persistent_server_errors_stop_after_max_attempts_with_s3s_code() {
    let server = canned(vec![response(
        "500 Internal Server Error",
        "",
        "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>",
    )]);
    match client(server.port).get("log/checkpoint", 1024) {
        Err(S3Error::Status {
            status: 500,
            code,
            message,
            ..
        }) => {
            assert_eq!(code, "InternalError");
            assert_eq!(message, "We encountered an internal error.");
        }
        other => panic!("expected HTTP 500, got {other:?}"),
    }
    assert_eq!(server.count.load(Ordering::SeqCst), MAX_ATTEMPTS as usize);
}

#[test]
fn client_errors_are_not_retried() {
    let server = canned(vec![response(
        "403 Forbidden",
        "",
        "<Error><Code>AccessDenied</Code></Error>",
    )]);
    assert!(matches!(
        client(server.port).get("log/checkpoint", 1024),
        Err(S3Error::Status { status: 403, .. })
    ));
    assert_eq!(server.count.load(Ordering::SeqCst), 1);
}

#[test]
fn a_declared_body_over_the_limit_is_refused_unread() {
    // Declares 1 GiB and sends nothing: the client must not wait for it or allocate it.
    let huge = b"HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 1073741824\r\n\r\n".to_vec();
    let server = canned(vec![huge]);
    assert!(matches!(
        client(server.port).get("log/tile/0/000", 8192),
        Err(S3Error::TooLarge { max: 8192, .. })
    ));
    // An error answer with an oversized body keeps its status.
    let huge_error = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 1073741824\r\n\r\n".to_vec();
    let server = canned(vec![huge_error]);
    assert!(matches!(
        client(server.port).get("log/tile/0/000", 8192),
        Err(S3Error::Status { status: 403, .. })
    ));
}

#[test]
fn a_success_without_an_etag_is_an_error() {
    let server = canned(vec![response("200 OK", "", "body")]);
    assert!(matches!(
        client(server.port).get("log/checkpoint", 1024),
        Err(S3Error::MissingEtag { method: "GET", .. })
    ));
}

#[test]
fn requests_are_path_style_signed_and_carry_their_conditions() {
    let server = canned(vec![response("200 OK", "ETag: \"e1\"\r\n", "")]);
    let s3 = client(server.port);
    s3.create(
        "log/tile/entries/000.p/1",
        bytes::Bytes::from_static(b"entry"),
    )
    .unwrap();
    let head = server.seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(
        head.starts_with("put /bucket/log/tile/entries/000.p/1 http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nif-none-match: *\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\nhost: 127.0.0.1:{}\r\n", server.port)),
        "{head}"
    );
    assert!(
        head.contains("\r\nauthorization: aws4-hmac-sha256 credential=akidexample/"),
        "{head}"
    );
    assert!(
        head.contains("signedheaders=host;if-none-match;x-amz-content-sha256;x-amz-date"),
        "{head}"
    );
    let body_hash: String = sha2::Sha256::digest(b"entry")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        head.contains(&format!("\r\nx-amz-content-sha256: {body_hash}\r\n")),
        "{head}"
    );
}

#[test]
fn https_endpoints_are_refused_with_a_reason() {
    match Endpoint::parse("https://s3.example.com") {
        Err(e) => assert!(e.to_string().contains("no TLS stack"), "{e}"),
        Ok(e) => panic!("accepted {e:?}"),
    }
}

fn list_page(truncated: bool, keys: &[&str], token: Option<&str>) -> Vec<u8> {
    let contents: String = keys
        .iter()
        .map(|k| format!("<Contents><Key>{k}</Key></Contents>"))
        .collect();
    let token = token
        .map(|t| format!("<NextContinuationToken>{t}</NextContinuationToken>"))
        .unwrap_or_default();
    response(
        "200 OK",
        "Content-Type: application/xml\r\n",
        &format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><IsTruncated>{truncated}</IsTruncated>{contents}{token}</ListBucketResult>"
        ),
    )
}

/// A server that answers every listing page "truncated, no keys, here is
/// another token" would keep a listing going forever (found in issue 20):
/// the first such page is refused, after one request.
#[test]
fn a_truncated_listing_page_with_no_keys_is_refused_not_followed() {
    let server = canned(vec![list_page(true, &[], Some("again"))]);
    match client(server.port).list("log/tile/", 1_000_000) {
        Err(S3Error::BadListing { detail, .. }) => {
            assert!(detail.contains("truncated page with no keys"), "{detail}")
        }
        other => panic!("expected a refused listing, got {other:?}"),
    }
    assert_eq!(server.count.load(Ordering::SeqCst), 1);
}

/// Keys then an empty truncated page: refused at that page, not looped on.
#[test]
fn an_empty_truncated_page_after_keys_is_refused_too() {
    let server = canned(vec![
        list_page(true, &["log/a", "log/b"], Some("t1")),
        list_page(true, &[], Some("t2")),
    ]);
    assert!(matches!(
        client(server.port).list("log/", 1_000_000),
        Err(S3Error::BadListing { .. })
    ));
    assert_eq!(server.count.load(Ordering::SeqCst), 2);
}

/// A listing that goes on past the caller's key limit is refused at the
/// page that crosses it: the count the server offers drives no work.
#[test]
fn a_listing_past_the_key_limit_stops_at_the_limit() {
    let keys: Vec<String> = (0..10).map(|i| format!("log/k{i:02}")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let server = canned(vec![list_page(true, &refs, Some("more"))]);
    match client(server.port).list("log/", 25) {
        Err(S3Error::BadListing { detail, .. }) => {
            assert!(detail.contains("more than 25"), "{detail}")
        }
        other => panic!("expected a refused listing, got {other:?}"),
    }
    // Pages of 10: the third crosses 25.
    assert_eq!(server.count.load(Ordering::SeqCst), 3);
}

/// Every attempt of a conditional PUT failed with a 5xx (the store may
/// have applied one and the answer been lost): the client reads the
/// object and decides by its bytes: ours is done, another object is a
/// conflict.
#[test]
fn a_conditional_write_that_got_no_answer_is_settled_by_reading_the_object() {
    use rcpt::storage::s3::{Created, Etag};
    let failed = response(
        "503 Service Unavailable",
        "",
        "<Error><Code>SlowDown</Code></Error>",
    );
    let attempts = || vec![failed.clone(); MAX_ATTEMPTS as usize];
    let then = |read: Vec<u8>| {
        let mut r = attempts();
        r.push(read);
        canned(r)
    };
    let body = || bytes::Bytes::from_static(b"ours");
    let expected = Etag::from_unquoted("e0");

    let ours = then(response("200 OK", "ETag: \"e1\"\r\n", "ours"));
    let created = client(ours.port).create("log/checkpoint", body()).unwrap();
    assert_eq!(created, Created::Identical(Etag::from_unquoted("e1")));
    assert_eq!(ours.count.load(Ordering::SeqCst), MAX_ATTEMPTS as usize + 1);
    let ours = then(response("200 OK", "ETag: \"e1\"\r\n", "ours"));
    let replaced = client(ours.port).replace("log/checkpoint", body(), &expected);
    assert_eq!(replaced.unwrap(), Etag::from_unquoted("e1"));

    let other = then(response("200 OK", "ETag: \"e2\"\r\n", "theirs"));
    assert!(matches!(
        client(other.port).create("log/checkpoint", body()),
        Err(S3Error::ExistsDifferent { .. })
    ));
    let other = then(response("200 OK", "ETag: \"e2\"\r\n", "theirs"));
    match client(other.port).replace("log/checkpoint", body(), &expected) {
        Err(S3Error::Conflict { current, .. }) => {
            assert_eq!(current, Some(Etag::from_unquoted("e2")))
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// As above, when the read finds nothing of ours: the expected tag still
/// there (not applied, or not yet), or nothing for a create: the write's
/// own error, flagged as an answer lost. A refusal by the store (403) is
/// final and not read back.
#[test]
fn a_conditional_write_that_got_no_answer_and_is_not_there_stays_unknown() {
    use rcpt::storage::s3::Etag;
    use rcpt::storage::s3::answer_lost;
    let failed = response(
        "503 Service Unavailable",
        "",
        "<Error><Code>SlowDown</Code></Error>",
    );
    let then = |read: Vec<u8>| {
        let mut r = vec![failed.clone(); MAX_ATTEMPTS as usize];
        r.push(read);
        canned(r)
    };
    let body = || bytes::Bytes::from_static(b"ours");
    let expected = Etag::from_unquoted("e0");
    let unchanged = then(response("200 OK", "ETag: \"e0\"\r\n", "before"));
    let err = client(unchanged.port)
        .replace("log/checkpoint", body(), &expected)
        .unwrap_err();
    assert!(
        answer_lost(&err) && matches!(err, S3Error::Status { status: 503, .. }),
        "{err}"
    );
    let absent = then(response("404 Not Found", "", ""));
    let err = client(absent.port)
        .create("log/checkpoint", body())
        .unwrap_err();
    assert!(answer_lost(&err), "{err}");

    // A refusal by the store (403) is final: no read.
    let refused = canned(vec![response(
        "403 Forbidden",
        "",
        "<Error><Code>AccessDenied</Code></Error>",
    )]);
    assert!(matches!(
        client(refused.port).create("log/checkpoint", body()),
        Err(S3Error::Status { status: 403, .. })
    ));
    assert_eq!(refused.count.load(Ordering::SeqCst), 1);
}
