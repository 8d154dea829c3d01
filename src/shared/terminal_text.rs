//! Text from the kernel or from other users (process names, cgroup and pod
//! names, namespace names, interface names, the contents of counter files)
//! made inert before it reaches a terminal.
//!
//! Any unprivileged process can name itself `\x1b]0;title\x07\x1b[2J` with
//! prctl(PR_SET_NAME); printed raw, that retitles or clears the operator's
//! terminal, and a newline in it splits a table row. Here every control
//! character (C0, DEL, C1) and every Unicode control that reorders or hides
//! text (bidi overrides and isolates, zero-width marks) is written as a
//! visible escape (`\x1b`, `\n`, `\u{202e}`). HTML, JSON and the metrics
//! endpoint have escapes of their own and do not use this.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters that must not reach a terminal as they are.
pub(crate) fn is_hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        )
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_hostile(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_hostile(c) && !keep(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One field (a process name, a pod name): every control character
/// escaped, newlines included, so it stays on its row.
pub(crate) fn inert(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// A whole text about to be written to a terminal: the same, except the
/// newlines that lay it out. The last line of defence for a field a view
/// forgot; fields with newlines of their own must go through [`inert`].
pub fn inert_lines(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_newlines_become_visible() {
        let name = "\x1b]0;PWN\x07\x1b[2J<i>\nrow";
        assert_eq!(inert(name), "\\x1b]0;PWN\\x07\\x1b[2J<i>\\nrow");
        assert_eq!(inert_lines("a\x1b[2J\nb\r"), "a\\x1b[2J\nb\\r");
        // C1 controls (a one-byte CSI in some terminals), DEL, bidi override.
        assert_eq!(inert("\u{9b}31m\x7f"), "\\x9b31m\\x7f");
        assert_eq!(inert("abc\u{202e}fed"), "abc\\u{202e}fed");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for s in ["java", "kafka-0 ns/pod", "ctr 3f2a", "über/ü", ""] {
            assert!(matches!(inert(s), Cow::Borrowed(b) if b == s));
        }
    }
}
