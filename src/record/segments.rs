//! Segment file names and the rename chain of rotation.
//!
//! The live segment is always the path the user gave (`FILE`); closed
//! segments are `FILE.1` (the newest) to `FILE.<keep>` (the oldest), like
//! logrotate, so `FILE` is always the one being written and a listing sorts
//! the history.

use std::io;
use std::path::{Path, PathBuf};

/// `FILE.<n>`; `n == 0` is `FILE` itself.
pub fn segment_path(base: &Path, n: usize) -> PathBuf {
    if n == 0 {
        return base.to_path_buf();
    }
    let mut name = base.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Moves `FILE` to `FILE.1`, `FILE.1` to `FILE.2`, ... and drops what would
/// go past `FILE.<keep>`. With `keep == 0` the closed segment is removed.
/// Stops at the first error, naming the file: renames already done leave
/// every segment under some name, nothing is deleted that should be kept.
pub(crate) fn shift(base: &Path, keep: usize) -> io::Result<()> {
    let oldest = segment_path(base, keep);
    match std::fs::remove_file(&oldest) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(named(&oldest, "removing", e)),
    }
    for n in (0..keep).rev() {
        let from = segment_path(base, n);
        let to = segment_path(base, n + 1);
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && n > 0 => {}
            Err(e) => return Err(named(&from, "renaming", e)),
        }
    }
    Ok(())
}

fn named(path: &Path, doing: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

/// The recording's file name with `{start}` (UTC start time, e.g.
/// `20261121T030405Z`) and `{host}` filled in, so a service can start a
/// new recording on every start without a shell (a recording is never
/// overwritten, so a fixed name would fail the second start).
pub(crate) fn expand_name(path: &Path, start_unix_ms: u64, host: &str) -> PathBuf {
    let text = path.to_string_lossy();
    if !text.contains("{start}") && !text.contains("{host}") {
        return path.to_path_buf();
    }
    // A host name never holds '/', but the name must stay one path component.
    let host = host.replace('/', "_");
    PathBuf::from(
        text.replace("{start}", &crate::shared::clock::compact_utc(start_unix_ms))
            .replace("{host}", &host),
    )
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_other_names_kept() {
        let p = Path::new("/var/lib/ts/{host}-{start}.jsonl.zst");
        // 2026-11-21 03:04:05 UTC
        let got = expand_name(p, 1_795_230_245_000, "broker-1");
        assert_eq!(
            got,
            PathBuf::from("/var/lib/ts/broker-1-20261121T030405Z.jsonl.zst")
        );
        let plain = Path::new("/tmp/{x}.jsonl");
        assert_eq!(expand_name(plain, 0, "h"), plain);
        assert_eq!(
            expand_name(Path::new("{host}.jsonl"), 0, "a/b"),
            PathBuf::from("a_b.jsonl")
        );
    }
}
