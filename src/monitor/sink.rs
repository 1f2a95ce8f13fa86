//! sink: where a monitor's events go, and when they count as delivered.

use super::Event;

/// Why a sink refused an event (a failed hook, a closed output).
#[derive(Debug, thiserror::Error)]
#[error("delivering {event}")]
pub struct SinkError {
    /// The event's name.
    pub event: &'static str,
    /// The cause.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Where events go. An event is delivered once [`Sink::emit`] has
/// returned for it and then [`Sink::flush`] has returned `Ok`: the monitor
/// flushes before every save of its state (so a saved state never covers an
/// event not delivered) and at the end of every round.
pub trait Sink {
    /// Deliver one event, or buffer it until [`Sink::flush`]; an error stops
    /// the round before its entry.
    fn emit(&mut self, event: &Event) -> Result<(), SinkError>;

    /// True when delivering an event has an effect beyond the output (a
    /// hook): the state is then saved after every entry bundle, so a
    /// monitor killed repeats at most one bundle's effects.
    fn hooked(&self) -> bool {
        false
    }

    /// Deliver every buffered event. After an error the sink is not
    /// trusted again: every later flush fails too.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// `done` of the round's `total` new entries are checked (called after
    /// each entry bundle; a progress display, nothing more).
    fn progress(&mut self, _done: u64, _total: u64) {}
}
