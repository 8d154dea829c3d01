//! Sinks only render: they take snapshots and their analysis and never
//! change them.

pub(crate) mod headroom;
pub(crate) mod held;
pub mod metrics;
pub(crate) mod otlp;
pub(crate) mod table;
pub(crate) mod tui;
pub(crate) mod view;
