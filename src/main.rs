use std::process::ExitCode;

use clap::Parser;
use throttlescope::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Watch(args) => throttlescope::watch::run(args).map(|_| ExitCode::SUCCESS),
        Command::Record(args) => throttlescope::watch::run_record(args).map(|_| ExitCode::SUCCESS),
        Command::Report(args) => throttlescope::report::run(args),
        Command::Replay(args) => throttlescope::replay::run(args).map(|_| ExitCode::SUCCESS),
        Command::Doctor(args) => throttlescope::doctor::run(args),
        Command::Thresholds => {
            throttlescope::watch::print_thresholds();
            Ok(ExitCode::SUCCESS)
        }
        Command::BaselineProbe(args) => {
            throttlescope::baseline_probe::run(args.duration).map(|_| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}");
            eprintln!(
                "throttlescope: {}",
                throttlescope::terminal_text::inert_lines(&msg)
            );
            ExitCode::FAILURE
        }
    }
}
