//! `throttlescope doctor`: what will and won't work on this host, and why.

use std::fs;
use std::process::ExitCode;

use anyhow::Result;
use libbpf_rs::btf::Btf;

use crate::collect::allowance::{AllowanceReader, CounterSource};
use crate::collect::collector::CollectorConfig;
use crate::collect::ifstats;
use crate::collect::netns;
use crate::collect::probes::flows::FLOW_PROGRAMS;
use crate::collect::probes::hostq::HOSTQ_PROGRAMS;
use crate::collect::probes::load::{self, NotLoaded, ProgramSpec};
use crate::commands::cli::DoctorArgs;
use crate::model::snapshot::AllowanceStatus;

/// Linux capabilities the observer uses (bit numbers from capability.h).
const CAPS: &[(&str, u32, &str)] = &[
    ("CAP_BPF", 39, "load BPF programs and maps"),
    ("CAP_PERFMON", 38, "attach tracing programs"),
];
// CAP_NET_ADMIN is not needed: the kernel answers ETHTOOL_GSTATS, GSSET_INFO,
// GSTRINGS and GDRVINFO for any user (measured as `nobody` with only CAP_BPF
// and CAP_PERFMON, see docs/fleet.md).
const CAP_SYS_ADMIN: u32 = 21;

/// How one line of the report counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Ok,
    /// Observing is not possible.
    Fail,
    /// Observing works, with this feature missing or degraded.
    Lost,
    /// Worth knowing; nothing missing for sure.
    Warn,
}

struct Report {
    lines: Vec<(Mark, String)>,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        self.push(if ok { Mark::Ok } else { Mark::Fail }, what);
        ok
    }

    fn push(&mut self, mark: Mark, what: impl Into<String>) {
        self.lines.push((mark, what.into()));
    }

    fn count(&self, mark: Mark) -> usize {
        self.lines.iter().filter(|(m, _)| *m == mark).count()
    }
}

/// Every program with a tracepoint: flow probes, then host-queue probes.
fn all_programs() -> impl Iterator<Item = &'static ProgramSpec> {
    FLOW_PROGRAMS.iter().chain(HOSTQ_PROGRAMS.iter())
}

/// Each program's tracepoint, checked by name and by signature (the
/// argument count of the kernel's `btf_trace_<tp>` prototype).
fn check_tracepoints(r: &mut Report, btf: &Btf<'_>) {
    for spec in all_programs() {
        let Some(tp) = spec.tracepoint else { continue };
        let kind = if spec.required {
            "required"
        } else {
            "optional"
        };
        let (min, max) = spec.args;
        match load::tracepoint_args(btf, tp) {
            None if spec.required => r.push(
                Mark::Fail,
                format!("tracepoint {tp} ({kind}): absent from this kernel, so no {}", spec.gives),
            ),
            None => r.push(
                Mark::Lost,
                format!("tracepoint {tp} ({kind}): absent from this kernel; missing: {}", spec.lost),
            ),
            Some(n) if n < min => r.push(
                if spec.required { Mark::Fail } else { Mark::Lost },
                format!(
                    "tracepoint {tp} ({kind}): {n} arguments, the program reads {min}: it will be rejected{}",
                    if spec.required { String::new() } else { format!("; missing: {}", spec.lost) }
                ),
            ),
            Some(n) if n > max => r.push(
                Mark::Warn,
                format!(
                    "tracepoint {tp} ({kind}): {n} arguments, newer than the {max} this build knows; \
                     it loads, but figures from the new arguments are not read"
                ),
            ),
            Some(n) => r.push(
                Mark::Ok,
                format!("tracepoint {tp} ({kind}, {n} arguments): {}", spec.gives),
            ),
        }
    }
}

pub fn run(args: &DoctorArgs) -> Result<ExitCode> {
    let mut r = Report { lines: Vec::new() };

    let release = load::kernel_release();
    let floor_ok = r.check(
        load::check_kernel_floor(&release).is_ok(),
        match load::check_kernel_floor(&release) {
            Ok(()) => format!(
                "kernel {release} (floor {}.{}: {}; tested on 6.1, 6.12, 6.18)",
                load::KERNEL_FLOOR.0,
                load::KERNEL_FLOOR.1,
                load::KERNEL_FLOOR_WHY
            ),
            Err(e) => format!("{e:#}"),
        },
    );

    let btf = Btf::from_vmlinux();
    let btf_ok = r.check(
        btf.is_ok(),
        match &btf {
            Ok(_) => "BTF at /sys/kernel/btf/vmlinux".to_string(),
            Err(e) => format!("no kernel BTF ({e}): CO-RE programs cannot load"),
        },
    );
    if let Ok(btf) = &btf {
        check_tracepoints(&mut r, btf);
    }

    let caps = effective_caps();
    let root_like = caps & (1 << CAP_SYS_ADMIN) != 0;
    for (name, bit, why) in CAPS {
        let has = caps & (1u64 << bit) != 0 || root_like;
        r.check(has, format!("{name}: {why}"));
    }

    let bpf_stats = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    r.push(
        Mark::Ok,
        format!(
            "kernel.bpf_stats_enabled = {} (1 adds per-program run time to the health block; optional)",
            u8::from(bpf_stats)
        ),
    );

    match netns::own() {
        Ok(ino) => r.push(Mark::Ok, format!("observing network namespace {ino}")),
        Err(e) => {
            r.check(false, format!("cannot read this network namespace: {e}"));
        }
    }
    r.push(
        Mark::Ok,
        if crate::collect::nat::NatLookup::new().available() {
            "with --all-netns, a pod's flow to a service address (a ClusterIP) takes its \
             backend's route, or lo where the pod's sidecar redirects it: conntrack's \
             translations are read through ctnetlink"
        } else {
            "with --all-netns, a pod's flow to a service address (a ClusterIP) takes that \
             address's route, not its backend's: this kernel has no conntrack or no ctnetlink \
             loaded (nf_conntrack_netlink; not loaded by throttlescope)"
        },
    );
    match ifstats::interfaces(&[]) {
        Ok(names) if names.is_empty() => r.push(Mark::Ok, "no interfaces besides lo"),
        Ok(names) => {
            for n in names {
                let driver = ifstats::driver(&n).unwrap_or_else(|| "unknown".into());
                let readable = ifstats::read_counters(&n).is_ok();
                // The reader the observer uses decides, not the driver name.
                let allowance = match AllowanceReader::new(&n, CounterSource::Ioctl).read() {
                    AllowanceStatus::Read(_) => "readable through SIOCETHTOOL".to_string(),
                    AllowanceStatus::Unavailable { reason } => {
                        format!("unavailable ({reason}; give --counters to use a counters file)")
                    }
                };
                let version = crate::collect::allowance::ethtool::driver_version(&n);
                r.check(
                    readable,
                    format!(
                        "interface {n}: driver {driver}{}, counters {}; allowance counters: {allowance}",
                        version.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
                        if readable { "readable" } else { "NOT readable" },
                    ),
                );
                let known = version.as_deref().and_then(|v| {
                    crate::collect::allowance::driver_versions::ena_failed_read_behaviour(
                        &driver, v,
                    )
                });
                if let Some((bad, text)) = known {
                    r.push(if bad { Mark::Warn } else { Mark::Ok }, text);
                }
            }
        }
        Err(e) => {
            r.check(false, format!("cannot list interfaces: {e:#}"));
        }
    }

    check_instance(&mut r);

    let mut load_ok = true;
    if !args.no_load && btf_ok && floor_ok {
        let trial = crate::collect::collector::Collector::start(CollectorConfig {
            events: false,
            ..Default::default()
        });
        match &trial {
            Ok(c) => {
                let lost = c.not_loaded();
                r.push(
                    Mark::Ok,
                    format!(
                        "trial load and attach of the probes: ok{}",
                        if lost.is_empty() {
                            String::new()
                        } else {
                            format!(", without {} optional program(s)", lost.len())
                        }
                    ),
                );
                r.push(Mark::Ok, format!("flow dump: {}", c.flow_dump_path()));
                for (spec, why) in lost {
                    if matches!(why, NotLoaded::TracepointAbsent) {
                        continue; // already said by the tracepoint check
                    }
                    r.push(
                        Mark::Lost,
                        format!(
                            "program {} (optional) not loaded: {}; missing: {}",
                            spec.name,
                            why.describe(spec),
                            spec.lost
                        ),
                    );
                }
            }
            Err(e) => {
                load_ok = r.check(false, format!("trial load of the probes failed: {e:#}"));
            }
        }
    }

    for (mark, line) in &r.lines {
        let tag = match mark {
            Mark::Ok => "[ok]  ",
            Mark::Fail => "[FAIL]",
            Mark::Lost => "[lost]",
            Mark::Warn => "[warn]",
        };
        println!("{tag} {}", crate::shared::terminal_text::inert_lines(line));
    }
    let possible = r.count(Mark::Fail) == 0 && load_ok;
    let lost = r.count(Mark::Lost);
    println!(
        "\n{}",
        if !possible {
            "Observing is NOT possible here: see the [FAIL] lines above.".to_string()
        } else if lost > 0 {
            format!("Observing is possible here, with fewer features: see the {lost} [lost] line(s) above.")
        } else {
            "Observing is possible here.".to_string()
        }
    );
    Ok(if possible {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The instance type and the baseline headroom will be measured against.
fn check_instance(r: &mut Report) {
    use crate::model::instance::HostIdentity;
    let host = crate::collect::instance::this_host();
    let how = "give `--instance-type TYPE` (looked up in the specs table) or `--baseline RATE` \
               (e.g. 1.25G) to watch, record or report to plan against one";
    match crate::commands::baseline::for_live(&Default::default()) {
        Ok(plan) => match (&host, &plan.baseline) {
            (_, Some(b)) => r.push(Mark::Ok, format!("instance: {}", b.describe())),
            (HostIdentity::Ec2(t), None) => r.push(
                Mark::Warn,
                format!(
                    "instance: EC2 {t}, not in the built-in specs table: no baseline known, \
                     so no headroom; {how}"
                ),
            ),
            (HostIdentity::Other { vendor, product }, None) => r.push(
                Mark::Warn,
                format!(
                    "instance: not an EC2 instance (DMI: {vendor:?}, {product:?}): no baseline \
                     known, so no headroom; {how}"
                ),
            ),
            (HostIdentity::Unknown(why), None) => r.push(
                Mark::Warn,
                format!(
                    "instance: not an EC2 instance (no DMI to name a type: {why}): no baseline \
                     known, so no headroom; {how}"
                ),
            ),
        },
        Err(e) => r.push(Mark::Warn, format!("instance: {e:#}")),
    }
}

/// CapEff from /proc/self/status.
fn effective_caps() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}
