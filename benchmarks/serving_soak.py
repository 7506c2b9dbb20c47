"""A serving soak: client threads calling one loaded SavedModel for many minutes.

`bench_serving.py --soak MINUTES` runs it (the model, the export and the command line are
there); this module holds the soak itself. TF Serving soaks a model server the same way: one
model loaded once, steady traffic for a long time, memory and latency watched for drift.

The requests are single sentences: `pool` sentences of 1 to 200 words drawn uniformly (one of
1 word and one of 200 always among them), then the odd texts of `ODD_TEXTS`. Each is answered
once alone before the clock starts (the warm-up: the reference answers, and every XLA program
compiled); during the soak each thread takes the next request of a shuffled cycle through the
pool as soon as its previous one is answered. A request fails when it raises or when its
answer differs from the one it got alone.

Every `interval_s` seconds a sample records the process's resident memory (VmRSS: the model,
every thread's buffers and TensorFlow's allocator, since the clients run in the serving
process), the requests/s, p50 and p99 latency of the requests answered in that interval,
the failures and `os.getloadavg()` (the machine is shared: the load shows what else ran).

The goals (issue #52), with the windows of a 30-minute soak (a shorter soak scales them by
MINUTES / 30; a longer one keeps them 5 minutes wide):
- no failed request;
- RSS growth after the first 5 minutes under 5%: the highest RSS of the samples after
  minute 5 against the RSS at minute 5;
- p99 latency of the last 5 minutes within 1.2x the p99 of minutes 5 to 10.

    python benchmarks/serving_soak.py --plot a.json b.json --out docs/images/serving_soak.png
"""

import argparse
import dataclasses
import json
import os
import threading
import time

import numpy as np

# The odd texts of tests/serve_attacks.py (a 100,000-character string) and tests/test_export.py
# (empty, emoji and other non-ASCII text, bytes that are not UTF-8), copied: benchmarks import
# nothing from tests. serve_attacks.py's batch of 1,000 strings is left out: the soak sends
# one sentence per request, and one such batch would be its p99 alone.
ODD_TEXTS = (
    "",
    "hola",
    "frase número 7.",
    "a bird 😀 über ☃ 猫",
    b"a dog \xff\xfe and \xc3",
    "a dog \ufffd\ufffd and \ufffd",
    ("una frase muy larga, " * 5000)[:100_000],
)
GROWTH_GOAL = 0.05  # RSS growth after the settling window
P99_GOAL = 1.2  # p99 of the last window over the reference window's
SOAK_WINDOW_MINUTES = 5.0  # the settling, reference and last windows of a 30-minute soak


@dataclasses.dataclass(frozen=True)
class SoakOptions:
    """How a soak runs.

    Attributes:
        minutes: how long the clients send requests.
        threads: client threads, each with one request in flight.
        interval_s: seconds between samples.
        pool: random sentences besides `ODD_TEXTS`.
        longest: the most words in a random sentence (the fewest is 1).
        seed: the sentences' and the order's seed.
    """

    minutes: float
    threads: int = 16
    interval_s: float = 30.0
    pool: int = 64
    longest: int = 200
    seed: int = 0


def soak_texts(words, options):
    """The request pool: `options.pool` sentences of 1..`longest` words, then `ODD_TEXTS`."""
    rng = np.random.default_rng(options.seed)
    lengths = rng.integers(1, options.longest + 1, size=options.pool)
    lengths[:2] = (1, options.longest)
    sentences = [" ".join(rng.choice(words, size=length)) for length in lengths]
    return sentences + list(ODD_TEXTS)


def memory_mib():
    """This process's resident memory (VmRSS) and its peak (VmHWM), in MiB."""
    with open("/proc/self/status") as file:
        fields = dict(line.split(":", 1) for line in file if ":" in line)
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM")}


def answer(function, text):
    """One request of one sentence: (tokens, translation) as NumPy arrays."""
    import tensorflow as tf

    out = function(text=tf.constant([text]))
    return out["tokens"].numpy(), out["translation"].numpy()


def warm_up(function, texts):
    """Each text answered alone: the reference answers."""
    return [answer(function, text) for text in texts]


class Clients:
    """`threads` threads sending requests until `deadline`; each answer recorded as
    (seconds since `start` at its end, latency in seconds, failed)."""

    def __init__(self, function, texts, expected, options):
        self.function, self.texts, self.expected = function, texts, expected
        self.order = np.random.default_rng(options.seed + 1).permutation(len(texts))
        self.lock = threading.Lock()
        self.records, self.problems, self.sent = [], [], 0
        self.start = self.deadline = None
        self.workers = [threading.Thread(target=self._client, daemon=True)
                        for _ in range(options.threads)]

    def run(self, seconds):
        self.start = time.monotonic()
        self.deadline = self.start + seconds
        for worker in self.workers:
            worker.start()

    def join(self):
        for worker in self.workers:
            worker.join()

    def _next(self):
        with self.lock:
            index = int(self.order[self.sent % len(self.order)])
            self.sent += 1
            return index

    def _client(self):
        while time.monotonic() < self.deadline:
            index = self._next()
            started = time.monotonic()
            try:
                tokens, translation = answer(self.function, self.texts[index])
                same = (np.array_equal(tokens, self.expected[index][0])
                        and np.array_equal(translation, self.expected[index][1]))
                problem = None if same else "answer differs from the same request served alone"
            except Exception as error:  # noqa: BLE001 - every failure is counted and shown
                problem = f"{type(error).__name__}: {str(error)[:200]}"
            ended = time.monotonic()
            with self.lock:
                self.records.append((ended - self.start, ended - started, problem is not None))
                if problem is not None:
                    self.problems.append((index, problem))

    def since(self, begin):
        """The records that ended at or after `begin` seconds."""
        with self.lock:
            return [record for record in self.records if record[0] >= begin]


def summarise(records, seconds):
    """requests/s, p50 and p99 ms and failures of `records` over `seconds`."""
    latencies = [latency for _, latency, _ in records]
    percentile = (lambda q: 1e3 * float(np.percentile(latencies, q))) if latencies else (
        lambda q: float("nan"))
    return dict(requests=len(records), requests_per_second=len(records) / seconds,
                p50_ms=percentile(50), p99_ms=percentile(99),
                errors=sum(failed for _, _, failed in records))


def sample(clients, begin, end):
    """One row: the interval [begin, end) seconds, memory and load now."""
    records = [record for record in clients.since(begin) if record[0] < end]
    load = os.getloadavg()
    return dict(minute=end / 60, time=time.time(), **summarise(records, end - begin),
                rss_mib=memory_mib()["VmRSS"], load_1=load[0], load_5=load[1], load_15=load[2])


def soak(function, texts, options, log=print):
    """Warm up, then run the clients for `options.minutes`, sampling every `interval_s`.

    Returns:
        dict: `warmup_s`, `rss_before_mib` (after the warm-up), `samples` (one row per
        interval), `records` (every answer: end second, latency, failed), `problems`
        (the first 20 failures: request index and what went wrong).
    """
    warm_start = time.monotonic()
    expected = warm_up(function, texts)
    warmup_s = time.monotonic() - warm_start
    log(f"warm-up: {len(texts)} requests answered alone in {warmup_s:.1f} s")
    clients = Clients(function, texts, expected, options)
    seconds = 60 * options.minutes
    rss_before = memory_mib()["VmRSS"]
    clients.run(seconds)
    samples, begin = [], 0.0
    while begin < seconds - 1e-9:
        end = min(begin + options.interval_s, seconds)
        time.sleep(max(0.0, clients.start + end - time.monotonic()))
        samples.append(sample(clients, begin, end))
        log(row_line(samples[-1]))
        begin = end
    clients.join()  # the requests in flight at the deadline end; they count in no sample
    return dict(warmup_s=warmup_s, rss_before_mib=rss_before, samples=samples,
                records=clients.records, problems=clients.problems[:20])


def windows(minutes):
    """(settle, reference, last) of a soak of `minutes`: minute 5, minutes 5-10 and the last
    5 minutes at 30 minutes; scaled by minutes / 30 when shorter."""
    width = SOAK_WINDOW_MINUTES * min(1.0, minutes / 30)
    return width, (width, 2 * width), (minutes - width, minutes)


def verdicts(result, minutes):
    """The three goals: figures and whether each is met."""
    settle, reference, last = windows(minutes)
    samples, records = result["samples"], result["records"]
    after = [row for row in samples if row["minute"] >= settle - 1e-9]
    base = after[0]["rss_mib"] if after else float("nan")
    peak = max((row["rss_mib"] for row in after), default=float("nan"))
    growth = (peak - base) / base

    def p99(window):
        inside = [r for r in records if window[0] * 60 <= r[0] < window[1] * 60]
        return summarise(inside, 1.0)["p99_ms"]

    def load(window):
        inside = [row["load_1"] for row in samples if window[0] < row["minute"] <= window[1] + 1e-9]
        return float(np.mean(inside)) if inside else float("nan")

    reference_p99, last_p99 = p99(reference), p99(last)
    errors = sum(failed for _, _, failed in records)
    return dict(
        requests=len(records), errors=errors, no_error=errors == 0,
        rss_base_mib=base, rss_peak_mib=peak, rss_growth=growth,
        rss_growth_ok=bool(growth < GROWTH_GOAL),
        windows_minutes=dict(settle=settle, reference=reference, last=last),
        p99_reference_ms=reference_p99, p99_last_ms=last_p99,
        p99_ratio=last_p99 / reference_p99, p99_ok=bool(last_p99 <= P99_GOAL * reference_p99),
        load_1_reference=load(reference), load_1_last=load(last),
    )


TABLE_HEADER = ("| minute | RSS MiB | requests/s | p50 ms | p99 ms | errors | load 1/5/15 |\n"
                "|---|---|---|---|---|---|---|")


def row_line(row):
    return (f"| {row['minute']:.2f} | {row['rss_mib']:.0f} | {row['requests_per_second']:.2f} | "
            f"{row['p50_ms']:.0f} | {row['p99_ms']:.0f} | {row['errors']} | "
            f"{row['load_1']:.2f} / {row['load_5']:.2f} / {row['load_15']:.2f} |")


def verdict_lines(verdict):
    """The three goals as lines of text."""
    mark = {True: "met", False: "MISSED"}
    window = verdict["windows_minutes"]
    return [
        f"no error: {mark[verdict['no_error']]} ({verdict['errors']} failed of "
        f"{verdict['requests']} requests)",
        f"RSS growth after minute {window['settle']:.2f}: {100 * verdict['rss_growth']:.2f}% "
        f"({verdict['rss_base_mib']:.0f} -> peak {verdict['rss_peak_mib']:.0f} MiB; goal < "
        f"{100 * GROWTH_GOAL:.0f}%): {mark[verdict['rss_growth_ok']]}",
        f"p99, last window {window['last'][0]:.2f}-{window['last'][1]:.2f} min over minutes "
        f"{window['reference'][0]:.2f}-{window['reference'][1]:.2f}: "
        f"{verdict['p99_last_ms']:.0f} / {verdict['p99_reference_ms']:.0f} ms = "
        f"{verdict['p99_ratio']:.2f}x (goal <= {P99_GOAL}x; 1-minute load "
        f"{verdict['load_1_last']:.2f} against {verdict['load_1_reference']:.2f}): "
        f"{mark[verdict['p99_ok']]}",
    ]


def plot(paths, out):
    """RSS, p99 latency and the load average over time, one line per soak JSON; the RSS
    goal (5% over the RSS at the settling minute) dashed, the two p99 windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for path in paths:
        with open(path) as file:
            report = json.load(file)
        rows, verdict = report["samples"], report["verdicts"]
        minutes = [row["minute"] for row in rows]
        label = report.get("label", os.path.basename(path))
        line, = axes[0].plot(minutes, [row["rss_mib"] for row in rows], marker=".", label=label)
        axes[0].axhline((1 + GROWTH_GOAL) * verdict["rss_base_mib"], color=line.get_color(),
                        linestyle="--", linewidth=0.8)
        axes[1].plot(minutes, [row["p99_ms"] / 1e3 for row in rows], marker=".",
                     color=line.get_color(), label=f"{label}, p99")
        axes[1].plot(minutes, [row["p50_ms"] / 1e3 for row in rows], linestyle=":",
                     color=line.get_color(), label=f"{label}, p50")
        axes[2].plot(minutes, [row["load_1"] for row in rows], color=line.get_color(), label=label)
    windows_ = verdict["windows_minutes"]
    for window in (windows_["reference"], windows_["last"]):
        axes[1].axvspan(*window, color="0.9", zorder=0)
    titles = ("resident memory (MiB);\ndashed: the 5% goal", "latency per sample (s)",
              "1-minute load average\n(2 cores)")
    for axis, title in zip(axes, titles):
        axis.set_ylabel(title, fontsize=8)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, ncol=2)
    axes[2].set_xlabel("minutes of soak (shaded: the windows whose p99 is compared)")
    figure.suptitle("Serving soak: one SavedModel loaded once, 16 client threads", fontsize=10)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description="Plot soak JSONs of bench_serving.py --soak.")
    parser.add_argument("--plot", nargs="+", required=True, metavar="JSON")
    parser.add_argument("--out", required=True, metavar="PNG")
    args = parser.parse_args(argv)
    print(plot(args.plot, args.out))


if __name__ == "__main__":
    main()
