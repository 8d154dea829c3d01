//! What tests/offline/cli_limits.rs and tests/lab/cli_limits.rs share: they were one
//! file before its tests were split by whether they need root.

use std::process::Command;

/// (exit code, stderr) of a command.
pub fn status(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
