"""Shared pytest fixtures: quiet TensorFlow, fixed seeds, a clean Keras state per test."""

import os

import pytest

# Must be set before TensorFlow is imported anywhere; keras is imported lazily
# inside the fixtures below so that this line runs first.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEED = 1234


@pytest.fixture
def seed():
    """Seed Python, NumPy, TensorFlow and Keras's global SeedGenerator; return the seed."""
    import keras

    keras.utils.set_random_seed(SEED)
    return SEED


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, for test inputs."""
    import numpy as np

    return np.random.default_rng(SEED)


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Every test starts seeded and leaves float32 and a fresh session behind.

    Resetting the dtype policy keeps a mixed-precision test from leaking into the
    next one. `clear_session(free_memory=False)` resets Keras's global state (layer
    name counters, graph state) without the full `gc.collect()`, which would cost
    about half a second per test.
    """
    import keras

    keras.utils.set_random_seed(SEED)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)
