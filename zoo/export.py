"""SavedModel export for TensorFlow Serving: `zoo.export(model, "saved_models/<name>")`.

The export is a plain SavedModel in TF Serving's layout,

    saved_models/<name>/<version>/    saved_model.pb, variables/, assets.extra/zoo_export.json

loadable without this package and without Keras: `tf.saved_model.load(path)`
needs TensorFlow plus, for translation models, the tensorflow-text op
libraries (`import tensorflow_text`, or TF Serving's model server, which links
them). Everything else (model weights, tokenizer vocabularies and tables,
beam search, detokenization) is inside the SavedModel.

Signatures of a translation model (Transformer or RNNsearch), B strings in:

    serving_default(text: tf.string (B,)) -> beam search (`zoo.decode.beam_search`)
        translation  tf.string (B,)    detokenized best hypothesis
        tokens       int32 (B, L)      its target ids: no [START], [END] kept,
                                       0 after it (L = max_length)
        score        float32 (B,)      its length-penalised log-probability
                                       log p(y | x) / ((5 + |y|) / 6)^alpha,
                                       |y| counting [END] (`decode.length_penalty`)
    greedy(text: tf.string (B,)) -> greedy decoding (`zoo.decode.greedy_decode`)
        translation, tokens  as above
        score        float32 (B,)      sum of the log-probabilities of the chosen
                                       tokens up to and including [END]

The text goes through the source tokenizer's `tokenize` (UTF-8 repair: invalid
bytes become U+FFFD; NFKC; lower-casing; WordPiece; unknown characters, emoji
included, become [UNK]), is cut to `max_length - 1` tokens and gets [END]
appended (`zoo.pipeline` convention: source = x + [END]); the batch is padded
with 0, decoded, and the target tokenizer's `detokenize` turns the ids back
into text. An empty string is a source of [END] alone and is translated like
any other input; an empty batch gives empty outputs (tokens `(0, max_length)`).
Decoding runs without XLA (TF Serving disables XLA:CPU JIT by default and
fails requests to functions that need it).

Imported Marian (OPUS-MT) models (`zoo.marian`) export the same signatures
with their own tokenizers (`zoo.marian_tokenizer`: cased SentencePiece
pieces mapped through vocab.json, `</s>` appended) and special ids (the
target tokenizer's `special_ids`: padding = decoder start, `</s>` = 0 in
OPUS-MT): `tokens` holds Marian ids with padding after `</s>`, and
`translation` is what Hugging Face's `batch_decode(skip_special_tokens=True)`
gives. Their beam search is Hugging Face's by default (`length_penalty="hf"`:
score `log p(y | x) / |y| ** alpha`, alpha 1.0), and the step at the length
limit emits `</s>` (`force_end`, Marian's `forced_eos_token_id`), so that the
SavedModel reproduces `generate(num_beams=4)`.

Signatures of a ViT, K classes, top k:

    serving_default(images: uint8 (B, H, W, C)) ->
        probabilities  float32 (B, K)   softmax of the logits
        classes        int32 (B, k)     top-k class ids, most probable first
        scores         float32 (B, k)   their probabilities
        class_names    tf.string (B, k) their names (`class_names`, or the ids as text)
    predict_image_bytes(image_bytes: tf.string (B,)) -> the same outputs
        each string is an encoded PNG, JPEG, GIF (first frame) or BMP of any
        size; it is decoded, converted to C channels (alpha dropped, RGB <->
        grayscale with ITU-R 601 weights) and resized to (H, W) (bilinear,
        antialiased) inside the graph. Bytes that are not an image fail the
        request with InvalidArgumentError ("Unknown image file format").

Versions: `version=None` takes the next integer after the largest existing
version directory. The SavedModel is written into `<path>/.tmp-<version>-<random>`
and renamed to `<path>/<version>` only once complete, so TF Serving (which
only loads integer-named directories) never sees a half-written version; an
exception during export removes the temporary directory. An existing version
is never overwritten (`FileExistsError`).

`zoo.export` is this module, made callable: `zoo.export(model, path)`,
`zoo.export.export(model, path)` and `from zoo.export import export` all call
the same function.
"""

import os
import pathlib
import sys
import types

import keras
import tensorflow as tf
import tensorflow_text

from zoo import decode, families, files, tokenizers
from zoo.tokens import END_ID, PAD_ID, START_ID, encode_sources

# The RNNsearch has no position table: without `max_length` it decodes up to
# this many tokens (`zoo.pipeline.make_translation_dataset`'s default).
DEFAULT_RNN_MAX_LENGTH = 128

METADATA_FILENAME = "zoo_export.json"
DEFAULT_TOP_K = 5

# tensorflow-text ops that TensorFlow Serving's model server registers (it
# links tensorflow-text's op libraries: normalisation, regex split, WordPiece,
# fast WordPiece, SentencePiece, whitespace). An export may use these and
# core TensorFlow ops, nothing else; tests check the exported graphs.
TF_SERVING_TEXT_OPS = frozenset(
    {
        # _normalize_ops
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "FindSourceOffsets",
        # _regex_split_ops
        "RegexSplitWithOffsets",
        # _wordpiece_tokenizer, _fast_wordpiece_tokenizer
        "WordpieceTokenizeWithOffsets",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>FastWordpieceDetokenize",
        # _sentencepiece_tokenizer, _fast_sentencepiece_tokenizer
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceStringToIdOp",
        "SentencepieceVocabSizeOp",
        "TFText>FastSentencepieceTokenize",
        "TFText>FastSentencepieceDetokenize",
        # _whitespace_tokenizer, _whitespace_tokenizer_v2
        "WhitespaceTokenizeWithOffsets",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
    }
)

# The tensorflow-text op libraries holding TF_SERVING_TEXT_OPS (file names in
# tensorflow_text/python/ops/): what a TF Serving-like process loads.
TF_SERVING_TEXT_OP_LIBRARIES = (
    "_normalize_ops.so",
    "_regex_split_ops.so",
    "_wordpiece_tokenizer.so",
    "_fast_wordpiece_tokenizer.so",
    "_sentencepiece_tokenizer.so",
    "_fast_sentencepiece_tokenizer.so",
    "_whitespace_tokenizer.so",
    "_whitespace_tokenizer_v2.so",
)


# === Model inspection ===


def model_family(model):
    """`"transformer"`, `"seq2seq"` (RNNsearch) or `"vit"`, from the layer names.

    The same rules as `zoo.attention_weights`, so models loaded from `.keras`
    files are recognised too. Raises ValueError for anything else.
    """
    family = families.model_family(model)
    if family is not None:
        return family
    raise ValueError(
        "export: `obj` must be a zoo Transformer, RNNsearch or ViT keras.Model (or the path "
        f"of a .keras file of one); received {type(model).__name__} "
        f"{getattr(model, 'name', '')!r}."
    )


def _layers(model):
    return {layer.name: layer for layer in model.layers}


def _source_vocabulary_size(model, family):
    layers = _layers(model)
    if family in ("transformer", "convs2s"):  # ka.TokenAndPositionEmbedding
        layer = layers.get("shared_embedding") or layers["source_embedding"]
        return layer.vocabulary_size
    return layers["source_embedding"].input_dim


def _target_vocabulary_size(model):
    return int(model.outputs[0].shape[-1])


def _position_limit(model):
    """The Transformer's position table size: the longest source or target it takes."""
    layers = _layers(model)
    names = ("shared_embedding", "source_embedding", "target_embedding")
    return min(layers[name].sequence_length for name in names if name in layers)


# === Argument checks ===


def _check_int(name, value, minimum, maximum=None):
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"export: `{name}` must be an int {bound}; received {name}={value!r}.")


def special_ids(tokenizer):
    """`{"pad", "start", "end"}` of a tokenizer (`special_ids`), else the zoo's 0, 2, 3."""
    ids = getattr(tokenizer, "special_ids", None) or {}
    return {"pad": ids.get("pad", PAD_ID), "start": ids.get("start", START_ID),
            "end": ids.get("end", END_ID)}


def _load_tokenizer(name, tokenizer):
    """A tokenizer object, or a directory written by a tokenizer's `save`."""
    if isinstance(tokenizer, (str, os.PathLike)):
        return tokenizers.load(tokenizer)
    if not isinstance(tokenizer, tf.Module) or not all(
        callable(getattr(tokenizer, method, None)) for method in ("tokenize", "detokenize")
    ):
        raise ValueError(
            f"export: `{name}` must be a zoo.text.WordPieceTokenizer (a tf.Module with "
            f"tokenize/detokenize) or the directory it was saved to; received {tokenizer!r}."
        )
    return tokenizer


def _check_vocabulary(name, tokenizer, model_size, side):
    size = getattr(tokenizer, "vocab_size", None)
    if size is not None and size > model_size:
        raise ValueError(
            f"export: `{name}` has {size} tokens but the model's {side} vocabulary has "
            f"{model_size}: its ids would not fit the model; pass the tokenizer the model "
            "was trained with."
        )


# === Exported modules ===


class TranslationModule(tf.Module):
    """What a translation export holds: the model, its tokenizers and the signatures.

    Args:
        model: a zoo Transformer or RNNsearch (`{"source", "target"}` -> logits).
        source_tokenizer, target_tokenizer: `zoo.text.WordPieceTokenizer`s (may
            be the same object); tracked as attributes, so their tables and
            vocabularies are saved with the model.
        max_length: the longest source (tokens + [END]) and the most tokens generated.
        beam_size, alpha: beam search width and length penalty.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, max_length, beam_size, alpha,
                 length_penalty="gnmt", force_end=False):
        super().__init__(name="translation")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_length = max_length
        self.beam_size = beam_size
        self.alpha = alpha
        self.length_penalty = length_penalty
        self.force_end = force_end
        self.ids = special_ids(target_tokenizer)

    def _decode_args(self):
        return dict(max_length=self.max_length, start_id=self.ids["start"],
                    end_id=self.ids["end"], pad_id=self.ids["pad"], force_end=self.force_end)

    def source_ids(self, text):
        """Strings (B,) -> source ids int32 (B, S): tokens cut to max_length - 1, + [END], 0-padded."""
        ids = encode_sources(self.source_tokenizer, text, self.max_length,
                             end_id=self.ids["end"])  # (B, (S))
        return ids.to_tensor(default_value=self.ids["pad"])  # (B, S)

    def sequence_log_prob(self, source, tokens):
        """Sum of log p(token) over each row of `tokens` (B, L), up to and including [END].

        One teacher-forced pass over `[START] + tokens[:, :-1]`: position t
        sees the same prefix as decoding step t did (the decoder is causal).
        """
        batch = tf.shape(tokens)[0]
        target = tf.concat(
            [tf.fill([batch, 1], tf.constant(self.ids["start"], tf.int32)), tokens[:, :-1]], axis=1
        )
        logits = self.model({"source": source, "target": target}, training=False)  # (B, L, V)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        chosen = tf.gather(log_probs, tokens, batch_dims=2)  # (B, L)
        end = tf.cast(tf.equal(tokens, self.ids["end"]), tf.int32)
        after_end = tf.cumsum(end, axis=1, exclusive=True)
        return tf.reduce_sum(tf.where(after_end > 0, tf.zeros_like(chosen), chosen), axis=1)

    def _outputs(self, text, run):
        source = self.source_ids(text)  # (B, S)

        def empty():
            return tf.zeros([0, self.max_length], tf.int32), tf.zeros([0], tf.float32)

        # An empty batch never reaches the model (shape corner cases in the
        # decoding loops); it gets empty outputs of the right ranks.
        tokens, score = tf.cond(tf.shape(source)[0] > 0, lambda: run(source), empty)
        tokens = tf.ensure_shape(tf.cast(tokens, tf.int32), [None, None])
        return {
            "translation": self.target_tokenizer.detokenize(tokens),  # (B,)
            "tokens": tokens,  # (B, L)
            "score": tf.ensure_shape(tf.cast(score, tf.float32), [None]),  # (B,)
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def beam(self, text):
        def run(source):
            return decode.beam_search(
                self.model,
                source,
                beam_size=self.beam_size,
                alpha=self.alpha,
                length_penalty=self.length_penalty,
                **self._decode_args(),
            )

        return self._outputs(text, run)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def greedy(self, text):
        def run(source):
            tokens = decode.greedy_decode(self.model, source, **self._decode_args())
            return tokens, self.sequence_log_prob(source, tokens)

        return self._outputs(text, run)


class ImageClassifierModule(tf.Module):
    """What a ViT export holds: the model, the class names and the signatures.

    Args:
        model: a zoo ViT (`images (B, H, W, C)` in [0, 255] -> logits `(B, K)`).
        top_k: how many classes each image reports.
        class_names: K names (str), id = position.
    """

    def __init__(self, model, top_k, class_names):
        super().__init__(name="image_classifier")
        self.model = model
        self.height, self.width, self.channels = (int(d) for d in model.inputs[0].shape[1:])
        self.top_k = top_k
        self.class_names = list(class_names)
        # Built here: the input signature holds the model's image size.
        self.serving_default = tf.function(
            self._predict_images,
            input_signature=[
                tf.TensorSpec(
                    [None, self.height, self.width, self.channels], tf.uint8, name="images"
                )
            ],
        )
        self.predict_image_bytes = tf.function(
            self._predict_image_bytes,
            input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")],
        )

    def _classify(self, images):  # float32 (B, H, W, C) in [0, 255]
        num_classes = len(self.class_names)

        def run():
            logits = self.model(images, training=False)  # (B, K)
            return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)

        # The patch reshapes cannot infer sizes on an empty batch: it skips the model.
        probabilities = tf.cond(
            tf.shape(images)[0] > 0, run, lambda: tf.zeros([0, num_classes], tf.float32)
        )
        probabilities = tf.ensure_shape(probabilities, [None, num_classes])
        top = tf.math.top_k(probabilities, k=self.top_k)  # (B, k) each
        names = tf.gather(tf.constant(self.class_names, tf.string), top.indices)
        return {
            "probabilities": probabilities,
            "classes": tf.cast(top.indices, tf.int32),
            "scores": top.values,
            "class_names": names,
        }

    def decode_image(self, image_bytes):
        """One encoded image (scalar string) -> float32 (H, W, C) in [0, 255]."""
        image = tf.io.decode_image(image_bytes, channels=0, expand_animations=False)  # (h, w, c)
        image = tf.ensure_shape(image, [None, None, None])
        # Drop alpha: 2 channels are gray + alpha, 4 are RGB + alpha.
        color = tf.cond(tf.shape(image)[-1] >= 3, lambda: image[..., :3], lambda: image[..., :1])
        color = tf.cast(color, tf.float32)  # (h, w, 1 or 3)
        if self.channels == 3:
            to_model = lambda: tf.tile(color, [1, 1, 3])  # noqa: E731
            color = tf.cond(tf.shape(color)[-1] == 1, to_model, lambda: color)
        else:
            to_model = lambda: tf.image.rgb_to_grayscale(color)  # noqa: E731
            color = tf.cond(tf.shape(color)[-1] == 3, to_model, lambda: color)
        color = tf.ensure_shape(color, [None, None, self.channels])
        resized = tf.image.resize(
            color, [self.height, self.width], method="bilinear", antialias=True
        )
        return tf.clip_by_value(resized, 0.0, 255.0)  # (H, W, C)

    def _predict_images(self, images):  # uint8 (B, H, W, C)
        return self._classify(tf.cast(images, tf.float32))

    def _predict_image_bytes(self, image_bytes):  # string (B,)
        images = tf.map_fn(
            self.decode_image,
            image_bytes,
            fn_output_signature=tf.TensorSpec([self.height, self.width, self.channels], tf.float32),
        )  # (B, H, W, C)
        return self._classify(images)


# === Writing versions ===


def existing_versions(path):
    """The integer version directories under `path`, as a sorted list of ints."""
    path = pathlib.Path(path)
    if not path.is_dir():
        return []
    return sorted(
        int(child.name)
        for child in path.iterdir()
        if child.is_dir() and child.name.isascii() and child.name.isdigit()
    )


def _write_atomically(base, version, save, renumber):
    """Run `save(directory, version)` into a temporary directory under `base`, then rename
    it to `base/<version>`; on any exception the temporary directory is removed. With
    `version=None`, two exports started at once get the next two free versions
    (`renumber(directory, version)` rewrites what names the version)."""
    path, _ = files.write_numbered_directory(base, save, version, renumber=renumber)
    return path


def export(
    obj,
    path,
    version=None,
    *,
    tokenizer=None,
    target_tokenizer=None,
    beam_size=4,
    alpha=None,
    max_length=None,
    top_k=None,
    class_names=None,
    length_penalty=None,
    force_end=None,
):
    """Write a zoo model as a TF Serving SavedModel version (see the module docstring).

    Args:
        obj: a zoo Transformer, RNNsearch or ViT `keras.Model` (from `zoo.get`
            or `keras.saving.load_model`), or the path of a `.keras` file.
        path: the model's directory, e.g. `"saved_models/numbers"`; the
            version is written to `<path>/<version>/`.
        version: a positive int, or None for one more than the largest
            existing version (1 for the first).
        tokenizer: translation models: the source tokenizer
            (`zoo.text.WordPieceTokenizer`, or a directory written by its
            `save`), also used for the target unless `target_tokenizer` is given.
        target_tokenizer: translation models with separate vocabularies.
        beam_size, alpha: `serving_default`'s beam width and length penalty
            (GNMT's, Wu et al. 2016; the Transformer paper: 4 and 0.6). Default
            alpha: 0.6, or 1.0 (Hugging Face's default) with `length_penalty="hf"`.
        length_penalty: `"gnmt"` or `"hf"` (`zoo.decode.beam_search`); default
            `"hf"` for a tokenizer with its own `special_ids` (imported Marian
            models), else `"gnmt"`.
        force_end: emit [END] at the length limit (`zoo.decode`); default as
            `length_penalty` (True for imported Marian models).
        max_length: translation models: sources are cut to `max_length - 1`
            tokens plus [END], and at most `max_length` tokens are generated.
            Default: the Transformer's position table size; 128 for RNNsearch.
        top_k: ViT: classes reported per image, at most the number of
            classes K; default min(5, K).
        class_names: ViT: one name per class; default the ids as text.

    Returns:
        `pathlib.Path` of the written version directory.

    Raises:
        ValueError: `obj` is not a zoo model, or arguments do not fit it.
        FileExistsError: `<path>/<version>` exists.
    """
    if isinstance(obj, (str, os.PathLike)):
        if not str(obj).endswith(".keras"):
            raise ValueError(f"export: a path `obj` must be a .keras file; received {obj!r}.")
        obj = keras.saving.load_model(obj)
    family = model_family(obj)

    base = pathlib.Path(path)
    if base.exists() and not base.is_dir():
        raise ValueError(f"export: `path` must be a directory; {base} is a file.")
    if version is not None:
        _check_int("version", version, 1)

    # Every argument is checked (and the signatures prepared) before anything is written.
    if family == "vit":
        if tokenizer is not None or target_tokenizer is not None:
            raise ValueError("export: a ViT takes no `tokenizer`/`target_tokenizer`.")
        module, signatures, metadata = _image_export(obj, top_k, class_names)
    else:
        if class_names is not None:
            raise ValueError("export: `class_names` is for ViT models only.")
        module, signatures, metadata = _translation_export(
            obj, family, tokenizer, target_tokenizer, beam_size, alpha, max_length,
            length_penalty, force_end,
        )

    base.mkdir(parents=True, exist_ok=True)
    if version is not None and version in existing_versions(base):
        raise FileExistsError(
            f"export: version {version} already exists in {base}; versions are never "
            "overwritten (pass another `version`, or None for the next one)."
        )
    metadata = {
        "format_version": 1,
        "family": family,
        "model_name": obj.name,
        "version": version,  # set when the version is chosen
        "tensorflow_version": tf.__version__,
        **metadata,
    }

    def renumber(directory, number):  # the version is in the metadata
        extra = directory / "assets.extra"
        extra.mkdir(exist_ok=True)
        files.write_json(extra / METADATA_FILENAME, {**metadata, "version": number})

    def save(directory, number):
        tf.saved_model.save(module, str(directory), signatures=signatures)
        renumber(directory, number)

    return _write_atomically(base, version, save, renumber)


def _translation_export(model, family, tokenizer, target_tokenizer, beam_size, alpha, max_length,
                        length_penalty=None, force_end=None):
    if tokenizer is None:
        raise ValueError(
            f"export: a {family} model needs `tokenizer` (and `target_tokenizer` when the "
            "target vocabulary differs) to serve text."
        )
    source_tokenizer = _load_tokenizer("tokenizer", tokenizer)
    target_tokenizer = (
        source_tokenizer
        if target_tokenizer is None
        else _load_tokenizer("target_tokenizer", target_tokenizer)
    )
    _check_vocabulary("tokenizer", source_tokenizer, _source_vocabulary_size(model, family), "source")
    _check_vocabulary(
        "target_tokenizer" if target_tokenizer is not source_tokenizer else "tokenizer",
        target_tokenizer,
        _target_vocabulary_size(model),
        "target",
    )
    _check_int("beam_size", beam_size, 1)
    imported = getattr(target_tokenizer, "special_ids", None) is not None
    if length_penalty is None:
        length_penalty = "hf" if imported else "gnmt"
    if length_penalty not in decode.LENGTH_PENALTIES:
        raise ValueError(
            f"export: `length_penalty` must be one of {decode.LENGTH_PENALTIES}; "
            f"received length_penalty={length_penalty!r}."
        )
    force_end = imported if force_end is None else bool(force_end)
    if alpha is None:
        alpha = 1.0 if length_penalty == "hf" else 0.6
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha >= 0:
        raise ValueError(f"export: `alpha` must be a number >= 0; received alpha={alpha!r}.")
    limit = _position_limit(model) if family in ("transformer", "convs2s") else None
    if max_length is None:
        max_length = limit if limit is not None else DEFAULT_RNN_MAX_LENGTH
    _check_int("max_length", max_length, 2, limit)

    module = TranslationModule(
        model, source_tokenizer, target_tokenizer, max_length, beam_size, float(alpha),
        length_penalty, force_end,
    )
    signatures = {"serving_default": module.beam, "greedy": module.greedy}
    metadata = {
        "tensorflow_text_version": tensorflow_text.__version__,
        "signatures": {
            "serving_default": "beam search: text -> translation, tokens, score",
            "greedy": "greedy decoding: text -> translation, tokens, score",
        },
        "max_length": max_length,
        "beam_size": beam_size,
        "alpha": float(alpha),
        "length_penalty": length_penalty,
        "force_end": force_end,
        "special_ids": module.ids,
    }
    return module, signatures, metadata


def _image_export(model, top_k, class_names):
    shape = tuple(model.inputs[0].shape)
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise ValueError(
            f"export: the ViT must take images of a fixed size (B, H, W, C); its input "
            f"shape is {shape}."
        )
    if shape[-1] not in (1, 3):
        raise ValueError(
            f"export: image signatures are written for 1- or 3-channel models; this ViT takes "
            f"{shape[-1]} channels."
        )
    num_classes = int(model.outputs[0].shape[-1])
    if top_k is None:
        top_k = min(DEFAULT_TOP_K, num_classes)
    _check_int("top_k", top_k, 1, num_classes)
    if class_names is None:
        class_names = [str(index) for index in range(num_classes)]
    else:
        class_names = list(class_names)
        if len(class_names) != num_classes or not all(isinstance(n, str) for n in class_names):
            raise ValueError(
                f"export: `class_names` must be {num_classes} str (one per class); received "
                f"{len(class_names)} names: {class_names[:10]!r}."
            )
    module = ImageClassifierModule(model, top_k, class_names)
    signatures = {
        "serving_default": module.serving_default,
        "predict_image_bytes": module.predict_image_bytes,
    }
    metadata = {
        "signatures": {
            "serving_default": "images uint8 (B, H, W, C) -> probabilities, classes, "
            "scores, class_names",
            "predict_image_bytes": "encoded PNG/JPEG/GIF/BMP (B,) -> the same outputs",
        },
        "image_shape": [module.height, module.width, module.channels],
        "top_k": top_k,
        "class_names": class_names,
    }
    return module, signatures, metadata


class _CallableModule(types.ModuleType):
    """`zoo.export` is this module and calling it calls `export`."""

    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
