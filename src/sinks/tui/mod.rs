//! The full-screen live view (ratatui over crossterm): per interface the
//! rates, allowance-exceeded rates, backlog, verdict with evidence and a
//! short history; below, the flows by backoff. Keys sort, filter, pause
//! and quit (see [`keys`]).

pub mod flows;
pub mod format;
pub mod history;
pub mod keys;
pub mod layout;
pub mod render;
pub mod terminal;

#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ratatui::crossterm::event::{self, Event};

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

pub struct TuiView {
    terminal: Option<Term>,
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
    /// Takes over the terminal (stdout must be one).
    pub fn new() -> Result<Self> {
        let mut view = TuiView {
            terminal: Some(terminal::take()?),
            ui: UiState::default(),
            live: Model::default(),
            frozen: None,
            new_while_paused: 0,
            ended: false,
        };
        view.redraw()?;
        Ok(view)
    }

    fn redraw(&mut self) -> Result<()> {
        let Some(term) = &mut self.terminal else {
            return Ok(());
        };
        let screen = Screen {
            model: self.frozen.as_ref().unwrap_or(&self.live),
            ui: &self.ui,
            new_while_paused: self.new_while_paused,
            ended: self.ended,
        };
        term.draw(|f| draw(f, &screen))
            .context("drawing the live view")?;
        Ok(())
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
        self.redraw()?;
        Ok(Control::Continue)
    }

    fn wait(&mut self, deadline: Instant) -> Result<Control> {
        loop {
            if signals::stop_requested() {
                return Ok(Control::Quit);
            }
            // Poll at least once, so keys work even when intervals are late.
            let slice = deadline
                .saturating_duration_since(Instant::now())
                .min(POLL_SLICE);
            if event::poll(slice).context("reading the terminal")? {
                match event::read().context("reading the terminal")? {
                    Event::Key(key) => match self.ui.on_key(key) {
                        KeyOutcome::Quit => return Ok(Control::Quit),
                        KeyOutcome::Redraw => {
                            self.follow_pause();
                            self.redraw()?;
                        }
                        KeyOutcome::Ignored => {}
                    },
                    Event::Resize(..) => self.redraw()?,
                    _ => {}
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
        self.redraw()?;
        while self.wait(Instant::now() + END_WAIT_SLICE)? == Control::Continue {}
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.terminal = None;
        terminal::restore()
    }
}

impl Drop for TuiView {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
