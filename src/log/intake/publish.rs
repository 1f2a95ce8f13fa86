//! publish: the checkpoint of the last append made public, cosigned first
//! when the log is witnessed. Witnessing plugs in through [`Witness`]: the
//! log layer says what it needs (a quorum's cosigned note), the network
//! layer asks the witnesses (`net::client::witnessing`); the log never
//! uses the network.

use super::{Intake, IntakeError, NotCosigned};
use crate::bundle::Bundle;
use crate::keys::NoteVerifier;
use crate::log::{Log, LogError};
use crate::tlog::merkle::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A checkpoint a quorum of witnesses cosigned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cosigned {
    /// The checkpoint note with the verified cosignature lines appended.
    pub note: String,
    /// The names of the witnesses whose lines were appended.
    pub cosigners: Vec<String>,
}

/// What publishing a witnessed checkpoint did, for the witness's report.
#[derive(Debug)]
pub struct Witnessed<'a> {
    /// The tree size of the checkpoint.
    pub size: u64,
    /// True when the checkpoint is published (a quorum cosigned it, and
    /// the cosigned note was stored).
    pub published: bool,
    /// Who cosigned, when a quorum did.
    pub cosigners: Option<&'a [String]>,
    /// True when the stored checkpoint already held a quorum's cosignatures.
    pub from_store: bool,
    /// How long witnessing took.
    pub elapsed: Duration,
    /// Storing the cosigned note as the log's checkpoint, when it was tried.
    pub stored: Option<&'a Result<(), LogError>>,
}

/// The witnesses of a log: they cosign a checkpoint before it is published.
pub trait Witness: Send {
    /// The witnesses whose cosignatures in `note` verify, when they meet
    /// the quorum (`None`: the note must be cosigned).
    fn quorum_in(&self, note: &str) -> Option<Vec<String>>;
    /// Get `checkpoint` (signed by the log alone) of a tree of `size`
    /// leaves cosigned by a quorum; `log` gives consistency proofs.
    fn cosign(&self, checkpoint: &str, size: u64, log: Arc<Log>) -> Result<Cosigned, NotCosigned>;
    /// Told what each publication did (a service logs it).
    fn witnessed(&self, _report: &Witnessed<'_>) {}
}

/// A published checkpoint, and a reader of the log at its size.
#[derive(Clone, Debug)]
pub struct Published {
    /// Its tree size.
    pub size: u64,
    /// Its root hash.
    pub root: Hash,
    /// The note as published (with any cosignatures).
    pub checkpoint: Arc<str>,
    /// The log at this checkpoint (no store read: the writer's view).
    pub log: Arc<Log>,
}

impl Published {
    fn of(log: &Log) -> Published {
        Published {
            size: log.size(),
            root: log.root(),
            checkpoint: Arc::from(log.checkpoint()),
            log: Arc::new(log.clone()),
        }
    }

    /// The bundle of entry `index` under this checkpoint (`log::bundle`).
    pub fn bundle(&self, index: u64) -> Result<Bundle, LogError> {
        self.log.bundle(index, self.size, &self.checkpoint)
    }
}

impl Intake {
    /// Publish the checkpoint of the last append: at once, or, with a
    /// witness, once a quorum cosigned it, the cosigned note stored as
    /// the log's checkpoint first (spec/witness.md "Witnessed log"). A
    /// stored checkpoint that already carries a quorum's cosignatures
    /// (after a restart, or a batch of duplicates) is published as it is.
    pub fn publish(&mut self) -> Result<Published, IntakeError> {
        let Intake {
            keeper, witness, ..
        } = self;
        let Some(writer) = keeper.writer() else {
            return Err(IntakeError::WriterAway);
        };
        let Some(witness) = witness.as_deref() else {
            return Ok(Published::of(writer.log()));
        };
        let log = writer.log();
        let size = log.size();
        if let Some(cosigners) = witness.quorum_in(log.checkpoint()) {
            witness.witnessed(&Witnessed {
                size,
                published: true,
                cosigners: Some(&cosigners),
                from_store: true,
                elapsed: Duration::ZERO,
                stored: None,
            });
            return Ok(Published::of(log));
        }
        let started = Instant::now();
        let unwitnessed = log_signed_only(log.checkpoint(), log.verifier());
        let cosigned = witness.cosign(&unwitnessed, size, Arc::new(log.clone()));
        // Stored before it is published: an answer means the cosigned
        // checkpoint is durable, and a note whose storing failed is
        // never published.
        let stored = cosigned
            .as_ref()
            .ok()
            .map(|c| writer.add_signatures(&c.note));
        witness.witnessed(&Witnessed {
            size,
            published: matches!(stored, Some(Ok(()))),
            cosigners: cosigned.as_ref().ok().map(|c| c.cosigners.as_slice()),
            from_store: false,
            elapsed: started.elapsed(),
            stored: stored.as_ref(),
        });
        let note = cosigned.map_err(IntakeError::NotCosigned)?.note;
        stored
            .transpose()
            .map_err(|e| IntakeError::NotStored(Box::new(e)))?;
        let mut published = Published::of(writer.log());
        published.checkpoint = Arc::from(note);
        Ok(published)
    }
}

/// `note` with only the signature lines of the log key `verifier`: what
/// the witnesses are sent (a stored note may carry older cosignatures).
pub fn log_signed_only(note: &str, verifier: &NoteVerifier) -> String {
    use base64::Engine;
    let Ok(parsed) = crate::tlog::note::Note::parse(note.as_bytes()) else {
        return note.to_string();
    };
    let mut out = format!("{}\n", parsed.text);
    for sig in parsed
        .signatures
        .iter()
        .filter(|s| s.name == verifier.name && s.key_hash == verifier.key_hash)
    {
        let mut raw = sig.key_hash.to_vec();
        raw.extend_from_slice(&sig.sig);
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        out.push_str(&format!(
            "{}{} {b64}\n",
            crate::tlog::note::SIGNATURE_LINE_PREFIX,
            sig.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SigningKey;

    #[test]
    fn witnesses_are_sent_the_note_with_the_log_lines_only() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let origin = "example.com/strip";
        let note = crate::log::sign_checkpoint(origin, 5, [7; 32], &key).unwrap();
        let verifier = NoteVerifier::new(origin, key.verifying_key()).unwrap();
        let body = crate::tlog::note::Note::parse(note.as_bytes())
            .unwrap()
            .text;
        let w = SigningKey::from_bytes(&[4; 32]);
        let line = crate::tlog::cosig::sign(&body, "witness.example/a", &w, 1).unwrap();
        let cosigned = format!("{note}{line}");
        assert_eq!(log_signed_only(&cosigned, &verifier), note);
        assert_eq!(log_signed_only(&note, &verifier), note);
    }
}
