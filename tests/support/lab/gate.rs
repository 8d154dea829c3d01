//! Which lab tests share the machine with another. tools/test runs the lab
//! program with two test threads; each lab test opens by taking this gate,
//! `shared()` or `alone(why)`, and holds it to its end. Shared tests run
//! two at a time; a test that is alone runs with no other lab test beside
//! it, for a reason it states: it judges timing that a second lab's CPU
//! would move (microbursts, a CPU budget), or it fills the machine itself
//! (JVMs, a storm of connections). tests/offline's `lab_tests_take_the_gate`
//! holds every lab test to opening with one of the two.
//!
//! Shared tests must pass beside any other shared test: each makes its own
//! namespaces under a unique prefix and judges only its own traffic.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static GATE: RwLock<()> = RwLock::new(());

/// Held for the test's life; dropped at its end, also when it panics.
pub enum Gate {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

/// This test may run beside another shared one. (A test that panicked
/// poisons the lock; the next test goes on: the lock guards no data.)
#[must_use = "the gate is held while the test runs: bind it, `let _gate = ...`"]
pub fn shared() -> Gate {
    Gate::Shared(GATE.read().unwrap_or_else(|e| e.into_inner()))
}

/// This test runs with no other lab test beside it, because `why`.
#[must_use = "the gate is held while the test runs: bind it, `let _gate = ...`"]
pub fn alone(why: &str) -> Gate {
    assert!(!why.is_empty(), "say why the test must run alone");
    Gate::Alone(GATE.write().unwrap_or_else(|e| e.into_inner()))
}
