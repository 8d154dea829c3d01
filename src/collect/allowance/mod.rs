//! NIC allowance counters: the ENA statistics that say the hypervisor
//! queued or dropped this instance's packets (see docs/allowance.md).
//!
//! Two sources give the same thing, a list of `(name, value)` as
//! `ethtool -S` prints it: the SIOCETHTOOL ioctl on the real device
//! ([`ethtool`]), or a file in `ethtool -S` format ([`parse`]) written by an
//! emulated device. Both go through the same delta logic ([`delta`]).

pub(crate) mod delta;
pub(crate) mod driver_versions;
pub mod ethtool;
pub mod parse;

use std::path::{Path, PathBuf};

use crate::model::snapshot::AllowanceStatus;

use self::delta::AllowanceTracker;
use self::ethtool::Ethtool;

/// A read's skipped lines as the sample shows them: the first, and how
/// many there were.
fn skipped_note(skipped: &[String]) -> Option<String> {
    let first = skipped.first()?;
    Some(match skipped.len() {
        1 => format!("1 line skipped: {first}"),
        n => format!("{n} lines skipped, the first: {first}"),
    })
}

/// Where an interface's counters are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterSource {
    /// SIOCETHTOOL on the interface, in the namespace of the thread that
    /// created the reader.
    Ioctl,
    /// A file in `ethtool -S` format, re-read at every `read`. Writers
    /// should replace it atomically (write elsewhere, then rename): a file
    /// caught half-written is malformed and counts as a failed read.
    File(PathBuf),
}

impl CounterSource {
    /// As `AllowanceSample::source` shows it: `ioctl` or `file:<path>`.
    pub(crate) fn label(&self) -> String {
        match self {
            CounterSource::Ioctl => "ioctl".into(),
            CounterSource::File(p) => format!("file:{}", p.display()),
        }
    }
}

/// Parses the value of `--counters IFACE=PATH`.
pub(crate) fn parse_counters_arg(s: &str) -> Result<(String, PathBuf), String> {
    let Some((iface, path)) = s.split_once('=') else {
        return Err(format!("expected IFACE=PATH, found {s:?}"));
    };
    valid_iface_name(iface).map_err(|why| format!("{s:?}: interface {iface:?} {why}"))?;
    if path.is_empty() {
        return Err(format!("{s:?}: empty PATH, expected IFACE=PATH"));
    }
    Ok((iface.to_string(), PathBuf::from(path)))
}

/// Why `path` cannot be a counter file, checked once at start: it does not
/// exist, is a directory, or is not a regular file (a device such as
/// /dev/zero, a FIFO, a socket). Each of these is a mistake in the command
/// line, not a read that may work next interval; a file that exists but is
/// malformed or goes missing later is a failed read, counted and shown.
pub(crate) fn counter_path_problem(path: &Path) -> Option<String> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("{shown} does not exist"))
        }
        Err(e) => return Some(format!("{shown}: {e}")),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return Some(format!("{shown} is a directory, not a counter file"));
    }
    if !ft.is_file() {
        return Some(format!(
            "{shown} is not a regular file (a device, FIFO or socket): counter files are \
             regular files, as `ethtool -S IFACE > FILE` writes them"
        ));
    }
    None
}

/// The kernel's rules for a device name (`dev_valid_name`).
fn valid_iface_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if name.len() > 15 {
        return Err("is longer than 15 bytes");
    }
    if name == "." || name == ".." {
        return Err("is not a valid name");
    }
    if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return Err("contains '/', ':' or whitespace");
    }
    Ok(())
}

/// What one fetch from the source gave.
enum Fetched {
    /// The statistics, and the lines of a counter file skipped as
    /// malformed (`path:line: why`).
    Stats(Vec<(String, u64)>, Vec<String>),
    /// The device has no statistics at all (e.g. `lo`): not an error.
    NoStats(String),
    Failed(String),
}

/// Reads one interface's allowance counters, interval after interval.
pub struct AllowanceReader {
    iface: String,
    source: CounterSource,
    /// The ioctl socket, opened on first need and kept.
    ethtool: Option<Ethtool>,
    /// The driver name, for the "unavailable" reason; read once.
    driver: Option<String>,
    tracker: AllowanceTracker,
    /// Lines of the counter file skipped since start.
    skipped_lines: u64,
}

impl AllowanceReader {
    /// For `Ioctl` the socket is made here, so it belongs to the network
    /// namespace of the calling thread (if that fails, `read` retries and
    /// reports the failure).
    pub fn new(iface: &str, source: CounterSource) -> Self {
        let ethtool = match source {
            CounterSource::Ioctl => Ethtool::open(iface).ok(),
            CounterSource::File(_) => None,
        };
        AllowanceReader {
            iface: iface.to_string(),
            source,
            ethtool,
            driver: None,
            tracker: AllowanceTracker::new(),
            skipped_lines: 0,
        }
    }

    /// Reads the counters now. Never panics and never gives up: a failed
    /// read is counted in the sample and the next call tries again.
    pub fn read(&mut self) -> AllowanceStatus {
        let label = self.source.label();
        match self.fetch() {
            // Lines skipped and no allowance stat among the rest: the bad
            // lines are where the counters should be (a file caught half
            // written). A failed read, not a device without counters.
            Fetched::Stats(stats, skipped)
                if !skipped.is_empty() && delta::extract(&stats) == Default::default() =>
            {
                self.skipped_lines += skipped.len() as u64;
                self.failed(skipped[0].clone(), &label)
            }
            Fetched::Stats(stats, skipped) => match self.tracker.observe(&stats, &label) {
                Some(mut sample) => {
                    self.skipped_lines += skipped.len() as u64;
                    sample.skipped_lines = self.skipped_lines;
                    sample.skipped = skipped_note(&skipped);
                    AllowanceStatus::Read(Box::new(sample))
                }
                None => AllowanceStatus::Unavailable {
                    reason: self.no_counters_reason(stats.len()),
                },
            },
            Fetched::NoStats(reason) => {
                self.tracker.forget();
                AllowanceStatus::Unavailable { reason }
            }
            Fetched::Failed(error) => self.failed(error, &label),
        }
    }

    fn failed(&mut self, error: String, label: &str) -> AllowanceStatus {
        let mut sample = self.tracker.failed(error, label);
        sample.skipped_lines = self.skipped_lines;
        AllowanceStatus::Read(Box::new(sample))
    }

    fn fetch(&mut self) -> Fetched {
        match &self.source {
            CounterSource::File(path) => match parse::parse_file(path) {
                Ok(p) => Fetched::Stats(p.stats, p.skipped.iter().map(|e| e.to_string()).collect()),
                Err(e) => Fetched::Failed(e),
            },
            CounterSource::Ioctl => {
                if self.ethtool.is_none() {
                    match Ethtool::open(&self.iface) {
                        Ok(e) => self.ethtool = Some(e),
                        Err(e) => return Fetched::Failed(e.to_string()),
                    }
                }
                let Some(ethtool) = self.ethtool.as_mut() else {
                    return Fetched::Failed(format!("{}: no SIOCETHTOOL socket", self.iface));
                };
                match ethtool.stats() {
                    Ok(stats) => Fetched::Stats(stats, Vec::new()),
                    Err(e) if e.is_unsupported() => {
                        let driver = self.driver_label();
                        Fetched::NoStats(format!(
                            "{}: driver {driver} reports no allowance counters (no ethtool statistics: {e})",
                            self.iface
                        ))
                    }
                    Err(e) => Fetched::Failed(e.to_string()),
                }
            }
        }
    }

    /// The driver name, or why it is unknown.
    fn driver_label(&mut self) -> String {
        if self.driver.is_none() {
            if let Some(e) = &self.ethtool {
                self.driver = e.driver().ok();
            }
        }
        self.driver.clone().unwrap_or_else(|| "unknown".into())
    }

    fn no_counters_reason(&mut self, n_stats: usize) -> String {
        let from = match &self.source {
            CounterSource::Ioctl => format!("driver {}", self.driver_label()),
            CounterSource::File(p) => p.display().to_string(),
        };
        format!(
            "{}: {from} reports no allowance counters ({n_stats} other statistics)",
            self.iface
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A scratch directory of this test process, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "throttlescope-allowance-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
        /// Writes atomically, as an emulator should.
        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            let tmp = self.0.join(format!(".{name}.tmp"));
            fs::write(&tmp, text).unwrap();
            fs::rename(&tmp, &path).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn ena_text(bw_in: u64, bw_out: u64) -> String {
        format!(
            "NIC statistics:\n     tx_timeout: 0\n     bw_in_allowance_exceeded: {bw_in}\n\
             \x20    bw_out_allowance_exceeded: {bw_out}\n     pps_allowance_exceeded: 0\n\
             \x20    conntrack_allowance_exceeded: 0\n     linklocal_allowance_exceeded: 0\n\
             \x20    queue_0_tx_cnt: 81234\n"
        )
    }

    fn sample(status: AllowanceStatus) -> crate::model::snapshot::AllowanceSample {
        match status {
            AllowanceStatus::Read(s) => *s,
            other => panic!("expected a sample, got {other:?}"),
        }
    }

    #[test]
    fn counters_arg_is_iface_equals_path() {
        assert_eq!(
            parse_counters_arg("eth0=/tmp/ena.txt"),
            Ok(("eth0".into(), PathBuf::from("/tmp/ena.txt")))
        );
        // Only the first '=' separates: the path may hold more.
        assert_eq!(
            parse_counters_arg("ens5=/tmp/a=b"),
            Ok(("ens5".into(), PathBuf::from("/tmp/a=b")))
        );
        for bad in [
            "eth0",
            "=/tmp/x",
            "eth0=",
            "a/b=/x",
            "averyveryverylongname=/x",
            "a b=/x",
        ] {
            let e = parse_counters_arg(bad).unwrap_err();
            assert!(
                e.contains("IFACE=PATH") || e.contains("interface"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn file_source_reads_deltas_and_survives_a_malformed_file() {
        let dir = Scratch::new("file");
        let path = dir.write("ena.txt", &ena_text(474, 10));
        let mut r = AllowanceReader::new("eth0", CounterSource::File(path.clone()));
        let s = sample(r.read());
        assert_eq!(s.source, format!("file:{}", path.display()));
        assert_eq!(s.totals.bw_in_allowance_exceeded, Some(474));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));

        dir.write("ena.txt", &ena_text(474, 60));
        assert_eq!(sample(r.read()).delta.bw_out_allowance_exceeded, Some(50));

        // A half-written file: the failure names file and line, the last
        // good totals stay, nothing grows.
        dir.write(
            "ena.txt",
            "NIC statistics:\n     tx_timeout: 0\n     bw_in_allowance_exc",
        );
        let s = sample(r.read());
        assert_eq!(s.read_failures, 1);
        let err = s.last_error.expect("error kept");
        assert_eq!(
            err,
            format!(
                "{}:3: expected \"name: value\", found \"bw_in_allowance_exc\"",
                path.display()
            )
        );
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(60));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));

        // Gone altogether: another failure.
        fs::remove_file(&path).unwrap();
        let s = sample(r.read());
        assert_eq!(s.read_failures, 2);
        assert!(s.last_error.unwrap().contains("cannot read"));

        // Back: growth from the last good read, error cleared.
        dir.write("ena.txt", &ena_text(475, 90));
        let s = sample(r.read());
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(30));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(1));
        assert_eq!((s.read_failures, s.last_error), (2, None));
    }

    #[test]
    fn a_bad_line_is_skipped_and_flagged_the_other_counters_still_read() {
        let dir = Scratch::new("badline");
        let path = dir.write("ena.txt", &ena_text(10, 100));
        let mut r = AllowanceReader::new("eth0", CounterSource::File(path.clone()));
        sample(r.read());
        let text = ena_text(12, 150).replace("tx_timeout: 0", "tx_timeout: n/a");
        dir.write("ena.txt", &text);
        let s = sample(r.read());
        assert_eq!(s.last_error, None);
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(50));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(2));
        assert_eq!(s.skipped_lines, 1);
        assert_eq!(
            s.skipped.as_deref(),
            Some(
                format!(
                    "1 line skipped: {}:2: value \"n/a\" is not an unsigned integer",
                    path.display()
                )
                .as_str()
            )
        );
        // A clean read clears the note; the count stays.
        dir.write("ena.txt", &ena_text(12, 160));
        let s = sample(r.read());
        assert_eq!((s.skipped_lines, s.skipped), (1, None));
    }

    #[test]
    fn counter_paths_that_cannot_be_counter_files() {
        let dir = Scratch::new("paths");
        let file = dir.write("ena.txt", &ena_text(0, 0));
        assert_eq!(counter_path_problem(&file), None);
        let missing = dir.0.join("nope.txt");
        assert_eq!(
            counter_path_problem(&missing),
            Some(format!("{} does not exist", missing.display()))
        );
        assert!(counter_path_problem(&dir.0)
            .unwrap()
            .ends_with("is a directory, not a counter file"));
        assert!(counter_path_problem(Path::new("/dev/zero"))
            .unwrap()
            .starts_with("/dev/zero is not a regular file"));
    }

    #[test]
    fn file_source_zeroed_read_then_reset() {
        let dir = Scratch::new("zero");
        let path = dir.write("ena.txt", &ena_text(100, 200));
        let mut r = AllowanceReader::new("eth0", CounterSource::File(path));
        sample(r.read());
        dir.write("ena.txt", &ena_text(0, 0));
        let s = sample(r.read());
        assert_eq!((s.zeroed_reads, s.resets), (1, 0));
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(200));
        dir.write("ena.txt", &ena_text(0, 0));
        let s = sample(r.read());
        assert_eq!((s.zeroed_reads, s.resets), (1, 1));
        dir.write("ena.txt", &ena_text(3, 7));
        let s = sample(r.read());
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(7));
    }

    #[test]
    fn file_without_allowance_stats_is_unavailable() {
        let dir = Scratch::new("none");
        let path = dir.write(
            "virtio.txt",
            "NIC statistics:\n     rx_queue_0_packets: 5\n     tx_queue_0_packets: 6\n",
        );
        let mut r = AllowanceReader::new("eth0", CounterSource::File(path.clone()));
        assert_eq!(
            r.read(),
            AllowanceStatus::Unavailable {
                reason: format!(
                    "eth0: {} reports no allowance counters (2 other statistics)",
                    path.display()
                )
            }
        );
    }

    #[test]
    fn ioctl_on_loopback_is_unavailable_not_a_failure() {
        let mut r = AllowanceReader::new("lo", CounterSource::Ioctl);
        for _ in 0..2 {
            match r.read() {
                AllowanceStatus::Unavailable { reason } => assert_eq!(
                    reason,
                    "lo: driver unknown reports no allowance counters (no ethtool \
                     statistics: lo: SIOCETHTOOL GSTATS: Operation not supported)"
                ),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn ioctl_on_a_missing_interface_counts_failures() {
        let mut r = AllowanceReader::new("nosuchif0", CounterSource::Ioctl);
        sample(r.read());
        let s = sample(r.read());
        assert_eq!(s.read_failures, 2);
        assert_eq!(
            s.last_error.as_deref(),
            Some("nosuchif0: SIOCETHTOOL GSSET_INFO: No such device")
        );
    }
}
