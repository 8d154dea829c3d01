//! A broker's network capacity for Kafka's rebalancers, from its instance
//! type's baseline less a margin, never from the burst: Cruise Control's
//! capacity file (`NW_IN`/`NW_OUT` in KiB/s per broker id), Strimzi's
//! `spec.cruiseControl.brokerCapacity` block and a plain table. Plain data
//! and text: `throttlescope capacity` (src/commands/capacity.rs) and the
//! report's right-sizing section both print these lines.
//!
//! Units: Cruise Control's `NW_IN`/`NW_OUT` are "KB/s" in its docs, but
//! its metrics divide bytes by 1024 (KiB/s); Strimzi writes its
//! `inboundNetwork` into Cruise Control's file as KiB/s too. So both are
//! given in KiB/s: bits/s / 8 / 1024, rounded down.

use serde::{Deserialize, Serialize};

use crate::model::instance::{InstanceSpec, SpecTable};
use crate::shared::units::rate_bits;

/// The margin below the baseline, percent, when `--margin` is not given.
pub const DEFAULT_MARGIN_PCT: f64 = 20.0;

/// Why the margin: said under every table.
pub const WHY_MARGIN: &str = "The capacity is the published baseline (what the instance can \
count on; the \"up to\" burst lasts minutes and is then enforced down to the baseline), less \
the margin: Kafka's byte rates count payload, the instance's allowance counts every byte on the \
wire (TCP/IP headers, TLS, replication's and clients' acknowledgements, and whatever else the \
host sends: metrics, logs, the controller). Cruise Control's goals keep their own headroom on \
top (network.*.capacity.threshold, 0.8 by default).";

/// A measured baseline differs from the published one when they are
/// further apart than this share of the published one.
pub const MEASURED_DIFFERS: f64 = 0.05;

/// One broker (or every broker: `broker_id` None) and its capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerCapacity {
    /// None: every broker (Cruise Control's default entry, broker -1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_id: Option<u32>,
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    /// The baselines the figures come from, bits/s, outbound and inbound.
    pub out_bps: f64,
    pub in_bps: f64,
    /// Where they came from: "published, built-in table, retrieved
    /// 2026-11-25", "measured in this recording", "--baseline".
    pub from: String,
    /// Percent below the baseline.
    pub margin_pct: f64,
}

impl BrokerCapacity {
    /// From the table's row for the type.
    pub fn published(
        broker_id: Option<u32>,
        spec: &InstanceSpec,
        table: &SpecTable,
        margin_pct: f64,
    ) -> Self {
        BrokerCapacity {
            broker_id,
            instance_type: spec.instance_type.clone(),
            vcpus: spec.vcpus,
            out_bps: spec.baseline_bps,
            in_bps: spec.baseline_bps,
            from: format!("published, {}", table.provenance_of(spec)),
            margin_pct,
        }
    }

    /// The capacity outbound and inbound, bits/s.
    pub fn capacity_bps(&self) -> (f64, f64) {
        let keep = 1.0 - self.margin_pct / 100.0;
        (self.out_bps * keep, self.in_bps * keep)
    }

    /// `NW_OUT` and `NW_IN`, KiB/s.
    pub fn kib_per_s(&self) -> (u64, u64) {
        let (out, inb) = self.capacity_bps();
        (kib(out), kib(inb))
    }

    fn baseline_text(&self) -> String {
        if self.out_bps == self.in_bps {
            format!("{} each way", rate_bits(self.out_bps))
        } else {
            format!(
                "{} out, {} in",
                rate_bits(self.out_bps),
                rate_bits(self.in_bps)
            )
        }
    }

    /// One line: "m5.xlarge: baseline 1.25Gb/s each way (published, ...),
    /// less 20%: NW_IN 122070 KiB/s, NW_OUT 122070 KiB/s (Strimzi
    /// inboundNetwork 122070KiB/s, outboundNetwork 122070KiB/s)".
    pub fn line(&self) -> String {
        let (out, inb) = self.kib_per_s();
        let who = match self.broker_id {
            Some(id) => format!("broker {id} ({})", self.instance_type),
            None => self.instance_type.clone(),
        };
        format!(
            "{who}: baseline {} ({}), less {}%: Cruise Control NW_IN {inb}, NW_OUT {out} \
             (KiB/s); Strimzi inboundNetwork: {inb}KiB/s, outboundNetwork: {out}KiB/s",
            self.baseline_text(),
            self.from,
            significant_pct(self.margin_pct),
        )
    }
}

/// The lines the report's right-sizing section ends with: the capacity of
/// the recorded host from its baseline, the measured one where it differs,
/// and the command that writes the files.
pub fn report_lines(c: &BrokerCapacity, measured: Option<&MeasuredBaseline>) -> Vec<String> {
    let mut lines = vec![c.line()];
    let differs = measured.filter(|m| m.differs(c.out_bps, c.in_bps));
    if let Some(m) = differs {
        let mc = m.capacity(c);
        lines.push(format!(
            "this recording's enforcement held another baseline than the published one: {}",
            mc.line()
        ));
    }
    let flag = if c.from.starts_with("published") {
        format!("--instance-type {}", c.instance_type)
    } else {
        let rate = |v: f64| crate::shared::units::significant(v / 1e9, 4) + "G";
        if c.out_bps == c.in_bps {
            format!("--baseline {}", rate(c.out_bps))
        } else {
            format!("--baseline {}/{}", rate(c.out_bps), rate(c.in_bps))
        }
    };
    lines.push(format!(
        "files: throttlescope capacity {flag} --format cruise-control --disk-mb MB (or --format \
         strimzi){}",
        if differs.is_some() {
            "; with the recording: throttlescope capacity --recording FILE --measured"
        } else {
            ""
        }
    ));
    lines
}

/// bits/s to whole KiB/s, rounded down (never above the figure).
pub fn kib(bps: f64) -> u64 {
    (bps / 8.0 / 1024.0).floor().max(0.0) as u64
}

fn significant_pct(p: f64) -> String {
    crate::shared::units::significant(p, 3)
}

/// The instance's baseline as enforcement measured it: the rate held
/// during enforcement episodes (throughput stepped down into them, against
/// a published baseline), the lowest per direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredBaseline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_bps: Option<f64>,
    /// Enforcement episodes it comes from.
    pub episodes: u64,
}

impl MeasuredBaseline {
    /// Takes one episode's rate during enforcement.
    pub fn add(&mut self, inbound: bool, bps: f64) {
        let slot = if inbound {
            &mut self.in_bps
        } else {
            &mut self.out_bps
        };
        *slot = Some(slot.map_or(bps, |v: f64| v.min(bps)));
        self.episodes += 1;
    }

    /// Whether either direction is further from `published` than
    /// [`MEASURED_DIFFERS`].
    pub fn differs(&self, published_out: f64, published_in: f64) -> bool {
        let off = |m: Option<f64>, p: f64| m.is_some_and(|m| (m - p).abs() > MEASURED_DIFFERS * p);
        off(self.out_bps, published_out) || off(self.in_bps, published_in)
    }

    /// The capacity from the measured baseline (the published one where a
    /// direction was not measured).
    pub fn capacity(&self, published: &BrokerCapacity) -> BrokerCapacity {
        BrokerCapacity {
            out_bps: self.out_bps.unwrap_or(published.out_bps),
            in_bps: self.in_bps.unwrap_or(published.in_bps),
            from: format!(
                "measured: the rate held in {} enforcement episode{} of this recording",
                self.episodes,
                if self.episodes == 1 { "" } else { "s" }
            ),
            ..published.clone()
        }
    }
}

/// Cruise Control's capacity file (config/capacity.json's format, read by
/// its `BrokerCapacityConfigFileResolver`): one entry per broker, `-1` for
/// every broker. `DISK` (MB) and `CPU` are required by the resolver and
/// not known here: `disk_mb` is the user's; `CPU` is "100" (percent, the
/// resolver's default unit) or, with `num_cores`, the type's vCPUs.
pub fn cruise_control_json(
    brokers: &[BrokerCapacity],
    disk_mb: u64,
    num_cores: bool,
) -> Result<String, String> {
    let mut entries = Vec::new();
    for b in brokers {
        let (out, inb) = b.kib_per_s();
        let cpu = if num_cores {
            let n = b.vcpus.ok_or_else(|| {
                format!(
                    "--num-cores: the vCPUs of {} are not in the table; leave --num-cores \
                     out (CPU as 100%)",
                    b.instance_type
                )
            })?;
            serde_json::json!({ "num.cores": n.to_string() })
        } else {
            serde_json::Value::String("100".to_string())
        };
        let (out_c, in_c) = b.capacity_bps();
        entries.push(serde_json::json!({
            "brokerId": b.broker_id.map_or("-1".to_string(), |id| id.to_string()),
            "capacity": {
                "DISK": disk_mb.to_string(),
                "CPU": cpu,
                "NW_IN": inb.to_string(),
                "NW_OUT": out.to_string(),
            },
            "doc": format!(
                "{}: baseline {} ({}), less {}%: {} in, {} out. NW_IN/NW_OUT in KiB/s; DISK in \
                 MB as given; CPU {}. Written by throttlescope capacity.",
                b.instance_type,
                b.baseline_text(),
                b.from,
                significant_pct(b.margin_pct),
                rate_bits(in_c),
                rate_bits(out_c),
                if num_cores { "in cores (the type's vCPUs)" } else { "in percent" },
            ),
        }));
    }
    let doc = serde_json::json!({ "brokerCapacities": entries });
    let mut s = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    s.push('\n');
    Ok(s)
}

/// Strimzi's `spec.cruiseControl.brokerCapacity` (inboundNetwork and
/// outboundNetwork, `^[0-9]+([KMG]i?)?B/s$`), as YAML from `spec:` down:
/// the default is the smallest capacity of the brokers; brokers with
/// another one are `overrides` (by broker id, grouped by figure).
pub fn strimzi_yaml(brokers: &[BrokerCapacity]) -> Result<String, String> {
    let Some(smallest) = brokers
        .iter()
        .min_by_key(|b| {
            let (out, inb) = b.kib_per_s();
            (out.min(inb), out, inb)
        })
        .map(BrokerCapacity::kib_per_s)
    else {
        return Err("no brokers".to_string());
    };
    let mut s = String::new();
    s.push_str("# throttlescope capacity: each broker's instance baseline less the margin,\n");
    for b in brokers {
        s.push_str(&format!("#   {}\n", b.line()));
    }
    s.push_str("spec:\n  cruiseControl:\n    brokerCapacity:\n");
    s.push_str(&format!(
        "      inboundNetwork: {}KiB/s\n      outboundNetwork: {}KiB/s\n",
        smallest.1, smallest.0
    ));
    // Overrides: brokers whose figures differ from the default, grouped.
    let mut groups: Vec<((u64, u64), Vec<u32>)> = Vec::new();
    for b in brokers {
        let k = b.kib_per_s();
        if k == smallest {
            continue;
        }
        let id = b.broker_id.ok_or_else(|| {
            "Strimzi overrides name brokers by id: give --brokers ID=TYPE,...".to_string()
        })?;
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, ids)) => ids.push(id),
            None => groups.push((k, vec![id])),
        }
    }
    if !groups.is_empty() {
        s.push_str("      overrides:\n");
        for ((out, inb), ids) in groups {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            s.push_str(&format!(
                "        - brokers: [{}]\n          inboundNetwork: {inb}KiB/s\n          \
                 outboundNetwork: {out}KiB/s\n",
                ids.join(", ")
            ));
        }
    }
    Ok(s)
}

/// The plain table, with where the figures came from and why the margin.
pub fn table(brokers: &[BrokerCapacity]) -> String {
    let mut s = format!(
        "{:<8} {:<18} {:>12} {:>12} {:>7} {:>12} {:>12} {:>10} {:>10}\n",
        "broker",
        "type",
        "baseline out",
        "baseline in",
        "margin",
        "capacity out",
        "capacity in",
        "NW_OUT",
        "NW_IN"
    );
    for b in brokers {
        let (out_c, in_c) = b.capacity_bps();
        let (out, inb) = b.kib_per_s();
        s.push_str(&format!(
            "{:<8} {:<18} {:>12} {:>12} {:>6}% {:>12} {:>12} {:>10} {:>10}\n",
            b.broker_id.map_or("all".to_string(), |id| id.to_string()),
            b.instance_type,
            rate_bits(b.out_bps),
            rate_bits(b.in_bps),
            significant_pct(b.margin_pct),
            rate_bits(out_c),
            rate_bits(in_c),
            out,
            inb
        ));
    }
    s.push_str(
        "NW_OUT and NW_IN in KiB/s (Cruise Control's capacity file; Strimzi's \
                outboundNetwork/inboundNetwork with the unit KiB/s)\n",
    );
    let mut froms: Vec<&str> = Vec::new();
    for b in brokers {
        if !froms.contains(&b.from.as_str()) {
            froms.push(&b.from);
        }
    }
    for f in froms {
        s.push_str(&format!("baseline: {f}\n"));
    }
    s.push_str(WHY_MARGIN);
    s.push('\n');
    s
}

/// `--brokers 1=m5.2xlarge,2=r6i.xlarge` (or the same, one a line or
/// comma-separated, in a file): broker id and type, in order.
pub fn parse_brokers(s: &str) -> Result<Vec<(u32, String)>, String> {
    let mut out: Vec<(u32, String)> = Vec::new();
    for item in s
        .split([',', '\n'])
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
    {
        let (id, t) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: a broker is ID=TYPE, e.g. 1=m5.2xlarge"))?;
        let id: u32 = id.trim().parse().map_err(|_| {
            format!("{item:?}: the broker id is a whole number 0 or above (Kafka's broker.id)")
        })?;
        if out.iter().any(|(i, _)| *i == id) {
            return Err(format!("broker {id} is given twice"));
        }
        out.push((id, t.trim().to_ascii_lowercase()));
    }
    if out.is_empty() {
        return Err("no brokers given (ID=TYPE,...)".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_table() -> SpecTable {
        SpecTable::parse(
            "# source a: https://example.invalid/a\n# retrieved a: 2026-01-02\n\
             m5.2xlarge x86_64 8 2.5 10 a\nr6i.xlarge x86_64 4 1.562 12.5 a\n\
             i3en.metal x86_64 - 100 - a\n",
            "t.tsv",
        )
        .unwrap()
    }

    fn broker(id: Option<u32>, t: &str, margin: f64) -> BrokerCapacity {
        let table = spec_table();
        BrokerCapacity::published(id, table.get(t).unwrap(), &table, margin)
    }

    #[test]
    fn capacity_is_the_baseline_less_the_margin_in_kib_per_s() {
        let b = broker(Some(1), "m5.2xlarge", 20.0);
        // 2.5 Gb/s * 0.8 = 2 Gb/s = 250,000,000 B/s = 244,140.625 KiB/s.
        assert_eq!(b.kib_per_s(), (244_140, 244_140));
        let b = broker(Some(2), "r6i.xlarge", 0.0);
        assert_eq!(b.kib_per_s(), (190_673, 190_673));
        assert!(b.line().contains("NW_IN 190673"), "{}", b.line());
        assert!(b.from.contains("retrieved 2026-01-02"), "{}", b.from);
    }

    #[test]
    fn cruise_control_file_has_every_resource_per_broker() {
        let brokers = [
            broker(Some(1), "m5.2xlarge", 20.0),
            broker(Some(2), "r6i.xlarge", 20.0),
        ];
        let json = cruise_control_json(&brokers, 500_000, false).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let caps = v["brokerCapacities"].as_array().unwrap();
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[0]["brokerId"], "1");
        assert_eq!(caps[0]["capacity"]["NW_IN"], "244140");
        assert_eq!(caps[0]["capacity"]["DISK"], "500000");
        assert_eq!(caps[0]["capacity"]["CPU"], "100");
        assert_eq!(caps[1]["capacity"]["NW_OUT"], "152539");
        let cores = cruise_control_json(&brokers, 1, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&cores).unwrap();
        assert_eq!(
            v["brokerCapacities"][1]["capacity"]["CPU"]["num.cores"],
            "4"
        );
        let metal = [broker(None, "i3en.metal", 20.0)];
        assert!(cruise_control_json(&metal, 1, true)
            .unwrap_err()
            .contains("vCPUs of i3en.metal"));
        let v: serde_json::Value =
            serde_json::from_str(&cruise_control_json(&metal, 1, false).unwrap()).unwrap();
        assert_eq!(v["brokerCapacities"][0]["brokerId"], "-1");
    }

    #[test]
    fn strimzi_block_defaults_to_the_smallest_and_overrides_the_others() {
        let brokers = [
            broker(Some(1), "m5.2xlarge", 20.0),
            broker(Some(2), "r6i.xlarge", 20.0),
            broker(Some(3), "m5.2xlarge", 20.0),
        ];
        let y = strimzi_yaml(&brokers).unwrap();
        assert!(
            y.contains(
                "    brokerCapacity:\n      inboundNetwork: 152539KiB/s\n      \
                 outboundNetwork: 152539KiB/s\n      overrides:\n        - brokers: [1, 3]\n          \
                 inboundNetwork: 244140KiB/s\n"
            ),
            "{y}"
        );
        let one = strimzi_yaml(&[broker(None, "m5.2xlarge", 20.0)]).unwrap();
        assert!(!one.contains("overrides"), "{one}");
    }

    #[test]
    fn measured_baseline_is_offered_when_it_differs() {
        let b = broker(None, "m5.2xlarge", 20.0);
        let mut m = MeasuredBaseline::default();
        m.add(false, 2.6e9);
        assert!(!m.differs(b.out_bps, b.in_bps), "4% off is the same");
        m.add(false, 3.2e9);
        assert_eq!(m.out_bps, Some(2.6e9), "the lowest");
        let mut m = MeasuredBaseline::default();
        m.add(true, 3.2e9);
        assert!(m.differs(b.out_bps, b.in_bps));
        let c = m.capacity(&b);
        assert_eq!((c.out_bps, c.in_bps), (2.5e9, 3.2e9));
        assert!(c.from.starts_with("measured"), "{}", c.from);
    }

    #[test]
    fn brokers_parse_from_a_list_or_lines() {
        assert_eq!(
            parse_brokers("1=m5.2xlarge, 2=R6I.xlarge").unwrap(),
            [(1, "m5.2xlarge".to_string()), (2, "r6i.xlarge".to_string())]
        );
        assert_eq!(
            parse_brokers("# cluster\n0=m5.large\n\n7=c6gn.xlarge # new\n").unwrap(),
            [(0, "m5.large".to_string()), (7, "c6gn.xlarge".to_string())]
        );
        for (bad, why) in [
            ("1:m5.large", "ID=TYPE"),
            ("-1=m5.large", "whole number"),
            ("1=m5.large,1=m5.xlarge", "twice"),
            ("", "no brokers"),
        ] {
            let e = parse_brokers(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
