//! units: how the command line spells durations (spec/cli.md "Units").
//!
//! A duration is a whole number with a unit, `ms`, `s`, `m`, `h` or `d`
//! (`250ms`, `30s`, `5m`, `24h`, `7d`); a bare number is seconds. A count
//! is printed with its noun in the singular for one ([`count`]).

use std::time::Duration;

/// Longest duration any flag takes: 366 days.
const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// Parse a duration flag's value.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration: give a whole number with ms, s, m, h or d (250ms, 30s, 5m, 24h), or seconds"
        )
    };
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let millis: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    let d = Duration::from_millis(n.checked_mul(millis).ok_or_else(bad)?);
    if d > MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than the most any flag takes (366d)"
        ));
    }
    Ok(d)
}

/// `n` and its noun, singular for one: `1 entry`, `2 entries`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1, "entry", "entries"), "1 entry");
        assert_eq!(count(0, "entry", "entries"), "0 entries");
        assert_eq!(count(2, "file", "files"), "2 files");
    }

    #[test]
    fn durations_take_every_unit_and_bare_seconds() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        for bad in [
            "",
            "s",
            "1.5s",
            "-1s",
            "1w",
            "99999999999999999999d",
            "400d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
