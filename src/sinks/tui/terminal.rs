//! Taking over the terminal and giving it back: raw mode, the alternate
//! screen and a hidden cursor on the way in; all undone on the way out,
//! whether the view finishes, is dropped, the program panics, or a stop
//! that could not finish cleanly ends the process (see
//! [`crate::shared::signals`]).

use std::io::{stdout, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use anyhow::{Context, Result};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::Terminal;

use crate::shared::signals;

pub(crate) type Term = Terminal<CrosstermBackend<Stdout>>;

/// Whether the terminal is ours (and so needs restoring).
static TAKEN: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Raw mode, alternate screen, hidden cursor; restores on panic.
pub(crate) fn take() -> Result<Term> {
    PANIC_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // The panic message must land on the normal screen, readable.
            let _ = restore();
            previous(info);
        }));
    });
    enable_raw_mode().context("switching the terminal to raw mode")?;
    TAKEN.store(true, Ordering::SeqCst);
    signals::on_forced_exit(restore_without_locks);
    signals::take_job_control(true);
    let entered = execute!(stdout(), EnterAlternateScreen, Hide)
        .context("entering the terminal's alternate screen")
        .and_then(|_| {
            Terminal::new(CrosstermBackend::new(stdout())).context("starting the full-screen view")
        });
    if entered.is_err() {
        let _ = restore();
    }
    entered
}

/// The full-screen view owns the terminal: a line on stderr now would be
/// drawn over it (messages wait in the metrics and health instead).
pub(crate) fn is_taken() -> bool {
    TAKEN.load(Ordering::SeqCst)
}

/// [`restore`] for a forced exit, from another thread while the view's
/// thread may be stuck holding stdout's lock: the escape sequences go
/// straight to the descriptor, and only if it can take them now.
fn restore_without_locks() {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return;
    }
    let _ = disable_raw_mode();
    // Leave the alternate screen, show the cursor.
    signals::write_if_ready(libc::STDOUT_FILENO, b"\x1b[?1049l\x1b[?25h");
}

/// Gives the terminal back as it was; does nothing when it is not ours, so
/// every exit path may call it.
pub(crate) fn restore() -> Result<()> {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return Ok(());
    }
    signals::take_job_control(false);
    // Try every step even when one fails, then report the first failure.
    let screen =
        execute!(stdout(), LeaveAlternateScreen, Show).context("leaving the alternate screen");
    let raw = disable_raw_mode().context("leaving raw mode");
    screen.and(raw)
}
