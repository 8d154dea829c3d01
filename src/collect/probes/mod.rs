//! The BPF programs, as libbpf-cargo skeletons.

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
pub mod flows_skel {
    include!(concat!(env!("OUT_DIR"), "/flows.skel.rs"));
}

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
pub mod hostq_skel {
    include!(concat!(env!("OUT_DIR"), "/hostq.skel.rs"));
}

pub mod event_reader;
pub mod flows;
pub mod hostq;
pub mod load;
pub mod netns_dump;
pub mod records;
