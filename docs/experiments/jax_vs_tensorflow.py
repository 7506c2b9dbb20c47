"""Train one `zoo train` command under TensorFlow and under JAX, one after the other, and score
both with `zoo evaluate` (TensorFlow, which decodes): docs/experiments/jax_vs_tensorflow.md.

    python docs/experiments/jax_vs_tensorflow.py OUT transformer-small --data gettext:es \
        --time-limit 15

Writes OUT/tensorflow and OUT/jax (the runs), OUT/<backend>.log, and OUT/report.json: per
backend the wall time, the steps, the training seconds, steps per second, the budget's final
total and warm-up, the last step's learning rate and the rate after it, and the evaluation's
BLEU with its 95% interval (greedy and beam 4).
"""

import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def zoo(argv, backend, log):
    """`python -m zoo ARGV` under KERAS_BACKEND=backend; (wall seconds, exit code)."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    started = time.monotonic()
    with open(log, "a") as output:
        code = subprocess.call([sys.executable, "-m", "zoo", *argv], env=env, cwd=ROOT,
                               stdout=output, stderr=subprocess.STDOUT)
    return time.monotonic() - started, code


def rates(run):
    """The budget's last step's rate and the rate after it (docs/math.md#the-budgeted-schedule)."""
    config = json.loads((run / "config.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    peak = config["schedule"]["peak_learning_rate"]
    warmup, total = summary["budget"]["warmup_steps"], summary["budget"]["predicted_steps_final"]
    steps = summary["steps"]

    def rate(i):
        if i < warmup:
            return peak * (i + 1) / warmup
        return peak * max(0.0, (total - i) / (total - warmup))

    return steps, summary["train_seconds_this_call"], total, warmup, rate(steps - 1), rate(steps)


def main(out, train_argv):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = {}
    for backend in ("tensorflow", "jax"):
        run = out / backend
        wall, code = zoo(["train", *train_argv, "--out", str(run)], backend,
                         out / f"{backend}.log")
        if code:
            sys.exit(f"zoo train under {backend} exited with {code}: see {out}/{backend}.log")
        steps, seconds, total, warmup, last, after = rates(run)
        report[backend] = {"wall_s": round(wall, 1), "steps": steps, "train_s": seconds,
                           "steps_per_s": round(steps / seconds, 3), "final_total": total,
                           "warmup": warmup, "last_step_rate": last, "rate_after": after}
    for backend in ("tensorflow", "jax"):
        zoo(["evaluate", str(out / backend), "--confidence", "--json"], "tensorflow",
            out / f"evaluate-{backend}.log")
        metrics = json.loads((out / backend / "metrics.json").read_text())
        report[backend]["metrics"] = {k: v for k, v in metrics.items() if k != "examples"}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
