//! The per-namespace flow dump for `--all-netns` where the socket-storage
//! map iterator is refused: the TCP socket iterator walks the sockets of
//! the network namespace its fd is created in, so a helper thread enters
//! each other namespace in turn and creates one there.
//!
//! Which namespaces: every one a process is in (`/proc/PID/ns/net`) and
//! every one `ip netns` names (`/run/netns`), found again each interval;
//! their files stay open between intervals, so a namespace is entered by
//! its inode, never by a path that could now name another one.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::MetadataExt;

use anyhow::{bail, Context, Result};

use super::flows_skel::types::ts_flow_record;
use super::records::read_record;

/// Network namespaces other than this thread's, open by inode.
#[derive(Default)]
pub(crate) struct OtherNamespaces {
    open: HashMap<u64, File>,
}

impl OtherNamespaces {
    /// Finds the namespaces there are now: new ones are opened, gone ones
    /// closed. This thread's own is left out.
    fn refresh(&mut self) {
        let own = crate::collect::netns::own().ok().map(u64::from);
        let mut seen = HashSet::new();
        let mut candidates: Vec<std::path::PathBuf> = Vec::new();
        if let Ok(dir) = fs::read_dir("/proc") {
            for e in dir.flatten() {
                let name = e.file_name();
                if name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                    candidates.push(e.path().join("ns/net"));
                }
            }
        }
        if let Ok(dir) = fs::read_dir("/run/netns") {
            candidates.extend(dir.flatten().map(|e| e.path()));
        }
        for path in candidates {
            let Ok(ino) = crate::collect::netns::inode_of(&path) else {
                continue; // the process exited meanwhile
            };
            if Some(ino) == own || !seen.insert(ino) {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = self.open.entry(ino) {
                if let Ok(f) = File::open(&path) {
                    // Opened by path: make sure it is still the namespace
                    // that was stat'ed.
                    if f.metadata().map(|m| m.ino()).ok() == Some(ino) {
                        slot.insert(f);
                    }
                }
            }
        }
        self.open.retain(|ino, _| seen.contains(ino));
    }

    /// Appends the records of every other namespace to `out`, reading the
    /// iterator link `link_fd` from inside each.
    pub(crate) fn read(&mut self, link_fd: RawFd, out: &mut Vec<ts_flow_record>) -> Result<()> {
        self.refresh();
        let fds: Vec<(u64, RawFd)> = self
            .open
            .iter()
            .map(|(ino, f)| (*ino, f.as_raw_fd()))
            .collect();
        if fds.is_empty() {
            return Ok(());
        }
        // A thread of its own: entering a namespace changes the calling
        // thread's, and this one must stay where it is.
        let read = std::thread::scope(|s| {
            s.spawn(|| -> Result<Vec<ts_flow_record>> {
                let mut buf = Vec::new();
                for (ino, fd) in fds {
                    // SAFETY: fd is an open namespace file owned by `self`,
                    // which outlives this scope.
                    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                        // Gone between the scan and now: nothing to read.
                        continue;
                    }
                    read_iter(link_fd, &mut buf)
                        .with_context(|| format!("reading the flows of netns {ino}"))?;
                }
                Ok(buf)
            })
            .join()
        });
        match read {
            Ok(r) => {
                out.extend(r?);
                Ok(())
            }
            Err(_) => bail!("the per-namespace flow dump thread panicked"),
        }
    }
}

/// Bytes read from the iterator at a time: whole records are decoded from
/// each read, so the dump never holds its bytes and its records at once
/// (at 30,000 flows in a full dump that was 10 MB twice).
const READ_CHUNK: usize = 64 * 1024;

/// Creates an iterator fd from `link_fd` in this thread's namespace, reads
/// it to the end (for the TCP iterator: that namespace's sockets) and
/// appends its flow records to `out`.
pub(crate) fn read_iter(link_fd: RawFd, out: &mut Vec<ts_flow_record>) -> Result<()> {
    // SAFETY: a plain syscall wrapper on a valid link fd.
    let fd = unsafe { libbpf_sys::bpf_iter_create(link_fd) };
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd))
            .context("creating a flow-dump iterator");
    }
    // SAFETY: fd was just returned to us and is owned by nobody else.
    let mut f = unsafe { File::from_raw_fd(fd) };
    let n = size_of::<ts_flow_record>();
    let mut chunk = vec![0u8; READ_CHUNK.max(n)];
    let mut filled = 0;
    loop {
        let got = match f.read(&mut chunk[filled..]) {
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // The kernel hands a long walk back (EAGAIN after a million
            // objects visited without output); the next read resumes it.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e).context("reading the flow-dump iterator"),
        };
        if got == 0 {
            break;
        }
        filled += got;
        let whole = filled / n * n;
        out.extend(
            chunk[..whole]
                .chunks_exact(n)
                .filter_map(read_record::<ts_flow_record>),
        );
        chunk.copy_within(whole..filled, 0);
        filled -= whole;
    }
    if filled != 0 {
        bail!("flow-dump iterator ended {filled} bytes into a record of {n}");
    }
    Ok(())
}
