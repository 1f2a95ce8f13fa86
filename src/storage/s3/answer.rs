//! answer: what the S3 client gives back (an object, its metadata, the
//! outcome of a conditional create) and why a request failed, with a hint
//! of what to check for S3's common error codes.

use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};

use super::client::{MAX_ETAG_BYTES, MAX_KEY_BYTES, REQUEST_TIMEOUT};

/// An entity tag as the server gave it, without its surrounding quotes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Etag(String);

impl Etag {
    /// From an `ETag` header value: quotes (and a weak `W/`) removed.
    pub(super) fn from_header(value: &HeaderValue) -> Option<Etag> {
        let text = value.to_str().ok()?.trim();
        if text.is_empty() || text.len() > MAX_ETAG_BYTES {
            return None;
        }
        let text = text.strip_prefix("W/").unwrap_or(text);
        let text = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .unwrap_or(text);
        let printable = text.bytes().all(|c| c.is_ascii_graphic() && c != b'"');
        (printable && !text.is_empty()).then(|| Etag(text.to_string()))
    }

    /// The tag without quotes.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// For tests of what a server accepts: a tag from its unquoted text.
    pub fn from_unquoted(text: &str) -> Etag {
        Etag(text.to_string())
    }
}

impl std::fmt::Display for Etag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\"", self.0)
    }
}

/// An object read whole.
#[derive(Debug, Clone)]
pub struct Object {
    /// Its bytes.
    pub body: Bytes,
    /// Its entity tag.
    pub etag: Etag,
}

/// What HEAD says about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Its entity tag.
    pub etag: Etag,
    /// Its length in bytes.
    pub len: u64,
}

/// The result of [`Client::create`](super::client::Client::create).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The object did not exist and now holds the bytes.
    New(Etag),
    /// The object already held exactly these bytes (a retried or repeated write).
    Identical(Etag),
}

impl Created {
    /// The object's entity tag, either way.
    pub fn etag(&self) -> &Etag {
        match self {
            Created::New(e) | Created::Identical(e) => e,
        }
    }
}

/// What to do about an error answer, by S3's error code (or the status
/// when there is none): said after the answer.
pub(super) fn status_hint(code: &str, status: u16) -> &'static str {
    match code {
        "NoSuchBucket" => {
            "; the bucket does not exist: create it, or check the BUCKET of s3://BUCKET/PREFIX"
        }
        "InvalidAccessKeyId" => {
            "; the object store does not know this access key: check AWS_ACCESS_KEY_ID"
        }
        "SignatureDoesNotMatch" => {
            "; the request's signature was refused: check AWS_SECRET_ACCESS_KEY (and AWS_REGION)"
        }
        "AccessDenied" | "" if status == 403 => {
            "; access denied: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the bucket's \
             policy for this key"
        }
        "AuthorizationHeaderMalformed" => "; check AWS_REGION",
        _ => "",
    }
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum S3Error {
    /// A key that S3 cannot take.
    #[error("object key {key:?}: {detail}")]
    BadKey {
        /// The key (cut).
        key: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// Connecting, sending or receiving failed on every attempt.
    #[error(
        "{method} {key}: {detail} (after {attempts} attempts; is the endpoint right, and the \
         object store up?)"
    )]
    Transport {
        /// The request method.
        method: &'static str,
        /// The object key.
        key: String,
        /// The last failure, with its causes.
        detail: String,
        /// Attempts made.
        attempts: u32,
    },
    /// No complete answer within [`REQUEST_TIMEOUT`] on every attempt.
    #[error("{method} {key}: no answer within {secs} s (after {attempts} attempts)", secs = REQUEST_TIMEOUT.as_secs())]
    Timeout {
        /// The request method.
        method: &'static str,
        /// The object key.
        key: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered with a status the request does not expect.
    #[error("{method} {key}: HTTP {status} {code} {message}{hint}", hint = status_hint(code, *status))]
    Status {
        /// The request method.
        method: &'static str,
        /// The object key.
        key: String,
        /// The status code.
        status: u16,
        /// S3's error code from the XML body (`AccessDenied`, `NoSuchBucket`, ...), if any.
        code: String,
        /// S3's error message, if any.
        message: String,
    },
    /// The object is larger than the caller allows.
    #[error("{key}: the object is over {max} bytes")]
    TooLarge {
        /// The object key.
        key: String,
        /// The limit.
        max: usize,
    },
    /// A success answer without a usable ETag header.
    #[error("{method} {key}: the answer has no usable ETag")]
    MissingEtag {
        /// The request method.
        method: &'static str,
        /// The object key.
        key: String,
    },
    /// `If-None-Match: *` was refused and the object holds other bytes.
    #[error(
        "{key} already exists with different contents (ETag {current}); refusing to overwrite it"
    )]
    ExistsDifferent {
        /// The object key.
        key: String,
        /// The ETag of what is there.
        current: Etag,
    },
    /// `If-Match` was refused: the object changed or is gone.
    #[error("{key} changed under us: expected ETag {expected}, found {}", current.as_ref().map_or("no object".to_string(), |e| e.to_string()))]
    Conflict {
        /// The object key.
        key: String,
        /// The ETag the write was conditioned on.
        expected: Etag,
        /// The ETag of what is there now, or `None` if nothing is.
        current: Option<Etag>,
    },
    /// A listing the client could not read.
    #[error("listing {prefix:?}: {detail}")]
    BadListing {
        /// The prefix listed.
        prefix: String,
        /// What is wrong.
        detail: String,
    },
}

/// A key S3 can take: at most [`MAX_KEY_BYTES`], not absolute, no control
/// character (refused before anything is sent).
pub(super) fn check_key(key: &str) -> Result<(), S3Error> {
    let bad = |detail| S3Error::BadKey {
        key: key.chars().take(MAX_KEY_BYTES).collect(),
        detail,
    };
    if key.len() > MAX_KEY_BYTES {
        return Err(bad("longer than 1,024 bytes"));
    }
    if key.starts_with('/') || key.bytes().any(|c| c.is_ascii_control()) {
        return Err(bad("starts with / or holds a control character"));
    }
    Ok(())
}

/// The ETag of an answer; an answer without one is an error.
pub(super) fn etag_of(
    headers: &HeaderMap,
    method: &'static str,
    key: &str,
) -> Result<Etag, S3Error> {
    headers
        .get(header::ETAG)
        .and_then(Etag::from_header)
        .ok_or_else(|| S3Error::MissingEtag {
            method,
            key: key.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_lose_their_quotes_and_weakness() {
        let tag = |s: &'static str| Etag::from_header(&HeaderValue::from_static(s));
        assert_eq!(
            tag("\"0cc175b9c0f1b6a831c399e269772661\"")
                .unwrap()
                .as_str(),
            "0cc175b9c0f1b6a831c399e269772661"
        );
        assert_eq!(tag("abc").unwrap().as_str(), "abc");
        assert_eq!(tag("W/\"abc\"").unwrap().as_str(), "abc");
        assert_eq!(tag("\"abc-3\"").unwrap().to_string(), "\"abc-3\"");
        assert!(tag("\"\"").is_none());
        assert!(tag("\"a\"b\"").is_none());
        assert!(tag("a b").is_none());
    }

    #[test]
    fn keys_s3_cannot_take_are_refused_before_sending() {
        assert!(check_key("log/tile/0/000").is_ok());
        assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
        assert!(check_key("/abs").is_err());
        assert!(check_key("a\nb").is_err());
    }
}
