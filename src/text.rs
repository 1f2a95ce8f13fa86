//! text: peer text made safe to print (spec/security.md "Text from peers").
//!
//! A receipt's issuer, a key id, a log's origin, a reason's detail, a
//! summary that quotes them: text that came from a file or a peer may hold
//! a newline (a forged extra line in a line-based output), a carriage
//! return or escape codes (a terminal rewritten), a NUL (refused by the
//! environment of a process), or bidirectional overrides (text that reads
//! otherwise than it is). Every human output of the binary prints such
//! text through [`Escaped`], the one escaping, so one printed line is one
//! line of the output and shows every character that is there.
//!
//! JSON outputs need none of this: JSON escapes control characters itself
//! and a consumer gets the exact string.

use std::fmt;

/// Text shown with every character that could change the output's lines
/// or the terminal escaped, as `\n`, `\r`, `\t`, `\e`, `\xNN` (other C0
/// controls and DEL), `\u{NNNN}` (C1 controls, bidirectional marks and
/// overrides, line and paragraph separators) and `\\` (a backslash, so the
/// escaping cannot be forged). Text with none of them prints as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escaped<'a>(pub &'a str);

/// True for a character [`Escaped`] replaces.
pub fn needs_escape(c: char) -> bool {
    matches!(c,
        '\\'
        | '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        // Arabic letter mark, left-to-right and right-to-left marks.
        | '\u{61c}' | '\u{200e}' | '\u{200f}'
        // Line and paragraph separators.
        | '\u{2028}' | '\u{2029}'
        // Embeddings, overrides, isolates and their ends.
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(needs_escape) {
            f.write_str(&rest[..at])?;
            let Some(c) = rest[at..].chars().next() else {
                break;
            };
            match c {
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\u{1b}' => f.write_str("\\e")?,
                c if u32::from(c) <= 0x7f => write!(f, "\\x{:02x}", u32::from(c))?,
                c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

/// `text` escaped ([`Escaped`]) as an owned string.
pub fn escape(text: &str) -> String {
    Escaped(text).to_string()
}

/// True when `text` prints as it is under [`Escaped`].
pub fn is_plain(text: &str) -> bool {
    !text.contains(needs_escape)
}

/// POSIX seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC);
/// outside years 0..=9999 the number itself.
pub fn utc(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    // Howard Hinnant's days-from-civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return seconds.to_string();
    }
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_escaped_and_plain_text_is_untouched() {
        let cases = [
            ("gate-a", "gate-a"),
            ("é名", "é名"),
            ("a\nb", "a\\nb"),
            ("a\r\tb", "a\\r\\tb"),
            ("\u{1b}[31mred", "\\e[31mred"),
            ("nul\0", "nul\\x00"),
            ("del\u{7f}", "del\\x7f"),
            ("c1\u{9b}", "c1\\u{9b}"),
            ("\u{202e}evil", "\\u{202e}evil"),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("back\\nslash", "back\\\\nslash"),
            ("ls\u{2028}", "ls\\u{2028}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape(raw), shown, "{raw:?}");
            assert_eq!(is_plain(raw), raw == shown, "{raw:?}");
            assert!(!escape(raw).contains(|c: char| c != '\\' && needs_escape(c)));
        }
    }
}
