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
pub(crate) const HEADER: &str = "NIC statistics:";

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
    let parsed = parse_stats_skipping(text, origin)?;
    match parsed.skipped.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(parsed.stats),
    }
}

/// What [`parse_stats_skipping`] read: the statistics, and the lines it
/// skipped with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedStats {
    pub stats: Vec<(String, u64)>,
    pub skipped: Vec<ParseError>,
}

/// As [`parse_stats`], but a line that is not `name: value` is skipped and
/// kept in `skipped` instead of failing the whole text: one bad line of a
/// counter file (a driver printing a stat of its own kind, a stray line)
/// must not hide every other counter. An empty text or a missing header is
/// still an error: then the text is not `ethtool -S` output at all.
pub(crate) fn parse_stats_skipping(text: &str, origin: &str) -> Result<ParsedStats, ParseError> {
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
                format!("expected the header {HEADER:?}, found {}", brief(l.trim())),
            ))
        }
    }
    let mut stats = Vec::new();
    let mut skipped = Vec::new();
    for (n, line) in lines {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(stat) => stats.push(stat),
            Err(message) => skipped.push(fail(n, message)),
        }
    }
    Ok(ParsedStats { stats, skipped })
}

/// One `name: value` line, trimmed and not blank.
fn parse_line(line: &str) -> Result<(String, u64), String> {
    // The value never holds a colon; a name might, so split at the last.
    let Some((name, value)) = line.rsplit_once(':') else {
        return Err(format!("expected \"name: value\", found {}", brief(line)));
    };
    let (name, value) = (name.trim_end(), value.trim());
    if name.is_empty() {
        return Err(format!(
            "no statistic name before the colon in {}",
            brief(line)
        ));
    }
    if value.is_empty() {
        return Err(format!("no value for {}", brief(name)));
    }
    // u64::from_str accepts a leading '+'; ethtool never prints one.
    value
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| value.parse::<u64>().ok())
        .flatten()
        .map(|v| (name.to_string(), v))
        .ok_or_else(|| format!("value {} is not an unsigned integer", brief(value)))
}

/// A counter file larger than this is not `ethtool -S` output (a real ENA
/// prints ~10 KiB with 32 queues): refused, never read whole.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;

/// At most this much of a line is quoted in an error: a 10 MB line of NULs
/// would otherwise be repeated in every interval's evidence.
const QUOTED_CHARS: usize = 60;

/// `text` quoted for an error message, cut after [`QUOTED_CHARS`].
fn brief(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(QUOTED_CHARS).collect();
    if chars.next().is_none() {
        format!("{head:?}")
    } else {
        format!("{head:?}... ({} bytes)", text.len())
    }
}

/// Reads a counter file without blocking and with a size bound: only a
/// regular file is read (a FIFO would block start-up, a device such as
/// /dev/zero never ends), and only up to [`MAX_FILE_BYTES`].
fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{shown}: not a regular file (a FIFO, socket or device): counter files must be \
             regular files, as `ethtool -S IFACE > FILE` writes them"
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "{shown}: larger than {MAX_FILE_BYTES} bytes: not `ethtool -S` output"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not text (invalid UTF-8 at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Reads and parses a counter file, skipping bad lines
/// ([`parse_stats_skipping`]). A file that cannot be read is an error naming
/// the file (there is no line to name); so is one without the header, and
/// one of which no line could be read (the first bad line is the error).
pub(crate) fn parse_file(path: &Path) -> Result<ParsedStats, String> {
    let text = read_bounded(path)?;
    let parsed =
        parse_stats_skipping(&text, &path.display().to_string()).map_err(|e| e.to_string())?;
    if parsed.stats.is_empty() {
        if let Some(first) = parsed.skipped.first() {
            return Err(first.to_string());
        }
    }
    Ok(parsed)
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
    fn a_bad_line_is_skipped_and_named_the_others_are_read() {
        let text = "NIC statistics:\n a: 1\n b: abc\n c 3\n d: 4\n";
        let p = parse_stats_skipping(text, "/tmp/x.txt").unwrap();
        assert_eq!(p.stats, vec![("a".to_string(), 1), ("d".to_string(), 4)]);
        let skipped: Vec<String> = p.skipped.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            skipped,
            [
                "/tmp/x.txt:3: value \"abc\" is not an unsigned integer",
                "/tmp/x.txt:4: expected \"name: value\", found \"c 3\"",
            ]
        );
        // Strict, the first is the error; without a header nothing is skipped.
        assert_eq!(
            err(text),
            "/tmp/x.txt:3: value \"abc\" is not an unsigned integer"
        );
        assert!(parse_stats_skipping("a: 1\n", "t").is_err());
    }

    #[test]
    fn unreadable_file_names_the_file() {
        let e = parse_file(Path::new("/nonexistent/throttlescope-counters.txt")).unwrap_err();
        assert!(
            e.starts_with("/nonexistent/throttlescope-counters.txt: cannot read:"),
            "{e}"
        );
    }

    #[test]
    fn devices_fifos_and_huge_files_are_refused_without_blocking() {
        // /dev/zero never ends: refused before a byte is read.
        let e = parse_file(Path::new("/dev/zero")).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        // A FIFO with no writer: opening it must not block.
        let dir = std::env::temp_dir().join(format!("ts-parse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = parse_file(&fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        // Past the size bound: refused, not read whole.
        let big = dir.join("big");
        std::fs::write(&big, vec![b'x'; MAX_FILE_BYTES as usize + 10]).unwrap();
        let e = parse_file(&big).unwrap_err();
        assert!(e.contains("larger than"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_huge_line_is_quoted_briefly() {
        let text = format!("NIC statistics:\n{}\n", "\0".repeat(10_000_000));
        let e = err(&text);
        assert!(e.len() < 600, "{} bytes of error", e.len());
        assert!(
            e.ends_with("... (10000000 bytes)"),
            "{}",
            &e[e.len() - 40..]
        );
    }
}
