//! Helpers both the live and the offline side use: time and its formats,
//! quantities printed and parsed (units), process signals, and the
//! sanitiser for text from the observed system before it reaches a terminal.

pub(crate) mod build_info;
pub mod clock;
pub mod signals;
pub(crate) mod stop_fd;
pub mod terminal_text;
pub mod units;
pub mod usage_error;
