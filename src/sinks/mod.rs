//! Sinks only render: they take snapshots and their analysis and never
//! change them.

pub mod headroom;
pub mod held;
pub mod metrics;
pub mod otlp;
pub mod table;
pub mod tui;
pub mod view;
