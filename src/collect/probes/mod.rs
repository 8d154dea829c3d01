//! The BPF programs, as libbpf-cargo skeletons.

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
pub(crate) mod flows_skel {
    include!(concat!(env!("OUT_DIR"), "/flows.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
pub(crate) mod hostq_skel {
    include!(concat!(env!("OUT_DIR"), "/hostq.skel.rs"));
}

pub(crate) mod event_reader;
pub mod flows;
pub(crate) mod growth;
pub mod hostq;
pub(crate) mod linklocal;
pub mod load;
pub(crate) mod netns_dump;
pub(crate) mod percpu;
pub(crate) mod qdisc_counts;
pub(crate) mod records;
pub(crate) mod udpopen;
