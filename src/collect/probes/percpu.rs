//! Arrays (per-CPU or plain) read whole, in one `BPF_MAP_LOOKUP_BATCH`.
//!
//! A lookup per slot is a syscall per slot: each interval the host-queue
//! probes read 256 slots of transmit-queue counters and 512 of peak rates,
//! and the flow probes ~25 health counters, that way. One batch reads every
//! slot of an array (on every kernel we support: arrays have had batch
//! lookups since 5.7); where the kernel refuses it anyway, the slots are
//! read one by one as before (`each_slot`).

use std::mem::size_of;
use std::os::fd::AsRawFd;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapType};

/// Every slot of an array, as the kernel lays them out: per slot, one value
/// per possible CPU, each padded to 8 bytes (a per-CPU array), or the one
/// value (a plain array: one "CPU").
pub(crate) struct PerCpuSlots {
    buf: Vec<u8>,
    slots: usize,
    cpus: usize,
    stride: usize,
    value_size: usize,
}

impl PerCpuSlots {
    /// Slot `slot`'s value on each CPU (nothing for a slot past the end).
    pub(crate) fn slot(&self, slot: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let row = slot * self.cpus * self.stride;
        let cpus = if slot < self.slots { self.cpus } else { 0 };
        (0..cpus).map(move |cpu| {
            let at = row + cpu * self.stride;
            &self.buf[at..at + self.value_size]
        })
    }

    /// Slot `slot` summed over CPUs, its value a u64 counter.
    pub(crate) fn sum_u64(&self, slot: usize) -> u64 {
        sum_u64(self.slot(slot))
    }
}

/// A u64 counter's per-CPU values summed (wrapping, as the counters
/// themselves do); a value shorter than 8 bytes counts nothing.
pub(crate) fn sum_u64<'a>(per_cpu: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    per_cpu
        .into_iter()
        .filter_map(|v| v.get(..8))
        .map(|v| u64::from_ne_bytes(v.try_into().unwrap()))
        .fold(0, u64::wrapping_add)
}

/// Slot `slot` of the per-CPU array `map`, its value a u64 counter, summed
/// over CPUs (0 for a slot with no value).
pub(crate) fn counter<M: MapCore>(map: &M, slot: u32) -> Result<u64> {
    let per_cpu = map
        .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)?
        .unwrap_or_default();
    Ok(sum_u64(per_cpu.iter().map(Vec::as_slice)))
}

/// Calls `each(slot, values)` for every slot of `map` (an array, per-CPU or
/// plain) that has a value: `values` holds one value per possible CPU (one
/// for a plain array). The slots come from one batch (`read_all`), or where
/// the kernel refuses it from a lookup each; `what` names the map in a
/// lookup's error.
pub(crate) fn each_slot<M: MapCore>(
    map: &M,
    what: &str,
    mut each: impl FnMut(u32, &[&[u8]]) -> Result<()>,
) -> Result<()> {
    let batch = read_all(map);
    for slot in 0..map.max_entries() {
        if let Some(all) = &batch {
            let values: Vec<&[u8]> = all.slot(slot as usize).collect();
            each(slot, &values)?;
            continue;
        }
        let key = slot.to_ne_bytes();
        let looked_up = if map.map_type() == MapType::PercpuArray {
            map.lookup_percpu(&key, MapFlags::ANY)
        } else {
            map.lookup(&key, MapFlags::ANY).map(|v| v.map(|v| vec![v]))
        };
        let Some(owned) = looked_up.with_context(|| format!("reading {what}"))? else {
            continue;
        };
        let values: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        each(slot, &values)?;
    }
    Ok(())
}

/// All of `map` (an array, per-CPU or plain) in one batch; None when the
/// kernel refused the batch or returned less than the whole array.
pub(crate) fn read_all<M: MapCore>(map: &M) -> Option<PerCpuSlots> {
    let slots = map.max_entries() as usize;
    let value_size = map.value_size() as usize;
    let (cpus, stride) = match map.map_type() {
        MapType::PercpuArray => (
            libbpf_rs::num_possible_cpus().ok()?,
            value_size.next_multiple_of(8),
        ),
        MapType::Array => (1, value_size),
        _ => return None,
    };
    let mut keys = vec![0u32; slots];
    let mut buf = vec![0u8; slots * cpus * stride];
    let mut count = u32::try_from(slots).ok()?;
    let mut next = 0u32;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
    };
    // SAFETY: `keys` holds `count` u32 keys (an array's key size), `buf`
    // `count` values of `cpus * stride` bytes (the kernel's per-CPU layout),
    // `next` one key; `opts` is a zeroed, sized bpf_map_batch_opts, and a
    // null `in_batch` starts at the first slot.
    let rc = unsafe {
        libbpf_sys::bpf_map_lookup_batch(
            map.as_fd().as_raw_fd(),
            std::ptr::null_mut(),
            (&mut next as *mut u32).cast(),
            keys.as_mut_ptr().cast(),
            buf.as_mut_ptr().cast(),
            &mut count,
            &opts,
        )
    };
    // ENOENT: the end of the array was reached in the same call.
    let whole = (rc == 0 || rc == -libc::ENOENT) && count as usize == slots;
    // An array's keys come in order; anything else is not read as one.
    let in_order = keys.iter().enumerate().all(|(i, &k)| k as usize == i);
    (whole && in_order).then_some(PerCpuSlots {
        buf,
        slots,
        cpus,
        stride,
        value_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::MapHandle;

    /// A real per-CPU array (root, as every probe test): the batch reads
    /// what a lookup per slot reads, values of an odd size included.
    #[test]
    fn one_batch_reads_what_a_lookup_per_slot_reads() {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let cpus = libbpf_rs::num_possible_cpus().unwrap();
        for value_size in [8u32, 12] {
            let map = MapHandle::create(
                MapType::PercpuArray,
                Some("ts_percpu_t"),
                4,
                value_size,
                5,
                &opts,
            )
            .expect("creating a per-CPU array (needs root)");
            for slot in [0u32, 3] {
                let values: Vec<Vec<u8>> = (0..cpus)
                    .map(|cpu| {
                        (0..value_size)
                            .map(|b| (slot as usize * 50 + cpu * 7 + b as usize) as u8)
                            .collect()
                    })
                    .collect();
                map.update_percpu(&slot.to_ne_bytes(), &values, MapFlags::ANY)
                    .unwrap();
            }
            let all = read_all(&map).expect("a batch lookup of an array");
            for slot in 0..5u32 {
                let one = map
                    .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
                    .unwrap()
                    .unwrap();
                let batch: Vec<Vec<u8>> = all.slot(slot as usize).map(<[u8]>::to_vec).collect();
                assert_eq!(batch, one, "slot {slot}, values of {value_size} bytes");
            }
            assert_eq!(all.slot(5).count(), 0);
            let first8 = |slot: usize, cpu: usize| -> u64 {
                u64::from_ne_bytes(std::array::from_fn(|b| (slot * 50 + cpu * 7 + b) as u8))
            };
            assert_eq!(
                all.sum_u64(3),
                (0..cpus).map(|c| first8(3, c)).fold(0, u64::wrapping_add)
            );
            assert_eq!(all.sum_u64(1), 0);
        }
    }

    /// A plain array reads as one value per slot, as a lookup per slot does.
    #[test]
    fn a_plain_array_reads_one_value_per_slot() {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let map = MapHandle::create(MapType::Array, Some("ts_array_t"), 4, 12, 3, &opts)
            .expect("creating an array (needs root)");
        let value: Vec<u8> = (1..=12).collect();
        map.update(&2u32.to_ne_bytes(), &value, MapFlags::ANY)
            .unwrap();
        let all = read_all(&map).expect("a batch lookup of an array");
        for slot in 0..3u32 {
            let one = map
                .lookup(&slot.to_ne_bytes(), MapFlags::ANY)
                .unwrap()
                .unwrap();
            let batch: Vec<Vec<u8>> = all.slot(slot as usize).map(<[u8]>::to_vec).collect();
            assert_eq!(batch, vec![one], "slot {slot}");
        }
        assert_eq!(all.slot(2).next().unwrap(), &value[..]);
    }
}
