"""IDX files (LeCun's MNIST format) and Fashion-MNIST, read from them."""

import gzip
import logging
import pathlib

import keras
import numpy as np

from zoo.datasets.image_data import ImageData
from zoo.errors import ZooError

logger = logging.getLogger(__name__)


_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
def read_idx(path):
    """Read an IDX file (LeCun's MNIST format), plain or gzip-compressed.

    Layout: two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16,
    0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions, each
    dimension as a big-endian uint32, then the data, big-endian, row-major.

    Returns:
        `np.ndarray` with those dimensions, in native byte order.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in _IDX_DTYPES:
        raise ZooError(f"{path} is not an IDX file; it starts with {data[:4]!r}")
    dtype, rank = _IDX_DTYPES[data[2]], data[3]
    header = 4 + 4 * rank
    if len(data) < header:
        raise ZooError(f"{path}: truncated IDX header ({len(data)} bytes, rank {rank})")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=rank, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ZooError(
            f"{path}: IDX header says shape {shape} of {dtype} ({expected} bytes) but the "
            f"file holds {len(data) - header} data bytes"
        )
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


FASHION_MNIST_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]
_FASHION_MNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
def _find_idx_file(directory, stem):
    # "train-images-idx3-ubyte" is also seen as "train-images.idx3-ubyte".
    dotted = stem.replace("-idx", ".idx")
    for name in (stem + ".gz", stem, dotted + ".gz", dotted):
        if (directory / name).is_file():
            return directory / name
    return None


FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
def _download_fashion_mnist():
    """`keras.datasets.fashion_mnist.load_data()`, or one clear error without network."""
    logger.warning("%s not found; downloading Fashion-MNIST with keras", FASHION_MNIST_DIR)
    try:
        return keras.datasets.fashion_mnist.load_data()
    except Exception as error:  # keras wraps URLError/OSError in a bare Exception
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise FileNotFoundError(
            f"Fashion-MNIST not found: {FASHION_MNIST_DIR} is missing (Debian package "
            f"{FASHION_MNIST_PACKAGE}: apt-get install {FASHION_MNIST_PACKAGE}) and the download "
            f"with keras.datasets failed ({reason}); pass --data-dir DIR with the four IDX files"
        ) from error


def fashion_mnist(data_dir=None, download=True):
    """Fashion-MNIST: 60,000 + 10,000 images (28, 28, 1) uint8, 10 classes.

    Reads the four IDX files (`train-images-idx3-ubyte.gz`,
    `train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz`,
    `t10k-labels-idx1-ubyte.gz`; `.gz` optional, `.idx` also accepted in place
    of `-idx`) from `data_dir`. Without `data_dir`: from
    `/usr/share/datasets/fashion-mnist` (Debian package
    `dataset-fashion-mnist`) when it is there, else
    `keras.datasets.fashion_mnist.load_data()`, which downloads (unless
    `download=False`).

    Raises:
        FileNotFoundError: `data_dir` was given and a file is missing, or there
            is no `data_dir`, no Debian package and no network (one line that
            names the package, `--data-dir` and what was tried).
    """
    if data_dir is None and _find_idx_file(FASHION_MNIST_DIR, _FASHION_MNIST_FILES["x_train"]):
        data_dir = FASHION_MNIST_DIR
    if data_dir is None and not download:
        raise FileNotFoundError(
            f"Fashion-MNIST not found: {FASHION_MNIST_DIR} is missing (Debian package "
            f"{FASHION_MNIST_PACKAGE}) and download=False; pass data_dir with the four IDX files"
        )
    if data_dir is None:
        (x_train, y_train), (x_test, y_test) = _download_fashion_mnist()
        source = "keras.datasets.fashion_mnist"
    else:
        data_dir = pathlib.Path(data_dir)
        arrays = {}
        for key, stem in _FASHION_MNIST_FILES.items():
            path = _find_idx_file(data_dir, stem)
            if path is None:
                raise FileNotFoundError(
                    f"{stem}[.gz] not found in {data_dir}; expected the files "
                    f"{sorted(_FASHION_MNIST_FILES.values())}"
                )
            arrays[key] = read_idx(path)
        x_train, y_train, x_test, y_test = (
            arrays["x_train"],
            arrays["y_train"],
            arrays["x_test"],
            arrays["y_test"],
        )
        source = str(data_dir)
    for images, labels in ((x_train, y_train), (x_test, y_test)):
        if images.ndim != 3 or labels.shape != images.shape[:1]:
            raise ZooError(
                f"Fashion-MNIST from {source}: expected images (N, 28, 28) and labels (N,); "
                f"received {images.shape} and {labels.shape}"
            )
    return ImageData(
        name="fashion_mnist",
        x_train=x_train.astype(np.uint8)[..., None],
        y_train=y_train.astype(np.int64),
        x_test=x_test.astype(np.uint8)[..., None],
        y_test=y_test.astype(np.int64),
        class_names=list(FASHION_MNIST_CLASSES),
        metadata={"source": source},
    )


