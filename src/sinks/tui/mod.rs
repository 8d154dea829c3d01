//! The full-screen live view (ratatui over crossterm): per interface the
//! rates, allowance-exceeded rates, backlog, verdict with evidence and a
//! short history; below, the flows by backoff. Keys sort, filter, pause
//! and quit (see [`keys`]).

pub(crate) mod flows;
pub(crate) mod format;
pub(crate) mod history;
pub(crate) mod input;
pub(crate) mod keys;
pub(crate) mod layout;
pub(crate) mod render;
pub(crate) mod terminal;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use self::input::{Input, TermInput};
use self::keys::{KeyOutcome, UiState};
use self::render::{draw, Model, Screen};
use self::terminal::Term;
use super::view::{Control, View};
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;
use crate::shared::signals;

/// How often a wait looks at the stop flag (SIGTERM) between keys.
const POLL_SLICE: Duration = Duration::from_millis(100);
/// At the end of input the view waits for a quit; any deadline will do,
/// the wait loops until then.
const END_WAIT_SLICE: Duration = Duration::from_secs(3600);

pub(crate) struct TuiView {
    terminal: Option<Term>,
    input: TermInput,
    /// The terminal's size at the last draw, to redraw when it changes.
    size: Option<(u16, u16)>,
    ui: UiState,
    /// Every interval as it arrives.
    live: Model,
    /// What the screen shows while paused.
    frozen: Option<Model>,
    new_while_paused: u64,
    /// The source has no more intervals (the end of a replay).
    ended: bool,
}

impl TuiView {
    /// Takes over the terminal (stdout must be one, and keys must come
    /// from a terminal: stdin or the controlling one).
    pub(crate) fn new() -> Result<Self> {
        let input = TermInput::open()?;
        let mut view = TuiView {
            terminal: Some(terminal::take()?),
            input,
            size: None,
            ui: UiState::default(),
            live: Model::default(),
            frozen: None,
            new_while_paused: 0,
            ended: false,
        };
        if view.redraw() == Control::Quit {
            anyhow::bail!("the terminal could not be drawn on");
        }
        Ok(view)
    }

    /// Draws the screen; a terminal that cannot be written to has gone away
    /// (EIO after a hangup), which ends the view like a hangup.
    fn redraw(&mut self) -> Control {
        let Some(term) = &mut self.terminal else {
            return Control::Continue;
        };
        self.size = window_size();
        let screen = Screen {
            model: self.frozen.as_ref().unwrap_or(&self.live),
            ui: &self.ui,
            new_while_paused: self.new_while_paused,
            ended: self.ended,
        };
        if term.draw(|f| draw(f, &screen)).is_err() {
            signals::terminal_lost();
            return Control::Quit;
        }
        Control::Continue
    }

    /// Lets go of the drawing half. ratatui shows the cursor when its
    /// terminal is dropped and reports a failure with `eprintln!`, which
    /// panics once stderr is gone too: so the cursor is shown here first,
    /// and a terminal that cannot take even that is forgotten, not dropped
    /// ([`terminal::restore`] does the rest either way).
    fn release(&mut self) {
        if let Some(mut term) = self.terminal.take() {
            if term.show_cursor().is_err() {
                std::mem::forget(term);
            }
        }
    }

    /// Takes the terminal again after the process was stopped and continued
    /// (the shell may have changed its modes meanwhile) and draws it whole.
    fn retake(&mut self) -> Control {
        self.release();
        let _ = terminal::restore();
        match terminal::take() {
            Ok(t) => {
                self.terminal = Some(t);
                self.redraw()
            }
            Err(_) => {
                signals::terminal_lost();
                Control::Quit
            }
        }
    }

    /// Ctrl-Z or SIGTSTP: gives the terminal back, stops, and takes it
    /// again when continued (`fg`).
    fn suspend(&mut self) -> Control {
        self.release();
        let _ = terminal::restore();
        signals::stop_self();
        self.retake()
    }

    fn on_key(&mut self, key: KeyEvent) -> Control {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('z') {
            return self.suspend();
        }
        match self.ui.on_key(key) {
            KeyOutcome::Quit => Control::Quit,
            KeyOutcome::Redraw => {
                self.follow_pause();
                self.redraw()
            }
            KeyOutcome::Ignored => Control::Continue,
        }
    }

    /// Keeps the frozen copy in step with the pause key.
    fn follow_pause(&mut self) {
        match (self.ui.paused, self.frozen.is_some()) {
            (true, false) => {
                self.frozen = Some(self.live.clone());
                self.new_while_paused = 0;
            }
            (false, true) => self.frozen = None,
            _ => {}
        }
    }
}

impl View for TuiView {
    fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        source: &str,
    ) -> Result<Control> {
        self.live.push(snap, analysis, source);
        if self.ui.paused {
            self.new_while_paused += 1;
        }
        Ok(self.redraw())
    }

    fn wait(&mut self, deadline: Instant) -> Result<Control> {
        loop {
            if signals::stop_requested() {
                return Ok(Control::Quit);
            }
            let mut control = Control::Continue;
            if signals::take_suspend() {
                control = self.suspend();
            } else if signals::take_continued() {
                control = self.retake();
            } else if window_size() != self.size {
                control = self.redraw();
            }
            if control == Control::Quit {
                return Ok(Control::Quit);
            }
            // Wait at least once, so keys work even when intervals are late.
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(POLL_SLICE);
            match self.input.next(slice)? {
                Input::Hangup => {
                    signals::terminal_lost();
                    return Ok(Control::Quit);
                }
                Input::Nothing => {}
                Input::Keys(keys) => {
                    for key in keys {
                        if self.on_key(key) == Control::Quit {
                            return Ok(Control::Quit);
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                return Ok(Control::Continue);
            }
        }
    }

    /// Says so in the title and keeps the last screen (keys still sort,
    /// filter and pause) until q, Esc, Ctrl-C or a stop signal: a replay
    /// that closed at once would hide the interval it ended on.
    fn end_of_input(&mut self) -> Result<()> {
        self.ended = true;
        if self.redraw() == Control::Quit {
            return Ok(());
        }
        while self.wait(Instant::now() + END_WAIT_SLICE)? == Control::Continue {}
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.release();
        let restored = terminal::restore();
        if signals::hung_up() {
            // Nothing is left to give back to.
            return Ok(());
        }
        restored
    }
}

impl Drop for TuiView {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// The window's size from stdout (one ioctl, no fallback that would start
/// a process every time); None when stdout is no longer a terminal.
fn window_size() -> Option<(u16, u16)> {
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        (libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0)
            .then_some((ws.ws_col, ws.ws_row))
    }
}
