//! recording: a demonstration recorded (`rcpt gate mcp --record NAME`,
//! spec/contracts.md).
//!
//! A [`Recording`] keeps the steps of this session that were admitted and
//! answered without error, each with the reads made since the step before
//! it ([`super::contracted::Contracted`] tells it which); [`Recording::finish`]
//! writes the contract when the session ends.

use super::contract::{Contract, ContractError, Contracts, DemoCall, MAX_CONTRACT_CALLS};
use super::contracted::lock;
use crate::digest::Digest;
use std::sync::Mutex;

/// A recording in progress (`rcpt gate mcp --record NAME`).
#[derive(Debug)]
pub struct Recording {
    name: String,
    token: String,
    max_age: u64,
    state: Mutex<RecState>,
}

#[derive(Debug, Default)]
struct RecState {
    /// Admitted, not yet answered: by change id.
    pending: Vec<(Digest, DemoCall)>,
    /// Admitted and answered without error, in order.
    calls: Vec<DemoCall>,
    /// Steps past [`MAX_CONTRACT_CALLS`] were not kept.
    overflow: bool,
}

/// How a recording ended.
#[derive(Debug)]
pub enum Recorded {
    /// The contract written.
    Written(Box<Contract>),
    /// Its marker was removed (`rcpt gate contract cancel`): nothing written.
    Cancelled,
}

impl Recording {
    /// Start recording `name` in `contracts` (its marker created).
    pub fn start(
        contracts: &Contracts,
        name: &str,
        max_age: u64,
    ) -> Result<Recording, ContractError> {
        if max_age == 0 || max_age > super::contract::MAX_MAX_AGE {
            return Err(ContractError::MaxAge(max_age));
        }
        let mut raw = [0u8; 16];
        crate::io::random_bytes(&mut raw).map_err(ContractError::Randomness)?;
        let token = crate::digest::to_hex(&raw);
        contracts.start_recording(name, &token)?;
        Ok(Recording {
            name: name.to_string(),
            token,
            max_age,
            state: Mutex::new(RecState::default()),
        })
    }

    /// The contract's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn admitted(&self, change_id: Digest, call: DemoCall) {
        let mut st = lock(&self.state);
        if st.pending.len() < super::MAX_IN_FLIGHT {
            st.pending.push((change_id, call));
        }
    }

    pub(super) fn finished(&self, change_id: &Digest, ok: bool) {
        let mut st = lock(&self.state);
        let Some(at) = st.pending.iter().position(|(c, _)| c == change_id) else {
            return;
        };
        let (_, call) = st.pending.remove(at);
        if !ok {
            return;
        }
        if st.calls.len() < MAX_CONTRACT_CALLS {
            st.calls.push(call);
        } else {
            st.overflow = true;
        }
    }

    /// The session ended: the contract written (version 1, or the next
    /// after the one it rebinds) and the marker removed; or nothing, when
    /// the recording was cancelled. An error when no step was kept.
    pub fn finish(&self, contracts: &Contracts, server: &str) -> Result<Recorded, ContractError> {
        if !contracts.still_recording(&self.name, &self.token) {
            return Ok(Recorded::Cancelled);
        }
        let st = lock(&self.state);
        let drop_marker = || {
            let _ = contracts.cancel(&self.name);
        };
        if st.calls.is_empty() {
            drop_marker();
            return Err(ContractError::NothingKept(self.name.clone()));
        }
        if st.overflow {
            drop_marker();
            return Err(ContractError::TooManySteps(self.name.clone()));
        }
        let version = contracts.find(&self.name)?.map_or(1, |old| old.version + 1);
        let c = Contract::new(&self.name, version, server, self.max_age, st.calls.clone());
        contracts.write(&c)?;
        drop_marker();
        Ok(Recorded::Written(Box::new(c)))
    }
}
