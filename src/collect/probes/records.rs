//! Kernel records read as the generated ABI types: the one place user space
//! turns bytes from a BPF map, iterator or ring buffer into a struct.
//!
//! The types come from the objects' BTF (bpf/flows.h, bpf/hostq.h, through
//! libbpf-cargo), never re-declared by hand. Reading one from bytes is sound
//! only for types in which every bit pattern is a valid value, so the
//! reader takes only types that carry [`KernelRecord`], and that trait is
//! implemented here, once, for exactly those.

use std::mem::size_of;

use super::flows_skel::types::{ts_close_event, ts_event, ts_flow_record, uo_key, uo_value};
use super::hostq_skel::types::{hq_drop_key, hq_if_key, hq_if_stats, hq_rate, ll_key, ll_value};

/// A kernel/user ABI struct made of integers and arrays of integers only.
///
/// # Safety
/// Every bit pattern of the type's size must be a valid value: no `bool`,
/// no enum, no reference or pointer, no padding read as a field.
pub(crate) unsafe trait KernelRecord: Copy {}

// SAFETY: each is a generated struct of integer fields and integer arrays
// (bpf/flows.h, bpf/hostq.h, bpf/linklocal.h, the last two in hostq.bpf.o;
// bpf/udpopen.h, in flows.bpf.o: its `comm` an array of C chars);
// the ABI enums travel as plain integers.
unsafe impl KernelRecord for ts_flow_record {}
unsafe impl KernelRecord for ts_event {}
unsafe impl KernelRecord for ts_close_event {}
unsafe impl KernelRecord for hq_if_key {}
unsafe impl KernelRecord for hq_if_stats {}
unsafe impl KernelRecord for hq_drop_key {}
unsafe impl KernelRecord for hq_rate {}
unsafe impl KernelRecord for ll_key {}
unsafe impl KernelRecord for ll_value {}
unsafe impl KernelRecord for uo_key {}
unsafe impl KernelRecord for uo_value {}

/// The record at the start of `bytes`, or None when they are too short.
/// Extra bytes are ignored (a ring-buffer event may be a longer kind).
pub(crate) fn read_record<T: KernelRecord>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked above, and T is a KernelRecord, so any
    // bytes are a valid T; unaligned because map, iterator and ring-buffer
    // buffers carry no alignment promise.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_bytes_are_no_record_and_extra_bytes_are_ignored() {
        let n = size_of::<hq_if_key>();
        assert!(read_record::<hq_if_key>(&vec![0u8; n - 1]).is_none());
        let mut bytes = vec![0u8; n + 3];
        bytes[..4].copy_from_slice(&7u32.to_ne_bytes());
        let key = read_record::<hq_if_key>(&bytes).expect("long enough");
        assert_eq!((key.netns, key.ifindex), (7, 0));
    }
}
