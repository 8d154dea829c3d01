//! Parser for the text `ethtool -S IFACE` prints:
//!
//! ```text
//! NIC statistics:
//!      bw_in_allowance_exceeded: 0
//!      queue_0_tx_cnt: 1234
//! ```
//!
//! Used for counter files (an emulated ENA device writes this format) and
//! to check the ioctl path against the real `ethtool`.

use std::fmt;
use std::path::Path;

/// The first line `ethtool -S` prints.
pub const HEADER: &str = "NIC statistics:";

/// What is wrong with a statistics text, and where: `path:line: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The file (or whatever the text came from).
    pub origin: String,
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.origin, self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses `ethtool -S` output into `(name, value)` pairs in file order.
/// `origin` names the source in errors. Blank lines are skipped; anything
/// else that is not `name: value` with an unsigned integer value is an
/// error, as are an empty text and a missing header. Names are kept as
/// printed (drivers use `[`, `]`, `_`, `-`, `.`, digits, even spaces).
pub fn parse_stats(text: &str, origin: &str) -> Result<Vec<(String, u64)>, ParseError> {
    let fail = |line: usize, message: String| ParseError {
        origin: origin.to_string(),
        line,
        message,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let header = lines.by_ref().find(|(_, l)| !l.trim().is_empty());
    match header {
        None => return Err(fail(1, format!("empty, expected the header {HEADER:?}"))),
        Some((_, l)) if l.trim() == HEADER => {}
        Some((n, l)) => {
            return Err(fail(
                n,
                format!("expected the header {HEADER:?}, found {:?}", l.trim()),
            ))
        }
    }
    let mut stats = Vec::new();
    for (n, line) in lines {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // The value never holds a colon; a name might, so split at the last.
        let Some((name, value)) = line.rsplit_once(':') else {
            return Err(fail(n, format!("expected \"name: value\", found {line:?}")));
        };
        let (name, value) = (name.trim_end(), value.trim());
        if name.is_empty() {
            return Err(fail(
                n,
                format!("no statistic name before the colon in {line:?}"),
            ));
        }
        if value.is_empty() {
            return Err(fail(n, format!("no value for {name:?}")));
        }
        // u64::from_str accepts a leading '+'; ethtool never prints one.
        let parsed = value
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| value.parse::<u64>().ok())
            .flatten();
        match parsed {
            Some(v) => stats.push((name.to_string(), v)),
            None => {
                return Err(fail(
                    n,
                    format!("value {value:?} is not an unsigned integer"),
                ))
            }
        }
    }
    Ok(stats)
}

/// Reads and parses a counter file. A file that cannot be read is an error
/// naming the file (there is no line to name).
pub fn parse_file(path: &Path) -> Result<Vec<(String, u64)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse_stats(&text, &path.display().to_string()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_stats(text, "/tmp/x.txt").unwrap_err().to_string()
    }

    #[test]
    fn parses_ethtool_output_with_brackets_digits_and_underscores() {
        let text = "NIC statistics:\n     tx_timeout: 0\n     queue_0_tx_cnt: 1234\n\
                    \x20    rx_queue[3]_bytes: 18446744073709551615\n\
                    \x20    bw_out_allowance_exceeded: 42\n";
        let stats = parse_stats(text, "t").unwrap();
        assert_eq!(
            stats,
            vec![
                ("tx_timeout".to_string(), 0),
                ("queue_0_tx_cnt".to_string(), 1234),
                ("rx_queue[3]_bytes".to_string(), u64::MAX),
                ("bw_out_allowance_exceeded".to_string(), 42),
            ]
        );
    }

    #[test]
    fn header_only_is_an_empty_list() {
        assert_eq!(parse_stats("NIC statistics:\n", "t").unwrap(), vec![]);
    }

    #[test]
    fn bad_value_names_file_and_line() {
        let text = "NIC statistics:\n a: 1\n b: 2\n\n c: 3\n d: 4\n e: abc\n";
        assert_eq!(
            err(text),
            "/tmp/x.txt:7: value \"abc\" is not an unsigned integer"
        );
    }

    #[test]
    fn negative_signed_or_overflowing_values_are_refused() {
        for v in ["-1", "+1", "18446744073709551616", "1.5", "0x10"] {
            let e = err(&format!("NIC statistics:\n a: {v}\n"));
            assert!(e.starts_with("/tmp/x.txt:2: value"), "{v}: {e}");
        }
    }

    #[test]
    fn empty_file_and_missing_header_are_errors() {
        assert_eq!(
            err(""),
            "/tmp/x.txt:1: empty, expected the header \"NIC statistics:\""
        );
        assert_eq!(
            err("\n\n"),
            "/tmp/x.txt:1: empty, expected the header \"NIC statistics:\""
        );
        assert_eq!(
            err("\n a: 1\n"),
            "/tmp/x.txt:2: expected the header \"NIC statistics:\", found \"a: 1\""
        );
    }

    #[test]
    fn lines_without_colon_name_or_value_are_errors() {
        assert_eq!(
            err("NIC statistics:\n a 1\n"),
            "/tmp/x.txt:2: expected \"name: value\", found \"a 1\""
        );
        assert_eq!(
            err("NIC statistics:\n : 1\n"),
            "/tmp/x.txt:2: no statistic name before the colon in \": 1\""
        );
        assert_eq!(
            err("NIC statistics:\n a:\n"),
            "/tmp/x.txt:2: no value for \"a\""
        );
    }

    #[test]
    fn unreadable_file_names_the_file() {
        let e = parse_file(Path::new("/nonexistent/throttlescope-counters.txt")).unwrap_err();
        assert!(
            e.starts_with("/nonexistent/throttlescope-counters.txt: cannot read:"),
            "{e}"
        );
    }
}
