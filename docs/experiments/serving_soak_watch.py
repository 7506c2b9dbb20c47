"""Watch a running serving soak from outside: the CPU it gets and what else runs.

Every 30 s, one JSON line (with the Unix time): the soak process's CPU use (cores, from /proc/PID/stat), its
resident memory split into anonymous and file-backed pages (/proc/PID/status), its thread
count, the machine's busy share of its cores (/proc/stat), the load average, and the five
other processes that used the most CPU in the interval. Used by serving_soak.md to tell
a slowdown of the server from a busy machine.

    python docs/experiments/serving_soak_watch.py PARENT_PID > watch.jsonl
    python docs/experiments/serving_soak_watch.py --windows SOAK_JSON WATCH_JSONL [START]

PARENT_PID: the shell that runs the soaks one after the other; the watched process is its
newest child, so the watch follows from one soak to the next and ends with the shell.
`--windows` sets the soak's figures beside the watch's, per 5-minute window: requests/s,
p50/p99, the cores the server got and the requests it answered per CPU-second (START: the
Unix time of the soak's minute 0, where its samples carry no `time`).
"""

import json
import os
import sys
import time

import numpy as np

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
            minute=(time.time() - started) / 60, time=time.time(), soak_pid=soak,
            soak_cores=used.get(soak, 0.0) / interval, **status(soak),
            machine_busy=(busy_now[0] - busy_before[0]) / max(1, busy_now[1] - busy_before[1]),
            load=os.getloadavg(),
            others=[[pid, round(seconds / interval, 2), now[pid][1]] for seconds, pid in others],
        )
        print(json.dumps(line), flush=True)
        before, busy_before = now, busy_now


def windows(soak_path, watch_path, start=None, width=5.0):
    """Per `width`-minute window of the soak: its latency and throughput, and the CPU it got."""
    with open(soak_path) as file:
        soak = json.load(file)
    rows = soak["samples"]
    if start is None:
        start = rows[0]["time"] - 60 * rows[0]["minute"]
    with open(watch_path) as file:
        watch = [json.loads(line) for line in file]
    watch = [w for w in watch if start <= w["time"] - 15 <= start + 60 * rows[-1]["minute"]]
    print("| minutes | requests/s | p50 s | p99 s | server cores | requests per CPU-s | "
          "RSS MiB (anon / file) | load 1 |")
    print("|---|---|---|---|---|---|---|---|")
    for begin in np.arange(0, rows[-1]["minute"] - 1e-9, width):
        inside = [r for r in soak["records"] if 60 * begin <= r[0] < 60 * (begin + width)]
        latencies = [r[1] for r in inside]
        seen = [w for w in watch if begin < (w["time"] - start) / 60 <= begin + width + 1e-9]
        cores = float(np.mean([w["soak_cores"] for w in seen])) if seen else float("nan")
        rate = len(inside) / (60 * width)
        last = seen[-1] if seen else {"RssAnon": float("nan"), "RssFile": float("nan")}
        load = float(np.mean([w["load"][0] for w in seen])) if seen else float("nan")
        print(f"| {begin:g}-{begin + width:g} | {rate:.2f} | {np.percentile(latencies, 50):.1f} | "
              f"{np.percentile(latencies, 99):.1f} | {cores:.2f} | {rate / cores:.2f} | "
              f"{last['RssAnon']:.0f} / {last['RssFile']:.0f} | {load:.1f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--windows":
        windows(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else None)
    else:
        main(int(sys.argv[1]))
