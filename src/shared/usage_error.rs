//! An error in what the user asked for, found after the command line was
//! parsed (clap exits 2 for its own usage errors): a `--counters` file that
//! does not exist or is not a regular file. `main` exits 2 for it too, as
//! for any other usage error, so a script can tell "you asked for something
//! impossible" from "observing failed" (1).

use std::fmt;

/// The exit status of a usage error, clap's and ours.
pub const USAGE_EXIT_STATUS: u8 = 2;

/// A usage error: one line, shown as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Whether `e` is, or was caused by, a [`UsageError`].
pub fn is_usage_error(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<UsageError>().is_some())
}
