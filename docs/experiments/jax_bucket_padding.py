"""One `zoo train` under Keras' JAX backend, with its translation batches padded to the longest
in each batch or to their length bucket's boundary: XLA's backend compiles and the wall time.

    KERAS_BACKEND=jax python docs/experiments/jax_bucket_padding.py {longest|boundary} RUN_DIR \
        TRAIN_ARGUMENTS...

Prints `padding=... code=... wall=...s compiles=N compile_s=...` on stderr: the count and total
duration of JAX's `/jax/core/compile/backend_compile_duration` events (every program XLA builds,
the train and validation steps' included) and the wall time of `zoo train`. Used by
jax_bucket_padding.md.
"""

import functools
import sys
import time

import jax

from zoo import cli
from zoo.datasets import preparation
from zoo.runs import training


def main(padding, run_dir, train_arguments):
    compiles = []

    def count(event, seconds, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(count)
    chosen = functools.partial(preparation.translation_datasets,
                               pad_to_bucket_boundary=padding == "boundary")
    # zoo.runs.training holds its own name for the function; zoo.runs.pacing asks the module.
    training.translation_datasets = preparation.translation_datasets = chosen
    start = time.perf_counter()
    code = cli.main(["train", *train_arguments, "--out", run_dir])
    print(f"padding={padding} code={code} wall={time.perf_counter() - start:.1f}s "
          f"compiles={len(compiles)} compile_s={sum(compiles):.1f}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
