"""Global-norm clipping under `MirroredStrategy` on 2 logical CPUs, in a fresh process.

Run by tests/test_distribute.py (logical devices must be configured before TensorFlow
initialises its devices):

    python tests/distributed_clipping.py OUT.npz

Two variables, `a` (3,) and `b` (2, 2), each replica its own gradients (`GRADIENTS`:
replica r's step s). SGD at learning rate 1 without momentum, `global_clipnorm=1`, patched
by `zoo.distribute.sync_gradient_clipping`, applies them in two steps inside
`strategy.run`, as `fit`'s train step does. Saves the initial weights (`a0`, `b0`) and
those after each step (`a1`, `b1`, `a2`, `b2`), which the test compares with NumPy:
`w ← w − clip(Σ_r g_r)`, one norm over both variables' summed gradients. TensorFlow is
imported in `main` only: the test imports `GRADIENTS` and the rest from here.
"""

import os
import sys

import numpy as np

CLIPNORM = 1.0
INITIAL = {"a": np.array([1.0, -2.0, 0.5], "float32"),
           "b": np.array([[0.25, 0.0], [-1.0, 2.0]], "float32")}
# [step][replica] -> {"a", "b"}. Step 1: each replica's gradient has a global norm below 1
# (0.63 and 0.69), their sum 1.28 above: clipping per replica would change nothing. The sum's
# `a` has norm 1.21 and its `b` 0.42: clipping per variable would leave `b` whole. Step 2:
# the sum's norm is 0.26, below 1: left whole.
GRADIENTS = [
    [{"a": [0.5, 0.3, 0.0], "b": [[0.1, -0.2], [0.05, 0.0]]},
     {"a": [0.4, 0.5, -0.1], "b": [[0.0, -0.1], [0.2, 0.1]]}],
    [{"a": [0.1, 0.0, 0.0], "b": [[0.0, 0.1], [0.0, 0.0]]},
     {"a": [0.0, -0.2, 0.0], "b": [[0.0, 0.0], [0.1, 0.0]]}],
]


def main(out):
    """Apply `GRADIENTS` under 2 replicas; save the weights after each step to `out`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * 2,
    )
    import keras

    from zoo import distribute

    strategy = distribute.get_strategy("mirrored")
    if strategy.num_replicas_in_sync != 2:
        raise SystemExit(f"expected 2 replicas, got {strategy.num_replicas_in_sync}")
    with strategy.scope():
        variables = [keras.Variable(INITIAL[name], name=name) for name in ("a", "b")]
        optimizer = keras.optimizers.SGD(1.0, global_clipnorm=CLIPNORM)
        optimizer.build(variables)
    distribute.sync_gradient_clipping(optimizer)

    @tf.function
    def step(gradients):
        strategy.run(lambda grads: optimizer.apply(grads, variables), args=(gradients,))

    results = {f"{name}0": value for name, value in INITIAL.items()}
    for s, per_replica in enumerate(GRADIENTS, start=1):
        gradients = strategy.experimental_distribute_values_from_function(
            lambda context, per_replica=per_replica: [
                tf.constant(per_replica[context.replica_id_in_sync_group][name], "float32")
                for name in ("a", "b")
            ]
        )
        step(gradients)
        for variable, name in zip(variables, ("a", "b")):
            results[f"{name}{s}"] = keras.ops.convert_to_numpy(variable)
    results["iterations"] = keras.ops.convert_to_numpy(optimizer.iterations)
    np.savez(out, **results)


if __name__ == "__main__":
    main(sys.argv[1])
