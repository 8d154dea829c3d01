//! Helpers both the live and the offline side use: time and its formats,
//! parsing of durations and sizes, process signals, and the sanitiser for
//! text from the observed system before it reaches a terminal.

pub mod clock;
pub mod duration;
pub mod signals;
pub mod terminal_text;
