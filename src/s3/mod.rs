//! s3: the log on S3-compatible object storage (spec/storage.md).
//!
//! Boundary: [`sigv4`] signs requests (pure, no I/O); [`client`] sends the
//! five requests the log needs (GET, HEAD, PUT with `If-None-Match: *`, PUT
//! with `If-Match`, DELETE, and LIST) with timeouts, bounded retries and
//! capped bodies; [`lease`] keeps one sequencer at a time. Nothing here
//! knows the tlog-tiles layout.

pub mod sigv4;
