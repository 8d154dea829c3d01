//! IPv4 fragments this network namespace created (`Ip: FragCreates` in
//! /proc/net/snmp, what `nstat IpFragCreates` shows).
//!
//! Fragmented egress packets have a packet-rate allowance of their own on
//! EC2 that also counts in `pps_allowance_exceeded`: a `pps_limit` verdict
//! says whether any were sent (docs/verdicts.md).

use std::fs;

/// The calling thread's namespace: /proc/net is /proc/self/net, the
/// namespace of the process's main thread, which a thread that entered
/// another namespace (tests, per-namespace readers) does not share.
const SNMP: &str = "/proc/thread-self/net/snmp";

/// The `FragCreates` total of /proc/net/snmp text: the `Ip:` header line
/// names the columns, the next `Ip:` line holds the values.
pub(crate) fn parse_frag_creates(snmp: &str) -> Result<u64, String> {
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = match (ip.next(), ip.next()) {
        (Some(n), Some(v)) => (n, v),
        _ => return Err("no Ip: header and value lines".into()),
    };
    let col = names
        .split_whitespace()
        .position(|n| n == "FragCreates")
        .ok_or("no FragCreates column")?;
    values
        .split_whitespace()
        .nth(col)
        .ok_or_else(|| "Ip: values line shorter than its header".to_string())?
        .parse()
        .map_err(|e| format!("FragCreates: {e}"))
}

/// The namespace's FragCreates total now.
pub(crate) fn read_frag_creates() -> Result<u64, String> {
    let text = fs::read_to_string(SNMP).map_err(|e| format!("{SNMP}: {e}"))?;
    parse_frag_creates(&text).map_err(|e| format!("{SNMP}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP_6_1: &str = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors \
        ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes \
        ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates\n\
        Ip: 1 64 31013 0 0 0 0 0 31013 21596 0 0 0 0 0 0 12 0 36\n\
        Icmp: InMsgs InErrors\nIcmp: 0 0\n";

    #[test]
    fn frag_creates_is_found_by_its_column_name() {
        assert_eq!(parse_frag_creates(SNMP_6_1), Ok(36));
        // 6.3+ appends OutTransmits after it: still the same column.
        let newer = SNMP_6_1
            .replace("FragCreates\n", "FragCreates OutTransmits\n")
            .replace(" 36\n", " 36 21596\n");
        assert_eq!(parse_frag_creates(&newer), Ok(36));
    }

    #[test]
    fn malformed_text_is_an_error() {
        assert!(parse_frag_creates("").is_err());
        assert!(parse_frag_creates("Ip: FragOKs\nIp: 1\n").is_err());
        assert!(parse_frag_creates("Ip: FragCreates\nIp:\n").is_err());
        assert!(parse_frag_creates("Ip: FragCreates\nIp: x\n").is_err());
    }
}
