//! Collection: everything that reads the running kernel. The BPF probes,
//! the NIC's allowance counters, the interface counters and names, socket
//! owners and namespaces, turned by the [`collector::Collector`] into one
//! [`crate::model::snapshot::Snapshot`] per interval. Nothing outside this
//! folder and the commands that start it depends on it, so the model, the
//! analysis, recordings and reports build without BPF (feature `collect`).

pub mod allowance;
pub mod cgroups;
pub mod collector;
pub(crate) mod egress;
pub(crate) mod flowtable;
pub(crate) mod fragments;
pub(crate) mod held;
pub mod ifindex;
pub(crate) mod ifstats;
pub(crate) mod instance;
pub mod kafka;
pub(crate) mod nat;
pub(crate) mod netns;
pub(crate) mod owners;
pub mod per_packet;
pub mod probes;
pub mod qdisc_roots;
pub(crate) mod removed_links;
pub(crate) mod rtnetlink;
