//! A progress bar on stderr for long appends and checks, only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// A progress bar on stderr that appears only when stderr is a terminal and
/// the work has run longer than a moment.
pub(super) struct Progress {
    pub(super) bar: ProgressBar,
    start: Instant,
    shown: bool,
    terminal: bool,
}

impl Progress {
    pub(super) fn new(total: Option<u64>, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        let template = if total.is_some() {
            "{msg} {bar:40} {pos}/{len} ({per_sec}, {eta})"
        } else {
            "{msg} {pos} ({per_sec})"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        Progress {
            bar,
            start: Instant::now(),
            shown: false,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    pub(super) fn set(&mut self, pos: u64) {
        if self.terminal && !self.shown && self.start.elapsed() > Duration::from_millis(500) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_position(pos);
    }

    pub(super) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
