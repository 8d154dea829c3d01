//! The cluster report (issue 44, item 4): `report` given the recordings of
//! several hosts (a Kafka cluster's brokers) lays them on one time axis.
//! The files are grouped by host (the header's `host_id`, format 1.14, else
//! its host name); each host gets its whole single-host report (the same
//! judging as live); then a second pass over every host's snapshots gives
//! the pure cluster analysis (src/analysis/cluster.rs) what it sums: per
//! notable episode the Kafka roles that carried the host's traffic, and
//! what every other host saw at the same time. Rendered as text
//! (cluster_text.rs), `--json` (this model) and HTML (cluster_html.rs).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::{build_observed, Report, ReportRequest};
use crate::analysis::cluster::{
    broker_ids, ClusterTracker, EpisodeView, HostPlan, HostScan, SpanEpisode,
};
use crate::record::recording::headers_in_order;
use crate::record::walk::walk_strict;
use crate::record::{TraceHeader, WalkItem};
use crate::shared::clock::format_utc;

/// The whole cluster report; `--json` prints exactly this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    /// The time axis: the earliest interval start and the latest end of
    /// every host (wall clock, ms).
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    /// By broker id, then name.
    pub hosts: Vec<ClusterHost>,
    /// Every notable episode (not idle, not free flow) of every host, by
    /// start time, with what the cluster saw.
    pub episodes: Vec<EpisodeView>,
}

/// One host: who it is, its recording, its own report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterHost {
    /// How the report names it: `broker 1 (ip-10-0-0-1)`, with its main
    /// address when another host has the same host name.
    pub name: String,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// As the other hosts' Kafka lookups placed its addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<i32>,
    /// Its flows' local addresses, most used first: what the others see as
    /// its peer address.
    pub addrs: Vec<IpAddr>,
    pub files: Vec<String>,
    pub start_unix_ms: u64,
    pub end_unix_ms: u64,
    /// Its episodes on the axis (every one, idle too, as in `report`).
    pub lane: Vec<SpanEpisode>,
    /// The single-host report of its files.
    pub report: Report,
}

/// The report as text.
pub(crate) fn render_text(r: &ClusterReport) -> String {
    super::cluster_text::render(r)
}

/// The report as one HTML page.
pub fn render_html(r: &ClusterReport) -> String {
    super::cluster_html::render(r)
}

/// The files of one host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostFiles {
    pub host: String,
    pub host_id: Option<String>,
    pub files: Vec<PathBuf>,
}

/// The key files are grouped by: the header's `host_id` where written
/// (1.14), else the host name.
fn host_key(h: &TraceHeader) -> (String, Option<String>) {
    (h.host.clone(), h.host_id.clone())
}

/// The files grouped by host, when they are of more than one; None for one
/// host (the single-host report, which also says what it skipped). With
/// several hosts a file that is not a recording is an error: it cannot be
/// placed.
pub(crate) fn hosts_of(paths: &[PathBuf]) -> Result<Option<Vec<HostFiles>>> {
    let (files, errors) = headers_in_order(paths);
    let mut by: BTreeMap<(String, Option<String>), Vec<PathBuf>> = BTreeMap::new();
    for f in &files {
        by.entry(host_key(&f.header))
            .or_default()
            .push(f.path.clone());
    }
    // Files of a host from before 1.14 (no host_id) join its newer files
    // when one host of that name has them: an upgrade between recordings.
    let nameless: Vec<(String, Option<String>)> = by
        .keys()
        .filter(|(host, id)| {
            id.is_none() && by.keys().filter(|(h, i)| h == host && i.is_some()).count() == 1
        })
        .cloned()
        .collect();
    for key in nameless {
        let files = by.remove(&key).unwrap_or_default();
        if let Some((_, v)) = by.iter_mut().find(|((h, _), _)| *h == key.0) {
            v.extend(files);
        }
    }
    if by.len() < 2 {
        return Ok(None);
    }
    if !errors.is_empty() {
        let list: Vec<String> = errors.iter().map(|e| format!("{e:#}")).collect();
        bail!(
            "a cluster report needs every file to be a recording: {}",
            list.join("; ")
        );
    }
    Ok(Some(
        by.into_iter()
            .map(|((host, host_id), files)| HostFiles {
                host,
                host_id,
                files,
            })
            .collect(),
    ))
}

/// One recording of a host as the first pass saw it.
struct SeenRecording {
    file: Option<String>,
    first_ms: Option<u64>,
    last_ms: Option<u64>,
}

/// Builds the cluster report of `hosts`, judging each as `req` says (its
/// `files` are ignored: each host's are its own).
pub(crate) fn build(hosts: Vec<HostFiles>, req: ReportRequest) -> Result<ClusterReport> {
    let mut reports = Vec::new();
    let mut scans = Vec::new();
    for h in &hosts {
        let mut scan = HostScan::default();
        let mut recordings: Vec<SeenRecording> = Vec::new();
        let mut observe = |item: &WalkItem| match item {
            WalkItem::NewRecording(_) => recordings.push(SeenRecording {
                file: None,
                first_ms: None,
                last_ms: None,
            }),
            WalkItem::Interval { snapshot, file } => {
                scan.push(snapshot);
                if let Some(r) = recordings.last_mut() {
                    r.file.get_or_insert_with(|| file.clone());
                    let start = snapshot
                        .unix_ms
                        .saturating_sub(snapshot.interval_ns / 1_000_000);
                    r.first_ms.get_or_insert(start);
                    r.last_ms = Some(snapshot.unix_ms);
                }
            }
            _ => {}
        };
        let one = ReportRequest {
            files: &h.files,
            thresholds: req.thresholds,
            filters: req.filters.clone(),
            top: req.top,
            baseline: req.baseline.clone(),
            instance_specs: req.instance_specs.clone(),
        };
        let report = build_observed(one, &mut observe).map_err(|e| {
            anyhow::anyhow!(
                "host {}: {e:#}",
                crate::shared::terminal_text::inert(&h.host)
            )
        })?;
        check_recordings(&h.host, &recordings)?;
        reports.push(report);
        scans.push(scan);
    }
    check_overlap(&hosts, &scans)?;
    let brokers = broker_ids(&scans);
    let names = names(&hosts, &scans, &brokers);
    let plans: Vec<HostPlan> = reports
        .iter()
        .zip(&scans)
        .zip(&names)
        .map(|((r, s), name)| HostPlan {
            name: name.clone(),
            addrs: s.addrs.keys().copied().collect(),
            episodes: lane(r),
        })
        .collect();
    let mut tracker = ClusterTracker::new(plans.clone());
    for (i, h) in hosts.iter().enumerate() {
        for item in walk_strict(&h.files)? {
            if let WalkItem::Interval { snapshot, .. } = item {
                tracker.push(i, &snapshot);
            }
        }
    }
    let mut episodes = tracker.finish();
    let mut out: Vec<ClusterHost> = hosts
        .into_iter()
        .zip(reports)
        .zip(scans)
        .zip(plans)
        .zip(brokers)
        .map(|((((h, report), scan), plan), broker)| {
            let mut addrs: Vec<(IpAddr, u64)> = scan.addrs.into_iter().collect();
            addrs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            ClusterHost {
                name: plan.name,
                host: h.host,
                host_id: h.host_id,
                broker,
                addrs: addrs.into_iter().map(|(a, _)| a).collect(),
                files: h.files.iter().map(|p| p.display().to_string()).collect(),
                start_unix_ms: scan.first_ms.unwrap_or(0),
                end_unix_ms: scan.last_ms.unwrap_or(0),
                lane: plan.episodes,
                report,
            }
        })
        .collect();
    // Hosts by broker id, then name; the episodes' host indices follow.
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by(|&a, &b| {
        let k = |h: &ClusterHost| (h.broker.is_none(), h.broker, h.name.clone());
        k(&out[a]).cmp(&k(&out[b]))
    });
    let mut new_index = vec![0; out.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for e in &mut episodes {
        e.host = new_index[e.host];
        for o in &mut e.others {
            o.host = new_index[o.host];
        }
        e.others.sort_by_key(|o| o.host);
    }
    let mut slots: Vec<Option<ClusterHost>> = out.drain(..).map(Some).collect();
    let hosts: Vec<ClusterHost> = order.iter().filter_map(|&i| slots[i].take()).collect();
    Ok(ClusterReport {
        start_unix_ms: hosts.iter().map(|h| h.start_unix_ms).min().unwrap_or(0),
        end_unix_ms: hosts.iter().map(|h| h.end_unix_ms).max().unwrap_or(0),
        hosts,
        episodes,
    })
}

/// A host's episodes on the wall clock.
fn lane(r: &Report) -> Vec<SpanEpisode> {
    let origin = r.recording.start_unix_ms as f64;
    r.episodes
        .iter()
        .map(|e| SpanEpisode {
            iface: e.episode.iface.clone(),
            verdict: e.episode.verdict,
            start_ms: (origin + e.start_offset_secs * 1000.0).round() as u64,
            end_ms: (origin + e.end_offset_secs * 1000.0).round() as u64,
            inbound: e.episode.peak_signal == "bw_in_allowance_pct",
        })
        .collect()
}

/// Two recordings of one host that overlap in time are two observers of
/// one host, or two hosts of one name: refused, not guessed.
fn check_recordings(host: &str, recs: &[SeenRecording]) -> Result<()> {
    let mut seen: Vec<&SeenRecording> = recs.iter().filter(|r| r.first_ms.is_some()).collect();
    seen.sort_by_key(|r| r.first_ms);
    for w in seen.windows(2) {
        let (a, b) = (w[0], w[1]);
        let (Some(a_last), Some(b_first)) = (a.last_ms, b.first_ms) else {
            continue;
        };
        if b_first < a_last {
            bail!(
                "host {}: the recordings {} ({} to {}) and {} (from {}) overlap in time: two \
                 observers of one host, or two hosts with one host name (recordings before \
                 format 1.14 tell hosts apart by name only); report them apart",
                crate::shared::terminal_text::inert(host),
                a.file.as_deref().unwrap_or("?"),
                format_utc(a.first_ms.unwrap_or(0)),
                format_utc(a_last),
                b.file.as_deref().unwrap_or("?"),
                format_utc(b_first),
            );
        }
    }
    Ok(())
}

/// Every host must share some time with another: clocks that never
/// overlap cannot be laid on one axis.
fn check_overlap(hosts: &[HostFiles], scans: &[HostScan]) -> Result<()> {
    let span = |s: &HostScan| (s.first_ms.unwrap_or(0), s.last_ms.unwrap_or(0));
    for (i, s) in scans.iter().enumerate() {
        let (a0, a1) = span(s);
        let shares = scans.iter().enumerate().any(|(j, o)| {
            let (b0, b1) = span(o);
            i != j && a0 < b1 && b0 < a1
        });
        if !shares {
            let others: Vec<String> = hosts
                .iter()
                .zip(scans)
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, (h, o))| {
                    let (b0, b1) = span(o);
                    format!(
                        "{} {} to {}",
                        crate::shared::terminal_text::inert(&h.host),
                        format_utc(b0),
                        format_utc(b1)
                    )
                })
                .collect();
            bail!(
                "the recordings do not overlap in time: {} covers {} to {}, the others {}; \
                 they cannot be laid on one time axis (were they recorded at the same time, \
                 and are the hosts' clocks set?)",
                crate::shared::terminal_text::inert(&hosts[i].host),
                format_utc(a0),
                format_utc(a1),
                others.join(", ")
            );
        }
    }
    Ok(())
}

/// `broker 1 (ip-10-0-0-1)`; the main address is added when two hosts
/// have one host name.
fn names(hosts: &[HostFiles], scans: &[HostScan], brokers: &[Option<i32>]) -> Vec<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for h in hosts {
        *count.entry(h.host.as_str()).or_default() += 1;
    }
    hosts
        .iter()
        .zip(scans)
        .zip(brokers)
        .enumerate()
        .map(|(i, ((h, s), b))| {
            let mut who = h.host.clone();
            if count[h.host.as_str()] > 1 {
                match s
                    .addrs
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                {
                    Some((ip, _)) => who.push_str(&format!(" {ip}")),
                    None => who.push_str(&format!(" #{}", i + 1)),
                }
            }
            match b {
                Some(id) => format!("broker {id} ({who})"),
                None => who,
            }
        })
        .collect()
}
