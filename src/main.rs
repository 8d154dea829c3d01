use std::process::ExitCode;

use throttlescope::commands::cli::{self, Command};
use throttlescope::shared::usage_error;

fn main() -> ExitCode {
    let cli = cli::parse();
    let result = match &cli.command {
        Command::Watch(args) => {
            throttlescope::commands::watch::run(args).map(|_| ExitCode::SUCCESS)
        }
        Command::Record(args) => {
            throttlescope::commands::watch::run_record(args).map(|_| ExitCode::SUCCESS)
        }
        Command::Report(args) => throttlescope::commands::report::run(args),
        Command::Replay(args) => {
            throttlescope::commands::replay::run(args).map(|_| ExitCode::SUCCESS)
        }
        Command::Capacity(args) => {
            throttlescope::commands::capacity::run(args).map(|_| ExitCode::SUCCESS)
        }
        Command::Doctor(args) => throttlescope::commands::doctor::run(args),
        Command::Thresholds => {
            throttlescope::commands::watch::print_thresholds();
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions(args) => {
            throttlescope::commands::manual::completions(args.shell, &mut std::io::stdout())
                .map(|_| ExitCode::SUCCESS)
        }
        Command::Man(args) => {
            throttlescope::commands::manual::man(args.dir.as_deref()).map(|_| ExitCode::SUCCESS)
        }
    };
    match result {
        // A stop because the terminal went away (SIGHUP, or EOF or EIO on
        // it) exits 129, as a shell reports death by SIGHUP, after the
        // clean stop: a script can tell it from a run that ended as asked.
        Ok(code) if throttlescope::shared::signals::hung_up() => {
            let _ = code;
            ExitCode::from(129)
        }
        Ok(code) => code,
        Err(e) => {
            let msg = format!("{e:#}");
            throttlescope::stderr_line!(
                "throttlescope: {}",
                throttlescope::shared::terminal_text::inert_lines(&msg)
            );
            if usage_error::is_usage_error(&e) {
                ExitCode::from(usage_error::USAGE_EXIT_STATUS)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
