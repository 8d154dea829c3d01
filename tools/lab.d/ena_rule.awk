# The ENA counting rule, written once: how many packets a shaping qdisc "queued or dropped"
# in one sampling period (100 ms), the increment of an emulated *_allowance_exceeded counter.
#
# Both emulators run it: the lab's (tools/lab.d/ena_emulator.py, on the host) and the kernel
# matrix guest's (tools/kernels.d/ena-emulator, busybox sh in a qemu guest whose initramfs
# has busybox but no python, so the rule cannot be python; awk runs in both). Each emulator
# reads its qdisc its own way (tc's JSON, tc's text) and keeps the previous sample; the
# arithmetic lives only here. Plain POSIX awk: mawk on the host, busybox awk in the guest
# (test_ena_emulator.py runs the rule's cases under both).
#
# Input, one line per qdisc and period (the first sample after start gives no line: the
# counters start at emulator start):
#   PREV_HANDLE PREV_SENT PREV_DROPS PREV_BACKLOG HANDLE SENT DROPS BACKLOG DROPS_ONLY
# PREV_* is the previous sample, PREV_HANDLE "-" when the device had no shaping qdisc then;
# SENT and DROPS are the qdisc's packet counters, BACKLOG its queue (bytes plus packets:
# only "is there a queue" matters), DROPS_ONLY 1 for a shaper counted like a policer.
# Output: one line per input line, the packets to add.
{
    # A qdisc that was not there, was replaced (another handle) or restarted its counters
    # (they went back) during the period: its own counters, from 0, with no queue at the
    # start. Otherwise a `tc qdisc replace` would count a negative or a huge period.
    if ($1 == "-" || $1 != $5 || $6 < $2 || $7 < $3) {
        $2 = 0; $3 = 0; $4 = 0
    }
    sent = $6 - $2
    drops = $7 - $3
    # tbf's overlimits is not "queued": a period counts as queued when the backlog stood at
    # both ends of it (a standing queue, as under enforcement; a burst seen at one sampling
    # instant is not counted in full), or when it dropped (the queue was full), and then
    # every packet it sent was queued (docs/lab.md, "why both ends").
    queued = (($4 > 0 && $8 > 0) || drops > 0) ? sent : 0
    # A hard cap (the lab's hard_cap) counts only what it threw away, as a policer would:
    # the normalised rate stays far under 50% while the cap holds throughput down.
    if ($9 == 1)
        queued = 0
    printf "%d\n", drops + queued
}
