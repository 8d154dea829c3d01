//! Any bytes a client can send the metrics endpoint on one connection: the
//! server answers, refuses or closes, never panics, and never buffers more
//! than its header limit (`sinks::metrics::fuzz_connection` checks the
//! invariants on every answer).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    throttlescope::sinks::metrics::fuzz_connection(data);
});
