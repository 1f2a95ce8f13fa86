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

/// The widest a progress line may be.
pub(super) const MAX_COLUMNS: usize = 80;
/// Columns kept for the rate (`99,999,999/s`) and the time left (`59m 59s`).
const RATE_COLUMNS: usize = 12;
const ETA_COLUMNS: usize = 7;

/// The bar's width, so that `WHAT [bar] POS/LEN (RATE, ETA)` fits in
/// [`MAX_COLUMNS`] for any position up to `total`: 10 to 40 columns.
pub(super) fn bar_width(what: &str, total: u64) -> usize {
    let count = crate::cli::units::grouped(total).len();
    // "WHAT " + bar + " " + "POS/LEN" + " (" + RATE + ", " + ETA + ")"
    let rest = what.len() + 1 + 1 + 2 * count + 1 + 2 + RATE_COLUMNS + 2 + ETA_COLUMNS + 1;
    MAX_COLUMNS.saturating_sub(rest).clamp(10, 40)
}

/// The style: counts grouped (`1,234`), the rate a whole number a second.
fn style(what: &str, total: Option<u64>) -> Option<ProgressStyle> {
    let template = match total {
        Some(t) => format!(
            "{{msg}} {{bar:{}}} {{pos_g}}/{{len_g}} ({{rate}}, {{eta}})",
            bar_width(what, t)
        ),
        None => "{msg} {pos_g} ({rate})".to_string(),
    };
    let style = ProgressStyle::with_template(&template).ok()?;
    Some(
        style
            .with_key(
                "pos_g",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&crate::cli::units::grouped(s.pos()));
                },
            )
            .with_key(
                "len_g",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&crate::cli::units::grouped(s.len().unwrap_or(0)));
                },
            )
            .with_key(
                "rate",
                |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&crate::cli::units::rate(s.per_sec()));
                },
            ),
    )
}

impl Progress {
    pub(super) fn new(total: Option<u64>, what: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        if let Some(style) = style(what, total) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A terminal wider than the limit that records what is drawn.
    #[derive(Debug, Default, Clone)]
    struct Screen(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_bar_fits_80_columns_with_grouped_counts_and_a_whole_rate() {
        for (what, total) in [
            ("appending", 1_000_000_000u64),
            ("checking", 7),
            ("proving", 300_000),
        ] {
            let screen = Screen::default();
            let bar = ProgressBar::with_draw_target(
                Some(total),
                ProgressDrawTarget::term_like(Box::new(screen.clone())),
            );
            bar.set_style(style(what, Some(total)).unwrap());
            bar.set_message(what.to_string());
            std::thread::sleep(std::time::Duration::from_millis(30));
            bar.set_position((total - total / 3).min(99_000));
            bar.tick();
            let lines = screen.0.lock().unwrap().clone();
            let line = lines.iter().rev().find(|l| l.starts_with(what)).unwrap();
            assert!(
                line.chars().count() <= MAX_COLUMNS,
                "{} columns: {line}",
                line.chars().count()
            );
            assert!(line.contains(&crate::cli::units::grouped(total)), "{line}");
            let rate = line.split(" (").nth(1).unwrap().split(", ").next().unwrap();
            let number = rate.strip_suffix("/s").unwrap_or_else(|| panic!("{line}"));
            let whole = number.chars().all(|c| c.is_ascii_digit() || c == ',');
            assert!(
                whole || (number.len() <= 3 && number.contains('.')),
                "{line}"
            );
        }
    }
}
