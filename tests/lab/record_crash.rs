//! A recorder killed with SIGKILL, and a disk that fills up: every whole
//! interval stays readable and the reader says where the data stops.
//!
//! The tests here need root; those that need none are in
//! tests/offline/record_crash.rs.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::record::{self, RotateOptions, TraceWriter};

/// A small tmpfs, unmounted (and its directory removed) on drop.
struct TinyFs {
    dir: TempDir,
}

impl TinyFs {
    fn mount(tag: &str) -> Option<TinyFs> {
        let dir = TempDir::new(tag);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&dir.0)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(TinyFs { dir })
    }

    fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir.0).status();
    }
}

fn disk_full(name: &str) {
    // The disk-full path is the point of this test: without a tmpfs to
    // fill (root is needed to mount one) it fails rather than pass untested.
    let fs = TinyFs::mount("enospc")
        .expect("cannot mount a 64 KiB tmpfs (needs root): the disk-full path cannot be tested");
    let path = fs.join(name);
    let mut w = TraceWriter::create(&path, header(), RotateOptions::default()).unwrap();
    let mut ok = 0u64;
    let err = loop {
        match w.write(&snapshot(ok, 8)) {
            Ok(()) => ok += 1,
            Err(e) => break format!("{e:#}"),
        }
        assert!(ok < 100_000, "a 64 KiB tmpfs never filled up");
    };
    assert!(ok > 0);
    assert!(err.starts_with(&path.display().to_string()), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains(&format!(
            "the {ok} intervals up to seq {} are intact",
            ok - 1
        )),
        "{err}"
    );
    // Later writes refuse, repeating why.
    let again = format!("{:#}", w.write(&snapshot(ok, 8)).unwrap_err());
    assert!(again.contains("recording stopped earlier"), "{again}");
    drop(w);

    let (_, snaps, warnings) = record::read_all(std::slice::from_ref(&path)).unwrap();
    assert_eq!(snaps.len() as u64, ok, "{warnings:?}");
    assert_eq!(snaps.last().unwrap(), &snapshot(ok - 1, 8));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    eprintln!(
        "{name}: {ok} intervals before ENOSPC; reader: {}",
        warnings[0]
    );

    // A new recording on a full disk fails at its header and leaves no
    // empty file behind. (The failed write above was cut back, so fill up
    // what it freed first.)
    {
        use std::io::Write;
        let mut filler = std::fs::File::create(fs.join("filler")).unwrap();
        while filler.write_all(&[b'x'; 512]).is_ok() {}
    }
    let second = fs.join(&format!("second-{name}"));
    let err = format!(
        "{:#}",
        TraceWriter::create(&second, header(), RotateOptions::default())
            .err()
            .expect("no room for a header")
    );
    assert!(err.starts_with(&second.display().to_string()), "{err}");
    assert!(!second.exists());
}

#[test]
fn disk_full_keeps_whole_intervals_plain() {
    let _gate = crate::lab_support::gate::shared();
    disk_full("trace.jsonl");
}

#[test]
fn disk_full_keeps_whole_intervals_zstd() {
    let _gate = crate::lab_support::gate::shared();
    disk_full("trace.jsonl.zst");
}
