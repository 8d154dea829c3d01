//! Any bytes given to the trace reader, as a file or a zstd stream: it may
//! refuse them or warn, never panic, hang or grow without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use throttlescope::record::TraceReader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = TraceReader::from_reader("fuzz", std::io::Cursor::new(data.to_vec()))
    else {
        return;
    };
    let _ = reader.header().version;
    for item in reader.by_ref() {
        if let Err(problem) = item {
            // Display must work for every problem the reader can report.
            let _ = problem.to_string();
        }
    }
    let _ = reader.closing_warnings();
    let _ = reader.summary();
});
