"""Tests for zoo/datasets/idx_files.py: the IDX reader and Fashion-MNIST."""

import gzip

import numpy as np
import pytest

from zoo import datasets
from zoo.datasets import idx_files


def write(path, data):
    path.write_bytes(data)
    return path


def idx_bytes(array, type_code):
    header = bytes([0, 0, type_code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    return header + array.tobytes()


@pytest.mark.parametrize(
    "dtype, type_code",
    [(np.uint8, 0x08), (np.int8, 0x09), (">i2", 0x0B), (">i4", 0x0C), (">f4", 0x0D), (">f8", 0x0E)],
)
def test_read_idx_types_plain_and_gzip(tmp_path, rng, dtype, type_code):
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    data = idx_bytes(array, type_code)
    plain = write(tmp_path / "x-idx3", data)
    packed = write(tmp_path / "x-idx3.gz", gzip.compress(data))
    for path in (plain, packed):
        result = datasets.read_idx(path)
        assert result.shape == (3, 4, 5)
        assert result.dtype.isnative
        np.testing.assert_array_equal(result, array)


def test_read_idx_rejects_bad_files(tmp_path):
    with pytest.raises(ValueError, match="not an IDX file"):
        datasets.read_idx(write(tmp_path / "a", b"PK\x03\x04rest"))
    labels = np.arange(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="10 bytes"):
        datasets.read_idx(write(tmp_path / "b", idx_bytes(labels, 0x08)[:-1]))
    with pytest.raises(FileNotFoundError, match="nope"):
        datasets.read_idx(tmp_path / "nope")


def write_fashion_files(directory, rng, num_train=12, num_test=5, dotted=False, compress=True):
    directory.mkdir()
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (num_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, num_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (num_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, num_test, dtype=np.uint8),
    }
    for stem, array in arrays.items():
        name = stem.replace("-idx", ".idx") if dotted else stem
        data = idx_bytes(array, 0x08)
        if compress:
            write(directory / (name + ".gz"), gzip.compress(data))
        else:
            write(directory / name, data)
    return arrays


@pytest.mark.parametrize("dotted, compress", [(False, True), (True, False)])
def test_fashion_mnist_from_a_directory(tmp_path, rng, dotted, compress):
    arrays = write_fashion_files(tmp_path / "fm", rng, dotted=dotted, compress=compress)
    (x_train, y_train), (x_test, y_test), class_names = datasets.fashion_mnist(tmp_path / "fm")
    assert x_train.shape == (12, 28, 28, 1) and x_train.dtype == np.uint8
    assert x_test.shape == (5, 28, 28, 1)
    np.testing.assert_array_equal(x_train[..., 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(y_test, arrays["t10k-labels-idx1-ubyte"])
    assert y_train.dtype == np.int64
    assert class_names[0] == "T-shirt/top" and len(class_names) == 10


def test_fashion_mnist_missing_file(tmp_path, rng):
    write_fashion_files(tmp_path / "fm", rng)
    (tmp_path / "fm" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        datasets.fashion_mnist(tmp_path / "fm")


def test_fashion_mnist_without_files_and_without_download(tmp_path, monkeypatch):
    missing = tmp_path / "missing"
    monkeypatch.setattr(idx_files, "FASHION_MNIST_DIR", missing)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist") as raised:
        datasets.fashion_mnist(download=False)
    assert str(missing) in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.skipif(
    not (datasets.FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason=("reads Debian's Fashion-MNIST in /usr/share/datasets/fashion-mnist, which is not "
            "installed: `make data` installs it when run as root with apt (or apt-get install "
            "dataset-fashion-mnist); the IDX reader was tested on generated files above"))
def test_fashion_mnist_debian_package():
    data = datasets.fashion_mnist()
    assert data.x_train.shape == (60000, 28, 28, 1) and data.x_test.shape == (10000, 28, 28, 1)
    assert data.y_train[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert np.bincount(data.y_test).tolist() == [1000] * 10


