//! Reports: one pass over a recording's files (never all of
//! it in memory), judged like the live view, summarised as text, `--json`
//! or `--html`. The model (model.rs) is the contract between the builder
//! and the renderers.

pub(crate) mod build;
pub mod cluster;
mod cluster_html;
mod cluster_text;
pub(crate) mod filters;
pub mod html;
pub mod kafka;
pub mod linklocal;
pub mod model;
pub mod plan;
pub(crate) mod text;
pub(crate) mod workloads;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::model::instance::{BaselineRequest, SpecTable};
use crate::record::{recorded_thresholds, walk, WalkItem};
pub use build::ReportBuilder;
pub use filters::ReportFilters;
pub(crate) use model::Report;

/// What a report reads and how it judges.
pub(crate) struct ReportRequest<'a> {
    /// The recording's files, in any order.
    pub files: &'a [PathBuf],
    /// `NAME=VALUE` thresholds over the recorded ones.
    pub thresholds: &'a [String],
    pub filters: ReportFilters,
    /// Flows listed per episode.
    pub top: usize,
    /// `--instance-type` and `--baseline`, over the recording's baseline.
    pub baseline: BaselineRequest,
    /// `--instance-specs`, read, when given.
    pub instance_specs: Option<SpecTable>,
}

/// Reads the files and builds the report; warnings (skipped lines, cut
/// tails, missing segments) are in `report.health.read_warnings`. Fails,
/// naming the files, when no interval could be read.
pub(crate) fn build(req: ReportRequest) -> Result<Report> {
    build_observed(req, &mut |_| {})
}

/// [`build`], showing `observe` every item of the walk before the report
/// takes it (the cluster report's first pass, src/report/cluster.rs).
pub(crate) fn build_observed(
    req: ReportRequest,
    observe: &mut dyn FnMut(&WalkItem),
) -> Result<Report> {
    let ReportRequest {
        files: paths,
        thresholds: assignments,
        filters,
        top,
        baseline,
        instance_specs,
    } = req;
    let mut walk = walk(paths);
    let files = walk.files().to_vec();
    if files.is_empty() {
        bail!("nothing to report: {}", walk.into_warnings().join("; "));
    }
    let mut warnings: Vec<String> = Vec::new();
    let first = &files[0];
    let (recorded, warning) = recorded_thresholds(&first.header, &first.name());
    warnings.extend(warning);
    // The first file's header, as for the thresholds: a bad
    // `--instance-specs` or an unknown `--instance-type` fails here.
    let plan = plan::for_recording(&baseline, instance_specs, &first.header)
        .map_err(crate::shared::usage_error::UsageError)?;
    let thresholds = recorded
        .clone()
        .with_assignments(assignments)
        .map_err(anyhow::Error::msg)?;
    let headers: Vec<_> = files.iter().map(|f| f.header.clone()).collect();
    let names = paths.iter().map(|p| p.display().to_string()).collect();
    let mut builder = ReportBuilder::new(names, &headers, &recorded, thresholds, filters, top)?;
    builder.set_plan(plan);
    let mut read = 0u64;
    for item in walk.by_ref() {
        observe(&item);
        match item {
            WalkItem::NewRecording(header) => builder.new_recording(&header),
            WalkItem::NextFile { header } => builder.next_file(&header),
            WalkItem::Interval { snapshot, .. } => {
                builder.push(&snapshot);
                read += 1;
            }
            WalkItem::Warning(w) => warnings.push(w),
        }
    }
    if read == 0 {
        let names: Vec<String> = files.iter().map(|f| f.name()).collect();
        let mut msg = format!("no complete interval in {}", names.join(", "));
        if !warnings.is_empty() {
            msg.push_str(": ");
            msg.push_str(&warnings.join("; "));
        }
        bail!(msg);
    }
    for w in warnings {
        builder.warn(w);
    }
    builder.finish()
}
