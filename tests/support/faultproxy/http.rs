//! Just enough HTTP/1.1 for the fault proxy to find where each request
//! and each answer ends: `Content-Length` bodies, `Transfer-Encoding:
//! chunked` answers, no body for HEAD, 1xx, 204 and 304.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Longest request or answer head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// One HTTP message as read: its head (start line and headers, with the
/// blank line) and its body bytes as sent (chunk framing included).
pub struct Message {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// The sender closes the connection after this message.
    pub close: bool,
}

pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Reads a head up to and including the blank line; `None` at a clean EOF
/// before any byte.
fn read_head(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take(MAX_HEAD as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            if head.is_empty() {
                return Ok(None);
            }
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        if line == b"\r\n" || line == b"\n" {
            return Ok(Some(head));
        }
    }
}

fn read_exact_body(r: &mut BufReader<TcpStream>, n: usize) -> std::io::Result<Vec<u8>> {
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)?;
    Ok(body)
}

/// A chunked body as sent, through its last chunk and trailer.
fn read_chunked(r: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = Vec::new();
        r.by_ref().take(4096).read_until(b'\n', &mut line)?;
        body.extend_from_slice(&line);
        let size_text = String::from_utf8_lossy(&line);
        let size_text = size_text.trim().split(';').next().unwrap_or("").to_string();
        let size = usize::from_str_radix(&size_text, 16)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))?;
        if size == 0 {
            // Trailer lines up to the blank one.
            loop {
                let mut t = Vec::new();
                r.by_ref().take(4096).read_until(b'\n', &mut t)?;
                body.extend_from_slice(&t);
                if t == b"\r\n" || t == b"\n" || t.is_empty() {
                    return Ok(body);
                }
            }
        }
        body.extend_from_slice(&read_exact_body(r, size + 2)?);
    }
}

pub fn read_request(r: &mut BufReader<TcpStream>) -> std::io::Result<Option<(Message, String)>> {
    let Some(head) = read_head(r)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&head).to_string();
    let method = text.split(' ').next().unwrap_or("").to_string();
    let body = match header(&text, "content-length") {
        Some(n) => read_exact_body(r, n.parse().unwrap_or(0))?,
        None => Vec::new(),
    };
    let close = header(&text, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    Ok(Some((Message { head, body, close }, method)))
}

pub fn read_answer(r: &mut BufReader<TcpStream>, method: &str) -> std::io::Result<Message> {
    let head = read_head(r)?.ok_or(std::io::ErrorKind::UnexpectedEof)?;
    let text = String::from_utf8_lossy(&head).to_string();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let close = header(&text, "connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let no_body = method == "HEAD" || status / 100 == 1 || status == 204 || status == 304;
    let body = if no_body {
        Vec::new()
    } else if header(&text, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked(r)?
    } else if let Some(n) = header(&text, "content-length") {
        read_exact_body(r, n.parse().unwrap_or(0))?
    } else {
        let mut rest = Vec::new();
        r.read_to_end(&mut rest)?;
        return Ok(Message {
            head,
            body: rest,
            close: true,
        });
    };
    Ok(Message { head, body, close })
}

pub fn status_answer(code: u16) -> Vec<u8> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>injected by the fault proxy</Message></Error>",
        if code == 503 {
            "SlowDown"
        } else {
            "InternalError"
        }
    );
    format!(
        "HTTP/1.1 {code} Injected\r\ncontent-type: application/xml\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends `request` upstream (reconnecting once if the kept connection was
/// closed by the store) and reads its answer.
pub fn exchange(
    upstream: &mut Option<(TcpStream, BufReader<TcpStream>)>,
    addr: SocketAddr,
    request: &Message,
    method: &str,
) -> std::io::Result<Message> {
    for fresh in [false, true] {
        if fresh || upstream.is_none() {
            let w = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            let r = BufReader::new(w.try_clone()?);
            *upstream = Some((w, r));
        }
        let Some((w, r)) = upstream.as_mut() else {
            continue;
        };
        let sent = w
            .write_all(&request.head)
            .and_then(|()| w.write_all(&request.body));
        match sent.and_then(|()| read_answer(r, method)) {
            Ok(a) => return Ok(a),
            // A kept connection the store had closed: once more on a new one.
            Err(_) if !fresh => *upstream = None,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::ErrorKind::NotConnected.into())
}
