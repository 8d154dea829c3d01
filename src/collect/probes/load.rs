//! Loading a BPF object whose programs are either required or optional.
//!
//! libbpf loads a skeleton's programs together: one rejected program fails
//! the whole object. So before loading, optional programs whose tracepoint
//! the running kernel does not have (no `btf_trace_<name>` in its BTF) get
//! autoload off; if the kernel still rejects an optional program, the
//! skeleton is opened again with that program's autoload off and the load
//! retried. A required program failing is an error that names the program
//! and quotes the verifier's own last lines, captured from libbpf's log.

use std::collections::BTreeMap;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Mutex;

use libbpf_rs::btf::types::{FuncProto, Typedef};
use libbpf_rs::btf::{Btf, BtfType};
use libbpf_rs::{OpenObject, PrintLevel};

use crate::model::snapshot::ProgramHealth;

/// One BPF program and what depends on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProgramSpec {
    /// The program's function name in bpf/*.bpf.c.
    pub name: &'static str,
    /// The tracepoint it attaches to (`tp_btf/<tracepoint>`); None for
    /// iterators.
    pub tracepoint: Option<&'static str>,
    /// Required programs carry figures nothing else gives: without them
    /// observing is refused. Optional ones are dropped when the kernel lacks
    /// or rejects them.
    pub required: bool,
    /// The argument counts of the tracepoint the program handles (kernels
    /// differ; later arguments are read only under CO-RE type matches).
    pub args: (usize, usize),
    /// What it gives.
    pub gives: &'static str,
    /// What is missing without it, and any fallback that replaces it.
    pub lost: &'static str,
}

/// The oldest kernel the required programs load on, and why: tracing
/// programs call `bpf_sk_storage_get` (5.11) and the flow iterators call
/// `bpf_get_socket_cookie` (5.12). Tested: 6.1, 6.12, 6.18 (docs/kernels.md).
pub(crate) const KERNEL_FLOOR: (u32, u32) = (5, 12);
pub(crate) const KERNEL_FLOOR_WHY: &str =
    "tracing programs cannot call bpf_sk_storage_get before 5.11, \
     and BPF iterators cannot call bpf_get_socket_cookie before 5.12";

/// `major.minor` of a kernel release string (`6.1.0-28-amd64` -> (6, 1)).
pub(crate) fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The running kernel's release string.
pub(crate) fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Refuses, with the missing features named, a kernel below the floor:
/// better than libbpf's rejection of a helper call without context.
pub(crate) fn check_kernel_floor(release: &str) -> anyhow::Result<()> {
    match parse_kernel_version(release) {
        Some(v) if v < KERNEL_FLOOR => anyhow::bail!(
            "kernel {release} is too old: throttlescope needs Linux {}.{} or newer ({KERNEL_FLOOR_WHY})",
            KERNEL_FLOOR.0,
            KERNEL_FLOOR.1
        ),
        _ => Ok(()),
    }
}

/// The name of the test-only switch. Setting it to program names (comma
/// separated, with or without the `on_` prefix) makes the verifier reject
/// those optional programs on purpose, as an older kernel would. Tests only:
/// never set it otherwise.
pub const TEST_FAIL_ENV: &str = "THROTTLESCOPE_TEST_FAIL_PROGRAM";

/// The name of the test-only pause: milliseconds between raising the flow
/// dump's generation and reading the flows, which a loaded machine makes
/// by preempting the reading thread there. Tests only: never set it
/// otherwise.
pub const TEST_DUMP_PAUSE_ENV: &str = "THROTTLESCOPE_TEST_DUMP_PAUSE_MS";

/// The name of the test-only skip: every Nth run of `on_tcp_cong_state_set`
/// that moves an observed socket into Loss returns before it counts
/// anything, as a run the kernel skips without counting does
/// (docs/architecture.md, "Runs the kernel skips"). Tests only: never set
/// it otherwise.
pub const TEST_SKIP_LOSS_ENV: &str = "THROTTLESCOPE_TEST_SKIP_LOSS_EVERY";

/// The N of [`TEST_SKIP_LOSS_ENV`] (0, none, when unset or not a number).
pub(crate) fn test_skip_loss_every() -> u32 {
    std::env::var(TEST_SKIP_LOSS_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The pause [`TEST_DUMP_PAUSE_ENV`] asks for (none when unset, 0 or not a
/// number of milliseconds under 10 s).
pub(crate) fn test_dump_pause() -> Option<std::time::Duration> {
    let ms: u64 = std::env::var(TEST_DUMP_PAUSE_ENV)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (1..10_000)
        .contains(&ms)
        .then(|| std::time::Duration::from_millis(ms))
}

/// The programs named by [`TEST_FAIL_ENV`] (none when unset).
pub(crate) fn test_fail_programs() -> Vec<String> {
    std::env::var(TEST_FAIL_ENV)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s.starts_with("on_") {
                s.to_string()
            } else {
                format!("on_{s}")
            }
        })
        .collect()
}

/// The `test_reject` bitmask of a BPF object: bit N for each program in
/// `fail` whose health counter (in `counters`) is N.
pub(crate) fn test_reject_mask(fail: &[String], counters: &[(&str, u32)]) -> u32 {
    counters
        .iter()
        // Iterators have no `on_` prefix; the names given always get one.
        .filter(|(name, _)| {
            fail.iter()
                .any(|f| f == name || f.strip_prefix("on_") == Some(name))
        })
        .fold(0, |mask, (_, counter)| mask | (1 << counter))
}

/// Why a program is not attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotLoaded {
    /// The running kernel has no such tracepoint.
    TracepointAbsent,
    /// The kernel refused the program; the verifier's (or libbpf's) last lines.
    Rejected(String),
}

impl NotLoaded {
    pub(crate) fn describe(&self, spec: &ProgramSpec) -> String {
        match self {
            NotLoaded::TracepointAbsent => format!(
                "tracepoint {} does not exist in this kernel",
                spec.tracepoint.unwrap_or(spec.name)
            ),
            NotLoaded::Rejected(log) => format!("rejected by the kernel: {log}"),
        }
    }
}

/// The programs one load left out, by name.
pub(crate) type Dropped = BTreeMap<&'static str, NotLoaded>;

/// How the current attempt is to be opened: the programs left out so far.
pub(crate) struct Plan<'a> {
    pub dropped: &'a Dropped,
}

impl Plan<'_> {
    pub(crate) fn is_dropped(&self, name: &str) -> bool {
        self.dropped.contains_key(name)
    }

    /// Autoload off for every dropped program.
    pub(crate) fn apply(&self, object: &mut OpenObject) {
        for mut prog in object.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            if self.dropped.contains_key(name.as_str()) {
                prog.set_autoload(false);
            }
        }
    }
}

/// Whether the kernel's BTF has the tracepoint (`btf_trace_<tp>`).
pub(crate) fn tracepoint_exists(btf: &Btf<'_>, tp: &str) -> bool {
    btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))
        .is_some()
}

/// The number of arguments the kernel passes to the tracepoint's programs
/// (the `btf_trace_<tp>` prototype's parameters, less its leading `void *`).
pub(crate) fn tracepoint_args(btf: &Btf<'_>, tp: &str) -> Option<usize> {
    let td = btf.type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))?;
    let ptr: BtfType<'_> = td.next_type()?;
    let proto = ptr.next_type()?.skip_mods_and_typedefs();
    let proto = FuncProto::try_from(proto).ok()?;
    Some(proto.len().saturating_sub(1))
}

/// Loads with `load`, leaving out optional programs the kernel lacks or
/// rejects. `load` opens the skeleton afresh, applies the plan (and its own
/// settings), and loads. Returns the loaded skeleton and what was left out.
pub(crate) fn load_with_fallback<L>(
    what: &str,
    specs: &[ProgramSpec],
    btf: Option<&Btf<'_>>,
    mut load: impl FnMut(&Plan<'_>) -> anyhow::Result<L>,
) -> anyhow::Result<(L, Dropped)> {
    let mut dropped = Dropped::new();
    if let Some(btf) = btf {
        for spec in specs.iter().filter(|s| !s.required) {
            if let Some(tp) = spec.tracepoint {
                if !tracepoint_exists(btf, tp) {
                    dropped.insert(spec.name, NotLoaded::TracepointAbsent);
                }
            }
        }
    }
    loop {
        let (result, log) = with_captured_log(|| load(&Plan { dropped: &dropped }));
        let err = match result {
            Ok(l) => return Ok((l, dropped)),
            Err(e) => e,
        };
        let failed = failed_program(&log);
        let tail = verifier_tail(&log, failed.as_deref());
        let spec = failed
            .as_deref()
            .and_then(|f| specs.iter().find(|s| s.name == f));
        match spec {
            Some(spec) if !spec.required && !dropped.contains_key(spec.name) => {
                let why = if tail.trim().is_empty() {
                    // Refused before the verifier said anything: by errno.
                    format!("{err:#}{}", refusal_hint(&err, &log))
                } else {
                    tail
                };
                dropped.insert(spec.name, NotLoaded::Rejected(why));
            }
            Some(spec) => {
                anyhow::bail!(
                    "loading the {what} BPF programs: required program {} ({}) was refused by the kernel ({err:#}){}: {tail}",
                    spec.name,
                    spec.gives,
                    privilege_hint(&err, &log)
                );
            }
            None => {
                anyhow::bail!(
                    "loading the {what} BPF programs failed ({err:#}){}{}",
                    privilege_hint(&err, &log),
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!(": {tail}")
                    }
                );
            }
        }
    }
}

/// Privileges are the cause only of EPERM (a verifier rejection is EACCES
/// or EINVAL, and says nothing about privileges).
fn privilege_hint(err: &anyhow::Error, log: &[String]) -> &'static str {
    let eperm = format!("{err:#}").contains("os error 1)")
        || log.iter().any(|l| l.contains("Operation not permitted"));
    if eperm {
        "; EPERM: needs root or CAP_BPF+CAP_PERFMON (see `throttlescope doctor`)"
    } else {
        ""
    }
}

/// For an optional program refused with EPERM while the others loaded:
/// the privileges were there, so a policy refused this kind of program.
fn refusal_hint(err: &anyhow::Error, log: &[String]) -> &'static str {
    if privilege_hint(err, log).is_empty() {
        ""
    } else {
        " (EPERM before verification while the other programs loaded: a BPF LSM policy \
         refuses this program type here)"
    }
}

static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// One capture at a time: the libbpf print callback is process-wide.
static CAPTURE: Mutex<()> = Mutex::new(());

fn capture_line(_level: PrintLevel, msg: String) {
    if let Ok(mut log) = LOG.lock() {
        log.extend(msg.lines().map(str::to_string));
    }
}

/// Runs `f` with libbpf's warnings captured (instead of printed without
/// context on stderr); returns its result and the captured lines.
fn with_captured_log<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let _one = CAPTURE.lock().unwrap_or_else(|e| e.into_inner());
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let previous = libbpf_rs::set_print(Some((PrintLevel::Warn, capture_line)));
    let out = f();
    libbpf_rs::set_print(previous);
    let log = std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()));
    (out, log)
}

/// The first program libbpf names in a failure line (`prog 'NAME': ...`).
pub(crate) fn failed_program(log: &[String]) -> Option<String> {
    log.iter().find_map(|l| {
        let rest = &l[l.find("prog '")? + 6..];
        let name = &rest[..rest.find('\'')?];
        let after = &rest[name.len()..];
        (after.contains("fail") || after.contains("BEGIN PROG LOAD LOG")).then(|| name.to_string())
    })
}

/// The verifier's own last lines for `prog` (between libbpf's BEGIN/END
/// PROG LOAD LOG markers); without a verifier log, libbpf's failure lines.
pub(crate) fn verifier_tail(log: &[String], prog: Option<&str>) -> String {
    const KEEP: usize = 4;
    let begin = log.iter().position(|l| {
        l.contains("BEGIN PROG LOAD LOG") && prog.is_none_or(|p| l.contains(&format!("'{p}'")))
    });
    if let Some(b) = begin {
        let body: Vec<&str> = log[b + 1..]
            .iter()
            .take_while(|l| !l.contains("END PROG LOAD LOG"))
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with("processed "))
            .collect();
        let body: Vec<String> = body
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let from = body.len().saturating_sub(KEEP);
        return body[from..].join(" | ");
    }
    let lines: Vec<&str> = log
        .iter()
        .map(|l| l.trim().trim_start_matches("libbpf: "))
        .filter(|l| l.contains("fail") || l.contains("error") || l.contains("doesn't"))
        .collect();
    let from = lines.len().saturating_sub(KEEP);
    lines[from..].join(" | ")
}

/// Which sockets to observe.
#[derive(Debug, Clone, Copy)]
pub enum NetnsFilter {
    /// Sockets of this network namespace (inode of /proc/self/ns/net).
    Only(u32),
    All,
}

/// The dropped programs of `specs`, in the specs' order.
pub(crate) fn not_loaded<'d>(
    specs: &'static [ProgramSpec],
    dropped: &'d Dropped,
) -> Vec<(&'static ProgramSpec, &'d NotLoaded)> {
    specs
        .iter()
        .filter_map(|s| dropped.get(s.name).map(|why| (s, why)))
        .collect()
}

/// A program's health: its stats when attached; when dropped, why and what
/// is missing.
pub(crate) fn health_of(
    object: &libbpf_rs::Object,
    specs: &[ProgramSpec],
    dropped: &Dropped,
    name: &str,
    events: u64,
) -> ProgramHealth {
    match (dropped.get(name), specs.iter().find(|s| s.name == name)) {
        (Some(why), Some(spec)) => ProgramHealth {
            name: name.trim_start_matches("on_").to_string(),
            attached: false,
            not_attached: Some(why.describe(spec)),
            lost: Some(spec.lost.to_string()),
            ..Default::default()
        },
        _ => program_health(object, name, events),
    }
}

/// One program's health: `events` as the program counted them, plus the
/// kernel's recursion misses and (with `kernel.bpf_stats_enabled`) run stats.
pub(crate) fn program_health(object: &libbpf_rs::Object, name: &str, events: u64) -> ProgramHealth {
    let info = object
        .progs()
        .find(|p| p.name() == name)
        .and_then(|p| prog_stats(p.as_fd().as_raw_fd()));
    ProgramHealth {
        name: name.trim_start_matches("on_").to_string(),
        events,
        attached: true,
        not_attached: None,
        lost: None,
        done_by: None,
        missed: info.map(|i| i.recursion_misses).unwrap_or(0),
        run_cnt: info.map(|i| i.run_cnt).unwrap_or(0),
        run_time_ns: info.map(|i| i.run_time_ns).unwrap_or(0),
    }
}

/// Kernel statistics of one loaded program.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgStats {
    /// The kernel's id of the program (bpftool prog show id N).
    pub id: u32,
    pub run_cnt: u64,
    pub run_time_ns: u64,
    pub recursion_misses: u64,
}

/// `bpf_prog_get_info_by_fd` for the program's id and the three counters
/// we report.
pub fn prog_stats(fd: i32) -> Option<ProgStats> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a valid, writable bpf_prog_info and `len` its size.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(ProgStats {
        id: info.id,
        run_cnt: info.run_cnt,
        run_time_ns: info.run_time_ns,
        recursion_misses: info.recursion_misses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn finds_the_rejected_program_and_the_verifier_tail() {
        let log = lines(
            "libbpf: prog 'on_tcp_retransmit_skb': BPF program load failed: -EACCES\n\
             libbpf: prog 'on_tcp_retransmit_skb': -- BEGIN PROG LOAD LOG --\n\
             reg type unsupported for arg#0 function on_tcp_retransmit_skb#5\n\
             0: R1=ctx() R10=fp0\n\
             ; int BPF_PROG(on_tcp_retransmit_skb, ...)\n\
             0: (79) r2 = *(u64 *)(r1 +16)\n\
             func 'tcp_retransmit_skb' doesn't have 3-th argument\n\
             invalid bpf_context access off=16 size=8\n\
             processed 1 insns (limit 1000000)\n\
             -- END PROG LOAD LOG --\n\
             libbpf: prog 'on_tcp_retransmit_skb': failed to load: -13\n\
             libbpf: failed to load object 'flows_bpf'",
        );
        assert_eq!(
            failed_program(&log).as_deref(),
            Some("on_tcp_retransmit_skb")
        );
        let tail = verifier_tail(&log, Some("on_tcp_retransmit_skb"));
        assert!(tail.ends_with(
            "func 'tcp_retransmit_skb' doesn't have 3-th argument | invalid bpf_context access off=16 size=8"
        ), "{tail}");
    }

    #[test]
    fn without_a_verifier_log_the_failure_lines_are_kept() {
        let log = lines(
            "libbpf: prog 'on_tcp_sendmsg_locked': failed to find kernel BTF type ID of 'tcp_sendmsg_locked': -ESRCH\n\
             libbpf: prog 'on_tcp_sendmsg_locked': failed to prepare load attributes: -3\n\
             libbpf: prog 'on_tcp_sendmsg_locked': failed to load: -3",
        );
        assert_eq!(
            failed_program(&log).as_deref(),
            Some("on_tcp_sendmsg_locked")
        );
        let tail = verifier_tail(&log, Some("on_tcp_sendmsg_locked"));
        assert!(
            tail.contains("failed to find kernel BTF type ID of 'tcp_sendmsg_locked'"),
            "{tail}"
        );
    }

    #[test]
    fn kernels_below_the_floor_are_refused_with_the_reason() {
        let e = check_kernel_floor("5.10.0-30-amd64")
            .unwrap_err()
            .to_string();
        assert!(e.contains("5.10.0-30-amd64") && e.contains("5.12"), "{e}");
        assert!(e.contains("bpf_sk_storage_get"), "{e}");
        assert!(check_kernel_floor("5.12.0").is_ok());
        assert!(check_kernel_floor("6.1.0-28-amd64").is_ok());
        assert_eq!(parse_kernel_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(parse_kernel_version("garbage"), None);
    }

    #[test]
    fn the_test_switch_sets_one_bit_per_named_program() {
        let counters = [("on_a", 1), ("on_b", 4), ("on_c", 0)];
        let fail = vec!["on_b".to_string(), "on_c".to_string(), "on_x".to_string()];
        assert_eq!(test_reject_mask(&fail, &counters), (1 << 4) | 1);
        assert_eq!(test_reject_mask(&[], &counters), 0);
    }

    #[test]
    fn map_failures_name_no_program() {
        let log = lines("libbpf: map 'flow_state': failed to create: -EPERM");
        assert_eq!(failed_program(&log), None);
    }

    #[test]
    fn running_kernel_prototypes_are_read_from_btf() {
        let Ok(btf) = Btf::from_vmlinux() else {
            panic!("this machine has BTF (docs/architecture.md): /sys/kernel/btf/vmlinux");
        };
        assert_eq!(tracepoint_args(&btf, "tcp_probe"), Some(2));
        assert_eq!(tracepoint_args(&btf, "tcp_destroy_sock"), Some(1));
        assert!(tracepoint_exists(&btf, "inet_sock_set_state"));
        assert!(!tracepoint_exists(&btf, "no_such_tracepoint_here"));
    }
}
