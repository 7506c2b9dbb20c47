"""`zoo.vit.augmentation`: the ViT's shifted images and augmentation layers.

Each goes through the shared layer check (`tests/layer_checks.py`); the rest
compares them with NumPy.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.vit.augmentation import Augmentation, RandomShift, ShiftedImages

from layer_checks import run_layer_checks  # pytest puts tests/ (no __init__.py) on sys.path


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def _images(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, shape).astype("float32")


# === The shared layer check ===


def test_shifted_images_passes_the_layer_checks(tmp_path):
    run_layer_checks(lambda: ShiftedImages(1), {"inputs": _images(2, 6, 6, 2)}, tmp_path)


def test_random_shift_passes_the_layer_checks(tmp_path):
    run_layer_checks(lambda: RandomShift(2, seed=3), {"inputs": _images(2, 6, 6, 2)}, tmp_path)


def test_augmentation_passes_the_layer_checks(tmp_path):
    # Without `stop_step`: its step counter is a weight that no training step moves
    # (the check wants every weight trainable); it is tested below on its own.
    run_layer_checks(
        lambda: Augmentation(random_flip=True, random_translation=0.2, random_erasing=0.5,
                             seed=3),
        {"inputs": _images(2, 8, 8, 1)}, tmp_path,
    )


# === Against NumPy ===


def test_shifted_images_match_numpy_shifts():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(2, 6, 5, 3)).astype("float32")
    shifted = numpy(ShiftedImages(2)(images))
    assert shifted.shape == (2, 6, 5, 15)

    def shift(x, dy, dx):  # out[i, j] = x[i - dy, j - dx], zero outside
        out = np.zeros_like(x)
        for i in range(x.shape[1]):
            for j in range(x.shape[2]):
                if 0 <= i - dy < x.shape[1] and 0 <= j - dx < x.shape[2]:
                    out[:, i, j] = x[:, i - dy, j - dx]
        return out

    expected = [images] + [shift(images, dy, dx) for dy in (-2, 2) for dx in (-2, 2)]
    np.testing.assert_array_equal(shifted, np.concatenate(expected, axis=-1))
    with pytest.raises(ValueError, match="shift"):
        ShiftedImages(-1)


def _find_shift(image, shifted, max_shift):
    """The (dy, dx) with shifted[i, j] = image[i - dy, j - dx] (0 outside), or None."""
    height, width = image.shape[:2]
    for dy in range(-max_shift, max_shift + 1):
        for dx in range(-max_shift, max_shift + 1):
            expected = np.zeros_like(image)
            expected[max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = image[
                max(-dy, 0):height + min(-dy, 0), max(-dx, 0):width + min(-dx, 0)
            ]
            if np.array_equal(expected, shifted):
                return dy, dx
    return None


def test_random_shift_is_a_whole_pixel_translation_per_image():
    rng = np.random.default_rng(0)
    images = rng.uniform(1, 2, size=(16, 7, 9, 2)).astype("float32")  # no zeros inside
    layer = RandomShift(2, seed=0)
    np.testing.assert_array_equal(numpy(layer(images)), images)  # inference: unchanged
    shifted = numpy(layer(images, training=True))
    shifts = [_find_shift(images[b], shifted[b], 2) for b in range(len(images))]
    assert None not in shifts
    assert len(set(shifts)) > 3  # each image draws its own shift
    xla = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    shifted = numpy(xla(images))
    assert None not in [_find_shift(images[b], shifted[b], 2) for b in range(len(images))]
    with pytest.raises(ValueError, match="max_shift"):
        RandomShift(1.5)


def _erased(images):
    """Per image: whether some pixel of an all-ones image was set to 0."""
    return (numpy(images) == 0).any(axis=(1, 2, 3))


@pytest.mark.parametrize("jit", [False, True])
def test_augmentation_stops_after_stop_step_training_calls(jit):
    layer = Augmentation(random_erasing=1.0, seed=0, stop_step=2)
    images = np.ones((4, 8, 8, 1), "float32")
    call = tf.function(lambda x: layer(x, training=True), jit_compile=jit)
    assert _erased(call(images)).all()  # step 0 < 2: augmented
    np.testing.assert_array_equal(numpy(layer(images)), images)  # inference: not counted
    np.testing.assert_array_equal(numpy(layer(images, training=False)), images)
    assert int(layer.step.numpy()) == 1
    assert _erased(call(images)).all()  # step 1
    for expected_step in (3, 4):  # steps 2, 3: the images as they are
        np.testing.assert_array_equal(numpy(call(images)), images)
        assert int(layer.step.numpy()) == expected_step
    assert not Augmentation(random_erasing=1.0).weights  # no stop_step, no counter
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="stop_step"):
            Augmentation(random_flip=True, stop_step=bad)
