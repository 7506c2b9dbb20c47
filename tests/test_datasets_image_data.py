"""Tests for zoo/datasets/image_data.py: scikit-learn digits and image folders."""


import numpy as np
import pytest

from zoo import datasets


def test_digits():
    data = datasets.digits(seed=0)
    (x_train, y_train), (x_test, y_test), class_names = data
    assert x_train.shape[1:] == (8, 8, 1) and x_train.dtype == np.uint8
    assert len(x_train) + len(x_test) == 1797 and len(x_test) == 360
    assert x_train.max() == 255 and x_train.min() == 0
    assert class_names == [str(d) for d in range(10)]
    assert set(np.unique(y_test)) == set(range(10))  # stratified
    np.testing.assert_array_equal(datasets.digits(seed=0).y_test, y_test)


def test_digits_resized_to_fashion_mnist_size():
    small, large = datasets.digits(seed=0), datasets.digits(seed=0, image_size=28)
    assert large.x_train.shape == (len(small.x_train), 28, 28, 1) and large.x_train.dtype == np.uint8
    np.testing.assert_array_equal(large.y_test, small.y_test)
    # Bilinear resizing keeps each image's mean brightness (within rounding).
    np.testing.assert_allclose(large.x_test.mean(axis=(1, 2, 3)), small.x_test.mean(axis=(1, 2, 3)),
                               atol=4.0)
    with pytest.raises(ValueError, match="image_size"):
        datasets.digits(image_size=0)


def test_images_from_directory(tmp_path, rng):
    from PIL import Image

    for name, value in (("cats", 40), ("dogs", 200)):
        (tmp_path / name).mkdir()
        for i in range(5):
            pixels = np.full((10, 14, 3), value, np.uint8)
            Image.fromarray(pixels).save(tmp_path / name / f"{i}.png")
    data = datasets.images(tmp_path, image_size=(6, 7), test_ratio=0.2, seed=1)
    assert data.class_names == ["cats", "dogs"]
    assert data.x_train.shape == (8, 6, 7, 3) and data.x_test.shape == (2, 6, 7, 3)
    assert data.x_train.dtype == np.uint8
    for x, y in zip(data.x_train, data.y_train):
        assert int(x.mean()) == (40 if y == 0 else 200)
    with pytest.raises(FileNotFoundError, match="missing"):
        datasets.images(tmp_path / "missing", 8)


