//! The baseline a command measures headroom against, from its flags
//! (`InstanceArgs`): for `watch` and `record` with this host's DMI
//! (`for_live`), for `report` and `replay` over the recording's header
//! (`report::plan::for_recording`). The rules themselves are in
//! model/instance.rs and report/plan.rs; here, only reading the flags and
//! the host, and turning a bad flag into a usage error (exit 2).

use anyhow::Result;

use crate::commands::cli::InstanceArgs;
use crate::model::instance::{self, BaselineRequest, Plan, SpecTable};
use crate::record::TraceHeader;
use crate::shared::usage_error::UsageError;

impl InstanceArgs {
    /// `--instance-specs` read, when given.
    pub(crate) fn table(&self) -> Result<Option<SpecTable>> {
        self.instance_specs
            .as_deref()
            .map(|path| SpecTable::read(path).map_err(|e| UsageError(e).into()))
            .transpose()
    }

    pub(crate) fn request(&self) -> BaselineRequest {
        BaselineRequest {
            instance_type: self.instance_type.clone(),
            baseline: self.baseline,
        }
    }
}

/// Live: the flags, else the instance type from this host's DMI.
pub(crate) fn for_live(args: &InstanceArgs) -> Result<Plan> {
    let table = args.table()?.unwrap_or_else(SpecTable::built_in);
    let host = crate::collect::instance::this_host();
    instance::plan(&host, &args.request(), table).map_err(|e| UsageError(e).into())
}

/// A recording whose first header is `header`, with the flags.
pub(crate) fn for_recording(args: &InstanceArgs, header: &TraceHeader) -> Result<Plan> {
    crate::report::plan::for_recording(&args.request(), args.table()?, header)
        .map_err(|e| UsageError(e).into())
}

/// Says the plan once on stderr: the baseline, or why there is none.
pub(crate) fn say(plan: &Plan) {
    if let Some(line) = plan.line() {
        crate::stderr_line!(
            "throttlescope: {}",
            crate::shared::terminal_text::inert_lines(&line)
        );
    }
}
