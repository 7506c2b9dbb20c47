"""What PATH holds for `zoo explore`: a run directory or an exported SavedModel, opened once.

A run shows everything: its model's answers with every attention map, its training curves
and config. An export shows what it offers: its translations or classes, through
`zoo predict`'s code; a SavedModel keeps no attention outputs, and the page says so.
"""

import dataclasses
import pathlib
import re

import numpy as np
import tensorflow as tf
from PIL import Image

import zoo
from zoo import files, registry
from zoo.datasets.preparation import load_run_data
from zoo.errors import ZooError
from zoo.runs import inference, prediction, rundir

EXAMPLES = 8  # test sentences or images offered on the page


@dataclasses.dataclass
class Target:
    """PATH, opened.

    Attributes:
        path: the run directory or the SavedModel folder (an export root's newest version).
        kind: `"translation"` or `"image"`.
        run: the `zoo.runs.rundir.Run` of a run directory; None for an export.
        setup: a translation run's `zoo.runs.inference.decoding_setup` (max length, decoding
            options, copy table), computed once.
        examples: test sentences, or PNG files of test images, to try on the page.
    """

    path: pathlib.Path
    kind: str
    run: object = None
    setup: tuple = None
    examples: list = dataclasses.field(default_factory=list)

    @property
    def name(self):
        """The model's registered name, or the export's folder."""
        return self.run.name if self.run is not None else str(self.path)


def open_target(path, workdir):
    """`Target` of a run directory or an exported SavedModel; test images are written as PNG
    files into `workdir`. ZooError (one line) for anything else, or a model without attention
    weights to show."""
    path = pathlib.Path(path)
    if (path / "config.json").is_file():
        return _open_run(path, pathlib.Path(workdir))
    saved = prediction.resolve_saved_model(path)
    if saved is None:
        raise ZooError(f"{path} is neither a run directory (no config.json) nor an exported "
                       "SavedModel (no saved_model.pb, nor numbered versions holding one)")
    return Target(saved, _export_kind(saved))


def _export_kind(saved):
    """`"translation"` when the export's serving_default takes text, else `"image"`."""
    try:
        loaded = tf.saved_model.load(str(saved))
    except (tf.errors.OpError, OSError, ValueError) as error:
        raise files.CorruptFileError(saved, "the SavedModel does not load",
                                     str(error).split("\n")[0][:300]) from None
    default = loaded.signatures.get("serving_default")
    if default is None:
        raise ZooError(f"{saved} has no serving_default signature")
    _, specs = default.structured_input_signature
    return "translation" if any(s.dtype == tf.string for s in specs.values()) else "image"


def _open_run(path, workdir):
    inference.require_decoding("zoo explore", path)
    run = rundir.load_run(path)
    if registry.family_of_model(run.model) is None:
        raise ZooError(f"{path}: {run.name} is not a Transformer, RNNsearch, ConvS2S or ViT: "
                       "it has no attention weights to show")
    target = Target(path, run.kind, run)
    if run.kind == "translation":
        target.setup = inference.decoding_setup(run)
    _check_attention(target)
    target.examples = _examples(run, workdir)
    return target


def _check_attention(target):
    """Compute the attention maps of a one-token input once: a model whose layers return no
    weights (linear attention) is refused here, in one line; it also warms the model up."""
    run = target.run
    try:
        if run.kind == "translation":
            maps = zoo.attention_weights(run.model, {"source": np.ones((1, 2), "int32"),
                                                     "target": np.ones((1, 2), "int32")})
        else:
            config = run.config["model_config"]
            shape = (1, config["image_size"], config["image_size"], config["channels"])
            maps = zoo.attention_weights(run.model, np.zeros(shape, "float32"))
    except (ValueError, TypeError, NotImplementedError, KeyError) as error:
        reason = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(error)).split())  # Keras' bold
        raise ZooError(f"{target.path}: {run.name} gives no attention weights to show "
                       f"({reason[:200]})") from None
    if not maps or any(value is None for value in maps.values()):
        raise ZooError(f"{target.path}: {run.name} gives no attention weights to show")


def _examples(run, workdir):
    """A few test sentences, or test images written as PNG files; none when the run's data
    cannot be loaded here (the page still takes typed sentences and uploads)."""
    try:
        _, data = load_run_data(run.config, quiet=True)
    except (ZooError, OSError, ValueError):
        return []
    if run.kind == "translation":
        return [source for source, _ in data.test_pairs[:EXAMPLES]]
    workdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, image in enumerate(np.asarray(data.x_test[:EXAMPLES], np.uint8)):
        label = run.class_names[int(data.y_test[index])] if run.class_names else "test"
        path = workdir / f"test_{index}_{label.replace('/', '-').replace(' ', '_')}.png"
        Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(path)
        paths.append(str(path))
    return paths
