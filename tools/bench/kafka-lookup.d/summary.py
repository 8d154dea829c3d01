#!/usr/bin/env python3
"""The figures of tools/bench/kafka-lookup from its raw arm records (one JSON object a line):
JSON on stdout, a table on stderr. Per group count and round, from the `on` arm:

- ours: the lookup's own counters (health.kafka) over the window, per lookup;
- the lookup thread's on-CPU time (schedstat of the thread `kafka-lookup`) per lookup, and
  the observer's whole CPU (utime + stime) per second in the `on` and `off` windows;
- the broker's: Kafka's own counters (RequestsPerSec per request type, socket-server-metrics
  of the CLIENT listener) over the whole arm, less the `off` arm's over as long, divided by
  the lookups the broker saw (its ListGroups: one a lookup of a one-broker cluster); and the
  broker JVM's CPU per second, `on` against `off`;
- every lookup's duration (last_lookup_ms), and the last health: groups, groups not
  described, members, failures.
"""

import argparse
import json
import statistics
import sys

LOOKUP_APIS = ["ApiVersions", "Metadata", "ListGroups", "DescribeGroups", "ConsumerGroupDescribe"]


def delta(after, before, *path):
    a, b = after, before
    for p in path:
        a = (a or {}).get(p, 0)
        b = (b or {}).get(p, 0)
    return (a or 0) - (b or 0)


def broker_deltas(arm):
    m0, m1 = arm["broker_before"], arm["broker_after"]
    d = {"requests_" + k: delta(m1, m0, "requests", k) for k in LOOKUP_APIS}
    d["requests_all"] = sum(m1["requests"].values()) - sum(m0["requests"].values())
    for k in ["incoming_byte_total", "outgoing_byte_total", "request_total", "connection_creation_total"]:
        d[k] = delta(m1, m0, "listeners", "CLIENT", k)
    d["request_bytes_lookup_apis"] = sum(delta(m1, m0, "request_bytes", k) for k in LOOKUP_APIS)
    return d


def one_round(on, off, hz):
    s, e = on["start"], on["end"]
    ks, ke = s["kafka"], e["kafka"]
    lookups = ke["lookups_ok"] - ks["lookups_ok"]
    failed = ke["lookups_failed"] - ks["lookups_failed"]
    window = e["t"] - s["t"]
    off_window = off["end"]["t"] - off["start"]["t"]
    r = {
        "lookups": lookups,
        "lookups_failed_in_window": failed,
        "window_s": round(window, 3),
        "ours": {
            k: (ke[k] - ks[k]) / lookups for k in ["requests", "bytes_sent", "bytes_received"]
        },
        "lookup_thread_ms": (e["thread_ns"] - s["thread_ns"]) / 1e6 / lookups,
        "observer_cpu_ms_per_s": {
            "on": (e["ticks"] - s["ticks"]) / hz * 1e3 / window,
            "off": (off["end"]["ticks"] - off["start"]["ticks"]) / hz * 1e3 / off_window,
        },
        "lookup_ms": on["lookup_ms"],
        "last": on["last"],
    }
    r["observer_cpu_ms_per_lookup"] = (
        (r["observer_cpu_ms_per_s"]["on"] - r["observer_cpu_ms_per_s"]["off"]) * window / lookups
    )
    bon, boff = broker_deltas(on), broker_deltas(off)
    scale = on["arm_s"] / off["arm_s"]
    seen = bon["requests_ListGroups"] - boff["requests_ListGroups"] * scale
    r["broker_lookups"] = bon["requests_ListGroups"]
    r["broker_arm_on"] = bon
    r["broker_arm_off"] = boff
    r["broker"] = {k: (bon[k] - boff[k] * scale) / seen for k in bon} if seen > 0 else None
    r["broker_cpu_ms_per_s"] = {
        "on": on["broker_ticks"] / hz * 1e3 / on["arm_s"],
        "off": off["broker_ticks"] / hz * 1e3 / off["arm_s"],
    }
    r["broker_cpu_ms_per_lookup"] = (
        (r["broker_cpu_ms_per_s"]["on"] - r["broker_cpu_ms_per_s"]["off"]) * on["arm_s"] / seen
        if seen > 0
        else None
    )
    return r


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--machine", default="{}")
    ap.add_argument("--config", default="{}")
    a = ap.parse_args()
    machine, config = json.loads(a.machine), json.loads(a.config)
    hz = config.get("clk_tck", 100)
    arms = [json.loads(line) for line in open(a.raw) if line.strip()]
    counts = []
    for n in sorted({x["groups"] for x in arms}):
        rounds = []
        for rnd in sorted({x["round"] for x in arms if x["groups"] == n}):
            pick = {x["arm"]: x for x in arms if x["groups"] == n and x["round"] == rnd}
            rounds.append(one_round(pick["on"], pick["off"], hz))
        durations = [d for r in rounds for d in r["lookup_ms"]]
        last = rounds[-1]["last"]
        counts.append(
            {
                "groups": n,
                "created": next(x["created"] for x in arms if x["groups"] == n),
                "median": {
                    "ours": {k: med([r["ours"][k] for r in rounds]) for k in rounds[0]["ours"]},
                    "broker": {
                        k: med([(r["broker"] or {}).get(k) for r in rounds])
                        for k in (rounds[0]["broker"] or {})
                    },
                    "lookup_thread_ms": med([r["lookup_thread_ms"] for r in rounds]),
                    "observer_cpu_ms_per_s_on": med([r["observer_cpu_ms_per_s"]["on"] for r in rounds]),
                    "observer_cpu_ms_per_s_off": med([r["observer_cpu_ms_per_s"]["off"] for r in rounds]),
                    "observer_cpu_ms_per_lookup": med([r["observer_cpu_ms_per_lookup"] for r in rounds]),
                    "broker_cpu_ms_per_s_on": med([r["broker_cpu_ms_per_s"]["on"] for r in rounds]),
                    "broker_cpu_ms_per_s_off": med([r["broker_cpu_ms_per_s"]["off"] for r in rounds]),
                    "broker_cpu_ms_per_lookup": med([r["broker_cpu_ms_per_lookup"] for r in rounds]),
                },
                "lookup_ms": {
                    "n": len(durations),
                    "min": min(durations) if durations else None,
                    "median": med(durations),
                    "max": max(durations) if durations else None,
                },
                "last": last,
                "rounds": rounds,
            }
        )
    json.dump({"machine": machine, "config": config, "counts": counts, "arms": arms}, sys.stdout, indent=1)
    print(file=sys.stdout)
    table(machine, config, counts)


def fmt(x, nd=0):
    if x is None:
        return "-"
    return f"{x:,.{nd}f}"


def table(machine, config, counts):
    rows = [
        ("groups listed / not described", lambda c: f"{c['last']['groups']} / {c['last']['groups_not_described']}"),
        ("members listed", lambda c: str(c["last"]["members"])),
        ("lookups failed (whole arm)", lambda c: str(c["last"]["lookups_failed"])),
        ("lookup ms: median (max)", lambda c: f"{fmt(c['lookup_ms']['median'])} ({fmt(c['lookup_ms']['max'])})"),
        ("ours: requests / lookup", lambda c: fmt(c["median"]["ours"]["requests"], 1)),
        ("ours: bytes sent / lookup", lambda c: fmt(c["median"]["ours"]["bytes_sent"])),
        ("ours: bytes received / lookup", lambda c: fmt(c["median"]["ours"]["bytes_received"])),
        ("broker: lookups seen (ListGroups)", lambda c: str(c["rounds"][0]["broker_lookups"])),
        ("broker: requests / lookup", lambda c: fmt(c["median"]["broker"].get("request_total"), 1)),
        ("broker:   of them DescribeGroups", lambda c: fmt(c["median"]["broker"].get("requests_DescribeGroups"), 1)),
        ("broker: bytes in / lookup", lambda c: fmt(c["median"]["broker"].get("incoming_byte_total"))),
        ("broker: bytes out / lookup", lambda c: fmt(c["median"]["broker"].get("outgoing_byte_total"))),
        ("broker: connections / lookup", lambda c: fmt(c["median"]["broker"].get("connection_creation_total"), 1)),
        ("lookup thread CPU ms / lookup", lambda c: fmt(c["median"]["lookup_thread_ms"], 2)),
        ("observer CPU ms/s: on / off", lambda c: f"{fmt(c['median']['observer_cpu_ms_per_s_on'], 1)} / {fmt(c['median']['observer_cpu_ms_per_s_off'], 1)}"),
        ("observer CPU ms / lookup (on-off)", lambda c: fmt(c["median"]["observer_cpu_ms_per_lookup"], 1)),
        ("broker CPU ms/s: on / off", lambda c: f"{fmt(c['median']['broker_cpu_ms_per_s_on'], 1)} / {fmt(c['median']['broker_cpu_ms_per_s_off'], 1)}"),
        ("broker CPU ms / lookup (on-off)", lambda c: fmt(c["median"]["broker_cpu_ms_per_lookup"], 1)),
    ]
    w = max(len(r[0]) for r in rows)
    out = sys.stderr
    print(
        f"kafka-lookup: {machine.get('date', '')}, {machine.get('cpus', '?')} CPUs, load "
        f"{machine.get('loadavg_start', '?')} -> {machine.get('loadavg_end', '?')}, Kafka "
        f"{config.get('kafka', '?')}, period {config.get('period_s')} s, "
        f"{config.get('lookups')} lookups x {config.get('rounds')} round(s), "
        f"{config.get('members', 0)} live members",
        file=out,
    )
    cells = [[f(c) for c in counts] for _, f in rows]
    cw = max([len(x) for r in cells for x in r] + [len(f"{c['groups']} groups") for c in counts])
    print(f"{'':<{w}}  " + "  ".join(f"{str(c['groups']) + ' groups':>{cw}}" for c in counts), file=out)
    for (name, _), r in zip(rows, cells):
        print(f"{name:<{w}}  " + "  ".join(f"{x:>{cw}}" for x in r), file=out)


if __name__ == "__main__":
    main()
