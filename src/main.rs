use std::process::ExitCode;

use clap::Parser;
use throttlescope::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Watch(args) => throttlescope::watch::run(args).map(|_| ExitCode::SUCCESS),
        Command::Doctor(args) => throttlescope::doctor::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("throttlescope: {e:#}");
            ExitCode::FAILURE
        }
    }
}
