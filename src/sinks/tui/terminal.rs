//! Taking over the terminal and giving it back: raw mode, the alternate
//! screen and a hidden cursor on the way in; all undone on the way out,
//! whether the view finishes, is dropped, or the program panics.

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

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Whether the terminal is ours (and so needs restoring).
static TAKEN: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Raw mode, alternate screen, hidden cursor; restores on panic.
pub fn take() -> Result<Term> {
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

/// Gives the terminal back as it was; does nothing when it is not ours, so
/// every exit path may call it.
/// The full-screen view owns the terminal: a line on stderr now would be
/// drawn over it (messages wait in the metrics and health instead).
pub fn is_taken() -> bool {
    TAKEN.load(Ordering::SeqCst)
}

pub fn restore() -> Result<()> {
    if !TAKEN.swap(false, Ordering::SeqCst) {
        return Ok(());
    }
    // Try every step even when one fails, then report the first failure.
    let screen =
        execute!(stdout(), LeaveAlternateScreen, Show).context("leaving the alternate screen");
    let raw = disable_raw_mode().context("leaving raw mode");
    screen.and(raw)
}
