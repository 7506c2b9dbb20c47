"""Tests for zoo/distribute/replica_sync.py on one device (the strategies' runs are in
tests/test_distribute.py), and the unpadded loss and metric the ViT recipe trains with."""


import numpy as np
import pytest

from zoo import distribute


def test_unmasked_loss_and_accuracy_match_keras(rng):
    # The ViT recipe's loss and metric: MaskedSparseCategoricalCrossentropy /
    # MaskedAccuracy with pad_id=None are Keras' sparse cross-entropy (smoothed
    # as the categorical one) and accuracy, for (B,) and (B, 1) labels.
    import keras

    import keras_attention as ka

    logits = rng.normal(size=(6, 5)).astype("float32")
    labels = np.array([0, 1, 4, 0, 2, 3])
    weights = rng.uniform(0.5, 2.0, size=6).astype("float32")
    onehot = np.eye(5, dtype="float32")[labels]
    for smoothing in (0.0, 0.1):
        ours = ka.MaskedSparseCategoricalCrossentropy(pad_id=None, label_smoothing=smoothing)
        theirs = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
        for y in (labels, labels[:, None]):
            np.testing.assert_allclose(float(ours(y, logits)), float(theirs(onehot, logits)),
                                       rtol=1e-6)
        # Weighted: the weighted mean (sum of weighted losses / sum of weights).
        per_example = keras.losses.categorical_crossentropy(
            onehot, logits, from_logits=True, label_smoothing=smoothing
        ).numpy()
        np.testing.assert_allclose(
            float(ours(labels, logits, sample_weight=weights)),
            (per_example * weights).sum() / weights.sum(), rtol=1e-6,
        )
    clone = ka.MaskedSparseCategoricalCrossentropy.from_config(
        ka.MaskedSparseCategoricalCrossentropy(pad_id=None).get_config()
    )
    assert clone.pad_id is None
    ours, theirs = ka.MaskedAccuracy(pad_id=None), keras.metrics.SparseCategoricalAccuracy()
    for y in (labels, labels[:, None]):
        ours.update_state(y, logits)
        theirs.update_state(y, logits)
    assert float(ours.result()) == pytest.approx(float(theirs.result()))
    assert float(ours.result()) == pytest.approx(np.mean(logits.argmax(-1) == labels))


def test_sync_loss_tracker_changes_nothing_on_one_device():
    import keras

    import zoo

    model = zoo.get("vit-tiny", image_size=8, channels=1, patch_size=4, num_layers=1,
                    hidden_dim=8, num_heads=2, mlp_dim=8, num_classes=3, label_smoothing=0.0)
    tracker = model._loss_tracker
    assert getattr(tracker, "_zoo_synced", False)  # zoo.get prepared it
    update = tracker.update_state
    assert distribute.sync_loss_tracker(model) is model
    assert tracker.update_state is update  # idempotent
    images = np.zeros((5, 8, 8, 1), "float32")
    labels = np.array([0, 1, 2, 0, 1])
    result = model.evaluate(images, labels, batch_size=2, verbose=0, return_dict=True)
    expected = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
        labels, model.predict(images, verbose=0)
    )
    assert result["loss"] == pytest.approx(float(expected), rel=1e-5)


