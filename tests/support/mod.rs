//! Shared by both test programs (tests/offline, tests/lab), each of which
//! includes it with `#[path = "../support/mod.rs"] mod support;`: the
//! product's paths, running its binary, a temporary directory, synthetic
//! recordings, and the helpers of the former test files that were split
//! by whether a test needs root. The lab's own helpers (namespaces, traffic,
//! parsing `ss`) are in tests/support/lab/, which only tests/lab includes.

pub mod cli_limits;
pub mod metrics;
pub mod record;
pub mod record_robustness;
pub mod replay;
pub mod report;
pub mod report_html;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_throttlescope"))
}

/// Runs a command, panicking with its output when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A directory removed (with its contents) when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!(
            "throttlescope-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
