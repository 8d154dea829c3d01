//! What tests/offline/replay.rs and tests/lab/replay.rs share: they were one
//! file before its tests were split by whether they need root.

use serde_json::Value;

/// Parses JSON lines (`watch --json`, `replay --json`).
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("JSON line {l:?}: {e}")))
        .collect()
}
