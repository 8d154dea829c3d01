//! Sinks only render: they take snapshots and their analysis and never
//! change them.

pub mod held;
pub mod metrics;
pub mod table;
pub mod tui;
pub mod view;

use std::io::IsTerminal;

use anyhow::Result;

use crate::commands::cli::ViewArgs;
use view::{JsonView, PlainView, View};

/// The view `args` ask for: JSON, plain tables, or the full-screen view
/// when stdout is a terminal. (Here, not in view.rs, so the full-screen view
/// depends on the trait and not the other way round.)
pub fn choose_view(args: &ViewArgs) -> Result<Box<dyn View>> {
    if args.json {
        return Ok(Box::new(JsonView));
    }
    if args.plain || !std::io::stdout().is_terminal() {
        return Ok(Box::new(PlainView { top: args.top }));
    }
    Ok(Box::new(tui::TuiView::new()?))
}
