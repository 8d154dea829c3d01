//! What the instance can count on: the published network specifications of
//! EC2 instance types (a table shipped with the binary, replaceable with
//! `--instance-specs FILE`) and the baseline a run is planned against
//! ([`Baseline`]), found from the instance type or given by the user.
//!
//! Burst is best effort and its length is not predictable (docs/headroom.md
//! has the field numbers), so the baseline is the one number headroom is
//! measured against. Plain data and text parsing: the DMI read that finds the
//! instance type is collect/instance.rs.

use serde::{Deserialize, Serialize};

/// The table shipped with the binary (format in docs/headroom.md).
pub(crate) const BUILT_IN_SPECS: &str = include_str!("ec2_network_specs.tsv");

/// Where the built-in table says it came from, when a file is not given.
pub(crate) const BUILT_IN_NAME: &str = "built-in table";

/// The CPU architecture of an instance type: right-sizing offers the same
/// architecture first (moving a broker to another one is a migration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    X86_64,
    Arm64,
}

impl Arch {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "x86_64" => Some(Arch::X86_64),
            "arm64" => Some(Arch::Arm64),
            _ => None,
        }
    }
}

/// One instance type's published network figures. Both apply to each
/// direction: an instance with a 1.25 Gb/s baseline can count on 1.25 Gb/s
/// out and, at the same time, 1.25 Gb/s in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSpec {
    pub instance_type: String,
    pub arch: Arch,
    /// None where the table does not know it (`-`).
    pub vcpus: Option<u32>,
    pub baseline_bps: f64,
    /// The "up to" figure; equal to the baseline where none is published;
    /// None where the row's source gave the baseline only (`-`).
    pub burst_bps: Option<f64>,
    /// The row's source (a key of [`SpecTable::named`]); None for a row
    /// without one, which the table's unnamed `# source:` lines cover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Where a table's figures came from: the pages and the date they were
/// read. A row names one by its key (the table's last column); the
/// unnamed one (`# source: URL`, `# retrieved: DATE`) has the key "".
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Source {
    pub key: String,
    pub urls: Vec<String>,
    pub retrieved: Option<String>,
}

/// A table of instance specifications and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecTable {
    /// The file it was read from, or [`BUILT_IN_NAME`].
    pub origin: String,
    /// Every `# source` URL (the pages the figures were taken from), each once.
    pub sources: Vec<String>,
    /// When they were taken: the unnamed `# retrieved:`, else the dates of
    /// the named sources, oldest first ("2026-08-18 and 2026-11-25").
    pub retrieved: Option<String>,
    /// The sources, in the order they were declared.
    pub named: Vec<Source>,
    pub specs: Vec<InstanceSpec>,
}

impl SpecTable {
    /// The table shipped with the binary.
    pub(crate) fn built_in() -> Self {
        // The shipped file is checked by a unit test: it always parses.
        SpecTable::parse(BUILT_IN_SPECS, BUILT_IN_NAME).expect("the built-in table parses")
    }

    /// Parses the table format: `#` comments (`# source: URL`,
    /// `# retrieved: DATE` and their named forms `# source KEY: URL`,
    /// `# retrieved KEY: DATE` are kept), blank lines, and rows of five or
    /// six tab- or space-separated fields: type, arch, vCPUs, baseline Gb/s,
    /// burst Gb/s and the source's key; vCPUs and burst may be `-`
    /// (unknown). Any other line is an error naming its line number.
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut table = SpecTable {
            origin: origin.to_string(),
            sources: Vec::new(),
            retrieved: None,
            named: Vec::new(),
            specs: Vec::new(),
        };
        // Row keys, checked once every declaration is read: (line, key).
        let mut keyed: Vec<(usize, String)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let at = |why: String| format!("{origin}, line {}: {why}", i + 1);
            let line = line.trim();
            if let Some(comment) = line.strip_prefix('#') {
                let comment = comment.trim();
                for (word, is_url) in [("source", true), ("retrieved", false)] {
                    let Some((key, value)) = declaration(comment, word) else {
                        continue;
                    };
                    let src = table.source_mut(key);
                    if is_url {
                        src.urls.push(value.to_string());
                        if !table.sources.iter().any(|u| u == value) {
                            table.sources.push(value.to_string());
                        }
                    } else {
                        src.retrieved = Some(value.to_string());
                    }
                }
                continue;
            }
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (name, arch, vcpus, baseline, burst, key) = match fields[..] {
                [n, a, v, b, u] => (n, a, v, b, u, None),
                [n, a, v, b, u, k] => (n, a, v, b, u, Some(k)),
                _ => {
                    return Err(at(format!(
                        "{} fields; a row is: type arch vcpus baseline_gbps burst_gbps [source]",
                        fields.len()
                    )))
                }
            };
            if !is_type_name(name) {
                return Err(at(format!(
                    "{name:?} is not an instance type (family.size, e.g. m5.xlarge)"
                )));
            }
            let arch =
                Arch::parse(arch).ok_or_else(|| at(format!("arch {arch:?}: x86_64 or arm64")))?;
            let vcpus: Option<u32> = match vcpus {
                "-" => None,
                v => Some(v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    at(format!(
                        "vcpus {v:?}: a whole number above 0, or - (unknown)"
                    ))
                })?),
            };
            let gbps = |s: &str, what: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v > 0.0 && *v <= 10_000.0)
                    .ok_or_else(|| at(format!("{what} {s:?}: Gb/s, above 0")))
            };
            let baseline = gbps(baseline, "baseline")?;
            let burst = match burst {
                "-" => None,
                b => Some(gbps(b, "burst")?),
            };
            if let Some(burst) = burst.filter(|b| *b < baseline) {
                return Err(at(format!(
                    "burst {burst} Gb/s is below the baseline {baseline} Gb/s"
                )));
            }
            if table.get(name).is_some() {
                return Err(at(format!("{name} is listed twice")));
            }
            if let Some(k) = key {
                keyed.push((i + 1, k.to_string()));
            }
            table.specs.push(InstanceSpec {
                instance_type: name.to_string(),
                arch,
                vcpus,
                baseline_bps: baseline * 1e9,
                burst_bps: burst.map(|b| b * 1e9),
                source: key.map(str::to_string),
            });
        }
        if table.specs.is_empty() {
            return Err(format!("{origin}: no instance types in it"));
        }
        for (line, key) in keyed {
            if !table.named.iter().any(|s| s.key == key) {
                return Err(format!(
                    "{origin}, line {line}: source {key:?} is not declared \
                     (a `# source {key}: URL` line)"
                ));
            }
        }
        if let Some(s) = table.named.iter().find(|s| s.urls.is_empty()) {
            return Err(format!(
                "{origin}: source {:?} has a date but no `# source` URL",
                s.key
            ));
        }
        table.retrieved = match table.named.iter().find(|s| s.key.is_empty()) {
            Some(s) if s.retrieved.is_some() => s.retrieved.clone(),
            _ => {
                let mut dates: Vec<&str> = table
                    .named
                    .iter()
                    .filter_map(|s| s.retrieved.as_deref())
                    .collect();
                dates.sort_unstable();
                dates.dedup();
                (!dates.is_empty()).then(|| dates.join(" and "))
            }
        };
        Ok(table)
    }

    fn source_mut(&mut self, key: &str) -> &mut Source {
        let at = match self.named.iter().position(|s| s.key == key) {
            Some(at) => at,
            None => {
                self.named.push(Source {
                    key: key.to_string(),
                    ..Source::default()
                });
                self.named.len() - 1
            }
        };
        &mut self.named[at]
    }

    /// The source a row names (or the unnamed one).
    pub(crate) fn source_of(&self, spec: &InstanceSpec) -> Option<&Source> {
        let key = spec.source.as_deref().unwrap_or("");
        self.named.iter().find(|s| s.key == key)
    }

    /// "table (retrieved DATE)" for one row: the date of its own source.
    pub(crate) fn provenance_of(&self, spec: &InstanceSpec) -> String {
        match self.source_of(spec).and_then(|s| s.retrieved.as_deref()) {
            Some(d) => format!("{}, retrieved {d}", self.origin),
            None => self.provenance(),
        }
    }

    /// Reads and parses FILE (`--instance-specs`).
    pub(crate) fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--instance-specs {}: {e}", path.display()))?;
        SpecTable::parse(&text, &path.display().to_string())
    }

    pub(crate) fn get(&self, instance_type: &str) -> Option<&InstanceSpec> {
        self.specs
            .iter()
            .find(|s| s.instance_type.eq_ignore_ascii_case(instance_type))
    }

    /// "source (retrieved DATE)", for a line that says where a figure
    /// came from.
    pub(crate) fn provenance(&self) -> String {
        match &self.retrieved {
            Some(d) => format!("{}, retrieved {d}", self.origin),
            None => self.origin.clone(),
        }
    }

    /// The types whose baseline covers `tx_bps` and `rx_bps` (each
    /// direction has its own baseline), those of `arch` first, then the
    /// others, each group by baseline, smallest first (the table has no
    /// prices: the smallest baseline that covers is the nearest size).
    /// Only types a broker could be moved to ([`broker_candidate`]).
    pub(crate) fn covering(
        &self,
        tx_bps: f64,
        rx_bps: f64,
        arch: Option<Arch>,
    ) -> Vec<&InstanceSpec> {
        let need = tx_bps.max(rx_bps);
        let mut out: Vec<&InstanceSpec> = self
            .specs
            .iter()
            .filter(|s| s.baseline_bps >= need && broker_candidate(&s.instance_type))
            .collect();
        out.sort_by(|a, b| {
            let other = |s: &InstanceSpec| arch.is_some_and(|x| x != s.arch);
            other(a)
                .cmp(&other(b))
                .then(a.baseline_bps.total_cmp(&b.baseline_bps))
                .then(a.vcpus.cmp(&b.vcpus))
                .then(a.instance_type.cmp(&b.instance_type))
        });
        out
    }
}

/// Families the right-sizing does not offer (every type stays known for
/// headroom and capacity): burstable CPU (t2, t3, t3a, t4g), accelerated
/// computing (GPUs, Inferentia, Trainium, Gaudi, FPGAs, video: p, g, gr,
/// inf, trn, dl, f, vt), Macs, HPC (sold per node for tightly coupled jobs),
/// the multi-terabyte memory ones (u-, u7i) and the Xen-era previous
/// generation (c3, c4, d2, i2, m4, r3, r4).
const NOT_OFFERED: &[&str] = &[
    "t", "p", "g", "gr", "inf", "trn", "dl", "f", "vt", "mac", "hpc", "u",
];
const NOT_OFFERED_FAMILIES: &[&str] = &["c3", "c4", "d2", "i2", "m4", "r3", "r4"];

/// Whether right-sizing may offer `instance_type` for a broker: see
/// [`NOT_OFFERED`].
pub(crate) fn broker_candidate(instance_type: &str) -> bool {
    let family = instance_type.split('.').next().unwrap_or("");
    // The class: the letters before the generation digit (`m` of m6g,
    // `mac` of mac2, `u` of u-6tb1 and u7i).
    let class: String = family
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .collect();
    !NOT_OFFERED.contains(&class.as_str()) && !NOT_OFFERED_FAMILIES.contains(&family)
}

/// `family.size`: lowercase letters and digits, a dot, then the size
/// (letters and digits, e.g. `xlarge`, `16xlarge`, `metal-24xl`).
fn is_type_name(s: &str) -> bool {
    let Some((family, size)) = s.split_once('.') else {
        return false;
    };
    let ok = |p: &str, extra: &[char]| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(&c))
    };
    ok(family, &['-']) && ok(size, &['-'])
}

/// `source: URL` (key "") or `source KEY: URL` when `word` is `source`: the
/// key and the value; None for any other comment. A key is lowercase
/// letters, digits, `-`, `_` and `.`.
fn declaration<'a>(comment: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let rest = comment.strip_prefix(word)?;
    let (key, value) = rest.split_once(':')?;
    let key = key.trim();
    let plain = rest.starts_with(':');
    let named = rest.starts_with(' ')
        && !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
    (plain || named).then_some((key, value.trim()))
}

/// How the baseline a run is measured against was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineFrom {
    /// The instance type from DMI, looked up in the table.
    Dmi,
    /// `--instance-type`, looked up in the table.
    InstanceTypeFlag,
    /// `--baseline` given by the user.
    BaselineFlag,
}

/// The baseline a run is planned against: in a recording's header, so a
/// report judges headroom as the live view did (or with its own flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The instance type, when known (from DMI or `--instance-type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    pub from: BaselineFrom,
    /// Outbound and inbound baseline, bits/s (published figures are the
    /// same both ways; `--baseline OUT/IN` may differ).
    pub tx_bps: f64,
    pub rx_bps: f64,
    /// The published burst ("up to") figure, when the type is in the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bps: Option<f64>,
    /// The instance's architecture, when the table says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    /// Where the figures came from: the table (file, date) or `--baseline`.
    pub source: String,
}

impl Baseline {
    /// Whether the figures are AWS's published ones (from the table), as
    /// opposed to the user's.
    pub(crate) fn published(&self) -> bool {
        self.from != BaselineFrom::BaselineFlag
    }

    /// One line naming the baseline and where it came from.
    pub(crate) fn describe(&self) -> String {
        use crate::shared::units::rate_bits;
        let rate = if self.tx_bps == self.rx_bps {
            format!("{} each way", rate_bits(self.tx_bps))
        } else {
            format!(
                "{} out, {} in",
                rate_bits(self.tx_bps),
                rate_bits(self.rx_bps)
            )
        };
        let who = match (&self.instance_type, self.from) {
            (Some(t), BaselineFrom::Dmi) => format!("{t} (from DMI)"),
            (Some(t), BaselineFrom::InstanceTypeFlag) => format!("{t} (--instance-type)"),
            (Some(t), BaselineFrom::BaselineFlag) => format!("{t}, --baseline"),
            (None, _) => "--baseline".to_string(),
        };
        let burst = self
            .burst_bps
            .filter(|b| *b > self.tx_bps)
            .map(|b| format!(", burst up to {}", rate_bits(b)))
            .unwrap_or_default();
        if self.from == BaselineFrom::BaselineFlag {
            // The source is the flag itself: said once.
            return format!("baseline {rate}{burst}: {who}");
        }
        format!("baseline {rate}{burst}: {who}, {}", self.source)
    }
}

/// What the host said about itself (collect/instance.rs reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostIdentity {
    /// An EC2 instance of this type.
    Ec2(String),
    /// Not EC2: the DMI vendor and product, as read (may be empty).
    Other { vendor: String, product: String },
    /// DMI could not be read (no /sys/devices/virtual/dmi, e.g. in some
    /// containers): the reason.
    Unknown(String),
}

/// What the user gave on the command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BaselineRequest {
    pub instance_type: Option<String>,
    /// `--baseline OUT[/IN]`, bits/s.
    pub baseline: Option<(f64, f64)>,
}

/// The baseline to plan against, or why there is none (a line to say
/// once). An `--instance-type` not in the table is an error (a typo must
/// not pass for "no baseline"); a DMI type not in it is said, not fatal.
pub(crate) fn resolve(
    host: &HostIdentity,
    req: &BaselineRequest,
    table: &SpecTable,
) -> Result<Result<Baseline, String>, String> {
    let (instance_type, from) = match (&req.instance_type, host) {
        (Some(t), _) => (Some(t.to_ascii_lowercase()), BaselineFrom::InstanceTypeFlag),
        (None, HostIdentity::Ec2(t)) => (Some(t.to_ascii_lowercase()), BaselineFrom::Dmi),
        (None, _) => (None, BaselineFrom::BaselineFlag),
    };
    let spec = instance_type.as_deref().and_then(|t| table.get(t));
    if let Some((tx, rx)) = req.baseline {
        return Ok(Ok(Baseline {
            instance_type,
            from: BaselineFrom::BaselineFlag,
            tx_bps: tx,
            rx_bps: rx,
            burst_bps: spec.and_then(|s| s.burst_bps),
            arch: spec.map(|s| s.arch),
            source: "--baseline".to_string(),
        }));
    }
    match (instance_type, spec) {
        (Some(t), Some(s)) => Ok(Ok(Baseline {
            instance_type: Some(t),
            from,
            tx_bps: s.baseline_bps,
            rx_bps: s.baseline_bps,
            burst_bps: s.burst_bps,
            arch: Some(s.arch),
            source: table.provenance_of(s),
        })),
        (Some(t), None) if from == BaselineFrom::InstanceTypeFlag => Err(format!(
            "--instance-type {t}: not in the instance specs ({}); give --baseline RATE \
             or a table with it (--instance-specs FILE)",
            table.origin
        )),
        (Some(t), None) => Ok(Err(format!(
            "EC2 instance type {t} is not in the instance specs ({}): no baseline known, so \
             no headroom; give --baseline RATE (e.g. --baseline 1.25G) or --instance-specs FILE",
            table.origin
        ))),
        (None, _) => Ok(Err(match host {
            HostIdentity::Other { vendor, .. } => format!(
                "not an EC2 instance (DMI vendor {:?}): no baseline known, so no headroom; \
                 give --instance-type TYPE or --baseline RATE to plan against one",
                vendor
            ),
            HostIdentity::Unknown(why) => format!(
                "not an EC2 instance as far as DMI tells (EC2 names the instance type \
                 there; {why}): no baseline known, so no headroom; give --instance-type \
                 TYPE or --baseline RATE to plan against one"
            ),
            HostIdentity::Ec2(_) => unreachable!("an EC2 type is handled above"),
        })),
    }
}

/// What a run or a report plans against: the table, the instance type the
/// host or the recording named (even one the table lacks), the baseline,
/// or why there is none (a line to say once).
#[derive(Debug, Clone)]
pub struct Plan {
    pub table: SpecTable,
    pub instance_type: Option<String>,
    pub baseline: Option<Baseline>,
    pub note: Option<String>,
}

impl Plan {
    /// No baseline and no type: headroom absent, sized with the built-in
    /// table.
    pub fn none() -> Self {
        Plan {
            table: SpecTable::built_in(),
            instance_type: None,
            baseline: None,
            note: None,
        }
    }

    /// The line to say at start: the baseline, or why there is none.
    pub fn line(&self) -> Option<String> {
        match (&self.baseline, &self.note) {
            (Some(b), _) => Some(b.describe()),
            (None, note) => note.clone(),
        }
    }
}

/// The plan for `host` with the user's `req` and `table` ([`resolve`]);
/// an error is a usage error (a type the table lacks, given by the user).
pub(crate) fn plan(
    host: &HostIdentity,
    req: &BaselineRequest,
    table: SpecTable,
) -> Result<Plan, String> {
    let resolved = resolve(host, req, &table)?;
    let instance_type = match host {
        HostIdentity::Ec2(t) => Some(t.clone()),
        _ => None,
    };
    Ok(match resolved {
        Ok(b) => Plan {
            instance_type: instance_type.or_else(|| b.instance_type.clone()),
            table,
            baseline: Some(b),
            note: None,
        },
        Err(why) => Plan {
            instance_type,
            table,
            baseline: None,
            note: Some(why),
        },
    })
}

/// Parses `--baseline RATE[/RATE]`: outbound, then inbound (the same when
/// one rate is given). A rate is bits/s with an optional k, M or G prefix
/// (decimal) and an optional `b/s`, `bit` or `bps`: `1.25G`, `800Mb/s`.
pub(crate) fn parse_baseline(s: &str) -> Result<(f64, f64), String> {
    // `/s` ends a unit (`800Mb/s`); any other `/` separates the two rates.
    let plain = s.replace("/s", "").replace("/S", "");
    match plain.split_once('/') {
        Some((out, inb)) => Ok((parse_rate(out)?, parse_rate(inb)?)),
        None => {
            let r = parse_rate(&plain)?;
            Ok((r, r))
        }
    }
}

/// One rate in bits/s: `1.25G`, `1250M`, `800Mb/s`, `2.5Gbit`, `100000000`.
pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a rate (try 1.25G, 800M or 800Mb/s)"))?;
    let unit = unit.trim();
    let lower = unit.to_ascii_lowercase();
    let prefix = ["b/s", "bps", "bit/s", "bit", "b"]
        .iter()
        .find_map(|suffix| lower.strip_suffix(suffix))
        .unwrap_or(&lower);
    let mult = match prefix {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?} (bits/s with k, M or G: 1.25G, 800Mb/s)"
            ))
        }
    };
    let bps = value * mult;
    if !bps.is_finite() || bps < 1e3 {
        return Err(format!("{s:?}: a baseline is at least 1 kb/s"));
    }
    Ok(bps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The families brokers run on, each with its sizes from large to
    /// 16xlarge where AWS publishes them.
    const FAMILIES: &[&str] = &[
        "m5", "m5n", "m6i", "m6in", "m6g", "m7i", "m7g", "m8i", "m8g", "r5", "r6i", "r6g", "r7g",
        "r8g", "c5", "c6i", "c6g", "c7g", "i4i", "i4g",
    ];

    #[test]
    fn the_built_in_table_is_well_formed_and_covers_the_broker_families() {
        let t = SpecTable::built_in();
        assert!(!t.sources.is_empty(), "the table names its sources");
        assert!(
            t.sources
                .iter()
                .all(|s| s.starts_with("https://docs.aws.amazon.com/ec2/latest/instancetypes/")),
            "{:?}",
            t.sources
        );
        // One dated source per row: every row names a declared source
        // with AWS's pages and a date.
        for s in &t.specs {
            let src = t
                .source_of(s)
                .unwrap_or_else(|| panic!("{}: no source", s.instance_type));
            assert!(!src.key.is_empty(), "{}: unnamed source", s.instance_type);
            assert!(!src.urls.is_empty(), "{}", src.key);
            let date = src.retrieved.as_deref().expect("every source is dated");
            assert!(
                date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-',
                "{date}"
            );
        }
        assert_eq!(t.retrieved.as_deref(), Some("2026-08-18 and 2026-11-25"));
        for family in FAMILIES {
            for size in ["large", "xlarge", "2xlarge", "4xlarge"] {
                let name = format!("{family}.{size}");
                assert!(t.get(&name).is_some(), "{name} missing");
            }
        }
        let mut families: Vec<&str> = t
            .specs
            .iter()
            .map(|s| s.instance_type.split('.').next().unwrap())
            .collect();
        families.dedup();
        for family in &families {
            // Within a family a bigger size never has a smaller baseline,
            // but for GPU families (g5.12xlarge 40 Gb/s, g5.16xlarge 25).
            let monotonic = broker_candidate(&format!("{family}.large"));
            let rows: Vec<&InstanceSpec> = t
                .specs
                .iter()
                .filter(|s| s.instance_type.split('.').next() == Some(family))
                .collect();
            // Within a family, a bigger size never has a smaller baseline.
            // Metal sizes have figures of their own (i8g.metal-48xl 90 Gb/s,
            // i8g.48xlarge 100).
            let mut by_cpus: Vec<&InstanceSpec> = rows
                .iter()
                .copied()
                .filter(|s| s.vcpus.is_some() && !s.instance_type.contains(".metal"))
                .collect();
            by_cpus.sort_by_key(|s| s.vcpus);
            for w in by_cpus.windows(2).filter(|_| monotonic) {
                assert!(
                    w[1].baseline_bps >= w[0].baseline_bps,
                    "{} below {}",
                    w[1].instance_type,
                    w[0].instance_type
                );
            }
            // Graviton: a `g` right after the generation digit (m6g,
            // c7gn, im4gn, is4gen, x2gd), and a1.
            let after_digit = family
                .trim_start_matches(|c: char| c.is_ascii_lowercase())
                .trim_start_matches(|c: char| c.is_ascii_digit());
            let graviton = *family == "a1" || after_digit.starts_with('g');
            let apple_or_grace =
                family.starts_with("mac") && *family != "mac1" || family.contains("-gb");
            for s in rows {
                assert_eq!(
                    s.arch == Arch::Arm64,
                    graviton || apple_or_grace,
                    "{}: architecture",
                    s.instance_type
                );
                // vCPUs where the size tells: 4 per xlarge.
                if let (Some(n), Some(x)) = (
                    s.vcpus,
                    s.instance_type
                        .split_once('.')
                        .and_then(|(_, z)| z.strip_suffix("xlarge"))
                        .and_then(|m| {
                            if m.is_empty() {
                                Some(1)
                            } else {
                                m.parse::<u32>().ok()
                            }
                        }),
                ) {
                    assert_eq!(n, 4 * x, "{}: vCPUs", s.instance_type);
                }
            }
        }
        // The types the issue found missing, all common broker types.
        for name in [
            "i3en.xlarge",
            "im4gn.large",
            "is4gen.xlarge",
            "d3en.2xlarge",
            "m6id.xlarge",
            "r6id.2xlarge",
            "c5n.xlarge",
            "c6gn.xlarge",
        ] {
            assert!(t.get(name).is_some(), "{name} missing");
        }
        assert_eq!(t.specs.len(), 1350);
        assert_eq!(families.len(), 190);
        // Figures the field report measured against (m5.xlarge 1.25 Gb/s
        // baseline, up to 10).
        let m5 = t.get("m5.xlarge").unwrap();
        assert_eq!((m5.baseline_bps, m5.burst_bps), (1.25e9, Some(10e9)));
    }

    /// The spot figures docs/headroom.md quotes from AWS's pages are the
    /// table's: a row of the docs' table is `| type | baseline | burst |`.
    #[test]
    fn the_spot_figures_in_the_docs_are_the_tables() {
        let docs = include_str!("../../docs/headroom.md");
        let start = docs
            .find("<!-- spot figures -->")
            .expect("docs/headroom.md has its spot figures");
        let t = SpecTable::built_in();
        let mut checked = 0;
        for line in docs[start..].lines().skip(3) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [_, name, baseline, burst, page, _] = cells[..] else {
                break;
            };
            let name = name.trim_matches('`');
            let s = t
                .get(name)
                .unwrap_or_else(|| panic!("{name} not in the table"));
            let gbps = |v: &str| v.trim_end_matches(" Gb/s").parse::<f64>().unwrap() * 1e9;
            assert_eq!(s.baseline_bps, gbps(baseline), "{name} baseline");
            match burst {
                "-" => assert_eq!(s.burst_bps, None, "{name} burst"),
                b => assert_eq!(s.burst_bps, Some(gbps(b)), "{name} burst"),
            }
            let src = t.source_of(s).unwrap();
            assert!(
                src.urls.iter().any(|u| u.contains(page)),
                "{name}: {page} not among {:?}",
                src.urls
            );
            checked += 1;
        }
        assert!(checked >= 10, "{checked} spot figures");
    }

    #[test]
    fn right_sizing_offers_no_burstable_accelerated_or_old_types() {
        for (t, offered) in [
            ("m6g.xlarge", true),
            ("im4gn.large", true),
            ("i3en.xlarge", true),
            ("x2gd.xlarge", true),
            ("z1d.large", true),
            ("lab.xlarge", true),
            ("t3.2xlarge", false),
            ("t4g.xlarge", false),
            ("g4dn.xlarge", false),
            ("g5g.xlarge", false),
            ("inf2.xlarge", false),
            ("trn1.2xlarge", false),
            ("mac2.metal", false),
            ("hpc7g.4xlarge", false),
            ("u-6tb1.56xlarge", false),
            ("u7i-12tb.224xlarge", false),
            ("c4.8xlarge", false),
            ("dl1.24xlarge", false),
            ("f2.6xlarge", false),
            ("vt1.3xlarge", false),
        ] {
            assert_eq!(broker_candidate(t), offered, "{t}");
        }
    }

    #[test]
    fn parse_takes_named_sources_and_unknown_figures() {
        let t = SpecTable::parse(
            "# source a: https://example.invalid/a
# source a: https://example.invalid/b
             # retrieved a: 2026-01-02
# source b: https://example.invalid/a
             # retrieved b: 2025-12-01
# sources: a comment, not a declaration
             x.large x86_64 2 0.75 10 a
x.metal x86_64 - 25 - b
",
            "f.tsv",
        )
        .unwrap();
        assert_eq!(
            t.sources,
            ["https://example.invalid/a", "https://example.invalid/b"]
        );
        assert_eq!(t.retrieved.as_deref(), Some("2025-12-01 and 2026-01-02"));
        let metal = t.get("x.metal").unwrap();
        assert_eq!((metal.vcpus, metal.burst_bps), (None, None));
        assert_eq!(
            t.source_of(metal).unwrap().urls,
            ["https://example.invalid/a"]
        );
        assert_eq!(t.provenance_of(metal), "f.tsv, retrieved 2025-12-01");
        let large = t.get("x.large").unwrap();
        assert_eq!((large.vcpus, large.burst_bps), (Some(2), Some(10e9)));
        for (bad, why) in [
            (
                "x.large x86_64 2 0.75 10 nope
",
                "line 1: source \"nope\" is not declared",
            ),
            (
                "# retrieved a: 2026-01-01
x.large x86_64 2 0.75 10 a
",
                "no `# source` URL",
            ),
            (
                "x.large x86_64 two 0.75 10
",
                "line 1: vcpus",
            ),
            (
                "x.large x86_64 2 0.75 ten
",
                "burst",
            ),
            (
                "x.large x86_64 2 0.75 10 a b
",
                "7 fields",
            ),
        ] {
            let err = SpecTable::parse(bad, "f.tsv").unwrap_err();
            assert!(
                err.contains(why) && err.starts_with("f.tsv"),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn parse_takes_comments_and_rows_and_names_the_bad_line() {
        let t = SpecTable::parse(
            "# a table\n# source: https://example.invalid/x\n# retrieved: 2026-01-02\n\n\
             lab.small\tx86_64\t2\t0.08\t0.3\nlab.big x86_64 4 0.4 0.4\n",
            "lab.tsv",
        )
        .unwrap();
        assert_eq!(t.sources, ["https://example.invalid/x"]);
        assert_eq!(t.retrieved.as_deref(), Some("2026-01-02"));
        assert_eq!(t.specs.len(), 2);
        assert_eq!(t.get("LAB.SMALL").unwrap().baseline_bps, 0.08e9);
        assert_eq!(t.provenance(), "lab.tsv, retrieved 2026-01-02");
        let small = t.get("lab.small").unwrap();
        assert_eq!(t.provenance_of(small), "lab.tsv, retrieved 2026-01-02");
        for (bad, why) in [
            ("m5.large x86_64 2 0.75\n", "line 1: 4 fields"),
            ("m5.large x86 2 0.75 10\n", "arch"),
            ("# c\nm5.large x86_64 0 0.75 10\n", "line 2: vcpus"),
            ("m5.large x86_64 2 -1 10\n", "baseline"),
            ("m5.large x86_64 2 0.75 0.5\n", "below the baseline"),
            (
                "m5.large x86_64 2 0.75 10\nm5.large x86_64 2 0.75 10\n",
                "twice",
            ),
            ("M5 x86_64 2 0.75 10\n", "not an instance type"),
            ("# only comments\n", "no instance types"),
        ] {
            let err = SpecTable::parse(bad, "f.tsv").unwrap_err();
            assert!(
                err.contains(why) && err.starts_with("f.tsv"),
                "{bad:?}: {err}"
            );
        }
    }

    fn table() -> SpecTable {
        SpecTable::parse(
            "a.large x86_64 2 0.75 10\na.xlarge x86_64 4 1.25 10\na.2xlarge x86_64 8 2.5 10\n\
             ag.large arm64 2 0.75 10\nag.xlarge arm64 4 1.25 10\nag.2xlarge arm64 8 2.5 10\n",
            "t",
        )
        .unwrap()
    }

    #[test]
    fn covering_types_come_same_architecture_first_then_by_size() {
        let t = table();
        let names = |v: Vec<&InstanceSpec>| {
            v.iter()
                .map(|s| s.instance_type.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            names(t.covering(1.0e9, 0.2e9, Some(Arch::Arm64))),
            "ag.xlarge ag.2xlarge a.xlarge a.2xlarge"
        );
        // Inbound counts too: each direction needs its own baseline.
        assert_eq!(
            names(t.covering(0.1e9, 2.0e9, Some(Arch::X86_64))),
            "a.2xlarge ag.2xlarge"
        );
        assert!(t.covering(3e9, 0.0, None).is_empty());
    }

    #[test]
    fn resolve_prefers_the_flags_then_dmi_and_says_why_there_is_none() {
        let t = table();
        let ec2 = HostIdentity::Ec2("a.xlarge".into());
        let none = BaselineRequest::default();
        let b = resolve(&ec2, &none, &t).unwrap().unwrap();
        assert_eq!(
            (b.tx_bps, b.rx_bps, b.burst_bps),
            (1.25e9, 1.25e9, Some(10e9))
        );
        assert_eq!(b.from, BaselineFrom::Dmi);
        assert!(b.published());
        let flag = BaselineRequest {
            instance_type: Some("AG.LARGE".into()),
            baseline: None,
        };
        let b = resolve(&ec2, &flag, &t).unwrap().unwrap();
        assert_eq!(b.instance_type.as_deref(), Some("ag.large"));
        assert_eq!((b.tx_bps, b.arch), (0.75e9, Some(Arch::Arm64)));
        let given = BaselineRequest {
            instance_type: None,
            baseline: Some((1e9, 2e9)),
        };
        let b = resolve(&ec2, &given, &t).unwrap().unwrap();
        assert_eq!((b.tx_bps, b.rx_bps), (1e9, 2e9));
        assert!(!b.published());
        assert_eq!(b.instance_type.as_deref(), Some("a.xlarge"));

        let typo = BaselineRequest {
            instance_type: Some("a.xxlarge".into()),
            baseline: None,
        };
        assert!(resolve(&ec2, &typo, &t).unwrap_err().contains("a.xxlarge"));
        let unknown = HostIdentity::Ec2("z9.large".into());
        let why = resolve(&unknown, &none, &t).unwrap().unwrap_err();
        assert!(
            why.contains("z9.large") && why.contains("--baseline"),
            "{why}"
        );
        let kvm = HostIdentity::Other {
            vendor: "QEMU".into(),
            product: "Standard PC".into(),
        };
        let why = resolve(&kvm, &none, &t).unwrap().unwrap_err();
        assert!(
            why.contains("not an EC2 instance") && why.contains("--baseline"),
            "{why}"
        );
    }

    #[test]
    fn rates_parse_with_decimal_prefixes_and_bits_units() {
        assert_eq!(parse_rate("1.25G").unwrap(), 1.25e9);
        assert_eq!(parse_rate("800Mb/s").unwrap(), 800e6);
        assert_eq!(parse_rate("2.5Gbit").unwrap(), 2.5e9);
        assert_eq!(parse_rate("100000000").unwrap(), 1e8);
        assert_eq!(parse_rate("750mbps").unwrap(), 750e6);
        for bad in ["", "fast", "1.2X", "0", "10"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_baseline("1.25G").unwrap(), (1.25e9, 1.25e9));
        assert_eq!(parse_baseline("800Mb/s").unwrap(), (800e6, 800e6));
        assert_eq!(parse_baseline("1G/2G").unwrap(), (1e9, 2e9));
        assert_eq!(parse_baseline("1Gb/s/2Gb/s").unwrap(), (1e9, 2e9));
        assert!(parse_baseline("1G/").is_err());
    }
}
