//! Interface index -> name, in the observer's own network namespace.
//!
//! The flow probes record the ifindex of a flow's interface (bpf/flows.bpf.c
//! `update_ifindex`); an ifindex only means something inside its namespace.
//! The name is asked of the kernel (SIOCGIFNAME) on a socket made when the
//! resolver is, so it answers for the namespace the collector was started in:
//! the one its netns filter and the allowance ioctls use too. /sys/class/net
//! would answer for the namespace /sys was mounted in, which is another one
//! after a bare `setns`/`nsenter --net` (only `ip netns exec` remounts it),
//! and would then name the wrong interface.
//!
//! Names are looked up again every interval (one ioctl per distinct
//! interface, not per flow), so a renamed or replaced interface is seen at
//! the next interval.

use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Names by ifindex for the current interval.
#[derive(Debug)]
pub struct IfIndexNames {
    /// AF_INET datagram socket of the collector's namespace.
    sock: OwnedFd,
    names: HashMap<u32, Option<String>>,
    /// The interval `names` was looked up in.
    interval: u64,
}

impl IfIndexNames {
    /// A resolver for the calling thread's network namespace.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(IfIndexNames {
            // SAFETY: fd is a fresh descriptor nobody else owns.
            sock: unsafe { OwnedFd::from_raw_fd(fd) },
            names: HashMap::new(),
            interval: 0,
        })
    }

    /// The name of `ifindex` in interval `interval` (0 or an index that
    /// does not exist: None).
    pub(crate) fn name(&mut self, ifindex: u32, interval: u64) -> Option<String> {
        if interval != self.interval {
            self.names.clear();
            self.interval = interval;
        }
        if ifindex == 0 {
            return None;
        }
        let sock = &self.sock;
        self.names
            .entry(ifindex)
            .or_insert_with(|| name_of(sock, ifindex))
            .clone()
    }
}

/// SIOCGIFNAME: the name of `ifindex` in the socket's namespace.
fn name_of(sock: &OwnedFd, ifindex: u32) -> Option<String> {
    let index = libc::c_int::try_from(ifindex).ok()?;
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_ifru.ifru_ifindex = index;
    // SAFETY: valid socket and a writable ifreq, which is what SIOCGIFNAME
    // reads (the index) and writes (the name).
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFNAME as _, &mut ifr) };
    if rc < 0 {
        return None;
    }
    // The kernel writes a NUL-terminated name of at most IFNAMSIZ bytes;
    // the last byte is made NUL so that a bad reply cannot overrun.
    ifr.ifr_name[libc::IFNAMSIZ - 1] = 0;
    // SAFETY: NUL-terminated within the array (see above).
    let name = unsafe { CStr::from_ptr(ifr.ifr_name.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_this_namespaces_interfaces() {
        let mut n = IfIndexNames::new().unwrap();
        assert_eq!(n.name(0, 0), None);
        // lo is ifindex 1 in every namespace.
        assert_eq!(n.name(1, 0).as_deref(), Some("lo"));
        assert_eq!(n.name(i32::MAX as u32, 0), None);
        assert_eq!(n.name(u32::MAX, 0), None, "not an index the kernel takes");
        // Every interface /sys lists (this test runs where /sys is ours).
        for e in std::fs::read_dir("/sys/class/net").unwrap() {
            let e = e.unwrap();
            let idx: u32 = std::fs::read_to_string(e.path().join("ifindex"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let want = e.file_name().to_string_lossy().into_owned();
            assert_eq!(n.name(idx, 1), Some(want));
        }
    }
}
