//! append: admission, and the durable append of admitted entries through
//! the kept writer (the protocol is `log::writer`'s, spec/log.md "The
//! append protocol"). A batch of envelopes is all-or-nothing here; a
//! stream that reports each refusal is `batch.rs`.

use super::{Intake, IntakeError, Published};
use crate::bundle::Bundle;
use crate::log::admit::{self, Admitted, Refusal};
use crate::log::{Appended, HashedEntry};

/// One envelope taken: where its entry is, and its receipt's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// Its index, and whether it is new.
    pub appended: Appended,
    /// `blake3:` identity of the receipt payload.
    pub receipt_id: String,
}

impl Intake {
    /// Decide whether the log admits `envelope_json` ([`admit::admit`],
    /// under this intake's accepted issuers).
    pub fn admit(&self, envelope_json: &[u8]) -> Result<Admitted, Refusal> {
        admit::admit(envelope_json, self.accepted.as_ref())
    }

    /// Append admitted entries durably: their tiles, then the log-signed
    /// checkpoint, stored and published, before this returns (one index
    /// each, in order). Witnessing, when set, is [`Intake::publish`]'s.
    pub fn append_hashed(
        &mut self,
        entries: Vec<HashedEntry>,
    ) -> Result<Vec<Appended>, IntakeError> {
        let want = entries.len();
        let Some(writer) = self.keeper.writer_for_append()? else {
            return Err(IntakeError::WriterAway);
        };
        match writer.append_hashed(entries) {
            Ok(results) if results.len() == want => Ok(results),
            Ok(results) => Err(IntakeError::Short {
                got: results.len(),
                want,
            }),
            Err(e) => {
                self.dropped = self.keeper.failed(&e);
                Err(e.into())
            }
        }
    }

    /// Admit every envelope (the first refusal refuses the batch), append
    /// them in one durable batch, and publish the checkpoint (cosigned
    /// first, with a witness): only then does this return.
    pub fn append_envelopes(
        &mut self,
        envelopes: &[&[u8]],
    ) -> Result<(Vec<Logged>, Published), IntakeError> {
        let mut entries = Vec::with_capacity(envelopes.len());
        let mut ids = Vec::with_capacity(envelopes.len());
        for (position, e) in envelopes.iter().enumerate() {
            let admitted = self.admit(e).map_err(|source| IntakeError::Refused {
                position,
                of: envelopes.len(),
                source,
            })?;
            ids.push(admitted.receipt_id);
            entries.push(HashedEntry::new(admitted.entry));
        }
        let appended = self.append_hashed(entries)?;
        let published = self.publish()?;
        let logged = appended
            .into_iter()
            .zip(ids)
            .map(|(appended, receipt_id)| Logged {
                appended,
                receipt_id,
            })
            .collect();
        Ok((logged, published))
    }

    /// Append one envelope and return its bundle under the published
    /// checkpoint (`log::bundle`, the one place a bundle is assembled).
    pub fn append_for_bundle(&mut self, envelope_json: &[u8]) -> Result<Bundle, IntakeError> {
        let (logged, published) = self.append_envelopes(&[envelope_json])?;
        let Some(first) = logged.first() else {
            return Err(IntakeError::Short { got: 0, want: 1 });
        };
        Ok(published.bundle(first.appended.index)?)
    }
}
