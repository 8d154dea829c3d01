#!/usr/bin/env python3
"""Checks one kernel-matrix guest's serial log (tools/kernels).

check.py LOG EXPECT KERNEL [static|dynamic]: EXPECT is `observe` (doctor exits 0, each scenario's
`watch --json` runs and is judged right, per-flow retransmits agree with the
guest's RetransSegs), `doctor` (--version and doctor exit 0, nothing more is
run: tools/kernels --doctor-only) or `refuse` (doctor and watch exit non-zero
naming the floor). In every case `--version` must run and name the binary.
With `static`, the binary must have run in a chroot holding nothing but
itself and the mount points (the JAIL section lists it).
Prints one summary line (tab-separated) for the table, then any failures;
exits 1 when a check failed.
"""
import json
import re
import sys

# The scenario and the verdict it must be held at, as the views, metrics
# and report show it: the held verdict (docs/verdicts.md), its onset dated
# back to the first interval of its run.
EXPECTED = {"hv_queuing": "hypervisor_queuing", "hv_drop": "hypervisor_drop"}
# The share of busy intervals the held verdict must cover. TCP's ramp-up
# (1-2 intervals under the shaper's rate, free flow) is part of every run:
# 6-10 busy intervals, so 0.6 allows it and no more than one other miss.
HELD_MOST = 0.6
# The share of a sender's sampled segments that must find data waiting.
MOST = 0.5
RETRANS_TOLERANCE = 0.05
# The programs each kernel of the matrix lacks (docs/kernels.md, the program
# table): the tcp_sendmsg_locked tracepoint is newer than both. Any other
# program left out there is a regression (a change its verifier refuses),
# even when doctor names it: the rest of the run would pass without it.
EXPECTED_LOST = {"6.1": {"tcp_sendmsg_locked"}, "6.12": {"tcp_sendmsg_locked"}}


def sections(text):
    """`=== NAME rest` markers -> {NAME rest: body}; scenarios nest by order."""
    out, name, body = [], None, []
    for line in text.splitlines():
        if line.startswith("=== "):
            if name is not None:
                out.append((name, "\n".join(body)))
            name, body = line[4:].strip(), []
        elif name is not None:
            body.append(line)
    if name is not None:
        out.append((name, "\n".join(body)))
    return out


def held_as(rows, iface):
    """Per busy interval of `iface` (its own verdict not idle), the held
    verdict that finally covered it: a held run's `since_seq` dates its onset
    back, so an interval is covered by the latest run whose onset is at or
    before it and that was still held at or after it. Returns
    [(seq, own verdict, held verdict)]."""
    busy, runs = [], []
    for n, r in enumerate(rows):
        a = r["analysis"]
        seq = a.get("seq", n)
        for i in a["interfaces"]:
            if i["iface"] != iface:
                continue
            if i["verdict"] != "idle":
                busy.append((seq, i["verdict"]))
            held = i.get("held")
            if held:
                runs.append((held.get("since_seq", seq), seq, held["verdict"]))
    out = []
    for seq, own in busy:
        # The run with the latest onset that covers it: a later onset dated
        # back over it wins over the run it ended.
        latest = max(((since, at, v) for since, at, v in runs if since <= seq <= at), default=None)
        out.append((seq, own, latest[2] if latest else "none"))
    return out


def per_packet(secs, value, verdicts, fails):
    """`watch --per-packet auto` (the PERPACKET sections): paused in some
    interval, then, once the counter moved, running again: an interval after
    a paused one measured with b0's peak rate, and no attach refused."""
    rc = value("PERPACKET_RC")
    if rc != "0":
        fails.append(f"watch --per-packet auto exit {rc}: {dict(secs).get('PERPACKET_ERR', '').strip()[:400]}")
        return
    rows = []
    for line in dict(secs).get("PERPACKET", "").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    states = [r.get("health", {}).get("per_packet") or {} for r in rows]
    refused = [s["why"] for s in states if "; but " in s.get("why", "")]
    if refused:
        fails.append(f"--per-packet auto: attaching again failed: {refused[0][:300]}")
        return
    paused = [n for n, s in enumerate(states) if s and not s.get("measured", True)]
    again = [n for n, s in enumerate(states)
             if paused and n > paused[0] and s.get("measured")
             and any(i["name"] == "b0" and i.get("tx_peak_bps") is not None
                     for i in rows[n].get("interfaces", []))]
    if not paused:
        fails.append(f"--per-packet auto: never paused in {len(rows)} intervals")
    elif not again:
        fails.append(f"--per-packet auto: paused from interval {paused[0]}, never measured again: "
                     f"{[s.get('why', '') for s in states]}")
    else:
        verdicts.append(f"--per-packet auto paused {len(paused)}, ran again from interval {again[0]}")


POD_IP = "10.77.3.2"


def pod_flow_ifaces(row):
    """The interfaces the guest's pod's flows (from POD_IP, behind this namespace) were given
    in an interval of `watch --all-netns`: "none" for an unrouted one, "-" for none known."""
    out = []
    for f in row.get("flows", []):
        if str(f.get("local", "")).startswith(POD_IP + ":"):
            out.append(f.get("iface") or ("none" if f.get("unrouted") else "-"))
    return out


def snmp(body):
    lines = [l for l in body.splitlines() if l.startswith("Tcp:")]
    if len(lines) < 2:
        return None
    return dict(zip(lines[0].split(), lines[1].split()))


def main():
    log, expect, kernel = sys.argv[1:4]
    text = open(log, errors="replace").read()
    secs = sections(text)
    names = [n for n, _ in secs]
    fails = []

    def value(prefix):
        for n, _ in secs:
            if n.startswith(prefix + " "):
                return n[len(prefix) + 1:]
        return None

    release = value("KERNEL") or "?"
    static = len(sys.argv) > 4 and sys.argv[4] == "static"
    # -xdev: the mounted /proc, /sys, /dev and /tmp are not listed.
    JAIL = [".", "./dev", "./proc", "./sys", "./throttlescope", "./tmp"]
    jail = [l.strip() for l in dict(secs).get("JAIL", "").splitlines() if l.strip()]
    if static and sorted(jail) != JAIL:
        fails.append(f"the chroot should hold only the binary and mount points, it held {jail}")
    if not static and "JAIL" in names:
        fails.append("a chroot for a binary that is not static")
    mode = ", static, alone in a chroot" if static else ""
    doctor = dict(secs).get("DOCTOR", "")
    doctor_rc = value("DOCTOR_RC")
    if "END" not in names:
        # A guest kernel that died says how in the serial log: its first
        # oops or panic line names it (the rest is the trace, in the log).
        died = next((l.strip() for l in text.splitlines()
                     if re.search(r"\] (Oops: |Kernel panic|BUG: )", l)), None)
        fails.append("the guest did not finish (no END marker"
                     + (f"; its kernel died: {died!r}" if died else "") + "): see " + log)
    version = dict(secs).get("VERSION", "").strip()
    if value("VERSION_RC") != "0" or not version.startswith("throttlescope "):
        fails.append(f"--version exit {value('VERSION_RC')}: {version[:300]!r}")
    commit = re.search(r"^commit (\S+)", version, re.M)
    version = (version.splitlines()[0] if version else "?") + (f" (commit {commit.group(1)})" if commit else "")

    if expect == "doctor":
        if doctor_rc != "0":
            fails.append(f"doctor exit {doctor_rc}: {doctor.strip()[-600:]}")
        # The [lost] lines' subjects ("tracepoint tcp_sendmsg_locked"), not
        # the closing line that counts them.
        lost = [l.split("(")[0].replace("[lost]", "").strip() for l in doctor.splitlines() if l.startswith("[lost]")]
        print(f"{kernel}\t{release}\t{version}; doctor exit {doctor_rc}, lost: {', '.join(lost) or 'nothing'}{mode}\t-\t-")

    elif expect == "refuse":
        watch_rc = value("WATCH_RC")
        watch_out = dict(secs).get("WATCH_ERR", "")
        for what, rc, out in (("doctor", doctor_rc, doctor), ("watch", watch_rc, watch_out)):
            if rc in (None, "0"):
                fails.append(f"{what} did not refuse (exit {rc})")
            if rc == "101" or "panicked" in out:
                fails.append(f"{what} panicked")
            if "5.12" not in out:
                fails.append(f"{what} does not name the floor (5.12): {out.strip()[:300]!r}")
            if not re.search(r"bpf_sk_storage_get|bpf_get_socket_cookie", out):
                fails.append(f"{what} does not name the missing kernel feature")
            if "libbpf:" in out:
                fails.append(f"{what} printed libbpf noise: {out.strip()[:300]!r}")
        print(f"{kernel}\t{release}\tdoctor exit {doctor_rc}, watch exit {watch_rc}: refused (floor 5.12){mode}\t-\t-")
    else:
        if doctor_rc != "0":
            fails.append(f"doctor exit {doctor_rc}: {doctor.strip()[-600:]}")
        attached, lost, verdicts, retrans = "?", "?", [], []
        current = None
        by_scenario = {}
        for n, body in secs:
            if n.startswith("SCENARIO "):
                current = n.split()[1]
                by_scenario[current] = {}
            elif current is not None:
                by_scenario[current][n.split()[0]] = (n, body)
        for scenario, want in EXPECTED.items():
            got = by_scenario.get(scenario)
            if got is None:
                fails.append(f"{scenario}: not run")
                continue
            rc = got.get("WATCH_RC", ("WATCH_RC ?", ""))[0].split()[-1]
            if rc != "0":
                fails.append(f"{scenario}: watch exit {rc}: {got.get('STDERR', ('', ''))[1][:400]}")
            rows = []
            for line in got.get("JSON", ("", ""))[1].splitlines():
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        fails.append(f"{scenario}: a cut JSON line")
            if not rows:
                fails.append(f"{scenario}: no interval")
                continue
            progs = rows[-1]["health"]["programs"]
            attached = f"{sum(1 for p in progs if p.get('attached', True))}/{len(progs)}"
            # What this kernel cannot give, doctor must have named: a
            # program not attached has its [lost] line, unless another program
            # does its work (`done_by`: qdisc_dequeue's by dev_xmit from 6.2),
            # and then that one must be attached.
            lost_lines = [l for l in doctor.splitlines() if l.startswith("[lost]")]
            missing = sorted(p["name"] for p in progs
                             if not p.get("attached", True) and not p.get("done_by"))
            for name in missing:
                if not any(name in l for l in lost_lines):
                    fails.append(f"{scenario}: {name} is not attached, and doctor has no [lost] line for it")
            if kernel in EXPECTED_LOST:
                for name in sorted(set(missing) - EXPECTED_LOST[kernel]):
                    why = next((p.get("not_attached", "") for p in progs if p["name"] == name), "")
                    fails.append(f"{scenario}: {name} is not attached on {kernel}, where it should be: {why[:300]}")
            attached_names = {p["name"] for p in progs if p.get("attached", True)}
            handed = sorted(f"{p['name']} by {p['done_by']}" for p in progs
                            if not p.get("attached", True) and p.get("done_by"))
            for p in progs:
                if not p.get("attached", True) and p.get("done_by") and p["done_by"] not in attached_names:
                    fails.append(f"{scenario}: {p['name']} is done by {p['done_by']}, which is not attached")
            lost = (", ".join(missing) or "nothing") + (f" (done by another: {', '.join(handed)})" if handed else "")
            # The per-interval flow read is the same design on every kernel
            # of the matrix (docs/performance.md): the moved-set sweep.
            dump = next((l.split("flow dump: ", 1)[1] for l in doctor.splitlines()
                         if "flow dump: " in l), "")
            if not dump.startswith("flows that moved"):
                fails.append(f"{scenario}: doctor's flow dump is not the moved set: {dump or 'no line'!r}")
            # The first interval is the observer's start: not judged.
            judged = held_as(rows[1:], "b0")
            hits = sum(1 for _, _, held in judged if held == want)
            verdicts.append(f"{scenario} held {hits}/{len(judged)} {want}")
            if not judged or hits / len(judged) < HELD_MOST:
                seen = [f"{own}->{held}" for _, own, held in judged]
                fails.append(f"{scenario}: held {want} in {hits} of {len(judged)} busy intervals "
                             f"(own->held): {seen}")
            # Bulk senders against the shaper have data waiting: the send
            # limit figures (tcp_info's chrono, the per-ACK count) are read on
            # this kernel, and the tick rate was told.
            sending = [f for r in rows[1:] for f in r["flows"] if f["delta"]["bytes_sent"] > 0]
            probes = sum(f["delta"]["probe_events"] for f in sending)
            waiting = sum(f["delta"].get("waiting_events", 0) for f in sending)
            busy = sum(f["delta"].get("busy_us", 0) for f in sending)
            share = waiting / probes if probes else 0.0
            verdicts.append(f"{scenario} data waiting {share:.0%}")
            if share < MOST or busy == 0:
                fails.append(f"{scenario}: data waiting in {waiting}/{probes} segments, busy {busy} us")
            s0 = snmp(got.get("SNMP0", ("", ""))[1])
            s1 = snmp(got.get("SNMP1", ("", ""))[1])
            ours = sum(f["delta"]["retrans_segs"] for r in rows for f in r["flows"])
            if s0 and s1:
                theirs = int(s1["RetransSegs"]) - int(s0["RetransSegs"])
                retrans.append(f"{scenario} {ours}/{theirs}")
                if abs(ours - theirs) > max(RETRANS_TOLERANCE * theirs, 1):
                    fails.append(f"{scenario}: per-flow retransmits {ours}, RetransSegs {theirs} (>5% apart)")
            else:
                fails.append(f"{scenario}: no /proc/net/snmp readings")
        # --all-netns: the same programs, with the link-local count's
        # forwarded mode, attached (on_dev_xmit carries it).
        all_rc = value("ALLNETNS_RC")
        if all_rc != "0":
            fails.append(f"watch --all-netns exit {all_rc}: {dict(secs).get('ALLNETNS_ERR', '').strip()[:400]}")
        else:
            try:
                row = json.loads(dict(secs).get("ALLNETNS", "").strip())
                progs = {p["name"]: p.get("attached", True) for p in row["health"]["programs"]}
                if not progs.get("dev_xmit"):
                    fails.append(f"watch --all-netns: dev_xmit not attached: {progs}")
                else:
                    verdicts.append("--all-netns dev_xmit attached")
                pod = pod_flow_ifaces(row)
                if pod and all(i == "b0" for i in pod):
                    verdicts.append(f"a pod's flow on b0 ({len(pod)} of {len(pod)})")
                else:
                    fails.append(f"watch --all-netns: the pod's flows on {pod or 'none seen'}, not b0")
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                fails.append(f"watch --all-netns: no interval read ({e})")
        per_packet(secs, value, verdicts, fails)
        dumped = "the moved set" if "flow dump: flows that moved" in doctor else "NOT the moved set"
        print(f"{kernel}\t{release}\tdoctor exit {doctor_rc}, programs attached {attached}, doctor names as lost: {lost}, flows read from {dumped}{mode}\t"
              f"{'; '.join(verdicts)}\t{'; '.join(retrans)}")
    for f in fails:
        print(f"  FAIL {kernel}: {f}")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
