"""`ImageData`, what every image dataset returns, and two of them: scikit-learn's
`digits` and a folder of images per class (`images`)."""

import dataclasses
import pathlib

import keras
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from zoo.errors import ZooError


@dataclasses.dataclass
class ImageData:
    """Images (N, H, W, C) uint8 in 0..255 and int64 labels (N,), split in two.

    Unpacks like `keras.datasets`: `(x_train, y_train), (x_test, y_test),
    class_names = data`.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list
    metadata: dict = dataclasses.field(default_factory=dict)

    def __iter__(self):
        return iter(((self.x_train, self.y_train), (self.x_test, self.y_test), self.class_names))

    def __repr__(self):
        return (
            f"ImageData(name={self.name!r}, x_train={self.x_train.shape}, "
            f"x_test={self.x_test.shape}, classes={len(self.class_names)})"
        )


def digits(test_ratio=0.2, seed=0, image_size=None):
    """scikit-learn's handwritten digits: 1,797 images (8, 8, 1), classes "0".."9".

    Pixel values 0..16 are scaled to 0..255 uint8. The split is stratified
    by class and fixed by `seed`. `image_size=28` resizes them (bilinear) to
    28x28, the shape of Fashion-MNIST: the tutorials' smoke runs use that
    when Fashion-MNIST is not on the machine.
    """
    if not (isinstance(test_ratio, (int, float)) and 0 < test_ratio < 1):
        raise ZooError(f"test_ratio must be in (0, 1); received test_ratio={test_ratio!r}")
    if image_size is not None and (isinstance(image_size, bool) or not isinstance(image_size, int)
                                   or image_size < 1):
        raise ZooError(f"image_size must be a positive integer; received {image_size!r}")
    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]  # (N, 8, 8, 1)
    if image_size is not None and image_size != 8:
        images = _resize(images, image_size)
    labels = bunch.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_ratio, random_state=seed, stratify=labels
    )
    return ImageData(
        name="digits",
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        class_names=[str(digit) for digit in range(10)],
        metadata={"test_ratio": test_ratio, "seed": seed},
    )


def _resize(images, size):
    """uint8 images (N, h, w, C) resized bilinearly to (N, size, size, C)."""
    resized = keras.ops.image.resize(images.astype(np.float32), (size, size),
                                     interpolation="bilinear")
    return np.clip(np.round(keras.ops.convert_to_numpy(resized)), 0, 255).astype(np.uint8)


def images(directory, image_size, test_ratio=0.2, seed=0, color_mode="rgb"):
    """Images in `directory/<class name>/*` -> resized uint8 arrays.

    Uses `keras.utils.image_dataset_from_directory` (jpeg, png, bmp, gif);
    class names are the sub-folder names, sorted; the split is fixed by
    `seed`.

    Args:
        directory: folder with one sub-folder per class.
        image_size: `(height, width)` (or an int for a square) to resize to.
        test_ratio: share of images held out, in (0, 1).
        seed: shuffling/split seed.
        color_mode: "rgb" (C=3), "grayscale" (C=1) or "rgba" (C=4).
    """
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"image directory not found: {directory}")
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    if len(tuple(image_size)) != 2 or min(image_size) < 1:
        raise ZooError(f"image_size must be (height, width) > 0; received {image_size!r}")
    if not (isinstance(test_ratio, (int, float)) and 0 < test_ratio < 1):
        raise ZooError(f"test_ratio must be in (0, 1); received test_ratio={test_ratio!r}")
    train, test = keras.utils.image_dataset_from_directory(
        directory,
        labels="inferred",
        label_mode="int",
        color_mode=color_mode,
        batch_size=None,
        image_size=tuple(image_size),
        shuffle=True,
        seed=seed,
        validation_split=test_ratio,
        subset="both",
        verbose=False,
    )
    class_names = list(train.class_names)

    def to_numpy(dataset):
        xs, ys = [], []
        for x, y in dataset.as_numpy_iterator():
            xs.append(np.clip(np.round(x), 0, 255).astype(np.uint8))
            ys.append(int(y))
        channels = {"rgb": 3, "grayscale": 1, "rgba": 4}[color_mode]
        if not xs:
            return np.zeros((0, *image_size, channels), np.uint8), np.zeros((0,), np.int64)
        return np.stack(xs), np.asarray(ys, np.int64)

    (x_train, y_train), (x_test, y_test) = to_numpy(train), to_numpy(test)
    return ImageData(
        name=directory.name,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        class_names=class_names,
        metadata={"directory": str(directory), "test_ratio": test_ratio, "seed": seed},
    )


