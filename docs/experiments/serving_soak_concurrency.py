"""How many of the soak's client threads run at once, per export: the CPU a loaded SavedModel
takes with 1 and with 16 concurrent clients.

For each export: load it once, answer each of 16 sentences (1 to 30 words) alone, then for 1
and 16 client threads send requests for SECONDS (serving_soak.Clients), and report
requests/s, the process's CPU (utime + stime over wall time, in cores) and the mean number of
its threads in state R (running or runnable), read from /proc/self/task every 0.2 s.
Used by serving_soak.md.

    python docs/experiments/serving_soak_concurrency.py SECONDS EXPORT...
"""

import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))

import numpy as np  # noqa: E402
import serving_soak  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 - registers the tokenizer ops for loading
from bench_serving import catalog_words  # noqa: E402


def running_threads():
    """How many of this process's other threads are in state R now."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as file:
                count += file.read().rsplit(")", 1)[1].split()[0] == "R"
        except OSError:
            continue
    return count - 1  # not the thread that reads


def measure(function, texts, expected, threads, seconds):
    options = serving_soak.SoakOptions(minutes=seconds / 60, threads=threads)
    clients = serving_soak.Clients(function, texts, expected, options)
    cpu, wall, states = sum(os.times()[:2]), time.monotonic(), []
    clients.run(seconds)
    while time.monotonic() < clients.deadline:
        states.append(running_threads())
        time.sleep(0.2)
    clients.join()
    cpu, wall = sum(os.times()[:2]) - cpu, time.monotonic() - wall
    errors = sum(failed for _, _, failed in clients.records)
    return dict(threads=threads, requests_per_second=len(clients.records) / wall,
                cores=cpu / wall, running=float(np.mean(states)), errors=errors,
                load_1=os.getloadavg()[0])


def main(seconds, paths):
    options = serving_soak.SoakOptions(minutes=1, pool=16, longest=30)
    texts = serving_soak.soak_texts(catalog_words(), options)[:16]
    print("| export | threads | requests/s | process cores | threads in state R | errors | load 1 |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        function = tf.saved_model.load(path).signatures["serving_default"]
        expected = serving_soak.warm_up(function, texts)
        for threads in (1, 16):
            row = measure(function, texts, expected, threads, seconds)
            print(f"| {path} | {threads} | {row['requests_per_second']:.2f} | {row['cores']:.2f} | "
                  f"{row['running']:.2f} | {row['errors']} | {row['load_1']:.1f} |", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2:])
