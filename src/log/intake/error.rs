//! error: why the intake could not open a log or take envelopes. Each
//! variant keeps its cause as its source; none repeats its cause's text.

use crate::keys::KeyError;
use crate::log::LogError;
use crate::log::admit::Refusal;

/// Why the intake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntakeError {
    /// The log could not be opened, read, written or proved from.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An `s3://` location or its settings were refused (the location,
    /// the endpoint, the credentials, the lease; each message says which).
    #[error(transparent)]
    ObjectStorage(Box<dyn std::error::Error + Send + Sync>),
    /// The S3 client could not start.
    #[error("starting the S3 client for {location}")]
    S3Client {
        /// The `s3://` location given.
        location: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// This build has no object-storage support.
    #[error("{location}: this rcpt was built without object-storage support (cargo feature s3)")]
    NoObjectStorage {
        /// The `s3://` location given.
        location: String,
    },
    /// An endpoint was given for a directory.
    #[error("--endpoint is for logs at s3://BUCKET/PREFIX, not the directory {dir}")]
    EndpointForDirectory {
        /// The directory.
        dir: String,
    },
    /// A log service's URL where a store was needed: a service is
    /// submitted to (`net::client::submit`), never opened.
    #[error("{url} is a log service: it takes submissions, and is not opened as a store")]
    Service {
        /// The URL given.
        url: String,
    },
    /// The log records no key file, and none was given.
    #[error("the log {location} records no key file to append with")]
    NoKeyFile {
        /// Where the log is.
        location: String,
    },
    /// The log's private key file could not be read (its cause names it).
    #[error("the log key")]
    KeyFile(#[source] KeyError),
    /// The log's private key file holds no private key.
    #[error("reading the log key {path}")]
    Key {
        /// The key file.
        path: String,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// An envelope of an all-or-nothing batch was refused.
    #[error("the log refuses {}", which(*position, *of))]
    Refused {
        /// Its position in the batch (from 0).
        position: usize,
        /// How many the batch holds.
        of: usize,
        /// Why.
        #[source]
        source: Refusal,
    },
    /// The log's writer is away (it stopped, and is being opened again).
    #[error("the log writer stopped after an error and is being opened again; retry")]
    WriterAway,
    /// No quorum of witnesses cosigned the checkpoint: the entries are
    /// durable, the checkpoint is not published.
    #[error("the entries are durably logged, but no quorum of witnesses cosigned the checkpoint")]
    NotCosigned(#[source] NotCosigned),
    /// A quorum cosigned the checkpoint, but the cosigned note could not
    /// be stored as the log's checkpoint: the entries are durable, the
    /// checkpoint is not published (nothing unstored is served).
    #[error(
        "the entries are durably logged, but storing the cosigned checkpoint failed: it is not \
         published"
    )]
    NotStored(#[source] Box<LogError>),
    /// The append returned fewer indexes than entries (a bug).
    #[error("the append returned {got} indexes for {want} entries")]
    Short {
        /// Indexes returned.
        got: usize,
        /// Entries given.
        want: usize,
    },
    /// The admission thread failed (a bug).
    #[error("the admission thread failed")]
    AdmissionThread,
}

/// The envelope refused, for messages: "the envelope" when it was alone.
fn which(position: usize, of: usize) -> String {
    match of {
        1 => "the envelope".to_string(),
        _ => format!("envelope {} of {of}", position + 1),
    }
}

/// Why witnessing ended without a quorum (the witness's own error).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct NotCosigned(pub Box<dyn std::error::Error + Send + Sync>);

impl IntakeError {
    /// True when the error is a bad invocation: a location that cannot
    /// name a log here, a missing log directory, no key to append with.
    pub fn is_bad_invocation(&self) -> bool {
        match self {
            IntakeError::Log(e) => e.is_bad_path(),
            IntakeError::ObjectStorage(_)
            | IntakeError::NoObjectStorage { .. }
            | IntakeError::EndpointForDirectory { .. }
            | IntakeError::Service { .. }
            | IntakeError::NoKeyFile { .. } => true,
            _ => false,
        }
    }

    /// The log error inside, if the log itself failed.
    pub fn log_error(&self) -> Option<&LogError> {
        match self {
            IntakeError::Log(e) => Some(e),
            _ => None,
        }
    }
}
