//! `throttlescope capacity`: each broker's network capacity for Kafka's
//! rebalancers, from its instance type's baseline less a margin
//! (model/capacity.rs makes the figures and the text). Here: which brokers
//! and types (this host from DMI, `--instance-type`, `--brokers`, or a
//! recording's host through the report), and a bad flag as a usage error.

use std::io::Write;

use anyhow::{Context, Result};

use crate::commands::cli::{CapacityArgs, CapacityFormat};
use crate::model::capacity::{self, BrokerCapacity};
use crate::model::instance::{HostIdentity, SpecTable};
use crate::shared::usage_error::UsageError;

pub fn run(args: &CapacityArgs) -> Result<()> {
    let out = render(args, &crate::collect::instance::this_host())?;
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match lock.write_all(out.as_bytes()).and_then(|_| lock.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

fn usage(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

/// What `args` ask for, on a host that says `host` about itself.
pub(crate) fn render(args: &CapacityArgs, host: &HostIdentity) -> Result<String> {
    let table = match &args.instance_specs {
        Some(path) => SpecTable::read(path).map_err(usage)?,
        None => SpecTable::built_in(),
    };
    let mut brokers = brokers(args, host, &table)?;
    for b in &mut brokers {
        b.margin_pct = args.margin;
        if let Some((out, inb)) = args.baseline {
            b.out_bps = out;
            b.in_bps = inb;
            b.from = "--baseline".to_string();
        }
    }
    match args.format {
        CapacityFormat::Table => Ok(capacity::table(&brokers)),
        CapacityFormat::Strimzi => capacity::strimzi_yaml(&brokers).map_err(usage),
        CapacityFormat::CruiseControl => {
            let disk = args.disk_mb.ok_or_else(|| {
                usage(
                    "--format cruise-control needs --disk-mb MB: Cruise Control's resolver \
                     requires each broker's disk capacity (MB), which the instance type does \
                     not tell"
                        .to_string(),
                )
            })?;
            capacity::cruise_control_json(&brokers, disk, args.num_cores).map_err(usage)
        }
    }
}

fn brokers(
    args: &CapacityArgs,
    host: &HostIdentity,
    table: &SpecTable,
) -> Result<Vec<BrokerCapacity>> {
    let lookup = |id: Option<u32>, t: &str, what: &str| {
        table
            .get(t)
            .map(|s| BrokerCapacity::published(id, s, table, args.margin))
            .ok_or_else(|| {
                usage(format!(
                    "{what} {t}: not in the instance specs ({}); give --baseline RATE or a \
                     table with it (--instance-specs FILE)",
                    table.origin
                ))
            })
    };
    let list = match (&args.brokers, &args.brokers_file) {
        (Some(s), _) => {
            Some(capacity::parse_brokers(s).map_err(|e| usage(format!("--brokers: {e}")))?)
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("--brokers-file {}: {e}", path.display())))?;
            Some(
                capacity::parse_brokers(&text)
                    .map_err(|e| usage(format!("--brokers-file {}: {e}", path.display())))?,
            )
        }
        (None, None) => None,
    };
    if let Some(list) = list {
        return list
            .iter()
            .map(|(id, t)| lookup(Some(*id), t, &format!("broker {id}:")))
            .collect();
    }
    if !args.recording.is_empty() {
        return from_recording(args, table).map(|b| vec![b]);
    }
    if let Some(t) = &args.instance_type {
        return Ok(vec![lookup(
            None,
            &t.to_ascii_lowercase(),
            "--instance-type",
        )?]);
    }
    match host {
        HostIdentity::Ec2(t) => Ok(vec![lookup(None, t, "this host's type (DMI)")?]),
        HostIdentity::Other { vendor, .. } => Err(usage(format!(
            "not an EC2 instance (DMI vendor {vendor:?}): give --instance-type TYPE, --brokers \
             ID=TYPE,... or --recording FILE"
        ))),
        HostIdentity::Unknown(why) => Err(usage(format!(
            "this host's instance type is unknown ({why}): give --instance-type TYPE, \
             --brokers ID=TYPE,... or --recording FILE"
        ))),
    }
}

/// The recorded host: the report's right-sizing has its capacity, and the
/// measured one where enforcement showed another baseline.
fn from_recording(args: &CapacityArgs, table: &SpecTable) -> Result<BrokerCapacity> {
    use crate::report::{build, ReportFilters, ReportRequest};
    let none: [String; 0] = [];
    let filters = ReportFilters::parse(
        &none,
        &none,
        None,
        None,
        crate::model::workload::WorkloadFilter::new(&none, &none, &none)
            .map_err(anyhow::Error::msg)?,
    )?;
    let report = build(ReportRequest {
        files: &args.recording,
        thresholds: &none,
        filters,
        top: 0,
        baseline: Default::default(),
        instance_specs: args.instance_specs.as_ref().map(|_| table.clone()),
    })?;
    let s = &report.right_sizing;
    let Some(published) = s.capacity.clone() else {
        return Err(usage(format!(
            "the recording names no instance type with a baseline in the instance specs{}: \
             give --instance-type TYPE instead",
            s.note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )));
    };
    match (&s.measured, args.measured) {
        (Some(m), true) if m.differs(published.out_bps, published.in_bps) => {
            Ok(m.capacity(&published))
        }
        (_, true) => {
            crate::stderr_line!(
                "throttlescope: the recording measured no baseline that differs from the \
                 published one (no enforcement episode, or within 5%): the published one is used"
            );
            Ok(published)
        }
        (Some(m), false) if m.differs(published.out_bps, published.in_bps) => {
            crate::stderr_line!(
                "throttlescope: {}",
                crate::shared::terminal_text::inert_lines(&format!(
                    "the recording measured another baseline: {} (--measured uses it)",
                    m.capacity(&published).line()
                ))
            );
            Ok(published)
        }
        _ => Ok(published),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(argv: &[&str]) -> CapacityArgs {
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: CapacityArgs,
        }
        let mut v = vec!["capacity"];
        v.extend_from_slice(argv);
        P::try_parse_from(v).unwrap().a
    }

    #[test]
    fn this_host_from_dmi_or_a_named_type_or_a_list() {
        let ec2 = HostIdentity::Ec2("m5.2xlarge".into());
        let t = render(&args(&[]), &ec2).unwrap();
        assert!(t.contains("m5.2xlarge") && t.contains("244140"), "{t}");
        assert!(
            t.contains("published, built-in table, retrieved 2026-11-25"),
            "{t}"
        );
        let kvm = HostIdentity::Other {
            vendor: "QEMU".into(),
            product: "pc".into(),
        };
        let e = render(&args(&[]), &kvm).unwrap_err().to_string();
        assert!(
            e.contains("not an EC2 instance") && e.contains("--instance-type"),
            "{e}"
        );
        let t = render(
            &args(&["--instance-type", "I3EN.xlarge", "--margin", "0"]),
            &kvm,
        )
        .unwrap();
        // 4.2 Gb/s = 525,000,000 B/s = 512,695.3 KiB/s.
        assert!(t.contains("512695"), "{t}");
        assert!(t.contains("retrieved 2026-08-18"), "{t}");
        let e = render(&args(&["--instance-type", "m5.huge"]), &kvm).unwrap_err();
        assert!(e.to_string().contains("m5.huge"), "{e}");
        let e = render(&args(&["--brokers", "1=m5.large,2=m9.nope"]), &kvm).unwrap_err();
        assert!(e.to_string().contains("broker 2: m9.nope"), "{e}");
    }

    #[test]
    fn cruise_control_needs_the_disk_and_takes_the_flags() {
        let kvm = HostIdentity::Unknown("no DMI".into());
        let a = args(&[
            "--brokers",
            "1=m5.2xlarge,2=r6i.xlarge,3=c6gn.xlarge",
            "--format",
            "cruise-control",
        ]);
        let e = render(&a, &kvm).unwrap_err().to_string();
        assert!(e.contains("--disk-mb"), "{e}");
        let a = args(&[
            "--brokers",
            "1=m5.2xlarge,2=r6i.xlarge,3=c6gn.xlarge",
            "--format",
            "cruise-control",
            "--disk-mb",
            "500000",
            "--margin",
            "25",
        ]);
        let v: serde_json::Value = serde_json::from_str(&render(&a, &kvm).unwrap()).unwrap();
        // c6gn.xlarge: 6.3 Gb/s * 0.75 / 8 / 1024 = 576,782.2 KiB/s.
        assert_eq!(v["brokerCapacities"][2]["capacity"]["NW_IN"], "576782");
        let a = args(&[
            "--instance-type",
            "m5.xlarge",
            "--baseline",
            "1.6G",
            "--format",
            "strimzi",
        ]);
        let y = render(&a, &kvm).unwrap();
        // 1.6 Gb/s * 0.8 / 8 / 1024 = 156,250 KiB/s.
        assert!(
            y.contains("inboundNetwork: 156250KiB/s") && y.contains("--baseline"),
            "{y}"
        );
    }
}
