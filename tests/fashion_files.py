"""Tiny Fashion-MNIST files for the tests that read `--data fashion-mnist`."""

import gzip

import numpy as np


def write_fashion_idx(directory, rng=None, num_train=96, num_test=16):
    """Tiny gzip IDX files laid out as Fashion-MNIST's (random pixels, labels 0-9).

    Returns the arrays written, by file stem.
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    directory.mkdir(parents=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (num_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": np.arange(num_train, dtype=np.uint8) % 10,
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (num_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": np.arange(num_test, dtype=np.uint8) % 10,
    }
    for stem, array in arrays.items():
        header = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
        (directory / f"{stem}.gz").write_bytes(gzip.compress(header + array.tobytes()))
    return arrays
