//! `throttlescope report`. PLACEHOLDER until the report lands.

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::ReportArgs;

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    let _ = args;
    bail!("report is not built yet")
}
