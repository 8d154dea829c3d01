//! The subcommands: the command line ([`cli`]) and one module per command
//! that wires collection, analysis and sinks together. `main` only
//! dispatches here.

pub mod baseline;
pub mod capacity;
pub mod cli;
pub mod doctor;
pub mod manual;
pub mod replay;
pub mod report;
pub mod watch;

use std::io::IsTerminal;

use anyhow::Result;

use crate::sinks::view::{JsonView, KafkaFilteredView, PlainView, View};
use cli::ViewArgs;

/// The view `args` ask for: JSON, plain tables, or the full-screen view
/// when stdout is a terminal. (Here, not in sinks/view.rs, so the full-screen
/// view depends on the trait and not the other way round.)
pub(crate) fn choose_view(args: &ViewArgs) -> Result<Box<dyn View>> {
    let kafka = args.kafka.filter()?;
    let view: Box<dyn View> = if args.json {
        Box::new(JsonView::default())
    } else if args.plain || !std::io::stdout().is_terminal() {
        Box::new(PlainView { top: args.top })
    } else {
        Box::new(crate::sinks::tui::TuiView::new()?)
    };
    Ok(if kafka.is_empty() {
        view
    } else {
        Box::new(KafkaFilteredView::new(view, kafka))
    })
}
