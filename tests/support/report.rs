//! What tests/offline/report.rs and tests/lab/report.rs share: they were one
//! file before its tests were split by whether they need root.

use std::process::{Command, Output};

use serde_json::Value;

/// `throttlescope report ARGS`: exit code, stdout, stderr.
pub fn report(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(crate::support::binary())
        .arg("report")
        .args(args)
        .output()
        .expect("running throttlescope report");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `report --json ARGS` that must succeed: the parsed report.
pub fn report_json(args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = report(&all);
    assert_eq!(code, 0, "report {args:?} failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("report JSON: {e}\n{stdout}"))
}
