//! Running one test by itself in a fresh process of this program.
//!
//! A child's peak RSS as wait4 reports it (ru_maxrss) includes the memory
//! of the process it was spawned from, as of the exec: the kernel carries
//! the old address space's high-water mark over. With one program for all
//! the offline tests, that process is the test program with whatever its
//! other tests hold at the time, not a small binary running one test, so a
//! test that bounds a child's peak memory runs itself alone first.

use std::process::Command;

/// Set in the fresh process: the test runs its body there.
const ALONE_ENV: &str = "THROTTLESCOPE_TEST_ALONE";

/// True in the fresh process. Otherwise runs test `name` (its full path in
/// this program, `module::fn`) alone in a fresh process of this program,
/// shows its output, fails if it failed, and returns false: the caller
/// then returns without running its body a second time.
pub fn in_fresh_process(name: &str) -> bool {
    if std::env::var_os(ALONE_ENV).is_some() {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, "1")
        .output()
        .unwrap_or_else(|e| panic!("running {name} alone: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} alone: {}", out.status);
    // A name that matches no test runs nothing and succeeds.
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} alone did not run: {stdout}"
    );
    false
}
