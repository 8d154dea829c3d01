//! `throttlescope report`. PLACEHOLDER until the report lands: the model
//! (model.rs) is the contract between the builder and the renderers.

pub mod html;
pub mod model;

use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::ReportArgs;

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    let _ = args;
    bail!("report is not built yet")
}
