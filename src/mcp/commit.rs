//! commit: the group commit of the proxy (spec/gate-mcp.md "Group
//! commit").
//!
//! A step's decision must be durable before its call reaches the server,
//! and its receipt before its answer reaches the client. Made durable one
//! by one, every step pays two syncs on the path of its message. Instead,
//! the relay stages what a message makes durable in a [`Durable`] and
//! returns [`Item`]s: messages to send now, and messages to send only once
//! that is durable ([`Item::After`]). The stdio proxy's committer thread
//! takes every message read meanwhile, commits their [`Durable`]s as one
//! (`io::Batch`: one writeback, one sync per directory and phase), then
//! sends all their messages in the order they were read. Nothing is sent
//! before what it rests on is durable, and a burst of calls pays one
//! commit.

use super::frame::IdKey;
use super::ledger::Pending;
use super::relay::Out;
use crate::io::Batch;

/// What some messages make durable: the files staged, and the steps to
/// hand to the finisher once they are.
#[derive(Debug, Default)]
pub struct Durable {
    /// The files staged.
    pub batch: Batch,
    /// Issued steps, handed to the finisher after the commit.
    pub hand_on: Vec<Pending>,
}

impl Durable {
    /// Nothing staged.
    pub fn new() -> Durable {
        Durable::default()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty() && self.hand_on.is_empty()
    }

    /// Take in `other` (its files phase by phase beside these).
    pub fn absorb(&mut self, other: Durable) {
        self.batch.absorb(other.batch);
        self.hand_on.extend(other.hand_on);
    }
}

/// One message a relay step produced.
#[derive(Debug)]
pub enum Item {
    /// Send as it is.
    Now(Out),
    /// Send `ok` once the message's [`Durable`] is; if it could not be
    /// made durable, send `failed` and forget the request `forget` (a step
    /// that was to be forwarded).
    After {
        /// What to send once durable.
        ok: Out,
        /// What to send instead when the commit failed.
        failed: Out,
        /// The request to forget when the commit failed.
        forget: Option<IdKey>,
    },
}

impl From<Out> for Item {
    fn from(o: Out) -> Item {
        Item::Now(o)
    }
}

/// What one message read leads to: its items and what they rest on.
#[derive(Debug, Default)]
pub struct Job {
    /// The messages to send, in order.
    pub items: Vec<Item>,
    /// What must be durable first.
    pub durable: Durable,
}

impl Job {
    /// A job of messages that rest on nothing.
    pub fn now(outs: Vec<Out>) -> Job {
        Job {
            items: outs.into_iter().map(Item::Now).collect(),
            durable: Durable::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_of_plain_messages_rests_on_nothing() {
        let j = Job::now(vec![Out::Client("a".into()), Out::Server("b".into())]);
        assert!(j.durable.is_empty());
        assert!(
            matches!(&j.items[..], [Item::Now(Out::Client(a)), Item::Now(Out::Server(b))] if a == "a" && b == "b")
        );
    }
}
