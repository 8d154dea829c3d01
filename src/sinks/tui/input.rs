//! Keys from the terminal, read with poll(2) and read(2) on the terminal's
//! descriptor, so that a terminal that went away ends the view.
//!
//! A terminal that went away (an SSH session dropped, a closed tmux or
//! xterm) stays readable for ever: poll says POLLHUP or POLLIN, and read
//! returns 0 or EIO every time. A reader that waits for a key and takes
//! "nothing read" as "nothing yet" spins on it at a full core (crossterm
//! 0.28's event reader does, and never returns to look at a stop request).
//! Here any of these is [`Input::Hangup`], and every other failure either
//! is an error or waits.
//!
//! The view needs few keys (see [`super::keys`]); the bytes a terminal
//! sends in raw mode are decoded by [`decode`], a pure function.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use anyhow::{anyhow, Result};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What one wait on the terminal gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Keys(Vec<KeyEvent>),
    /// Nothing within the time, or a signal interrupted the wait.
    Nothing,
    /// The terminal went away: hangup, end of file, EIO.
    Hangup,
}

/// The terminal the keys come from: stdin when it is one, else the
/// process's controlling terminal (`/dev/tty`), as raw mode picks it.
pub(crate) struct TermInput {
    fd: RawFd,
    /// Holds `/dev/tty` open when that is the source.
    _owned: Option<File>,
    /// The start of a character split across two reads.
    partial: Vec<u8>,
}

impl TermInput {
    pub(crate) fn open() -> Result<Self> {
        // SAFETY: isatty on a descriptor number; no memory is touched.
        if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
            return Ok(TermInput {
                fd: libc::STDIN_FILENO,
                _owned: None,
                partial: Vec::new(),
            });
        }
        let tty = File::options()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|e| {
                anyhow!(
                    "the full-screen view reads its keys from a terminal, but stdin is not one \
                     and this process has no controlling terminal (/dev/tty: {e}); \
                     use --plain or --json"
                )
            })?;
        Ok(TermInput {
            fd: tty.as_raw_fd(),
            _owned: Some(tty),
            partial: Vec::new(),
        })
    }

    /// Waits up to `timeout` for keys.
    pub(crate) fn next(&mut self, timeout: Duration) -> Result<Input> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up: a wait of under 1 ms must not become poll(0) in a
        // loop until the deadline.
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: poll(2) on one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(Input::Nothing);
            }
            return Err(anyhow!("waiting for keys on the terminal: {e}"));
        }
        if n == 0 {
            return Ok(Input::Nothing);
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Ok(Input::Hangup);
        }
        let mut buf = [0u8; 256];
        // SAFETY: read(2) into a local buffer of its length.
        let r = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r == 0 {
            return Ok(Input::Hangup);
        }
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => Ok(Input::Nothing),
                Some(libc::EIO) | Some(libc::ENXIO) | Some(libc::EBADF) => Ok(Input::Hangup),
                _ => Err(anyhow!("reading keys from the terminal: {e}")),
            };
        }
        self.partial.extend_from_slice(&buf[..r as usize]);
        let (keys, used) = decode(&self.partial);
        self.partial.drain(..used);
        Ok(Input::Keys(keys))
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

/// Decodes what a terminal in raw mode sent: the keys, and how many bytes
/// were used (a character cut short by the read's end is left for the next).
///
/// Escape sequences (arrows, function keys) and Alt+key are read whole and
/// dropped; the view has no use for them, and an Esc inside one must not
/// quit. A lone ESC at the end of what was read is the Esc key (terminals
/// send a sequence in one write).
pub(crate) fn decode(bytes: &[u8]) -> (Vec<KeyEvent>, usize) {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            0x1b => match bytes.get(i + 1) {
                None => {
                    keys.push(key(KeyCode::Esc));
                    i += 1;
                }
                Some(b'[') => {
                    // CSI: parameters, then one final byte in 0x40..=0x7e.
                    let mut j = i + 2;
                    while j < bytes.len() && !(0x40..=0x7e).contains(&bytes[j]) {
                        j += 1;
                    }
                    i = (j + 1).min(bytes.len());
                }
                Some(b'O') => i = (i + 3).min(bytes.len()),
                Some(0x1b) => {
                    keys.push(key(KeyCode::Esc));
                    i += 1;
                }
                Some(_) => {
                    // Alt+key: ESC then the key's own bytes.
                    let len = utf8_len(bytes[i + 1]);
                    i = (i + 1 + len).min(bytes.len());
                }
            },
            b'\r' | b'\n' => {
                keys.push(key(KeyCode::Enter));
                i += 1;
            }
            0x7f | 0x08 => {
                keys.push(key(KeyCode::Backspace));
                i += 1;
            }
            b'\t' => {
                keys.push(key(KeyCode::Tab));
                i += 1;
            }
            0x00..=0x1f => {
                // Ctrl+letter: 0x01 is Ctrl-A, 0x03 Ctrl-C, 0x1a Ctrl-Z.
                keys.push(ctrl((b'a' + b - 1) as char));
                i += 1;
            }
            _ => {
                let len = utf8_len(b);
                if i + len > bytes.len() {
                    break; // the rest of this character comes with the next read
                }
                // Not text: dropped.
                if let Ok(s) = std::str::from_utf8(&bytes[i..i + len]) {
                    keys.extend(s.chars().map(|c| key(KeyCode::Char(c))));
                }
                i += len;
            }
        }
    }
    (keys, i)
}

/// The length of a UTF-8 character from its first byte (1 for a stray
/// continuation byte, so it is dropped alone).
fn utf8_len(first: u8) -> usize {
    match first {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(bytes: &[u8]) -> Vec<KeyEvent> {
        let (keys, used) = decode(bytes);
        assert_eq!(used, bytes.len(), "{bytes:?} used whole");
        keys
    }

    #[test]
    fn letters_enter_backspace_and_control_keys() {
        assert_eq!(
            codes(b"qs/\r\x7f"),
            vec![
                key(KeyCode::Char('q')),
                key(KeyCode::Char('s')),
                key(KeyCode::Char('/')),
                key(KeyCode::Enter),
                key(KeyCode::Backspace),
            ]
        );
        assert_eq!(codes(b"\x03"), vec![ctrl('c')]);
        assert_eq!(codes(b"\x1a"), vec![ctrl('z')]);
        assert_eq!(codes(b" "), vec![key(KeyCode::Char(' '))]);
    }

    #[test]
    fn a_lone_escape_is_esc_and_sequences_are_dropped_whole() {
        assert_eq!(codes(b"\x1b"), vec![key(KeyCode::Esc)]);
        // Up arrow, F5, an SS3 arrow, Alt+q: no Esc, no q.
        assert_eq!(codes(b"\x1b[A\x1b[15~\x1bOA\x1bq"), vec![]);
        assert_eq!(
            codes(b"\x1b[Bp\x1b"),
            vec![key(KeyCode::Char('p')), key(KeyCode::Esc)]
        );
        assert_eq!(
            codes(b"\x1b\x1b"),
            vec![key(KeyCode::Esc), key(KeyCode::Esc)]
        );
    }

    #[test]
    fn text_is_decoded_even_when_a_character_is_split_across_reads() {
        assert_eq!(codes("é".as_bytes()), vec![key(KeyCode::Char('é'))]);
        let bytes = "aé".as_bytes();
        let (keys, used) = decode(&bytes[..2]);
        assert_eq!((keys, used), (vec![key(KeyCode::Char('a'))], 1));
        // Invalid UTF-8 is dropped, never a panic.
        assert_eq!(codes(b"\xff\x80x"), vec![key(KeyCode::Char('x'))]);
    }
}
