"""Watch a running serving soak from outside: the CPU it gets and what else runs.

Every 30 s, one JSON line: the soak process's CPU use (cores, from /proc/PID/stat), its
resident memory split into anonymous and file-backed pages (/proc/PID/status), its thread
count, the machine's busy share of its cores (/proc/stat), the load average, and the five
other processes that used the most CPU in the interval. Used by serving_soak.md to tell
a slowdown of the server from a busy machine.

    python docs/experiments/serving_soak_watch.py PARENT_PID > watch.jsonl

PARENT_PID: the shell that runs the soaks one after the other; the watched process is its
newest child, so the watch follows from one soak to the next and ends with the shell.
"""

import json
import os
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def status(pid):
    """VmRSS, RssAnon, RssFile (MiB) and Threads of a process."""
    try:
        with open(f"/proc/{pid}/status") as file:
            fields = dict(line.split(":", 1) for line in file if ":" in line)
    except OSError:
        return {}
    out = {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "RssAnon", "RssFile")}
    out["Threads"] = int(fields["Threads"])
    return out


def machine_busy():
    """(busy, total) jiffies of all cores together."""
    with open("/proc/stat") as file:
        values = [int(v) for v in file.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def every_process():
    """{pid: (CPU seconds, short command line)} of the processes now running."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        seconds = cpu_seconds(name)
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                command = file.read().replace(b"\0", b" ").decode(errors="replace")[:90]
        except OSError:
            continue
        if seconds is not None:
            out[int(name)] = (seconds, command)
    return out


def newest_child(parent):
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as file:
            children = [int(pid) for pid in file.read().split()]
    except OSError:
        return None
    return max(children) if children else None


def main(parent, interval=30.0):
    before, busy_before, started = every_process(), machine_busy(), time.time()
    while os.path.exists(f"/proc/{parent}"):
        time.sleep(interval)
        now, busy_now = every_process(), machine_busy()
        used = {pid: now[pid][0] - before[pid][0] for pid in now if pid in before}
        soak = newest_child(parent)
        others = sorted(((seconds, pid) for pid, seconds in used.items() if pid != soak),
                        reverse=True)[:5]
        line = dict(
            minute=(time.time() - started) / 60, soak_pid=soak,
            soak_cores=used.get(soak, 0.0) / interval, **status(soak),
            machine_busy=(busy_now[0] - busy_before[0]) / max(1, busy_now[1] - busy_before[1]),
            load=os.getloadavg(),
            others=[[pid, round(seconds / interval, 2), now[pid][1]] for seconds, pid in others],
        )
        print(json.dumps(line), flush=True)
        before, busy_before = now, busy_now


if __name__ == "__main__":
    main(int(sys.argv[1]))
