//! NIC statistics, driver name and offload state through the SIOCETHTOOL
//! ioctl: what `ethtool -S`, `ethtool -i` and `ethtool -k` print.
//!
//! The ioctl takes a `struct ifreq` naming the interface whose `ifr_data`
//! points at an ethtool command buffer: a `u32 cmd` followed by command
//! specific fields. The structs below mirror `include/uapi/linux/ethtool.h`
//! and `include/uapi/linux/if.h` field by field.
//!
//! The socket is created once, in the network namespace of the calling
//! thread; every later ioctl on it addresses that namespace's interfaces.

use std::ffi::{c_char, c_ulong, c_ushort, c_void};
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::model::snapshot::Offloads;

/// `SIOCETHTOOL` from `include/uapi/linux/sockios.h`.
const SIOCETHTOOL: c_ulong = 0x8946;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;

/// The string set of `ethtool -S` (enum ethtool_stringset).
const ETH_SS_STATS: u32 = 1;
/// Every stat name is a fixed 32-byte, NUL-padded field.
const ETH_GSTRING_LEN: usize = 32;
/// Interface names are at most 15 bytes plus the NUL.
const IFNAMSIZ: usize = 16;

/// Older kernels fill GSTRINGS and GSTATS with as many entries as the driver
/// reports *at that moment*, ignoring the count we pass in (newer ones
/// answer 0 entries when our count is stale, as seen on 6.18). If the count
/// grows between our GSSET_INFO and the fetch (queues added by `ethtool -L`
/// in between), the kernel writes past a buffer sized for the old count.
/// So every reply buffer gets some room to spare and ends at a guard page
/// (see `GuardedBuffer`): a bigger overrun fails with EFAULT instead of
/// corrupting memory. Either way a count other than the one we asked for
/// makes us start over with fresh names.
const SPARE_ENTRIES: usize = 64;

/// `struct ifmap` from `if.h`: the largest member of the `ifreq` union, so
/// it fixes the union's size (24 bytes on 64-bit targets, 16 on 32-bit).
#[repr(C)]
#[derive(Clone, Copy)]
struct IfMap {
    mem_start: c_ulong,
    mem_end: c_ulong,
    base_addr: c_ushort,
    irq: u8,
    dma: u8,
    port: u8,
}

/// The part of the `ifreq` union we use: `ifr_data`. `map` is only there
/// to give the union the kernel's size.
#[repr(C)]
union IfreqData {
    data: *mut c_void,
    _map: IfMap,
}

/// `struct ifreq`: the interface name, NUL-terminated, then the union.
#[repr(C)]
struct Ifreq {
    ifr_name: [c_char; IFNAMSIZ],
    ifr_ifru: IfreqData,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Ifreq>() == 40);

/// `struct ethtool_sset_info` asking for exactly one string set: `cmd`,
/// `reserved`, the `u64 sset_mask`, then one `u32` per bit set in the mask
/// we sent. The kernel clears the bit of a set the driver does not have.
#[repr(C)]
struct SsetInfoOne {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    count: u32,
}

/// Header of `struct ethtool_gstrings`: `cmd`, `string_set`, `len`, then
/// `len` names of ETH_GSTRING_LEN bytes each, starting at byte 12.
#[repr(C)]
struct GstringsHeader {
    cmd: u32,
    string_set: u32,
    len: u32,
}

/// Header of `struct ethtool_stats`: `cmd`, `n_stats`, then `n_stats` u64
/// values starting at byte 8 (already 8-aligned).
#[repr(C)]
struct StatsHeader {
    cmd: u32,
    n_stats: u32,
}

/// `struct ethtool_drvinfo`: 5 strings of 32 bytes, 12 reserved bytes and
/// five u32 counts; 196 bytes in all.
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const _: () = assert!(std::mem::size_of::<DrvInfo>() == 196);

/// `struct ethtool_value`: the legacy one-flag get commands (GTSO...).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// An ethtool ioctl that failed, as `eth0: SIOCETHTOOL GSTATS: Operation
/// not supported`.
#[derive(Debug)]
pub struct EthtoolError {
    pub iface: String,
    /// The command, without its `ETHTOOL_` prefix (`GSTATS`, `GDRVINFO`...),
    /// or `socket` when the socket itself could not be made.
    pub op: &'static str,
    pub error: io::Error,
}

impl EthtoolError {
    /// The errno, if the kernel gave one.
    pub(crate) fn errno(&self) -> Option<i32> {
        self.error.raw_os_error()
    }

    /// The driver does not implement this command.
    pub(crate) fn is_unsupported(&self) -> bool {
        self.errno() == Some(libc::EOPNOTSUPP)
    }
}

impl fmt::Display for EthtoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // io::Error prints "Operation not supported (os error 95)": keep the
        // words, drop the number, as ethtool itself does.
        let text = self.error.to_string();
        let text = match text.find(" (os error ") {
            Some(i) => &text[..i],
            None => &text,
        };
        if self.op == "socket" {
            write!(f, "{}: socket for SIOCETHTOOL: {}", self.iface, text)
        } else {
            write!(f, "{}: SIOCETHTOOL {}: {}", self.iface, self.op, text)
        }
    }
}

impl std::error::Error for EthtoolError {}

/// A zeroed, page-aligned buffer of at least `len` bytes followed by an
/// inaccessible page, so that a kernel `copy_to_user` running past the end
/// fails with EFAULT rather than writing into whatever follows.
struct GuardedBuffer {
    base: *mut c_void,
    /// The whole mapping, guard page included.
    mapped: usize,
    len: usize,
}

impl GuardedBuffer {
    fn new(len: usize) -> io::Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        let usable = len.div_ceil(page).max(1) * page;
        let mapped = usable + page;
        // SAFETY: a fresh anonymous mapping, checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let buf = GuardedBuffer { base, mapped, len };
        // SAFETY: the last page lies inside the mapping just made.
        let rc =
            unsafe { libc::mprotect(base.cast::<u8>().add(usable).cast(), page, libc::PROT_NONE) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(buf)
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.base.cast()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are mapped readable and initialised
        // (anonymous mappings start zeroed).
        unsafe { std::slice::from_raw_parts(self.base.cast::<u8>(), self.len) }
    }
}

impl Drop for GuardedBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.mapped) };
    }
}

/// One interface's ethtool access: the socket and the stat names as last
/// read (they are re-read whenever the driver's count changes).
pub struct Ethtool {
    iface: String,
    sock: OwnedFd,
    names: Vec<String>,
}

impl Ethtool {
    /// A socket for `iface` in the calling thread's network namespace. The
    /// interface is not looked up until the first command.
    pub fn open(iface: &str) -> Result<Self, EthtoolError> {
        let fail = |error| EthtoolError {
            iface: iface.to_string(),
            op: "socket",
            error,
        };
        if iface.is_empty() || iface.len() >= IFNAMSIZ || iface.contains('\0') {
            return Err(fail(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name must be 1 to {} bytes", IFNAMSIZ - 1),
            )));
        }
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(fail(io::Error::last_os_error()));
        }
        Ok(Ethtool {
            iface: iface.to_string(),
            // SAFETY: fd is a fresh descriptor nobody else owns.
            sock: unsafe { OwnedFd::from_raw_fd(fd) },
            names: Vec::new(),
        })
    }

    /// Runs one ethtool command whose buffer starts at `cmd`.
    ///
    /// SAFETY (for callers): `cmd` must point at a writable buffer large
    /// enough for everything the kernel writes back for that command.
    unsafe fn ioctl(&self, op: &'static str, cmd: *mut c_void) -> Result<(), EthtoolError> {
        let mut ifr = Ifreq {
            ifr_name: [0; IFNAMSIZ],
            ifr_ifru: IfreqData { data: cmd },
        };
        for (dst, src) in ifr.ifr_name.iter_mut().zip(self.iface.bytes()) {
            *dst = src as c_char;
        }
        let rc = libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr);
        if rc < 0 {
            return Err(self.error(op, io::Error::last_os_error()));
        }
        Ok(())
    }

    fn error(&self, op: &'static str, error: io::Error) -> EthtoolError {
        EthtoolError {
            iface: self.iface.clone(),
            op,
            error,
        }
    }

    /// How many ETH_SS_STATS entries the driver reports now; `None` when it
    /// has no such string set (e.g. `lo`).
    pub(crate) fn stats_count(&self) -> Result<Option<usize>, EthtoolError> {
        let mut info = SsetInfoOne {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_STATS,
            count: 0,
        };
        // SAFETY: one bit in the mask, so the kernel writes the 16-byte
        // header and one u32: exactly SsetInfoOne.
        unsafe { self.ioctl("GSSET_INFO", &mut info as *mut _ as *mut c_void)? };
        if info.sset_mask & (1 << ETH_SS_STATS) == 0 {
            return Ok(None);
        }
        Ok(Some(info.count as usize))
    }

    /// The ETH_SS_STATS names, assuming the driver has `expected` of them;
    /// `None` when it has another number (its count changed: retry).
    /// `stats` is the usual way in; this is the step it is built from.
    pub fn read_names(&self, expected: usize) -> Result<Option<Vec<String>>, EthtoolError> {
        let header = std::mem::size_of::<GstringsHeader>();
        let capacity = expected + SPARE_ENTRIES;
        let mut buf = GuardedBuffer::new(header + capacity * ETH_GSTRING_LEN)
            .map_err(|e| self.error("GSTRINGS", e))?;
        let hdr = buf.as_mut_ptr() as *mut GstringsHeader;
        // SAFETY: the mapping is page-aligned and larger than the header;
        // anything the kernel writes past it hits the guard page (EFAULT).
        unsafe {
            (*hdr).cmd = ETHTOOL_GSTRINGS;
            (*hdr).string_set = ETH_SS_STATS;
            (*hdr).len = expected as u32;
            if !self.fetch("GSTRINGS", hdr as *mut c_void)? {
                return Ok(None);
            }
        }
        // SAFETY: the kernel wrote the header back.
        let written = unsafe { (*hdr).len } as usize;
        if written != expected {
            return Ok(None);
        }
        let names = buf.bytes()[header..header + written * ETH_GSTRING_LEN]
            .chunks_exact(ETH_GSTRING_LEN)
            .map(|field| {
                let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
                String::from_utf8_lossy(&field[..end]).into_owned()
            })
            .collect();
        Ok(Some(names))
    }

    /// The ETH_SS_STATS values, assuming `expected` of them; `None` when the
    /// driver has another number (retry).
    pub fn read_values(&self, expected: usize) -> Result<Option<Vec<u64>>, EthtoolError> {
        let header = std::mem::size_of::<StatsHeader>();
        let capacity = expected + SPARE_ENTRIES;
        let mut buf =
            GuardedBuffer::new(header + capacity * 8).map_err(|e| self.error("GSTATS", e))?;
        let hdr = buf.as_mut_ptr() as *mut StatsHeader;
        // SAFETY: as in read_names.
        unsafe {
            (*hdr).cmd = ETHTOOL_GSTATS;
            (*hdr).n_stats = expected as u32;
            if !self.fetch("GSTATS", hdr as *mut c_void)? {
                return Ok(None);
            }
        }
        // SAFETY: the kernel wrote the header back.
        let written = unsafe { (*hdr).n_stats } as usize;
        if written != expected {
            return Ok(None);
        }
        let values = buf.bytes()[header..header + written * 8]
            .chunks_exact(8)
            .map(|v| u64::from_ne_bytes(v.try_into().expect("8 bytes")))
            .collect();
        Ok(Some(values))
    }

    /// An ioctl whose reply can outgrow the buffer: EFAULT (the guard page)
    /// means "more entries than we made room for", `Ok(false)`.
    ///
    /// SAFETY (for callers): as for `ioctl`, up to the guard page.
    unsafe fn fetch(&self, op: &'static str, cmd: *mut c_void) -> Result<bool, EthtoolError> {
        match self.ioctl(op, cmd) {
            Ok(()) => Ok(true),
            Err(e) if e.errno() == Some(libc::EFAULT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every ETH_SS_STATS entry now, as `(name, value)` in driver order:
    /// what `ethtool -S` prints. Names are re-read when the count changed
    /// since the last call (a driver that swapped names without changing
    /// their number would go unnoticed; queue changes always change it).
    /// A driver without statistics is an "Operation not supported" error
    /// from GSTATS.
    pub fn stats(&mut self) -> Result<Vec<(String, u64)>, EthtoolError> {
        // The count can change between any two ioctls; a few attempts
        // settle it unless queues are being reconfigured in a tight loop.
        const ATTEMPTS: usize = 4;
        for _ in 0..ATTEMPTS {
            let count = match self.stats_count()? {
                Some(n) => n,
                None => {
                    return Err(self.error("GSTATS", io::Error::from_raw_os_error(libc::EOPNOTSUPP)))
                }
            };
            if count != self.names.len() {
                match self.read_names(count)? {
                    Some(names) => self.names = names,
                    None => continue,
                }
            }
            match self.read_values(count)? {
                Some(values) => return Ok(self.names.iter().cloned().zip(values).collect()),
                // Changed between the names and the values: start over.
                None => self.names.clear(),
            }
        }
        Err(self.error(
            "GSTATS",
            io::Error::other("the number of statistics kept changing"),
        ))
    }

    /// The stat names as last read (empty before the first `stats`).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The driver name, as `ethtool -i` prints on its `driver:` line.
    pub fn driver(&self) -> Result<String, EthtoolError> {
        Ok(self.driver_info()?.0)
    }

    /// The driver's name and version (`ethtool -i`: `driver`, `version`).
    pub(crate) fn driver_info(&self) -> Result<(String, String), EthtoolError> {
        // SAFETY: an all-zero DrvInfo is valid (integers and byte arrays).
        let mut info: DrvInfo = unsafe { std::mem::zeroed() };
        info.cmd = ETHTOOL_GDRVINFO;
        // SAFETY: the kernel writes exactly one struct ethtool_drvinfo.
        unsafe { self.ioctl("GDRVINFO", &mut info as *mut _ as *mut c_void)? };
        let text = |b: &[u8; 32]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(32);
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        Ok((text(&info.driver), text(&info.version)))
    }

    fn flag(&self, op: &'static str, cmd: u32) -> Result<bool, EthtoolError> {
        let mut v = EthtoolValue { cmd, data: 0 };
        // SAFETY: the kernel writes one struct ethtool_value.
        unsafe { self.ioctl(op, &mut v as *mut _ as *mut c_void)? };
        Ok(v.data != 0)
    }

    /// TSO, GSO and GRO as `ethtool -k` reports them
    /// (`tcp-segmentation-offload`, `generic-segmentation-offload`,
    /// `generic-receive-offload`). The legacy one-flag commands are used:
    /// they answer for every device, and GTSO already folds the TSO
    /// variants (IPv4, IPv6, ECN...) into one flag as ethtool does.
    pub fn offloads(&self) -> Result<Offloads, EthtoolError> {
        Ok(Offloads {
            tso: self.flag("GTSO", ETHTOOL_GTSO)?,
            gso: self.flag("GGSO", ETHTOOL_GGSO)?,
            gro: self.flag("GGRO", ETHTOOL_GGRO)?,
        })
    }
}

/// The driver name of `iface` in this thread's namespace (one-shot).
pub(crate) fn driver_name(iface: &str) -> Result<String, EthtoolError> {
    Ethtool::open(iface)?.driver()
}

/// The driver version of `iface` in this thread's namespace (one-shot);
/// None when unknown or empty.
pub(crate) fn driver_version(iface: &str) -> Option<String> {
    let (_, v) = Ethtool::open(iface).ok()?.driver_info().ok()?;
    (!v.is_empty()).then_some(v)
}

/// The offload state of `iface` in this thread's namespace (one-shot).
pub(crate) fn offloads(iface: &str) -> Result<Offloads, EthtoolError> {
    Ethtool::open(iface)?.offloads()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<GstringsHeader>(), 12);
        assert_eq!(std::mem::size_of::<StatsHeader>(), 8);
        assert_eq!(std::mem::offset_of!(SsetInfoOne, count), 16);
        assert_eq!(std::mem::offset_of!(DrvInfo, n_priv_flags), 176);
        assert_eq!(std::mem::offset_of!(Ifreq, ifr_ifru), IFNAMSIZ);
    }

    #[test]
    fn guarded_buffer_ends_at_an_inaccessible_page() {
        let mut buf = GuardedBuffer::new(10).expect("mmap");
        assert_eq!(buf.bytes(), &[0u8; 10]);
        // The kernel refuses to write past the usable pages: read(2) from
        // /dev/zero into the guard page is EFAULT, as copy_to_user is.
        let usable = buf.mapped / 2;
        let f = std::fs::File::open("/dev/zero").unwrap();
        let ptr = buf.as_mut_ptr();
        // SAFETY: the kernel checks the range; nothing is written on EFAULT.
        let rc = unsafe { libc::read(f.as_raw_fd(), ptr.add(usable).cast(), 8) };
        assert_eq!(rc, -1);
        assert_eq!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EFAULT)
        );
        // SAFETY: inside the usable part.
        let rc = unsafe { libc::read(f.as_raw_fd(), ptr.add(usable - 8).cast(), 8) };
        assert_eq!(rc, 8);
    }

    #[test]
    fn missing_interface_names_itself_and_the_command() {
        let mut e = Ethtool::open("nosuchif0").expect("socket");
        let err = e.stats().unwrap_err().to_string();
        assert_eq!(err, "nosuchif0: SIOCETHTOOL GSSET_INFO: No such device");
    }

    #[test]
    fn overlong_interface_name_is_refused() {
        let err = Ethtool::open("a-name-longer-than-15").err().unwrap();
        assert!(err.to_string().contains("1 to 15 bytes"), "{err}");
    }

    #[test]
    fn loopback_has_no_statistics_and_no_driver_info() {
        // lo exists in every namespace and implements neither command.
        let mut e = Ethtool::open("lo").expect("socket");
        assert_eq!(e.stats_count().expect("GSSET_INFO on lo"), None);
        let err = e.stats().unwrap_err();
        assert!(err.is_unsupported());
        assert_eq!(
            err.to_string(),
            "lo: SIOCETHTOOL GSTATS: Operation not supported"
        );
        let err = e.driver().unwrap_err();
        assert_eq!(
            err.to_string(),
            "lo: SIOCETHTOOL GDRVINFO: Operation not supported"
        );
        // The flag commands work on any device.
        e.offloads().expect("offloads of lo");
    }
}
