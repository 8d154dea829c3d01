//! The baseline a command measures headroom against: from the flags, then
//! this host's DMI (`watch`, `record`) or the recording's header (`report`,
//! `replay`). Where none is known, one line says so and headroom is simply
//! absent everywhere.

use anyhow::Result;

use crate::commands::cli::InstanceArgs;
use crate::model::instance::{
    self, Baseline, BaselineFrom, BaselineRequest, HostIdentity, SpecTable,
};
use crate::record::TraceHeader;
use crate::shared::usage_error::UsageError;

/// What a command plans against.
pub struct Plan {
    pub table: SpecTable,
    /// The instance type the host or recording named (even when the table
    /// lacks it).
    pub instance_type: Option<String>,
    pub baseline: Option<Baseline>,
    /// Why there is no baseline, to say once.
    pub note: Option<String>,
}

impl InstanceArgs {
    fn table(&self) -> Result<SpecTable> {
        match &self.instance_specs {
            Some(path) => SpecTable::read(path).map_err(|e| UsageError(e).into()),
            None => Ok(SpecTable::built_in()),
        }
    }

    fn request(&self) -> BaselineRequest {
        BaselineRequest {
            instance_type: self.instance_type.clone(),
            baseline: self.baseline,
        }
    }

    fn given(&self) -> bool {
        self.instance_type.is_some() || self.baseline.is_some() || self.instance_specs.is_some()
    }
}

/// Live: the flags, else the instance type from this host's DMI.
pub(crate) fn for_live(args: &InstanceArgs) -> Result<Plan> {
    plan(args, &crate::collect::instance::this_host())
}

/// From the flags and `host`.
fn plan(args: &InstanceArgs, host: &HostIdentity) -> Result<Plan> {
    let table = args.table()?;
    let resolved = instance::resolve(host, &args.request(), &table).map_err(UsageError)?;
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

/// A recording: the flags (looking the recorded instance type up again
/// when only `--instance-specs` is given), else the baseline it was
/// recorded with.
pub fn for_recording(args: &InstanceArgs, header: &TraceHeader) -> Result<Plan> {
    let recorded_type = header.instance_type.clone().or_else(|| {
        header
            .baseline
            .as_ref()
            .and_then(|b| b.instance_type.clone())
    });
    let only_table = args.instance_type.is_none() && args.baseline.is_none();
    let recorded_flag = header
        .baseline
        .as_ref()
        .is_some_and(|b| b.from == BaselineFrom::BaselineFlag);
    if args.given() && !(only_table && recorded_flag) {
        let host = match &recorded_type {
            Some(t) => HostIdentity::Ec2(t.clone()),
            None => HostIdentity::Unknown("the recording names no instance type".into()),
        };
        let mut p = plan(args, &host)?;
        // The recorded type looked up in another table: it was found the
        // way the recording says (DMI or --instance-type), not here.
        if only_table {
            match (&mut p.baseline, &header.baseline) {
                (Some(b), Some(recorded)) => b.from = recorded.from,
                // The new table lacks the type: the recorded baseline
                // stands, and the table only sizes.
                (None, Some(recorded)) => {
                    p.baseline = Some(recorded.clone());
                    p.note = None;
                }
                _ => {}
            }
        }
        return Ok(p);
    }
    // With only --instance-specs on a recording planned with --baseline,
    // the user's baseline stays; the table is for right-sizing.
    Ok(Plan {
        table: args.table()?,
        instance_type: recorded_type,
        baseline: header.baseline.clone(),
        note: header.baseline.is_none().then(|| {
            "the recording has no baseline (none was known while recording): no headroom; \
             give --instance-type TYPE or --baseline RATE to plan against one"
                .to_string()
        }),
    })
}

impl Plan {
    /// The line to print at start: the baseline, or why there is none.
    pub(crate) fn say(&self) {
        let line = match (&self.baseline, &self.note) {
            (Some(b), _) => b.describe(),
            (None, Some(why)) => why.clone(),
            (None, None) => return,
        };
        crate::stderr_line!(
            "throttlescope: {}",
            crate::shared::terminal_text::inert_lines(&line)
        );
    }
}
