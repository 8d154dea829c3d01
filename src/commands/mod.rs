//! The subcommands: the command line ([`cli`]) and one module per command
//! that wires collection, analysis and sinks together. `main` only
//! dispatches here.

pub mod cli;
pub mod doctor;
pub mod replay;
pub mod watch;
