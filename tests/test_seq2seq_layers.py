"""The RNNsearch's own layers (`zoo.seq2seq`) through the shared layer check."""

import numpy as np
import pytest

from zoo.seq2seq import BahdanauDecoder, Maxout

from layer_checks import run_layer_checks  # pytest puts tests/ (no __init__.py) on sys.path

B, T, S, E, A, UNITS = 2, 3, 4, 5, 6, 7


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def test_maxout_passes_the_layer_checks(tmp_path):
    run_layer_checks(lambda: Maxout(3), {"inputs": _x(B, T, 6)}, tmp_path)


@pytest.mark.parametrize("cell, attention", [("gru", "additive"), ("lstm", "additive"),
                                             ("gru", "location")])
def test_bahdanau_decoder_passes_the_layer_checks(cell, attention, tmp_path):
    states = [_x(B, UNITS, seed=2)] * (2 if cell == "lstm" else 1)
    run_layer_checks(
        lambda: BahdanauDecoder(UNITS, 4, cell=cell, attention=attention, location_filters=2,
                                location_kernel_size=3),
        {"target_embeddings": _x(B, T, E), "annotations": _x(B, S, A, seed=1),
         "initial_state": np.stack(states)},
        tmp_path,
    )
