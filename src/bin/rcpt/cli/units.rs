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

/// A duration flag's value within `min..=max` (both said in the message).
pub fn duration_in(text: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < min || d > max {
        return Err(format!(
            "{text:?} is out of range: give {} to {}",
            show_duration(min),
            show_duration(max)
        ));
    }
    Ok(d)
}

/// Longest `log serve --batch-wait` and `--witness-grace`.
#[cfg(feature = "net")]
pub const MAX_SERVE_WAIT: Duration = Duration::from_secs(60);
/// Shortest and longest s3 writer lease (`--lease-ttl`).
pub const LEASE_TTL_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(600));

/// `log serve --batch-wait` and `--witness-grace`: 0 to 60 s.
#[cfg(feature = "net")]
pub fn serve_wait(text: &str) -> Result<Duration, String> {
    duration_in(text, Duration::ZERO, MAX_SERVE_WAIT)
}

/// `--lease-ttl`: 1 s to 600 s.
pub fn lease_ttl(text: &str) -> Result<Duration, String> {
    duration_in(text, LEASE_TTL_RANGE.0, LEASE_TTL_RANGE.1)
}

/// `log monitor --interval`: more than zero.
pub fn interval(text: &str) -> Result<Duration, String> {
    duration_in(text, Duration::from_millis(1), MAX_DURATION)
}

/// A duration in the largest unit that says it exactly: `250ms`, `60s`, `5m`.
pub fn show_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0 => "0s".to_string(),
        _ if ms.is_multiple_of(86_400_000) => format!("{}d", ms / 86_400_000),
        _ if ms.is_multiple_of(3_600_000) => format!("{}h", ms / 3_600_000),
        _ if ms.is_multiple_of(1000) => format!("{}s", ms / 1000),
        _ => format!("{ms}ms"),
    }
}

/// `n` with thousands separated by commas: `39,594`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate for people: a whole number per second, thousands grouped
/// (`39,594/s`), one decimal below 10 (`2.5/s`).
pub fn rate(per_second: f64) -> String {
    if !per_second.is_finite() || per_second < 0.0 {
        return "-/s".to_string();
    }
    if per_second < 10.0 {
        return format!("{per_second:.1}/s");
    }
    // Saturating: a rate past u64 is not a rate anyone reads.
    format!("{}/s", grouped(per_second.round() as u64))
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
    use super::*;

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1, "entry", "entries"), "1 entry");
        assert_eq!(count(0, "entry", "entries"), "0 entries");
        assert_eq!(count(2, "file", "files"), "2 files");
    }

    #[test]
    fn numbers_and_rates_are_grouped_and_whole() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(389_554), "389,554");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(rate(39_594.301_1), "39,594/s");
        assert_eq!(rate(2.54), "2.5/s");
        assert_eq!(rate(f64::NAN), "-/s");
    }

    #[cfg(feature = "net")]
    #[test]
    fn bounded_durations_say_their_range() {
        assert_eq!(lease_ttl("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(lease_ttl("2").unwrap(), Duration::from_secs(2));
        assert_eq!(serve_wait("1").unwrap(), Duration::from_secs(1));
        assert_eq!(serve_wait("0").unwrap(), Duration::ZERO);
        assert_eq!(
            lease_ttl("0s").unwrap_err(),
            "\"0s\" is out of range: give 1s to 600s"
        );
        assert_eq!(
            serve_wait("2m").unwrap_err(),
            "\"2m\" is out of range: give 0s to 60s"
        );
        assert!(interval("0").is_err());
        assert_eq!(show_duration(Duration::from_millis(250)), "250ms");
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
