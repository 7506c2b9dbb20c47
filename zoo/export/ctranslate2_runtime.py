"""Running a CTranslate2 export of a Transformer (`zoo.export.ctranslate2_export`).

    exported = ctranslate2_runtime.load("saved_models/transformer-small-ctranslate2")  # or a version
    ids = exported.translate_ids(["Open the file"])        # target ids, end token dropped
    texts = exported.translate(["Open the file"], beam_size=1)
    results = ctranslate2_runtime.predict(path, sentences)  # what `zoo predict` prints

The export's tokenizers (`tokenizer/`, loaded with `zoo.text.tokenizers`) turn text into ids as
the SavedModel's signatures do; the ids become the model's vocabulary tokens
(`shared_vocabulary.json`, ...), `ctranslate2.Translator.translate_batch` decodes them with the
export's `translate_options` (CTranslate2 appends the end token to each source), and the target
tokenizer's `detokenize` writes the text, as the SavedModel does: equal ids give equal text.
An empty sentence is CTranslate2's own case: it returns an empty translation without running
the model (the SavedModel decodes the end token alone).
"""

import dataclasses
import functools
import pathlib
import typing

import tensorflow as tf

from zoo import files
from zoo.errors import ZooError
from zoo.export import runtimes
from zoo.export.formats import CTRANSLATE2, require
from zoo.text import tokenizers

METADATA = runtimes.METADATA


def resolve(path):
    """The version directory of a CTranslate2 export at `path` (a version, or a root whose newest
    version is one); else None."""
    return runtimes.resolve(path, (CTRANSLATE2,))


@dataclasses.dataclass(frozen=True)
class Exported:
    """A loaded CTranslate2 export: its version directory, metadata, `ctranslate2.Translator`,
    tokenizers and vocabularies (token strings, id = position)."""

    path: pathlib.Path
    metadata: dict
    translator: typing.Any
    source_tokenizer: typing.Any
    target_tokenizer: typing.Any
    source_tokens: list
    target_tokens: list

    @functools.cached_property
    def target_ids(self):
        return {token: index for index, token in enumerate(self.target_tokens)}

    def source_pieces(self, texts):
        """The source tokenizer's tokens of each text, as vocabulary strings (no end token:
        CTranslate2 keeps `max_input_length - 1` of them and appends it)."""
        ids = self.source_tokenizer.tokenize(tf.constant(list(texts), tf.string)).to_list()
        return [[self.source_tokens[i] for i in row] for row in ids]

    def options(self, beam_size=None, alpha=None, **overrides):
        """`translate_batch`'s keyword arguments: the export's, `beam_size` and the length
        penalty `alpha` replaced where given."""
        options = dict(self.metadata["translate_options"], **overrides)
        if beam_size is not None:
            options["beam_size"] = beam_size
        if alpha is not None:
            options["length_penalty"] = alpha
        return options

    def translate_ids(self, texts, beam_size=None, alpha=None, **overrides):
        """Target ids of each text's best hypothesis, the end token dropped (lists of ints)."""
        texts = list(texts)
        if not texts:
            return []
        results = self.translator.translate_batch(self.source_pieces(texts),
                                                  **self.options(beam_size, alpha, **overrides))
        end = self.metadata["special_tokens"]["end"]
        return [[self.target_ids[token] for token in result.hypotheses[0] if token != end]
                for result in results]

    def detokenize(self, rows):
        if not rows:
            return []
        ids = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1, inner_shape=())
        return [text.decode("utf-8") for text in
                self.target_tokenizer.detokenize(ids).numpy().tolist()]

    def translate(self, texts, beam_size=None, alpha=None):
        """The translations of `texts`, as the SavedModel's `translation` output writes them."""
        return self.detokenize(self.translate_ids(texts, beam_size, alpha))


def _vocabulary(directory, name):
    path = directory / f"{name}_vocabulary.json"
    if not path.is_file():
        path = directory / "shared_vocabulary.json"
    return files.read_json(path, list)


def load(path, compute_type="default", **translator_options):
    """The `Exported` CTranslate2 export at `path` (see `resolve`); ctranslate2 must be
    installed. `compute_type` and `translator_options` go to `ctranslate2.Translator` (default:
    the saved weights' type on the CPU)."""
    directory = resolve(path)
    if directory is None:
        raise FileNotFoundError(f"{path} is not a CTranslate2 export (no {METADATA} naming "
                                f"format {CTRANSLATE2!r})")
    metadata = files.read_json(directory / METADATA, dict)
    ctranslate2 = require("ctranslate2", "ctranslate2", f"a CTranslate2 export ({directory})")
    translator = ctranslate2.Translator(str(directory), device="cpu", compute_type=compute_type,
                                        **translator_options)
    dirs = metadata["tokenizer"]["directories"]
    source = tokenizers.load(directory / dirs["source"])
    target = source if dirs["target"] == dirs["source"] else tokenizers.load(
        directory / dirs["target"])
    return Exported(directory, metadata, translator, source, target,
                    _vocabulary(directory, "source"), _vocabulary(directory, "target"))


def predict(path, inputs, beam_size=None, alpha=None):
    """Translate sentences with the export at `path`: one `{"input", "translation"}` per input,
    as `zoo.runs.predict` gives for a SavedModel. `beam_size`: 1 greedy, default the export's
    (4); `alpha`: the length penalty (default the export's)."""
    inputs = list(inputs)
    if not inputs:
        raise ZooError("predict needs at least one input (sentences)")
    exported = load(path)
    translations = exported.translate(inputs, beam_size, alpha)
    return [{"input": text, "translation": translation}
            for text, translation in zip(inputs, translations)]

