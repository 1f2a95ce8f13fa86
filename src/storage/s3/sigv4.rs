//! sigv4: AWS Signature Version 4 for S3 requests, signed in the
//! `Authorization` header. Pure: no I/O and no clock (the caller passes the
//! time), so it is tested byte for byte against AWS's published vectors
//! (`tests/vectors/aws-sigv4/`, run by `tests/s3_sigv4.rs`).
//!
//! The algorithm, as AWS documents it ("Create a signed AWS API request"):
//!
//! ```text
//! CanonicalRequest = Method \n CanonicalURI \n CanonicalQuery \n
//!                    CanonicalHeaders \n SignedHeaders \n HexPayloadHash
//! StringToSign     = "AWS4-HMAC-SHA256" \n AmzDate \n Scope \n
//!                    hex(SHA-256(CanonicalRequest))
//! Scope            = YYYYMMDD/region/service/aws4_request
//! SigningKey       = HMAC(HMAC(HMAC(HMAC("AWS4" || secret, YYYYMMDD),
//!                    region), service), "aws4_request")
//! Signature        = hex(HMAC(SigningKey, StringToSign))
//! ```
//!
//! S3 differs from the other services in one place: the path is
//! URI-encoded once and never normalised (`//` and `/./` stay as they are),
//! which is what this module does for every request.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::digest::to_hex;

/// The only algorithm this module signs with.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// Header carrying the request time, `YYYYMMDDTHHMMSSZ`.
pub const AMZ_DATE: &str = "x-amz-date";
/// Header carrying a temporary credential's session token (signed).
pub const AMZ_SECURITY_TOKEN: &str = "x-amz-security-token";
/// Header carrying the hex SHA-256 of the body (S3 requires it on every request).
pub const AMZ_CONTENT_SHA256: &str = "x-amz-content-sha256";
/// Hex SHA-256 of the empty string: the payload hash of a request with no body.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

type HmacSha256 = Hmac<Sha256>;

/// An access key and its secret, with an optional session token.
/// `Debug` never shows the secret or the token.
#[derive(Clone)]
pub struct Credentials {
    /// The access key id, sent in the clear in the credential scope.
    pub access_key_id: String,
    /// The secret access key: only ever used as HMAC key material.
    pub secret_access_key: String,
    /// A temporary credential's token, sent (and signed) as `x-amz-security-token`.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A UTC instant to the second, formatted the way SigV4 wants it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmzTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl AmzTime {
    /// The instant `secs` seconds after 1970-01-01T00:00:00Z.
    pub fn from_unix(secs: u64) -> Self {
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        // `rem` < 86,400, so every field below fits its type.
        AmzTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
        }
    }

    /// The current time from the system clock.
    pub fn now() -> Self {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Self::from_unix(secs)
    }

    /// `YYYYMMDD`, the date of the credential scope.
    pub fn date(&self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// `YYYYMMDDTHHMMSSZ`, the value of `x-amz-date`.
    pub fn amz_date(&self) -> String {
        format!(
            "{}T{:02}{:02}{:02}Z",
            self.date(),
            self.hour,
            self.minute,
            self.second
        )
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar, by eras of 400 years (146,097 days each).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // shift the epoch to 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097); // [0, 146096]
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // 0 = March
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// What is signed of one request. Names and values are as sent; the signer
/// canonicalises them.
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `PUT`, ...
    pub method: &'a str,
    /// The path, not yet URI-encoded, starting with `/` (`/bucket/key`).
    pub path: &'a str,
    /// Query parameters, not yet URI-encoded, in any order.
    pub query: &'a [(String, String)],
    /// Headers to sign, in any order and case; `host` must be among them.
    /// A name given more than once is signed as its values joined by `,`.
    pub headers: &'a [(String, String)],
    /// Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
    pub payload_sha256: &'a str,
}

/// Where and when a request is signed.
#[derive(Debug, Clone)]
pub struct Scope<'a> {
    /// Region of the credential scope (`us-east-1`).
    pub region: &'a str,
    /// Service of the credential scope (`s3`).
    pub service: &'a str,
    /// Request time: goes into `x-amz-date` and the scope's date.
    pub time: AmzTime,
}

/// The result of signing: the headers to add to the request, and the
/// intermediate strings (for tests and for debugging a refused signature).
#[derive(Debug)]
pub struct Signed {
    /// Headers the signer added to the signed set and that the request MUST
    /// carry with exactly these values: `x-amz-date`, and
    /// `x-amz-security-token` with a session token.
    pub added_headers: Vec<(&'static str, String)>,
    /// The value of the `Authorization` header.
    pub authorization: String,
    /// The canonical request that was hashed.
    pub canonical_request: String,
    /// The string that was signed.
    pub string_to_sign: String,
    /// The hex signature.
    pub signature: String,
}

/// Signs `request` with `credentials` for `scope`.
pub fn sign(credentials: &Credentials, scope: &Scope<'_>, request: &Request<'_>) -> Signed {
    let amz_date = scope.time.amz_date();
    let mut added_headers = vec![(AMZ_DATE, amz_date.clone())];
    if let Some(token) = &credentials.session_token {
        added_headers.push((AMZ_SECURITY_TOKEN, token.clone()));
    }
    let (canonical_headers, signed_headers) = canonical_headers(request.headers, &added_headers);
    let canonical_request = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        uri_encode(request.path, false),
        canonical_query(request.query),
        canonical_headers,
        signed_headers,
        request.payload_sha256
    );
    let date = scope.time.date();
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{credential_scope}\n{}",
        to_hex(&Sha256::digest(canonical_request.as_bytes()))
    );
    let key = signing_key(&credentials.secret_access_key, &date, scope);
    let signature = to_hex(&hmac(&key, string_to_sign.as_bytes()));
    let authorization = format!(
        "{ALGORITHM} Credential={}/{credential_scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    );
    Signed {
        added_headers,
        authorization,
        canonical_request,
        string_to_sign,
        signature,
    }
}

/// The derived key: HMAC chain over date, region, service and `aws4_request`.
fn signing_key(secret: &str, date: &str, scope: &Scope<'_>) -> [u8; 32] {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, scope.region.as_bytes());
    let k_service = hmac(&k_region, scope.service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

#[expect(
    clippy::expect_used,
    reason = "HMAC takes a key of any length (RFC 2104 hashes a longer one), so new_from_slice cannot fail"
)]
fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts keys of every length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `CanonicalHeaders` (each `name:value\n`, names lower-cased and sorted,
/// values trimmed with inner runs of spaces collapsed, repeated names joined
/// by `,`) and `SignedHeaders` (the names joined by `;`).
fn canonical_headers(
    headers: &[(String, String)],
    added: &[(&'static str, String)],
) -> (String, String) {
    let mut all: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), collapse_spaces(value)))
        .chain(
            added
                .iter()
                .map(|(name, value)| ((*name).to_string(), collapse_spaces(value))),
        )
        .collect();
    // Stable sort: values of a repeated name keep the order they were given.
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let mut canonical = String::new();
    let mut names: Vec<&str> = Vec::new();
    for (name, value) in &all {
        if names.last() == Some(&name.as_str()) {
            canonical.pop(); // the '\n' of the previous value of this name
            canonical.push(',');
        } else {
            names.push(name);
            canonical.push_str(name);
            canonical.push(':');
        }
        canonical.push_str(value);
        canonical.push('\n');
    }
    (canonical, names.join(";"))
}

/// Trims a header value and replaces each run of spaces by one space.
fn collapse_spaces(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `CanonicalQueryString`: each name and value URI-encoded, sorted by name
/// then value, `name=value` joined by `&` (an empty value gives `name=`).
fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, true), uri_encode(v, true)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// URI-encodes every byte except the unreserved `A-Z a-z 0-9 - _ . ~`, as
/// `%XX` with upper-case hex; `/` is kept unless `encode_slash`.
pub fn uri_encode(s: &str, encode_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~');
        if unreserved || (b == b'/' && !encode_slash) {
            out.push(char::from(b));
        } else {
            // Upper-case hex, as SigV4 requires (`{:02X}`).
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_known_instants() {
        assert_eq!(AmzTime::from_unix(0).amz_date(), "19700101T000000Z");
        // 2015-08-30T12:36:00Z, the instant of AWS's SigV4 test suite.
        assert_eq!(
            AmzTime::from_unix(1_440_938_160).amz_date(),
            "20150830T123600Z"
        );
        // 2013-05-24T00:00:00Z, the instant of the S3 documentation examples.
        assert_eq!(
            AmzTime::from_unix(1_369_353_600).amz_date(),
            "20130524T000000Z"
        );
        // A leap day and the last second of a leap year.
        assert_eq!(AmzTime::from_unix(951_782_400).date(), "20000229");
        assert_eq!(
            AmzTime::from_unix(1_483_228_799).amz_date(),
            "20161231T235959Z"
        );
    }

    #[test]
    fn uri_encoding_keeps_only_unreserved_bytes() {
        assert_eq!(uri_encode("/a b/c$d", false), "/a%20b/c%24d");
        assert_eq!(uri_encode("a/b", true), "a%2Fb");
        assert_eq!(uri_encode("ሴ", true), "%E1%88%B4");
        assert_eq!(uri_encode("-._~Az09", true), "-._~Az09");
        assert_eq!(uri_encode("+=&*", true), "%2B%3D%26%2A");
    }

    #[test]
    fn debug_redacts_the_secret_and_the_token() {
        let c = Credentials {
            access_key_id: "AKID".into(),
            secret_access_key: "very-secret".into(),
            session_token: Some("tok".into()),
        };
        let shown = format!("{c:?}");
        assert!(shown.contains("AKID"));
        assert!(!shown.contains("very-secret"));
        assert!(!shown.contains("tok\""));
    }
}
