//! list: the ListObjectsV2 answer read for its keys, `IsTruncated` and
//! `NextContinuationToken`, and the XML text escapes (no XML crate: only
//! these elements of one document type are read).

/// The text of the first `<name>…</name>` in `xml`.
pub(super) fn xml_element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let len = xml.get(start..)?.find(&close)?;
    xml.get(start..start + len)
}

/// One ListObjectsV2 page.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ListPage {
    pub(super) keys: Vec<String>,
    pub(super) truncated: bool,
    pub(super) next_token: Option<String>,
}

/// Reads the keys, `IsTruncated` and `NextContinuationToken` of a
/// ListObjectsV2 answer. Only these elements are read; a `<Key>` outside
/// `<Contents>` does not occur in this document type.
pub(super) fn parse_list_page(xml: &str) -> Result<ListPage, &'static str> {
    let mut keys = Vec::new();
    let mut rest = xml;
    while let Some(at) = rest.find("<Contents>") {
        let after = rest.get(at + "<Contents>".len()..).ok_or("cut listing")?;
        let end = after.find("</Contents>").ok_or("unclosed <Contents>")?;
        let contents = after.get(..end).ok_or("cut listing")?;
        let key = xml_element(contents, "Key").ok_or("<Contents> without <Key>")?;
        keys.push(unescape_xml(key)?);
        rest = after.get(end..).ok_or("cut listing")?;
    }
    let truncated = match xml_element(xml, "IsTruncated") {
        Some("true") => true,
        Some("false") | None => false,
        Some(_) => return Err("IsTruncated is neither true nor false"),
    };
    let next_token = xml_element(xml, "NextContinuationToken")
        .map(unescape_xml)
        .transpose()?;
    Ok(ListPage {
        keys,
        truncated,
        next_token,
    })
}

/// XML text to a string: the five named entities and numeric references.
pub(super) fn unescape_xml(text: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(rest.get(..amp).ok_or("cut text")?);
        let after = rest.get(amp + 1..).ok_or("cut text")?;
        let semi = after.find(';').ok_or("unterminated entity")?;
        let entity = after.get(..semi).ok_or("cut text")?;
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x") {
                    u32::from_str_radix(hex, 16).map_err(|_| "bad character reference")?
                } else if let Some(dec) = entity.strip_prefix('#') {
                    dec.parse::<u32>().map_err(|_| "bad character reference")?
                } else {
                    return Err("unknown entity");
                };
                char::from_u32(code).ok_or("bad character reference")?
            }
        };
        out.push(c);
        rest = after.get(semi + 1..).ok_or("cut text")?;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_pages_give_keys_in_order_and_the_continuation() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
<KeyCount>2</KeyCount><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated>
<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
<Contents><Key>p/a&amp;b</Key><LastModified>2026-11-30T20:00:00.000Z</LastModified><ETag>&quot;x&quot;</ETag><Size>1</Size></Contents>
<Contents><Key>p/tile/0/000</Key><Size>8192</Size></Contents></ListBucketResult>"#;
        let page = parse_list_page(xml).unwrap();
        assert_eq!(
            page.keys,
            vec!["p/a&b".to_string(), "p/tile/0/000".to_string()]
        );
        assert!(page.truncated);
        assert_eq!(
            page.next_token.as_deref(),
            Some("1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        );
        let last = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
        assert_eq!(
            parse_list_page(last).unwrap(),
            ListPage {
                keys: vec![],
                truncated: false,
                next_token: None
            }
        );
        assert!(parse_list_page("<Contents><Key>a</Key>").is_err());
        assert!(parse_list_page("<IsTruncated>maybe</IsTruncated>").is_err());
    }

    #[test]
    fn xml_text_unescapes_entities_and_refuses_unknown_ones() {
        assert_eq!(
            unescape_xml("a&lt;b&gt;&quot;&apos;&amp;&#65;&#x42;").unwrap(),
            "a<b>\"'&AB"
        );
        assert!(unescape_xml("&nbsp;").is_err());
        assert!(unescape_xml("&amp").is_err());
        assert!(unescape_xml("&#xD800;").is_err());
    }
}
