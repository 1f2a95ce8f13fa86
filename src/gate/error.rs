//! error: why the gate reached no verdict, or refused to write
//! ([`GateError`]); the binary maps each kind to its exit status.

use super::change::ChangeError;
use super::clean::CleanError;
use super::journal;
use super::patch;
use super::run::NotRun;
use super::store::StoreError;
use crate::fresh::ReadSetError;
use crate::receipt::PayloadError;

/// Why the gate reached no verdict.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateError {
    /// The change could not be identified.
    #[error(transparent)]
    Change(#[from] ChangeError),
    /// The clean copy could not be made.
    #[error(transparent)]
    Clean(#[from] CleanError),
    /// A check could not run.
    #[error(transparent)]
    NotRun(#[from] NotRun),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The read set could not be made.
    #[error("making the read set")]
    ReadSet(#[from] ReadSetError),
    /// The receipt could not be built (too large, or an invariant).
    #[error("building the receipt")]
    Payload(#[from] PayloadError),
    /// The work tree moved while the checks ran.
    #[error(
        "{0} changed while the checks ran; the receipt would not describe what was tested: run again"
    )]
    Moved(String),
    /// The receipt could not carry the read set of this change.
    #[error(
        "the change has {files} files: its receipt's read set would make a payload of about \
         {bytes} bytes, over the limit of {max}; gate a smaller change",
        max = crate::limits::MAX_PAYLOAD_BYTES
    )]
    TooLarge {
        /// Files in the change.
        files: usize,
        /// The estimated payload size.
        bytes: usize,
    },
    /// Interrupted between checks.
    #[error("interrupted (SIGINT or SIGTERM); the clean copy was removed")]
    Interrupted,
    /// The private scratch directory failed.
    #[error("preparing the capture directory")]
    Scratch(#[source] std::io::Error),
    /// The patch could not be read or does not apply.
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
    /// Writing the change (journal, compare and swap, files) failed.
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    /// A touched path is in the work tree but not in the clean copy.
    #[error(
        "{0}: the patch touches a path whose file in the work tree is not part of the change \
         the gate can copy (an ignored file?); nothing was written"
    )]
    Outside(String),
    /// The change is over a limit of the store.
    #[error("{0}; nothing was written")]
    OverLimit(String),
    /// The policy's rules gave no result.
    #[error(transparent)]
    Rules(#[from] super::rules::RulesError),
    /// The thread evaluating the rules panicked (a defect of rcpt).
    #[error("the rules' evaluation failed unexpectedly (a defect: please report it)")]
    RulesPanicked,
    /// Refused: the receipt cannot be undone, or the like.
    #[error("refused: {0}")]
    Refused(String),
}

impl GateError {
    /// True when the cause is how the gate was called (exit 2), not an
    /// evaluation that could not be completed (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(self, GateError::Change(e) if e.is_usage())
            || matches!(self, GateError::Patch(patch::PatchError::Read(_)))
            || matches!(self, GateError::Rules(e) if e.is_refused())
    }

    /// True when the gate refused to write (exit 1): a file that is not
    /// what was decided on (the compare and swap), a receipt it will not
    /// undo.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            GateError::Refused(_) | GateError::Journal(journal::JournalError::Mismatch { .. })
        )
    }
}
