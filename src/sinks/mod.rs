//! Sinks only render what the collector and the analysis produced.

pub mod table;
