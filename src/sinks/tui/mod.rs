//! The full-screen live view (ratatui over crossterm).
//! PLACEHOLDER until the TUI lands: falls back to plain tables.

use std::time::Instant;

use anyhow::Result;

use super::view::{Control, PlainView, View};
use crate::analysis::IntervalAnalysis;
use crate::snapshot::Snapshot;

pub struct TuiView {
    plain: PlainView,
}

impl TuiView {
    pub fn new() -> Result<Self> {
        Ok(TuiView {
            plain: PlainView { top: 10 },
        })
    }
}

impl View for TuiView {
    fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        source: &str,
    ) -> Result<Control> {
        self.plain.show(snap, analysis, source)
    }

    fn wait(&mut self, deadline: Instant) -> Result<Control> {
        self.plain.wait(deadline)
    }
}
