//! conditional: the client's writes, and what their answers mean
//! (spec/storage.md "The client, and why our own", "Lost answers").
//!
//! A conditional PUT (`If-None-Match: *` to create, `If-Match: ETAG` to
//! replace) is settled by the object's bytes, not by a status: a 412 is
//! read back (our own retried write, or another's object), and so is a
//! write whose every attempt went unanswered ([`answer_lost`]: the store
//! may have applied it and the answer been lost).

use bytes::Bytes;
use hyper::{Method, StatusCode};
use std::sync::atomic::Ordering;

use super::answer::{Created, Etag, S3Error, etag_of};
use super::client::{Client, MAX_ERROR_BODY_BYTES, status_error};

/// A precondition on a PUT.
#[derive(Debug, Clone, Copy)]
pub(super) enum Condition<'a> {
    /// `If-None-Match: *`: only if no object has the key.
    Absent,
    /// `If-Match: TAG`: only if the object's tag is this one.
    Matches(&'a Etag),
}

/// What an object holds, read back after a conditional write ([`Client::read_back`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// Exactly the bytes we wrote: our write was applied (this one or an
    /// earlier attempt of it).
    Ours(Etag),
    /// Something else, with its ETag, or nothing (`None`).
    Other(Option<Etag>),
}

/// A failed write whose answer may have been lost after the store applied
/// it: every attempt ended without an answer (a broken connection, a
/// timeout) or with a 5xx or 409, which a proxy or a store may give after
/// applying the write. A 4xx other than 409 is the store's refusal.
pub fn answer_lost(e: &S3Error) -> bool {
    match e {
        S3Error::Transport { .. } | S3Error::Timeout { .. } => true,
        S3Error::Status { status, .. } => *status >= 500 || *status == 409,
        _ => false,
    }
}

impl Client {
    /// PUT `body` at `key` only if no object has that key (`If-None-Match: *`).
    ///
    /// On a refusal the object is read: the same bytes are [`Created::Identical`]
    /// (our own retried write, or the same write repeated), other bytes are
    /// [`S3Error::ExistsDifferent`], and the caller decides. When no attempt
    /// got an answer (a lost answer: the store may have applied one), the
    /// object is read too ([`Client::read_back`]): our bytes are
    /// [`Created::Identical`]; no object, or no answer to the read either,
    /// leaves the write's own error.
    pub async fn create(&self, key: &str, body: Bytes) -> Result<Created, S3Error> {
        let lost = match self.put(key, body.clone(), Some(Condition::Absent)).await {
            Ok(Some(etag)) => return Ok(Created::New(etag)),
            Ok(None) => None,
            Err(e) if answer_lost(&e) => Some(e),
            Err(e) => return Err(e),
        };
        match (self.read_back(key, &body).await, lost) {
            (Ok(Current::Ours(etag)), _) => Ok(Created::Identical(etag)),
            (Ok(Current::Other(Some(current))), _) => Err(S3Error::ExistsDifferent {
                key: key.to_string(),
                current,
            }),
            // A refused create, and then nothing there.
            (Ok(Current::Other(None)), None) => Err(self.vanished(key)),
            (Err(e), None) => Err(e),
            // Not applied (yet), or not known: the write's own failure.
            (_, Some(lost)) => Err(lost),
        }
    }

    /// PUT `body` at `key` only if the object's ETag is `expected` (`If-Match`).
    ///
    /// On a refusal (412, or 404 where the key is gone) the object is read:
    /// if it holds exactly `body` the write is done (our retried write);
    /// if its ETag is still `expected`, the server wanted the other quoting
    /// of the tag, so the write is tried once more with it (and the client
    /// keeps that quoting); otherwise it is [`S3Error::Conflict`]. When no
    /// attempt got an answer (a lost answer), the object is read too
    /// ([`Client::read_back`]): our bytes mean the write is done, another
    /// ETag than `expected` is [`S3Error::Conflict`], and `expected` still
    /// there (not applied, or not yet) or no answer to the read leaves the
    /// write's own error.
    pub async fn replace(&self, key: &str, body: Bytes, expected: &Etag) -> Result<Etag, S3Error> {
        let mut switched_quoting = false;
        loop {
            let put = self.put(key, body.clone(), Some(Condition::Matches(expected)));
            let lost = match put.await {
                Ok(Some(etag)) => return Ok(etag),
                Ok(None) => None,
                Err(e) if answer_lost(&e) => Some(e),
                Err(e) => return Err(e),
            };
            let current = match (self.read_back(key, &body).await, lost) {
                (Ok(Current::Ours(etag)), _) => return Ok(etag),
                // Still the tag we expect: not applied, or not yet.
                (Ok(Current::Other(Some(now))), Some(lost)) if now == *expected => {
                    return Err(lost);
                }
                (Ok(Current::Other(current)), _) => current,
                (Err(e), None) => return Err(e),
                (Err(_), Some(lost)) => return Err(lost),
            };
            if current.as_ref() == Some(expected) && !switched_quoting {
                // The tag matched and the server still refused: it reads the
                // other form (quoted or not). Flip once, for good.
                let quoted = self.quote_if_match.load(Ordering::Relaxed);
                self.quote_if_match.store(!quoted, Ordering::Relaxed);
                switched_quoting = true;
                continue;
            }
            return Err(S3Error::Conflict {
                key: key.to_string(),
                expected: expected.clone(),
                current,
            });
        }
    }

    /// What `key` holds after a conditional write of `body` was refused or
    /// lost its answer: our own bytes (the write, or our earlier attempt,
    /// was applied), or another object's ETag, or nothing.
    pub async fn read_back(&self, key: &str, body: &Bytes) -> Result<Current, S3Error> {
        match self.get(key, body.len()).await {
            Ok(Some(current)) if current.body == *body => Ok(Current::Ours(current.etag)),
            Ok(Some(current)) => Ok(Current::Other(Some(current.etag))),
            Ok(None) => Ok(Current::Other(None)),
            // A larger object than ours is other bytes; read its tag.
            Err(S3Error::TooLarge { .. }) => {
                Ok(Current::Other(self.head(key).await?.map(|m| m.etag)))
            }
            Err(e) => Err(e),
        }
    }

    /// PUT `body` at `key` whatever is there.
    pub async fn put_overwrite(&self, key: &str, body: Bytes) -> Result<Etag, S3Error> {
        match self.put(key, body, None).await? {
            Some(etag) => Ok(etag),
            // No precondition was sent, so a 412 cannot be ours to explain.
            None => Err(S3Error::Status {
                method: "PUT",
                key: key.to_string(),
                status: StatusCode::PRECONDITION_FAILED.as_u16(),
                code: String::new(),
                message: "precondition failed on an unconditional PUT".to_string(),
            }),
        }
    }

    /// One PUT: `Some(etag)` on 200, `None` when the precondition failed.
    async fn put(
        &self,
        key: &str,
        body: Bytes,
        condition: Option<Condition<'_>>,
    ) -> Result<Option<Etag>, S3Error> {
        let mut headers: Vec<(String, String)> = Vec::new();
        match condition {
            Some(Condition::Absent) => headers.push(("if-none-match".into(), "*".into())),
            Some(Condition::Matches(etag)) => {
                let value = if self.quote_if_match.load(Ordering::Relaxed) {
                    etag.to_string()
                } else {
                    etag.as_str().to_string()
                };
                headers.push(("if-match".into(), value));
            }
            None => {}
        }
        let a = self
            .send(Method::PUT, key, &[], body, &headers, MAX_ERROR_BODY_BYTES)
            .await?;
        match (a.status, condition) {
            (StatusCode::OK, _) => Ok(Some(etag_of(&a.headers, "PUT", key)?)),
            (StatusCode::PRECONDITION_FAILED, Some(_)) => Ok(None),
            // AWS answers 404 to If-Match on a missing key; radosgw 412.
            (StatusCode::NOT_FOUND, Some(Condition::Matches(_))) => Ok(None),
            _ => Err(status_error("PUT", key, &a)),
        }
    }

    fn vanished(&self, key: &str) -> S3Error {
        S3Error::Transport {
            method: "GET",
            key: key.to_string(),
            detail: "the object refused our conditional write and then was gone".into(),
            attempts: 1,
        }
    }
}
