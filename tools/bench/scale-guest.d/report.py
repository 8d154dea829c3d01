#!/usr/bin/env python3
"""Turns tools/bench/scale-guest serial logs into figures.

report.py KERNEL=LOG...: per kernel and socket count, per arm min / median / max over
rounds of CPU per 1 s interval (process user+system, for the observer plus its event
programs' BPF run time; for ss the loop with its reaped children), the observer's ratio to
`ss -tin` of the same round, and which dump iterator the observer used. JSON on stdout, a
table on stderr; exits 1 when a guest did not finish, the rig failed, or an observer did
not dump through the socket-storage map iterator.
"""
import json
import sys

HZ = 100  # USER_HZ on x86-64: /proc/PID/stat and /proc/stat count in 1/100 s


def stats(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    median = xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2
    return {"min": xs[0], "median": median, "max": xs[-1]}


def machine_ticks(cpu_line):
    f = [int(x) for x in cpu_line.split()[1:]]
    # user nice system (idle iowait) irq softirq steal
    return f[0] + f[1] + f[2] + f[5] + f[6] + f[7]


def proc_ticks(stat_line):
    rest = stat_line.rsplit(") ", 1)[1].split()
    ut, st, cut, cst = (int(rest[i]) for i in (11, 12, 13, 14))
    return ut, st, cut, cst


def parse_arm(head, lines):
    """head: 'ARM conns=.. round=.. arm=.. window=..'; lines: the arm's body."""
    kv = dict(p.split("=", 1) for p in head.split()[1:])
    arm = {"conns": int(kv["conns"]), "round": int(kv["round"]), "arm": kv["arm"]}
    r = {}
    after = None
    for line in lines:
        if after:
            r[after] = line
            after = None
            continue
        if line.startswith("=== "):
            name = line[4:].strip()
            if name in ("LINKS", "LAST_HEALTH"):
                after = name
            elif name == "SSLOG":
                after = None
                r["SSLOG"] = []
            elif name == "OBSERVER_FAILED":
                arm["failed"] = True
            continue
        if "SSLOG" in r:
            # n uptime stat-line, after each completed run
            n, up, st = line.split(" ", 2)
            r["SSLOG"].append((int(n), float(up), sum(proc_ticks(st))))
            continue
        key, _, val = line.partition(" ")
        r.setdefault(key, val)
    if arm.get("failed") or "UPTIME_1" not in r:
        arm["failed"] = True
        return arm
    want = {"observer": "throttlescope", "observer-tcp": "throttlescope",
            "ss-tin": "sh", "ss-tinp": "sh"}.get(arm["arm"])
    if want and not (r.get("COMM_0") == want == r.get("COMM_1")):
        arm["failed"] = True
        # Both ends named: either may be the one that was not the arm's process.
        arm["why"] = f'measured {r.get("COMM_0")!r} then {r.get("COMM_1")!r}, not {want!r}'
        return arm
    elapsed = float(r["UPTIME_1"]) - float(r["UPTIME_0"])
    arm["elapsed_s"] = elapsed
    arm["machine_cpu_s_per_interval"] = (
        machine_ticks(r["CPU_1"]) - machine_ticks(r["CPU_0"])) / HZ / elapsed
    if arm["arm"].startswith("ss-"):
        a, b = proc_ticks(r["STAT_0"]), proc_ticks(r["STAT_1"])
        d = [y - x for x, y in zip(a, b)]
        arm["total_s_per_interval"] = sum(d) / HZ / elapsed
        runs = int(r["SSRUNS_1"]) - int(r["SSRUNS_0"])
        arm["runs_per_s"] = runs / elapsed
        # CPU per run from the loop's own log: the runs completed in the window, or
        # if fewer than two, every run logged.
        log = r.get("SSLOG") or []
        t0, t1 = float(r["UPTIME_0"]), float(r["UPTIME_1"])
        inside = [x for x in log if t0 <= x[1] <= t1]
        use = inside if len(inside) >= 2 else log
        if len(use) >= 2 and use[-1][0] > use[0][0]:
            arm["s_per_run"] = (use[-1][2] - use[0][2]) / HZ / (use[-1][0] - use[0][0])
            arm["runs_for_s_per_run"] = use[-1][0] - use[0][0]
    elif arm["arm"].startswith("observer"):
        a, b = proc_ticks(r["STAT_0"]), proc_ticks(r["STAT_1"])
        ids = {int(x) for x in r.get("PROG_IDS", "").split()}
        p0 = {p["id"]: p for p in json.loads(r["PROGS_0"]) if p["id"] in ids}
        p1 = {p["id"]: p for p in json.loads(r["PROGS_1"]) if p["id"] in ids}
        progs = []
        for pid, p in sorted(p1.items()):
            q = p0.get(pid, {})
            runs = p.get("run_cnt", 0) - q.get("run_cnt", 0)
            ns = p.get("run_time_ns", 0) - q.get("run_time_ns", 0)
            progs.append({"name": p.get("name"), "runs": runs, "bpf_s": ns / 1e9,
                          "ns_per_run": ns / runs if runs else None})
        names = {pid: p.get("name") for pid, p in p1.items()}
        # Iterators run inside the observer's read(): already in its system time.
        events = sum(p["bpf_s"] for p in progs
                     if not (p["name"] or "").startswith(("dump_", "seed_")))
        dump_prog = sum(p["bpf_s"] for p in progs if (p["name"] or "").startswith("dump_"))
        user = (b[0] - a[0]) / HZ / elapsed
        system = (b[1] - a[1]) / HZ / elapsed
        arm.update({
            "user_s_per_interval": user,
            "system_s_per_interval": system,
            "process_s_per_interval": user + system,
            "event_programs_s_per_interval": events / elapsed,
            "total_s_per_interval": user + system + events / elapsed,
            "dump_program_s_per_interval": dump_prog / elapsed,
            "snapshots_per_s": (int(r["LINES_1"]) - int(r["LINES_0"])) / elapsed,
            "s_per_run": (user + system + events / elapsed)
                         / ((int(r["LINES_1"]) - int(r["LINES_0"])) / elapsed),
            "peak_rss_mib": int(r.get("HWM_KIB", "0") or 0) / 1024,
            "programs": progs,
        })
        # Which dump: the observer's iterator links and their targets.
        links = json.loads(r.get("LINKS") or "[]")
        dumps = sorted({f'{names.get(l.get("prog_id"))} ({l.get("target_name")})'
                        for l in links
                        if l.get("type") == "iter" and l.get("prog_id") in ids
                        and (names.get(l.get("prog_id")) or "").startswith("dump_")})
        arm["dump_links"] = dumps
        arm["map_iterator"] = dumps == ["dump_flows (bpf_sk_storage_map)"]
        arm["tcp_iterator"] = dumps == ["dump_flows_tcp (tcp)"]
        if r.get("LAST_HEALTH"):
            h = json.loads(r["LAST_HEALTH"])
            hh = h.get("health") or {}
            arm["last_snapshot"] = {
                "flows_listed": h.get("flows_listed"), "idle_flows": h.get("idle_flows"),
                "flows_dumped": hh.get("flows_dumped"), "flows_carried": hh.get("flows_carried"),
                "late_intervals": hh.get("late_intervals"),
                "dump_flows_missing": [p for p in hh.get("programs", [])
                                       if p.get("name", "").startswith("dump_")]}
    return arm


def parse_log(kernel, path):
    with open(path, errors="replace") as f:
        text = f.read().splitlines()
    out = {"kernel": kernel, "log": path, "arms": [], "rigs": [], "problems": []}
    i = 0
    doctor = []
    in_doctor = False
    while i < len(text):
        line = text[i]
        if line.startswith("=== "):
            name = line[4:].strip()
            in_doctor = name == "DOCTOR"
            if name.startswith("KERNEL "):
                out["release"] = name.split(" ", 1)[1]
            elif name.startswith("ULIMIT_N "):
                out["guest"] = name.split(" ", 1)[1]
            elif name.startswith("DOCTOR_RC "):
                out["doctor_rc"] = name.split(" ", 1)[1]
            elif name.startswith("RIG "):
                out["rigs"].append(dict(p.split("=", 1) for p in name.split()[1:]))
            elif name.startswith("RIG_FAILED"):
                out["problems"].append(f"{kernel}: {name}: {text[i + 1] if i + 1 < len(text) else ''}")
            elif name == "END":
                out["finished"] = True
            elif name.startswith("ARM "):
                j = i + 1
                while j < len(text) and text[j].strip() != "=== ARM_END":
                    j += 1
                out["arms"].append(parse_arm(name, text[i + 1:j]))
                i = j
        elif in_doctor:
            doctor.append(line)
        i += 1
    out["doctor_dump_lines"] = [l for l in doctor if "dump_flows" in l]
    if not out.get("finished"):
        out["problems"].append(f"{kernel}: the guest did not finish (no END marker): {path}")
    if out.get("doctor_rc") != "0":
        out["problems"].append(f"{kernel}: doctor exited {out.get('doctor_rc')}")
    if any("[lost]" in l for l in out["doctor_dump_lines"]):
        out["problems"].append(f"{kernel}: doctor: {out['doctor_dump_lines']}")
    for a in out["arms"]:
        if a.get("failed"):
            out["problems"].append(f"{kernel}: {a['conns']} conns round {a['round']} {a['arm']} "
                                   f"failed {a.get('why', '')}")
        elif a["arm"] == "observer" and not a["map_iterator"]:
            out["problems"].append(
                f"{kernel}: {a['conns']} conns round {a['round']}: the observer did NOT dump "
                f"through the map iterator: {a['dump_links']}")
        elif a["arm"] == "observer-tcp" and not a["tcp_iterator"]:
            out["problems"].append(
                f"{kernel}: {a['conns']} conns round {a['round']}: observer-tcp did not dump "
                f"through the TCP iterator: {a['dump_links']}")
    return out


def summarise(log):
    res = []
    arms = [a for a in log["arms"] if not a.get("failed")]
    for conns in sorted({a["conns"] for a in arms}):
        mine = [a for a in arms if a["conns"] == conns]
        ss = {a["round"]: a["total_s_per_interval"] for a in mine if a["arm"] == "ss-tin"}
        ss_run = {a["round"]: a.get("s_per_run") for a in mine if a["arm"] == "ss-tin"}
        rig = next((r for r in log["rigs"] if int(r["conns"]) == conns), {})
        entry = {"kernel": log["kernel"], "release": log.get("release"), "conns": conns,
                 "established_in_sender_ns": int(rig.get("estab", 0)), "bulk": rig.get("bulk"),
                 "guest": log.get("guest"), "arms": []}
        for name in ("nothing", "observer", "observer-tcp", "ss-tin", "ss-tinp"):
            rows = [a for a in mine if a["arm"] == name]
            if not rows:
                continue
            s = {"arm": name, "rounds": len(rows)}
            for key in ("total_s_per_interval", "user_s_per_interval", "system_s_per_interval",
                        "event_programs_s_per_interval", "dump_program_s_per_interval",
                        "machine_cpu_s_per_interval", "snapshots_per_s", "runs_per_s",
                        "s_per_run", "peak_rss_mib"):
                v = stats(a.get(key) for a in rows)
                if v is not None:
                    s[key] = v
            if name.startswith("observer"):
                s["ratio_to_ss_tin"] = stats(
                    a["total_s_per_interval"] / ss[a["round"]] for a in rows
                    if ss.get(a["round"]))
                # Per poll: the observer's CPU per snapshot over ss -tin's per run. Under
                # TCG one ss run can take longer than the second between polls, so per
                # wall second ss is capped below "every second"; per poll it is not.
                s["ratio_to_ss_tin_per_poll"] = stats(
                    a["s_per_run"] / ss_run[a["round"]] for a in rows
                    if ss_run.get(a["round"]))
                s["dump_links"] = sorted({d for a in rows for d in a["dump_links"]})
                s["map_iterator"] = all(a["map_iterator"] for a in rows)
                s["tcp_iterator"] = all(a["tcp_iterator"] for a in rows)
                s["last_snapshot"] = rows[-1].get("last_snapshot")
            entry["arms"].append(s)
        entry["rounds"] = mine
        res.append(entry)
    return res


def ms(v, key="median"):
    return "-" if v is None else f"{v[key] * 1000:.1f}"


def mmm(v, scale=1000, digits=1):
    if v is None:
        return "-"
    return "/".join(f"{v[k] * scale:.{digits}f}" for k in ("min", "median", "max"))


def main():
    logs = [parse_log(*a.split("=", 1)) for a in sys.argv[1:]]
    entries = [e for log in logs for e in summarise(log)]
    for e in entries:
        print(json.dumps(e))
    head = ["kernel", "conns", "arm", "total ms/s min/med/max", "user", "sys",
            "event progs", "dump prog", "x ss -tin (per s)", "polls/s", "ms/poll med",
            "x ss -tin (per poll)", "guest busy", "peak RSS", "dump path"]
    rows = [head]
    for e in entries:
        for s in e["arms"]:
            obs = s["arm"].startswith("observer")
            rate = s.get("snapshots_per_s") or s.get("runs_per_s")
            rows.append([
                e["kernel"], str(e["conns"]), s["arm"], mmm(s.get("total_s_per_interval")),
                ms(s.get("user_s_per_interval")), ms(s.get("system_s_per_interval")),
                ms(s.get("event_programs_s_per_interval")),
                ms(s.get("dump_program_s_per_interval")),
                mmm(s.get("ratio_to_ss_tin"), 1, 3) if obs else "-",
                f"{rate['median']:.2f}" if rate else "-",
                ms(s.get("s_per_run")),
                mmm(s.get("ratio_to_ss_tin_per_poll"), 1, 3) if obs else "-",
                ms(s.get("machine_cpu_s_per_interval")),
                f"{s['peak_rss_mib']['max']:.1f} MiB" if s.get("peak_rss_mib") else "-",
                ", ".join(s["dump_links"]) if obs else "-"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=sys.stderr)
    problems = [p for log in logs for p in log["problems"]]
    for p in problems:
        print(f"scale-guest: FAIL: {p}", file=sys.stderr)
    for log in logs:
        for l in log["doctor_dump_lines"]:
            print(f"scale-guest: {log['kernel']} doctor: {l}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
