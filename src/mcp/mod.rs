//! mcp: `rcpt gate mcp`, receipts for an agent's tool calls
//! (spec/gate-mcp.md).
//!
//! A Model Context Protocol proxy between an agent (the client) and a
//! server it starts: every message passes as it came, except `tools/list`
//! (tools the pinned table does not hold as listed are dropped) and
//! `tools/call`. A call of a `read` tool is forwarded and recorded in the
//! session; any other call is a step: identified, decided, its files'
//! pre-images kept in the gate store, the decision durable before the
//! call is forwarded, the files re-read after it, the receipt signed and
//! logged; a refusal gets its receipt too and never reaches the server.
//!
//! The issuing side, above the gate: it uses the gate's store, journal,
//! inverse records and signing, the log, the receipt and io; never the
//! verifier. It runs the server as a child process.
//!
//! Engines: [`frame`] (one JSON-RPC message, strictly), [`policy`] (the
//! tool-proxy policy and its pinned table), [`table`] (definitions, their
//! digest, filtering a list), [`files`] (pointers to paths under roots),
//! [`decide`] (the seam of the decision), [`ruled`] (the policy's rules
//! and approvals), [`contracted`] (steps gated by contracts; `judge`, one
//! contract judged), [`step`] (decide, keep,
//! sign), `finish` (a forwarded step's receipt, recovery), [`issue`] (evidence and receipt), [`ledger`] (durability and recovery), [`commit`] (the group commit), [`sink`] (store and log
//! in batches), [`session`] (the reads seen), [`relay`] (the message
//! router both transports share), [`stdio`] (the threads of the stdio
//! proxy), `http` (Streamable HTTP, feature `net`), [`pin`] (the table from a server's list), [`undo`] (a step's
//! files restored), [`wire`] (what is read from and written into
//! messages).

pub mod commit;
pub mod contract;
pub mod contracted;
pub mod decide;
pub mod files;
mod finish;
pub mod frame;
#[cfg(feature = "net")]
pub mod http;
pub mod issue;
mod judge;
pub mod learn;
pub mod ledger;
pub mod pin;
pub mod policy;
mod recording;
pub mod relay;
pub mod ruled;
pub mod session;
pub mod sink;
pub mod stdio;
pub mod step;
pub mod table;
pub mod undo;
pub mod wire;

/// Longest message (one line on stdio, one body on HTTP), in bytes.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Most client requests in flight at once (answered with an error beyond).
pub const MAX_IN_FLIGHT: usize = 1024;
/// Most messages queued towards one side before the reader waits.
pub const MAX_QUEUE_FRAMES: usize = 1024;

pub use decide::{Decider, Ruling, TableDecider};
pub use policy::ToolPolicy;
pub use relay::{Out, Relay};
pub use ruled::RulesDecider;
pub use step::{Gate, GateParts};
