"""The ViT export with `jit_compile=True` (`zoo.export.image`): XLA runs the model inside
the SavedModel, and the outputs are the model's own."""

import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

import zoo


def must_compile(export_path):
    """Whether any function of the SavedModel must be XLA-compiled (`_XlaMustCompile`)."""
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((pathlib.Path(export_path) / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].graph_def
    attrs = [f.attr for f in graph.library.function]
    attrs += [n.attr for f in graph.library.function for n in f.node_def] + [n.attr for n in graph.node]
    return any("_XlaMustCompile" in a and a["_XlaMustCompile"].b for a in attrs)


@pytest.mark.large
def test_vit_jit_export_runs_the_model_under_xla_with_its_outputs(tmp_path):
    vit = zoo.get("vit-tiny", compile=False, image_size=8, channels=3, patch_size=4, num_layers=1,
                  num_classes=4)
    images = np.random.default_rng(0).integers(0, 256, (3, 8, 8, 3)).astype(np.uint8)
    expected = tf.nn.softmax(vit(images.astype(np.float32), training=False)).numpy()  # (3, 4)
    plain = zoo.export(vit, tmp_path / "plain", top_k=2)
    xla = zoo.export(vit, tmp_path / "xla", top_k=2, jit_compile=True)
    assert (must_compile(plain), must_compile(xla)) == (False, True)
    for path in (plain, xla):
        outputs = tf.saved_model.load(str(path)).signatures["serving_default"](images=tf.constant(images))
        np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-6)
        np.testing.assert_array_equal(outputs["classes"].numpy(), np.argsort(-expected)[:, :2])
        empty = tf.saved_model.load(str(path)).signatures["serving_default"](
            images=tf.zeros([0, 8, 8, 3], tf.uint8))
        assert empty["probabilities"].shape == (0, 4)

