//! The data model: what one interval holds ([`snapshot::Snapshot`]) and who
//! a flow belongs to (`workload::Workload`). Plain data with serde, the
//! same type live and in a recording.

pub mod capacity;
pub(crate) mod flow_json;
pub mod fold;
pub mod holders;
pub mod instance;
pub(crate) mod json_splice;
pub mod kafka;
pub mod linklocal;
pub mod snapshot;
pub mod udpopen;
pub(crate) mod workload;

/// serde's `skip_serializing_if` for counters: a zero count is left out
/// (and read back as 0 by `#[serde(default)]`).
/// The first `listed` of `items` (already ranked), the rest handed to
/// `fold` one by one: a sample's bounded list and its folded sums.
pub(crate) fn list_first<T>(mut items: Vec<T>, listed: usize, fold: impl FnMut(T)) -> Vec<T> {
    let rest = items.split_off(listed.min(items.len()));
    rest.into_iter().for_each(fold);
    items
}

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}
