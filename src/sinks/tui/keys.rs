//! What the live view's keys do: a small state machine over [`UiState`],
//! free of the terminal so it can be tested key by key.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::flows::SortKey;

/// What the person watching asked for, apart from the data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UiState {
    /// The display is frozen; intervals are still collected and recorded.
    pub paused: bool,
    pub sort: SortKey,
    /// The applied filter on peer address or process name ("" = none).
    pub filter: String,
    /// The filter being typed, while `/` is active.
    pub input: Option<String>,
    /// The key help replaces the status line.
    pub help: bool,
}

/// The effect of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyOutcome {
    Quit,
    /// The state changed: draw again.
    Redraw,
    /// Nothing to do (an unbound key, a key release).
    Ignored,
}

impl UiState {
    pub(crate) fn on_key(&mut self, key: KeyEvent) -> KeyOutcome {
        if key.kind != KeyEventKind::Press {
            return KeyOutcome::Ignored;
        }
        // Raw mode delivers Ctrl-C as a key, not SIGINT: it always quits.
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return KeyOutcome::Quit;
        }
        if let Some(input) = &mut self.input {
            match key.code {
                KeyCode::Enter => {
                    self.filter = input.trim().to_string();
                    self.input = None;
                }
                KeyCode::Esc => {
                    self.filter.clear();
                    self.input = None;
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !c.is_control() => input.push(c),
                _ => return KeyOutcome::Ignored,
            }
            return KeyOutcome::Redraw;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return KeyOutcome::Quit,
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('/') => self.input = Some(self.filter.clone()),
            KeyCode::Char('?') => self.help = !self.help,
            _ => return KeyOutcome::Ignored,
        }
        KeyOutcome::Redraw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(ui: &mut UiState, code: KeyCode) -> KeyOutcome {
        ui.on_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn typed(ui: &mut UiState, text: &str) {
        for c in text.chars() {
            assert_eq!(press(ui, KeyCode::Char(c)), KeyOutcome::Redraw);
        }
    }

    #[test]
    fn quit_keys() {
        let mut ui = UiState::default();
        assert_eq!(press(&mut ui, KeyCode::Char('q')), KeyOutcome::Quit);
        assert_eq!(press(&mut ui, KeyCode::Esc), KeyOutcome::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(ui.on_key(ctrl_c), KeyOutcome::Quit);
        // Even while typing a filter.
        press(&mut ui, KeyCode::Char('/'));
        assert_eq!(ui.on_key(ctrl_c), KeyOutcome::Quit);
        assert_eq!(press(&mut ui, KeyCode::Char('x')), KeyOutcome::Redraw);
        assert_eq!(press(&mut ui, KeyCode::F(5)), KeyOutcome::Ignored);
    }

    #[test]
    fn pause_sort_help() {
        let mut ui = UiState::default();
        press(&mut ui, KeyCode::Char('p'));
        assert!(ui.paused);
        press(&mut ui, KeyCode::Char(' '));
        assert!(!ui.paused);
        assert_eq!(ui.sort, SortKey::Backoff);
        let mut seen = vec![ui.sort];
        for _ in 0..SortKey::ALL.len() {
            press(&mut ui, KeyCode::Char('s'));
            seen.push(ui.sort);
        }
        assert_eq!(&seen[..SortKey::ALL.len()], &SortKey::ALL);
        assert_eq!(ui.sort, SortKey::Backoff, "cycles back");
        press(&mut ui, KeyCode::Char('?'));
        assert!(ui.help);
    }

    #[test]
    fn filter_applies_on_enter_and_clears_on_esc() {
        let mut ui = UiState::default();
        press(&mut ui, KeyCode::Char('/'));
        typed(&mut ui, "iperf4");
        press(&mut ui, KeyCode::Backspace);
        // Typing 'q' or 'p' into the filter neither quits nor pauses.
        typed(&mut ui, "q");
        assert_eq!(ui.filter, "", "not applied before Enter");
        assert_eq!(ui.input.as_deref(), Some("iperfq"));
        press(&mut ui, KeyCode::Enter);
        assert_eq!(ui.filter, "iperfq");
        assert_eq!(ui.input, None);
        assert!(!ui.paused);
        // `/` again starts from the applied filter; Esc clears it.
        press(&mut ui, KeyCode::Char('/'));
        assert_eq!(ui.input.as_deref(), Some("iperfq"));
        assert_eq!(press(&mut ui, KeyCode::Esc), KeyOutcome::Redraw);
        assert_eq!(ui.filter, "");
        assert_eq!(ui.input, None);
    }

    #[test]
    fn key_releases_are_ignored() {
        let mut ui = UiState::default();
        let mut release = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(ui.on_key(release), KeyOutcome::Ignored);
    }
}
