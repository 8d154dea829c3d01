//! The baseline a recording is judged against (`report`, `replay`): the
//! user's flags over what the recording's header says. Here and not with
//! the command line, so the offline build (no `collect` feature) reports
//! headroom too.

use crate::model::instance::{self, BaselineFrom, BaselineRequest, HostIdentity, Plan, SpecTable};
use crate::record::TraceHeader;

/// The plan `report` makes of a recording when given no flags: the
/// baseline its header says, sized with the built-in table.
pub fn as_recorded(header: &TraceHeader) -> Plan {
    for_recording(&BaselineRequest::default(), None, header)
        .expect("without flags there is nothing to refuse")
}

/// The plan for the recording whose first header is `header`. `req` holds
/// `--instance-type` and `--baseline`; `table` is `--instance-specs` when
/// given (else the built-in table). With only `--instance-specs`, the
/// recorded type is looked up again in that table; a recorded `--baseline`
/// stays. An error is a usage error (an `--instance-type` the table lacks).
pub(crate) fn for_recording(
    req: &BaselineRequest,
    table: Option<SpecTable>,
    header: &TraceHeader,
) -> Result<Plan, String> {
    let recorded_type = header.instance_type.clone().or_else(|| {
        header
            .baseline
            .as_ref()
            .and_then(|b| b.instance_type.clone())
    });
    let only_table = req.instance_type.is_none() && req.baseline.is_none();
    let given = !only_table || table.is_some();
    let recorded_flag = header
        .baseline
        .as_ref()
        .is_some_and(|b| b.from == BaselineFrom::BaselineFlag);
    let table = table.unwrap_or_else(SpecTable::built_in);
    if given && !(only_table && recorded_flag) {
        let host = match &recorded_type {
            Some(t) => HostIdentity::Ec2(t.clone()),
            None => HostIdentity::Unknown("the recording names no instance type".into()),
        };
        let mut p = instance::plan(&host, req, table)?;
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
        table,
        instance_type: recorded_type,
        baseline: header.baseline.clone(),
        note: header.baseline.is_none().then(|| {
            "the recording has no baseline (none was known while recording): no headroom; \
             give --instance-type TYPE or --baseline RATE to plan against one"
                .to_string()
        }),
    })
}
