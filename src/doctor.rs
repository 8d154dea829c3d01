//! `throttlescope doctor`: what will and won't work on this host, and why.

use std::fs;
use std::process::ExitCode;

use anyhow::Result;
use libbpf_rs::btf::types::Typedef;
use libbpf_rs::btf::Btf;

use crate::allowance::{AllowanceReader, CounterSource};
use crate::cli::DoctorArgs;
use crate::collector::{own_netns, CollectorConfig};
use crate::ifstats;
use crate::snapshot::AllowanceStatus;

/// The tracepoints the flow probes attach to, with what each one gives.
pub const TRACEPOINTS: &[(&str, &str)] = &[
    ("tcp_probe", "srtt, min_rtt, cwnd per incoming segment"),
    (
        "tcp_retransmit_skb",
        "retransmits (and failed retransmit attempts)",
    ),
    ("tcp_cong_state_set", "time in each congestion state"),
    ("inet_sock_set_state", "flow open and state changes"),
    ("tcp_destroy_sock", "flow close with final counters"),
    ("tcp_sendmsg_locked", "owner process of each flow"),
];

/// Linux capabilities the observer uses (bit numbers from capability.h).
const CAPS: &[(&str, u32, &str)] = &[
    ("CAP_BPF", 39, "load BPF programs and maps"),
    ("CAP_PERFMON", 38, "attach tracing programs"),
];
// CAP_NET_ADMIN is not needed: the kernel answers ETHTOOL_GSTATS, GSSET_INFO,
// GSTRINGS and GDRVINFO for any user (measured as `nobody` with only CAP_BPF
// and CAP_PERFMON, see docs/fleet.md).
const CAP_SYS_ADMIN: u32 = 21;

struct Report {
    lines: Vec<(bool, String)>,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        self.lines.push((ok, what.into()));
        ok
    }
}

pub fn run(args: &DoctorArgs) -> Result<ExitCode> {
    let mut r = Report { lines: Vec::new() };

    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version = parse_kernel_version(release.trim());
    r.check(
        version.is_some_and(|v| v >= (5, 11)),
        format!(
            "kernel {} (tp_btf, sk_storage in tracing and BPF iterators need 5.11+)",
            release.trim()
        ),
    );

    let btf = Btf::from_vmlinux();
    let btf_ok = r.check(
        btf.is_ok(),
        match &btf {
            Ok(_) => "BTF at /sys/kernel/btf/vmlinux".to_string(),
            Err(e) => format!("no kernel BTF ({e}): CO-RE programs cannot load"),
        },
    );
    let mut all_tp = btf_ok;
    if let Ok(btf) = &btf {
        for (tp, gives) in TRACEPOINTS {
            let found = btf
                .type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))
                .is_some();
            all_tp &= r.check(
                found,
                format!(
                    "tracepoint {tp}: {}",
                    if found { *gives } else { "missing, so no " }
                ) + if found { "" } else { gives },
            );
        }
    }

    let caps = effective_caps();
    let root_like = caps & (1 << CAP_SYS_ADMIN) != 0;
    let mut caps_ok = true;
    for (name, bit, why) in CAPS {
        let has = caps & (1u64 << bit) != 0 || root_like;
        caps_ok &= r.check(has, format!("{name}: {why}"));
    }

    let bpf_stats = fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    r.lines.push((
        true,
        format!(
            "kernel.bpf_stats_enabled = {} (1 adds per-program run time to the health block; optional)",
            u8::from(bpf_stats)
        ),
    ));

    match own_netns() {
        Ok(ino) => r
            .lines
            .push((true, format!("observing network namespace {ino}"))),
        Err(e) => {
            r.check(false, format!("cannot read this network namespace: {e}"));
        }
    }
    match ifstats::interfaces(&[]) {
        Ok(names) if names.is_empty() => r.lines.push((true, "no interfaces besides lo".into())),
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
                r.check(
                    readable,
                    format!(
                        "interface {n}: driver {driver}, counters {}; allowance counters: {allowance}",
                        if readable { "readable" } else { "NOT readable" },
                    ),
                );
            }
        }
        Err(e) => {
            r.check(false, format!("cannot list interfaces: {e:#}"));
        }
    }

    let mut load_ok = true;
    if !args.no_load && btf_ok {
        let trial = crate::collector::Collector::start(CollectorConfig {
            events: false,
            ..Default::default()
        });
        load_ok = r.check(
            trial.is_ok(),
            match &trial {
                Ok(_) => "trial load and attach of the flow probes: ok".to_string(),
                Err(e) => format!("trial load of the flow probes failed: {e:#}"),
            },
        );
    }

    for (ok, line) in &r.lines {
        println!("{} {line}", if *ok { "[ok]  " } else { "[FAIL]" });
    }
    let possible = btf_ok && all_tp && caps_ok && load_ok;
    println!(
        "\n{}",
        if possible {
            "Observing is possible here."
        } else {
            "Observing is NOT possible here: see the [FAIL] lines above."
        }
    );
    Ok(if possible {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn parse_kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(parse_kernel_version("5.10.0"), Some((5, 10)));
        assert_eq!(parse_kernel_version("garbage"), None);
    }
}
