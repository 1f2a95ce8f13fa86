//! finish: a forwarded step's end, from its outcome to its receipt, and
//! the recovery of the steps a dead session left (spec/gate-mcp.md "Each
//! step call"). The [`Gate`]'s other half: [`super::step`] decides.

use super::commit::Durable;
use super::files;
use super::issue::{evidence_of, files_value, inverse_record, map};
use super::ledger::{Issued, Pending, StepRecord};
use super::step::{Gate, INVERSE_BASE, InFlight, Outcome, StepError, now, t};
use crate::digest::Digest;
use crate::receipt::Verdict;
use crate::receipt::canonical::{Value, dagcbor, identity};
use std::path::Path;

impl Gate {
    /// Finish a forwarded step: files re-read, receipt signed and staged
    /// in `durable` (the caller relays the answer once it is committed,
    /// which hands the step to the finisher).
    pub fn finish(
        &self,
        step: InFlight,
        outcome: &Outcome,
        durable: &mut Durable,
    ) -> Result<Digest, StepError> {
        let InFlight { mut pending } = step;
        // Contracts: a recording keeps the steps that succeeded.
        let ok = matches!(outcome, Outcome::Answered { ok: true, .. });
        self.decider.finished(&pending.step.change_id, ok);
        let issued = self.issue_outcome(&pending.step, outcome)?;
        let id = issued.receipt_id;
        pending.issued = Some(issued);
        pending.stage_issued(&mut durable.batch)?;
        durable.hand_on.push(pending);
        Ok(id)
    }

    /// Make `durable` durable (one group commit), then hand its issued
    /// steps to the finisher. On an error nothing is handed on: the files
    /// that did become durable are finished by the next start.
    pub fn commit(&self, durable: Durable) -> Result<(), StepError> {
        let Durable { batch, hand_on } = durable;
        if !batch.is_empty() {
            batch.commit().map_err(super::ledger::LedgerError::Commit)?;
        }
        for p in hand_on {
            self.hand_on(p);
        }
        Ok(())
    }

    /// The receipt of a forwarded step, from its outcome and its files now.
    pub fn issue_outcome(
        &self,
        record: &StepRecord,
        outcome: &Outcome,
    ) -> Result<Issued, StepError> {
        let post: Vec<Result<files::State, String>> = record
            .files
            .iter()
            .map(|f| {
                crate::gate::journal::side_now(Path::new(INVERSE_BASE), &f.path)
                    .map_err(|e| e.to_string())
            })
            .collect();
        let states: Vec<files::State> = post.iter().map(|p| p.clone().unwrap_or(None)).collect();
        let moved = record
            .files
            .iter()
            .zip(&post)
            .any(|(f, p)| p.as_ref().map_or(true, |s| *s != f.pre));
        let (applied, note) = match outcome {
            Outcome::Answered { ok, .. } => (*ok, String::new()),
            Outcome::Unanswered(why) if !record.files.is_empty() => (
                moved,
                format!(
                    "{why}; applied established from the files: {}",
                    if moved { "changed" } else { "unchanged" }
                ),
            ),
            Outcome::Unanswered(why) => (false, format!("{why}; outcome unknown")),
        };
        let inverse = if record.reversible && post.iter().all(Result::is_ok) {
            Some(inverse_record(record, &states))
        } else {
            None
        };
        let inverse_id = inverse
            .as_ref()
            .map(|r| identity(&dagcbor::encode(&r.to_value())));
        let answer = match outcome {
            Outcome::Answered { answer, .. } => t(answer.to_string()),
            Outcome::Unanswered(_) => Value::Null,
        };
        let outcome_value = map([
            (
                "answered",
                Value::Bool(matches!(outcome, Outcome::Answered { .. })),
            ),
            ("applied", Value::Bool(applied)),
            ("answer", answer),
            ("note", t(note)),
            ("post", files_value(record, &states)),
        ]);
        let evidence = evidence_of(record, Some(outcome_value));
        // Contracts: a contract's admit proves by its record (contracted.rs).
        let proof = super::contracted::proof_of(&record.evidence)
            .unwrap_or_else(|| identity(&dagcbor::encode(&evidence)));
        let verdict = Verdict::Admit { proof };
        let receipt = self.receipt_of(record, verdict, inverse_id, &states, applied);
        self.issue(&receipt, evidence, inverse.map(|r| r.to_value()))
    }

    /// Record a read call and its answer in the session.
    pub fn record_read(&self, tool: &str, arguments: Digest, answer: Digest) {
        if let Ok(mut s) = self.session.lock() {
            let call = s.next_call();
            s.record(super::session::Read {
                tool: tool.to_string(),
                arguments,
                answer,
                at: now(),
                call,
            });
        }
    }

    /// True when a reversible step's pre-image is neither carried in its
    /// file nor in the store: the commit of its decision did not end (they
    /// are made durable in one phase, [`Gate::prepare`]).
    fn preimage_missing(&self, pending: &Pending) -> bool {
        use crate::gate::store::StoreError;
        use crate::io::InputError;
        let carried: Vec<Digest> = pending.carried.iter().map(|b| Digest::blake3(b)).collect();
        let record = &pending.step;
        record.reversible
            && record.files.iter().filter_map(|f| f.pre).any(|side| {
                !carried.contains(&side.digest)
                    && matches!(
                        self.store.get(&side.digest),
                        Err(StoreError::Read {
                            source: InputError::NotFound { .. },
                            ..
                        })
                    )
            })
    }

    /// Finish the steps a dead session of this store left: a decided step
    /// gets its receipt from the files (no answer was seen), an issued one
    /// is stored and logged. The number of steps finished.
    pub fn recover(&self) -> Result<usize, StepError> {
        let (orphans, _locks) = super::ledger::orphans(&self.store)?;
        let n = orphans.len();
        for mut p in orphans {
            if p.issued.is_none() {
                let mut why = "the proxy stopped before the server answered";
                if self.preimage_missing(&p) {
                    // Its commit did not end: never forwarded, and no inverse.
                    p.step.reversible = false;
                    why = "the proxy stopped before the decision was durable (a pre-image \
                           is missing): the call was never forwarded";
                }
                p.issued = Some(self.issue_outcome(&p.step, &Outcome::Unanswered(why.into()))?);
                p.write(self.ledger.tmp())?;
            }
            self.hand_on(p);
        }
        Ok(n)
    }
}
