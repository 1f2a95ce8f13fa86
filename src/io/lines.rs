//! JSON Lines: one capped line at a time.

use super::InputError;
use std::io::{BufRead, Read};

/// One line of a [`LineReader`].
#[derive(Debug)]
pub struct Line {
    /// 1-based line number.
    pub number: u64,
    /// The line without its newline, or why it was refused.
    pub bytes: Result<Vec<u8>, InputError>,
}

/// Reads JSON Lines (or any lines) with each line capped: a line over the
/// limit is reported as [`InputError::TooLarge`] and its rest skipped in
/// bounded reads, never held. Blank lines are skipped.
pub struct LineReader<R> {
    reader: R,
    name: String,
    limit: usize,
    number: u64,
    done: bool,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `reader` (named `name` in errors), each at most `limit` bytes.
    pub fn new(reader: R, name: &str, limit: usize) -> Self {
        LineReader {
            reader,
            name: name.to_string(),
            limit,
            number: 0,
            done: false,
        }
    }

    /// The reader, positioned after the last line returned.
    pub fn into_inner(self) -> R {
        self.reader
    }

    /// Read one raw line (at most `limit + 1` bytes); `None` at the end.
    fn raw_line(&mut self) -> Option<Line> {
        self.number += 1;
        let number = self.number;
        let cap = u64::try_from(self.limit)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let mut line = Vec::new();
        let read = (&mut self.reader).take(cap).read_until(b'\n', &mut line);
        let name = format!("{}:{number}", self.name);
        match read {
            Err(source) => {
                self.done = true;
                let error = InputError::Read {
                    source_name: name,
                    source,
                };
                return Some(Line {
                    number,
                    bytes: Err(error),
                });
            }
            Ok(0) => return None,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > self.limit {
            self.skip_rest(cap);
            let error = InputError::TooLarge {
                source_name: name,
                limit: self.limit,
            };
            return Some(Line {
                number,
                bytes: Err(error),
            });
        }
        Some(Line {
            number,
            bytes: Ok(line),
        })
    }

    /// Skip the rest of an over-long line, in bounded reads.
    fn skip_rest(&mut self, cap: u64) {
        let mut sink = Vec::new();
        loop {
            sink.clear();
            match (&mut self.reader).take(cap).read_until(b'\n', &mut sink) {
                Ok(0) | Err(_) => return,
                Ok(_) if sink.last() == Some(&b'\n') => return,
                Ok(_) => {}
            }
        }
    }
}

impl<R: BufRead> Iterator for LineReader<R> {
    type Item = Line;
    fn next(&mut self) -> Option<Line> {
        while !self.done {
            let line = self.raw_line()?;
            match &line.bytes {
                Ok(b) if b.iter().all(u8::is_ascii_whitespace) => continue,
                _ => return Some(line),
            }
        }
        None
    }
}
