//! open: what an intake is, and how one is opened on a log's store: the
//! log read and checked, the key to append with found (given, or the key
//! file recorded at init), the accepted issuers found (given, or those
//! recorded at init), and the writer kept ([`super::keeper`]).

use super::keeper::{Keeper, Reopen};
use super::{IntakeError, Witness};
use crate::keys::SigningKey;
use crate::log::admit::AcceptedIssuers;
use crate::log::{Log, LogError, LogWriter};
use crate::storage::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// The key the intake appends with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum KeyChoice {
    /// The key file recorded at init (`rcpt log init --key`).
    Recorded,
    /// This key file.
    File(PathBuf),
    /// This key.
    Key(SigningKey),
}

/// How an intake is opened.
#[derive(Clone, Debug)]
pub struct Options {
    /// The log's signing key.
    pub key: KeyChoice,
    /// The issuers whose envelopes are admitted; `None`: those recorded
    /// at init (and, with none recorded, signatures are not checked).
    pub accepted: Option<AcceptedIssuers>,
    /// When the writer is opened (and opened again).
    pub reopen: Reopen,
}

impl Options {
    /// A command's intake: the recorded key and issuers, the writer
    /// opened at the first append, waiting for another writer when `wait`.
    pub fn recorded(wait: bool) -> Options {
        Options {
            key: KeyChoice::Recorded,
            accepted: None,
            reopen: Reopen::OnDemand { wait },
        }
    }
}

/// The one way into a log: envelopes in, durable and published entries
/// (and, on request, their bundles) out.
pub struct Intake {
    pub(super) keeper: Keeper,
    pub(super) accepted: Option<AcceptedIssuers>,
    pub(super) witness: Option<Box<dyn Witness>>,
    /// Why the last failed append dropped the writer for good, until taken.
    pub(super) dropped: Option<&'static str>,
    location: String,
}

impl std::fmt::Debug for Intake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intake")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// Open the log in `store` to append to it: a copy of the public files
/// (no settings) cannot take entries.
pub fn open_log(store: Arc<dyn Store>) -> Result<Log, IntakeError> {
    Log::open_store(store, None).map_err(|e| match e {
        LogError::NoLogKey { location } => LogError::NotWritable { location }.into(),
        e => e.into(),
    })
}

/// Check that the log in `store` can take entries with the key it
/// records, without taking its writer: what a command checks before work
/// whose receipt it logs at the end.
pub fn probe(store: Arc<dyn Store>) -> Result<(), IntakeError> {
    let log = open_log(store)?;
    match log.key_file() {
        Some(_) => Ok(()),
        None => Err(IntakeError::NoKeyFile {
            location: log.location(),
        }),
    }
}

/// Read the log's private key from `path`.
pub fn read_log_key(path: &std::path::Path) -> Result<SigningKey, IntakeError> {
    let pem = crate::keys::read_key_file(path).map_err(IntakeError::KeyFile)?;
    crate::keys::signing_key_from_pem(&pem).map_err(|source| IntakeError::Key {
        path: path.display().to_string(),
        source,
    })
}

impl Intake {
    /// Open the intake of the log in `store` (the writer is taken now
    /// on a schedule, else at the first append or [`Intake::ready`]).
    pub fn open(store: Arc<dyn Store>, options: Options) -> Result<Intake, IntakeError> {
        let log = open_log(Arc::clone(&store))?;
        let location = log.location();
        let key = match options.key {
            KeyChoice::Key(k) => k,
            KeyChoice::File(path) => read_log_key(&path)?,
            KeyChoice::Recorded => match log.key_file() {
                Some(path) => read_log_key(path)?,
                None => return Err(IntakeError::NoKeyFile { location }),
            },
        };
        let accepted = match options.accepted {
            Some(a) => Some(a),
            None => log.accepted_issuers()?,
        };
        drop(log);
        let writer = match options.reopen {
            Reopen::Scheduled => Some(LogWriter::open_store(Arc::clone(&store), &key, false)?),
            Reopen::OnDemand { .. } => None,
        };
        Ok(Intake {
            keeper: Keeper::new(store, key, options.reopen, writer),
            accepted,
            witness: None,
            dropped: None,
            location,
        })
    }

    /// [`Intake::open`] for a service: the writer taken now (waiting for
    /// the lock when `wait`), opened again on a schedule after it stopped.
    pub fn serve(
        store: Arc<dyn Store>,
        key: SigningKey,
        accepted: AcceptedIssuers,
        wait: bool,
    ) -> Result<Intake, IntakeError> {
        let writer = LogWriter::open_store(Arc::clone(&store), &key, wait)?;
        Ok(Intake {
            location: writer.log().location(),
            keeper: Keeper::new(store, key, Reopen::Scheduled, Some(writer)),
            accepted: Some(accepted),
            witness: None,
            dropped: None,
        })
    }

    /// Checkpoints are cosigned by `witness` before they are published.
    pub fn with_witness(mut self, witness: Box<dyn Witness>) -> Intake {
        self.witness = Some(witness);
        self
    }

    /// Where the log is, for messages.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The store the log lives in.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.keeper.store()
    }

    /// The issuers whose envelopes are admitted (`None`: signatures are not checked).
    pub fn accepted(&self) -> Option<&AcceptedIssuers> {
        self.accepted.as_ref()
    }

    /// Take the writer now, if it is not held (on demand).
    pub fn ready(&mut self) -> Result<(), IntakeError> {
        self.keeper.writer_for_append()?;
        Ok(())
    }

    /// Release the writer (its lock) until the next append (on demand).
    pub fn release(&mut self) {
        if self.keeper.writer().is_some() {
            self.keeper.drop_writer();
        }
    }

    /// The log as the writer holds it (its last append), while it holds one.
    pub fn log(&mut self) -> Option<&Log> {
        self.keeper.writer().map(|w| w.log())
    }

    /// True while a writer is held.
    pub fn writing(&mut self) -> bool {
        self.keeper.writer().is_some()
    }
}
