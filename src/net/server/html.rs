//! html: the small, script-free status pages of `log serve` and `witness
//! serve` (spec/service.md "Status page"): the one escaping function every
//! value goes through, and the page shell (viewport, CSS, no script).
//!
//! Escaping rule: `& < > " '` become character references, so a value
//! is text in element content and in a quoted attribute alike; the
//! bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
//! U+2066–U+2069) and every other control character are replaced by their
//! code point written out, `[U+202E]`, so a hostile name can neither
//! reorder the text around it nor hide a character. Values from entries
//! are further put inside `<bdi>` by the pages, so right-to-left letters
//! (not controls) stay inside their cell.

/// `Content-Security-Policy` of every page: nothing but the page's own
/// inline style; no script, no object, no frame, no form, no base URL.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; \
     script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The media type of the pages.
pub const PAGE_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// True for a character shown as its code point instead of itself: the
/// bidirectional formatting characters and the C0, DEL and C1 controls.
fn shown_as_code_point(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || (c.is_control() && c != '\n' && c != '\t')
}

/// `text` made safe as HTML element content or a quoted attribute value
/// (see the module documentation for the rule).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if shown_as_code_point(c) => out.push_str(&format!("[U+{:04X}]", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// `<bdi>` + escaped `text` + `</bdi>`: an isolated run of untrusted text.
pub fn bdi(text: &str) -> String {
    format!("<bdi>{}</bdi>", escape(text))
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0 auto;max-width:64rem;\
padding:0.8rem;line-height:1.4;color:#111;background:#fff}\
h1{font-size:1.4rem}h2{font-size:1.15rem;margin-top:1.4rem}\
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;\
padding:0.25rem 0.4rem;border-bottom:1px solid #ddd}\
code,pre{font-family:ui-monospace,monospace;font-size:0.85rem;overflow-wrap:anywhere}\
pre{white-space:pre-wrap;background:#f3f3f3;padding:0.6rem}\
.wide{overflow-x:auto}dt{font-weight:600}dd{margin:0 0 0.4rem 0}";

/// A whole page: `title` (escaped here) and `body` (already HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// A table that scrolls sideways on a narrow screen: `id`, the column
/// heads (escaped here), and `rows`, each a whole `<tr>…</tr>` line of
/// HTML already escaped.
pub fn table(id: &str, heads: &[&str], rows: impl IntoIterator<Item = String>) -> String {
    let mut out = format!(
        "<div class=\"wide\"><table id=\"{}\">\n<thead><tr>",
        escape(id)
    );
    for head in heads {
        out.push_str(&format!("<th>{}</th>", escape(head)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str(&row);
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// Seconds as people read an age: `42 s`, `3 min 5 s`, `2 h 1 min`.
pub fn age(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// POSIX seconds as `YYYY-MM-DDTHH:MM:SSZ` (one function: [`crate::text::utc`]).
pub use crate::text::utc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_characters_become_references() {
        assert_eq!(
            escape(r#"<script>alert("x" + 'y') & </script>"#),
            "&lt;script&gt;alert(&quot;x&quot; + &#39;y&#39;) &amp; &lt;/script&gt;"
        );
        assert_eq!(escape("plain gate.example/ci"), "plain gate.example/ci");
        assert_eq!(escape("&amp;"), "&amp;amp;");
    }

    #[test]
    fn bidi_and_control_characters_are_shown_as_code_points() {
        assert_eq!(escape("a\u{202E}b"), "a[U+202E]b");
        for c in [
            '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
            '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{0000}', '\u{001B}', '\u{007F}',
            '\u{0085}',
        ] {
            let e = escape(&c.to_string());
            assert_eq!(e, format!("[U+{:04X}]", u32::from(c)));
        }
        // Right-to-left letters are text, kept (the page isolates them in <bdi>).
        assert_eq!(escape("שלום"), "שלום");
        assert_eq!(bdi("<b>"), "<bdi>&lt;b&gt;</bdi>");
    }

    #[test]
    fn nothing_escaped_can_open_markup() {
        let hostile = "\"'><img src=x onerror=alert(1)>\u{202E}<!--";
        let e = escape(hostile);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"') && !e.contains('\''));
        assert!(!e.contains('\u{202E}'));
    }

    #[test]
    fn a_table_holds_its_rows_under_escaped_heads() {
        let rows = ["<tr><td>1</td></tr>\n".to_string()];
        assert_eq!(
            table("t", &["a<b", "c"], rows),
            "<div class=\"wide\"><table id=\"t\">\n<thead><tr><th>a&lt;b</th><th>c</th></tr>\
             </thead>\n<tbody>\n<tr><td>1</td></tr>\n</tbody>\n</table></div>\n"
        );
    }

    #[test]
    fn dates_and_ages() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_795_000_001), "2026-11-18T11:06:41Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(i64::MAX), i64::MAX.to_string());
        assert_eq!(age(5), "5 s");
        assert_eq!(age(185), "3 min 5 s");
        assert_eq!(age(7260), "2 h 1 min");
    }
}
