//! Reading one line at a time with a ceiling on its length, so a file that
//! is not line-shaped (or a corrupt one) cannot make the reader hold it all.

use std::io::{self, BufRead};

/// Longest record line accepted: a snapshot of some 50 000 flows.
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// No more data.
    Eof,
    /// A line in `buf`, without its newline; `terminated` is false for a
    /// last line that stops without one.
    Text { terminated: bool },
    /// A line longer than the limit: skipped to its newline, not kept.
    TooLong { terminated: bool },
}

/// Reads the next line into `buf` (cleared first). On an I/O error, `buf`
/// holds the part of the line read before it.
pub(crate) fn read_line(
    input: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::Eof,
                (true, false) => Line::Text { terminated: false },
                (true, true) => Line::TooLong { terminated: false },
            });
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long {
                Line::TooLong { terminated: true }
            } else {
                Line::Text { terminated: true }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(data: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        let mut input = data;
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut input, &mut buf, max).unwrap();
            if l == Line::Eof {
                return out;
            }
            out.push((l, buf.clone()));
        }
    }

    #[test]
    fn splits_lines_and_marks_an_unterminated_tail() {
        let got = all(b"ab\n\ncd", 10);
        assert_eq!(
            got,
            vec![
                (Line::Text { terminated: true }, b"ab".to_vec()),
                (Line::Text { terminated: true }, b"".to_vec()),
                (Line::Text { terminated: false }, b"cd".to_vec()),
            ]
        );
    }

    #[test]
    fn a_long_line_is_skipped_not_kept() {
        let got = all(b"0123456789abc\nok\n", 5);
        assert_eq!(got[0], (Line::TooLong { terminated: true }, Vec::new()));
        assert_eq!(got[1], (Line::Text { terminated: true }, b"ok".to_vec()));
    }
}
