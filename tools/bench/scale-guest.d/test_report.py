"""Unit tests of report.py, which turns tools/bench/scale-guest serial logs into figures:
canned arm readings in, CPU per interval, ratios and problems out. No qemu, no root.

Run by tools/test, or `python3 -m unittest discover -s tools/bench/scale-guest.d`.
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


def stat_line(comm, utime, stime, cutime=0, cstime=0):
    """A /proc/PID/stat line: utime..cstime are fields 14-17; comm may hold blanks and ')'."""
    rest = ["S"] + ["0"] * 10 + [str(utime), str(stime), str(cutime), str(cstime)] + ["0"] * 5
    return f"42 ({comm}) " + " ".join(rest)


def cpu_line(user, nice, system, idle, iowait, irq, softirq, steal):
    return f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0"


def observer_arm(conns=1000, rnd=0, arm="observer", utime=(100, 130), stime=(50, 60),
                 lines=(10, 20), event_ns=1e9, target="bpf_sk_storage_map", prog="dump_flows"):
    """The body the guest prints for an observer arm over a 10 s window."""
    progs0 = [{"id": 7, "name": "on_ack", "run_cnt": 0, "run_time_ns": 0},
              {"id": 8, "name": prog, "run_cnt": 0, "run_time_ns": 0}]
    progs1 = [{"id": 7, "name": "on_ack", "run_cnt": 1000, "run_time_ns": int(event_ns)},
              {"id": 8, "name": prog, "run_cnt": 10, "run_time_ns": 2e8},
              {"id": 99, "name": "not_ours", "run_cnt": 5, "run_time_ns": 5e9}]
    links = [{"type": "iter", "prog_id": 8, "target_name": target},
             {"type": "tracing", "prog_id": 7}]
    health = {"flows_listed": conns, "idle_flows": conns - 200,
              "health": {"flows_dumped": conns, "flows_carried": 0, "late_intervals": 0,
                         "programs": []}}
    return [f"=== ARM conns={conns} round={rnd} arm={arm} window=10",
            "UPTIME_0 100.0", "UPTIME_1 110.0",
            f"CPU_0 {cpu_line(1000, 0, 500, 9000, 0, 10, 20, 0)}",
            f"CPU_1 {cpu_line(1500, 0, 700, 9500, 0, 20, 40, 0)}",
            "COMM_0 throttlescope", "COMM_1 throttlescope",
            f"STAT_0 {stat_line('throttlescope', utime[0], stime[0])}",
            f"STAT_1 {stat_line('throttlescope', utime[1], stime[1])}",
            "PROG_IDS 7 8", f"PROGS_0 {json.dumps(progs0)}", f"PROGS_1 {json.dumps(progs1)}",
            f"LINES_0 {lines[0]}", f"LINES_1 {lines[1]}", "HWM_KIB 20480",
            "=== LINKS", json.dumps(links), "=== LAST_HEALTH", json.dumps(health),
            "=== ARM_END"]


def ss_arm(conns=1000, rnd=0, ticks=(0, 200), runs=(0, 10)):
    log = [f"{n} {100.0 + n} {stat_line('sh', 10 * n, 10 * n)}" for n in range(0, 11, 2)]
    return [f"=== ARM conns={conns} round={rnd} arm=ss-tin window=10",
            "UPTIME_0 100.0", "UPTIME_1 110.0",
            f"CPU_0 {cpu_line(0, 0, 0, 0, 0, 0, 0, 0)}", f"CPU_1 {cpu_line(500, 0, 500, 0, 0, 0, 0, 0)}",
            "COMM_0 sh", "COMM_1 sh",
            f"STAT_0 {stat_line('sh', 0, 0, ticks[0], 0)}",
            f"STAT_1 {stat_line('sh', 0, 0, ticks[1], 0)}",
            f"SSRUNS_0 {runs[0]}", f"SSRUNS_1 {runs[1]}",
            "=== SSLOG", *log, "=== ARM_END"]


def guest_log(*arms, end=True, doctor_rc=0):
    lines = ["=== KERNEL 6.12.117+deb12-amd64", "=== ULIMIT_N 1048576 nr_open 1048576 cpus 2",
             "=== DOCTOR", "[ok] dump_flows: bpf_sk_storage_map iterator",
             f"=== DOCTOR_RC {doctor_rc}", "=== RIG conns=1000 estab=1000 bulk=50M"]
    for a in arms:
        lines += a
    if end:
        lines.append("=== END")
    return "\n".join(lines) + "\n"


class Pieces(unittest.TestCase):
    def test_stats_median_of_odd_and_even_and_none_skipped(self):
        self.assertEqual(report.stats([3, None, 1, 2]), {"min": 1, "median": 2, "max": 3})
        self.assertEqual(report.stats([4, 1, 2, 3])["median"], 2.5)
        self.assertIsNone(report.stats([None]))

    def test_machine_ticks_leave_out_idle_and_iowait(self):
        self.assertEqual(report.machine_ticks(cpu_line(1, 2, 3, 1000, 1000, 4, 5, 6)), 21)

    def test_proc_ticks_after_a_comm_with_blanks_and_parens(self):
        self.assertEqual(report.proc_ticks(stat_line("a) b (c", 11, 12, 13, 14)), (11, 12, 13, 14))


class Arms(unittest.TestCase):
    def parse(self, body):
        return report.parse_arm(body[0][4:], body[1:-1])

    def test_observer_cpu_per_interval(self):
        a = self.parse(observer_arm())
        # 30 + 10 ticks of 1/100 s in 10 s; on_ack's 1 s of BPF run time in 10 s; the
        # iterator's time is already in the process's system time, and a program not the
        # observer's (id 99) is left out.
        self.assertAlmostEqual(a["user_s_per_interval"], 0.03)
        self.assertAlmostEqual(a["system_s_per_interval"], 0.01)
        self.assertAlmostEqual(a["event_programs_s_per_interval"], 0.1)
        self.assertAlmostEqual(a["total_s_per_interval"], 0.14)
        self.assertAlmostEqual(a["dump_program_s_per_interval"], 0.02)
        self.assertAlmostEqual(a["snapshots_per_s"], 1.0)
        self.assertAlmostEqual(a["s_per_run"], 0.14)
        self.assertAlmostEqual(a["machine_cpu_s_per_interval"], (700 + 30) / 100 / 10)
        self.assertEqual(a["peak_rss_mib"], 20)
        self.assertEqual([p["name"] for p in a["programs"]], ["on_ack", "dump_flows"])
        self.assertTrue(a["map_iterator"])
        self.assertFalse(a["tcp_iterator"])
        self.assertEqual(a["last_snapshot"]["flows_dumped"], 1000)

    def test_observer_through_the_tcp_iterator(self):
        a = self.parse(observer_arm(arm="observer-tcp", target="tcp", prog="dump_flows_tcp"))
        self.assertEqual(a["dump_links"], ["dump_flows_tcp (tcp)"])
        self.assertTrue(a["tcp_iterator"])
        self.assertFalse(a["map_iterator"])

    def test_ss_loop_cpu_and_per_run_from_its_log(self):
        a = self.parse(ss_arm())
        self.assertAlmostEqual(a["total_s_per_interval"], 0.2)  # 200 reaped ticks in 10 s
        self.assertAlmostEqual(a["runs_per_s"], 1.0)
        # The log: run n at 100 + n s with 20 n ticks; runs 0..10 inside the window.
        self.assertAlmostEqual(a["s_per_run"], 0.2)
        self.assertEqual(a["runs_for_s_per_run"], 10)

    def test_measuring_the_wrong_process_fails_the_arm(self):
        body = [line.replace("COMM_1 throttlescope", "COMM_1 sleep") for line in observer_arm()]
        a = self.parse(body)
        self.assertTrue(a["failed"])
        self.assertIn("'sleep'", a["why"])

    def test_an_arm_without_its_end_reading_failed(self):
        body = [line for line in observer_arm() if not line.startswith("UPTIME_1")]
        self.assertTrue(self.parse(body)["failed"])


class Logs(unittest.TestCase):
    def parse(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "serial.log")
            with open(path, "w") as f:
                f.write(text)
            return report.parse_log("6.12", path)

    def test_a_finished_log_and_its_summary(self):
        log = self.parse(guest_log(observer_arm(rnd=0), ss_arm(rnd=0),
                                   observer_arm(rnd=1, utime=(100, 150)), ss_arm(rnd=1)))
        self.assertEqual(log["problems"], [])
        self.assertEqual(log["release"], "6.12.117+deb12-amd64")
        [entry] = report.summarise(log)
        self.assertEqual((entry["conns"], entry["established_in_sender_ns"], entry["bulk"]),
                         (1000, 1000, "50M"))
        obs = next(s for s in entry["arms"] if s["arm"] == "observer")
        self.assertEqual(obs["rounds"], 2)
        # Totals 0.14 and 0.16 s per interval against ss -tin's 0.2 in the same rounds.
        self.assertAlmostEqual(obs["ratio_to_ss_tin"]["min"], 0.7)
        self.assertAlmostEqual(obs["ratio_to_ss_tin"]["max"], 0.8)
        self.assertAlmostEqual(obs["ratio_to_ss_tin"]["median"], 0.75)
        self.assertAlmostEqual(obs["ratio_to_ss_tin_per_poll"]["median"], 0.75)
        self.assertTrue(obs["map_iterator"])

    def test_problems_unfinished_doctor_and_wrong_dump_path(self):
        text = guest_log(observer_arm(target="tcp", prog="dump_flows_tcp"),
                         end=False, doctor_rc=1)
        problems = self.parse(text)["problems"]
        self.assertTrue(any("did not finish" in p for p in problems), problems)
        self.assertTrue(any("doctor exited 1" in p for p in problems), problems)
        self.assertTrue(any("did NOT dump through the map iterator" in p for p in problems),
                        problems)


if __name__ == "__main__":
    unittest.main()
