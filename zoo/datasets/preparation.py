"""From a dataset spec to what a zoo model trains on: shared by `zoo train` and `zoo tune`.

    kind, data = load_data("transformer-tiny", "numbers", {"train_size": 1000})
    source, target = learn_tokenizers(data.train_pairs, model_config)
    train, val, num_train, num_val = translation_datasets(
        data.train_pairs, source, target, batch_size, max_length, val_ratio, seed)
    model_config.update(config_from_data(model_config, kind, data, (source, target)))

Loading (`load_data`, `check_data_fits`), the validation split
(`split_validation`), the batched `tf.data` pipelines (`translation_datasets`,
`image_datasets`), the WordPiece vocabularies (`learn_tokenizers`) and the
config fields the data dictates (`config_from_data`).
"""

import dataclasses
import sys
import time

import numpy as np
import tensorflow as tf

from keras_attention import backends
from zoo import datasets, registry
from zoo.datasets import pipeline
from zoo.errors import ZooError
from zoo.progress import say
from zoo.text import tokenizers

TRANSLATION_FAMILIES = ("transformer", "seq2seq")

IMAGE_FAMILIES = ("vit",)

BUCKETS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)

DATA_OPTIONS = ("data_dir", "train_size", "test_size", "test_ratio", "test_path", "data_seed")
# The seed that generates and splits a dataset when none is given: the same test pairs
# whatever the training seed (`--seed`) is.
DEFAULT_DATA_SEED = 0


def model_kind(name):
    """`"translation"` or `"image"`: what kind of data the model `name` takes."""
    entry = registry.entry(name)
    family = entry.family
    if family in TRANSLATION_FAMILIES:
        return "translation"
    if family in IMAGE_FAMILIES:
        return "image"
    fields = {field.name for field in dataclasses.fields(entry.config)}
    if "image_size" in fields and "num_classes" in fields:
        return "image"
    if "vocabulary_size" in fields and "max_length" in fields:
        return "translation"
    raise ZooError(
        f"zoo train does not know what data {name!r} (family {family!r}) takes; its config "
        "needs vocabulary_size and max_length (translation) or image_size and num_classes (images)."
    )


def check_data_fits(name, spec):
    """Raise a clear `ValueError` when the dataset `spec` is not for model `name`'s family."""
    kind = model_kind(name)
    data_kind = datasets.dataset_kind(spec)
    if kind != data_kind:
        if kind == "image":
            hint = "use an image dataset: digits, fashion-mnist or images:DIR"
        else:
            hint = "use a translation dataset: numbers, dates or tsv:PATH"
        raise ZooError(
            f"dataset {spec!r} holds {data_kind} data but {name!r} "
            f"({registry.entry(name).family}) is {'an image' if kind == 'image' else 'a translation'}"
            f" model; {hint}"
        )
    return kind


def data_seed(options, seed=None):
    """The seed that generates (`numbers`, `dates`) and splits a dataset.

    The `data_seed` option when given; else `seed`, which callers pass for run
    directories written before that option (they split with the training seed)
    and `zoo tune` for its own `--seed`; else `DEFAULT_DATA_SEED`.
    """
    chosen = (options or {}).get("data_seed")
    if chosen is not None:
        return chosen
    return DEFAULT_DATA_SEED if seed is None else seed


def load_run_data(config, quiet=False):
    """`load_data` for a run directory's `config.json` (a dict): its dataset, the same
    split it was trained on."""
    return load_data(config["model"], config["data"]["spec"], dict(config["data"]["options"]),
                     config["model_config"], config["training"]["seed"], quiet)


def load_data(name, spec, options=None, model_config=None, seed=None, quiet=False):
    """Load the dataset `spec` for model `name`, as `train` and `zoo tune` do.

    Args:
        name: a registry name (decides translation or images; a dataset of
            the other kind raises a `ValueError`, see `check_data_fits`).
        spec: `numbers`, `dates`, `tsv:PATH`, `digits`, `fashion-mnist` or
            `images:DIR` (`zoo.datasets.load`).
        options: dataset options, a dict with keys among `DATA_OPTIONS`
            (`data_dir`, `train_size`, `test_size`, `test_ratio`, `test_path`,
            `data_seed`); missing keys are None.
        model_config: the model's config as a dict; `images:DIR` folders are
            resized to its `image_size` and read with its `channels` (1, 3 or 4).
        seed: the generation and split seed when `options` give no `data_seed`
            (`data_seed`; default 0).
        quiet: print nothing (else the sizes and a first example, and a
            progress bar while pairs are generated or read when stdout is a
            terminal).

    Returns:
        `(kind, data)`: `"translation"` and a `zoo.datasets.TranslationData`
        (`train_pairs`, `test_pairs`: lists of `(source, target)` str pairs),
        or `"image"` and a `zoo.datasets.ImageData` (`x_train` uint8
        `(N, H, W, C)`, `y_train` int `(N,)`, the same for the test split,
        and `class_names`).
    """
    options = options or {}
    model_config = model_config or {}
    kind = check_data_fits(name, spec)
    started = time.monotonic()
    say(f"Loading dataset {spec!r}...", quiet)
    kwargs = {key: options.get(key) for key in DATA_OPTIONS if key != "data_seed"}
    if kind == "image" and spec.startswith("images:"):
        kwargs["image_size"] = model_config.get("image_size")
        channels = model_config.get("channels", 3)
        kwargs["color_mode"] = {1: "grayscale", 3: "rgb", 4: "rgba"}.get(channels)
        if kwargs["color_mode"] is None:
            raise ZooError(f"images: datasets need channels 1, 3 or 4; received {channels}")
    data = datasets.load(spec, seed=data_seed(options, seed), progress=not quiet and sys.stdout.isatty(), **kwargs)
    if kind == "translation":
        skipped = {reason: count for reason, count in data.skipped.items() if count}
        extra = f"; skipped lines: {skipped}" if skipped else ""
        say(
            f"  {len(data.train_pairs):,} training pairs, {len(data.test_pairs):,} held out "
            f"({time.monotonic() - started:.1f} s){extra}",
            quiet,
        )
        if data.train_pairs:
            source, target = data.train_pairs[0]
            say(f"  e.g. {source!r} -> {target!r}", quiet)
    else:
        say(
            f"  {len(data.x_train):,} training images {data.x_train.shape[1:]}, "
            f"{len(data.x_test):,} test images, {len(data.class_names)} classes "
            f"({time.monotonic() - started:.1f} s)",
            quiet,
        )
    return kind, data


def split_validation(count, val_ratio, seed):
    """Indices of a seeded split of `count` examples into training and validation.

    The validation share is `round(val_ratio * count)`, at least 1 and at most
    `count - 1` when `val_ratio > 0` and `count > 1`; none when `val_ratio` is 0.
    The same `(count, val_ratio, seed)` always gives the same split (what
    `translation_datasets`, `image_datasets` and `zoo tune` rely on).

    Args:
        count: the number of examples.
        val_ratio: the validation share, in [0, 1).
        seed: the split's seed.

    Returns:
        `(train, validation)`: sorted int arrays of indices, `(count - V,)` and `(V,)`.
    """
    if not (isinstance(val_ratio, (int, float)) and 0 <= val_ratio < 1):
        raise ZooError(f"val_ratio must be in [0, 1); received val_ratio={val_ratio!r}")
    num_val = 0
    if val_ratio > 0 and count > 1:
        num_val = min(max(1, round(val_ratio * count)), count - 1)
    order = np.random.default_rng(seed + 7919).permutation(count)
    return np.sort(order[num_val:]), np.sort(order[:num_val])


def _buckets(max_length):
    boundaries = [b for b in BUCKETS if b < max_length]
    return boundaries or None


def translation_datasets(pairs, source_tokenizer, target_tokenizer, batch_size, max_length,
                         val_ratio, seed, batch_tokens=None, shuffle=True, copy=False,
                         pad_to_bucket_boundary=None):
    """Teacher-forcing `(train, validation or None)` datasets and their sizes: batches of
    `batch_size` examples, or of at most `batch_tokens` tokens (`zoo.datasets.pipeline`;
    `copy`: for a copying model, with `source_extended`). `shuffle=False`: the training
    batches in a fixed order (as many as shuffled: each length bucket holds the same
    examples), to count or time them without drawing from the shuffled pipeline's seeds.
    `pad_to_bucket_boundary`: each bucket's batches padded to one length (`None`: on JAX,
    whose `jax.jit` compiles the train step anew for every input shape; TensorFlow's
    `tf.function` and eager PyTorch take the longest in each batch as it comes)."""
    train_index, val_index = split_validation(len(pairs), val_ratio, seed)
    train_pairs = [pairs[i] for i in train_index]
    val_pairs = [pairs[i] for i in val_index]
    boundaries = _buckets(max_length)
    if batch_tokens is not None and boundaries is None:
        boundaries = [max_length]  # one bucket: every example, batches of batch_tokens // max_length
    if pad_to_bucket_boundary is None:
        pad_to_bucket_boundary = backends.backend() == "jax"
    common = dict(max_length=max_length, bucket_boundaries=boundaries, batch_tokens=batch_tokens,
                  copy=copy, pad_to_bucket_boundary=pad_to_bucket_boundary)
    train = pipeline.make_translation_dataset(
        train_pairs, source_tokenizer, target_tokenizer, batch_size, seed=seed, shuffle=shuffle,
        **common
    )
    val = None
    if val_pairs:
        val = pipeline.make_translation_dataset(
            val_pairs, source_tokenizer, target_tokenizer, batch_size, shuffle=False, **common
        )
    return train, val, len(train_pairs), len(val_pairs)


def image_datasets(x, y, batch_size, val_ratio, seed):
    """`(train, validation or None)` batches of uint8 images and int labels, and their sizes."""
    train_index, val_index = split_validation(len(x), val_ratio, seed)

    def make(index, shuffle):
        # Shuffle and batch the indices, then gather each batch with one op: the
        # same batches as shuffling the examples one by one (same seed, same
        # order), without a per-example pass through tf.data on the CPU that
        # also trains.
        images = tf.constant(x[index])
        labels = tf.constant(y[index].astype(np.int32))
        dataset = tf.data.Dataset.range(len(index))
        if shuffle:
            dataset = dataset.shuffle(len(index), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size).map(
            lambda i: (tf.gather(images, i), tf.gather(labels, i)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)

    val = make(val_index, False) if len(val_index) else None
    return make(train_index, True), val, len(train_index), len(val_index)


def learn_tokenizers(pairs, model_config, separate=False, quiet=False, kind=tokenizers.DEFAULT):
    """Tokenizers learned on translation pairs: one shared, or one per side.

    Args:
        pairs: the training pairs, a list of `(source, target)` str.
        model_config: the model's config as a dict: the vocabularies have at
            most its `vocabulary_size` tokens (with `separate`: its
            `source_vocabulary_size` and `target_vocabulary_size` when set).
        separate: learn one vocabulary per side instead of a shared one.
        quiet: print nothing (else a start line, progress bars when stdout is
            a terminal, and the sizes).
        kind: `"sentencepiece"` (cased, the default) or `"wordpiece"`
            (`zoo.text.tokenizers`).

    Returns:
        `(source, target)` tokenizers: the same object twice when the
        vocabulary is shared.
    """
    shared = model_config["vocabulary_size"]
    if separate:
        vocab_sizes = (model_config.get("source_vocabulary_size") or shared,
                       model_config.get("target_vocabulary_size") or shared)
    else:
        vocab_sizes = (shared, shared)
    started = time.monotonic()
    progress = not quiet and sys.stdout.isatty()
    label = {"sentencepiece": "SentencePiece", "wordpiece": "WordPiece"}[tokenizers.check_name(kind)]
    if separate:
        say(f"Learning {label} vocabularies (source at most {vocab_sizes[0]}, target at most "
            f"{vocab_sizes[1]} tokens) from {len(pairs):,} pairs...", quiet)
        source = tokenizers.learn(kind, [s for s, _ in pairs], vocab_sizes[0], progress=progress)
        target = tokenizers.learn(kind, [t for _, t in pairs], vocab_sizes[1], progress=progress)
        say(f"  {source.vocab_size} + {target.vocab_size} tokens "
            f"({time.monotonic() - started:.1f} s)", quiet)
        return source, target
    say(f"Learning a shared {label} vocabulary of at most {vocab_sizes[0]} tokens "
        f"from {len(pairs):,} pairs...", quiet)
    tokenizer = tokenizers.learn(kind, [sentence for pair in pairs for sentence in pair],
                                 vocab_sizes[0], progress=progress)
    say(f"  {tokenizer.vocab_size} tokens ({time.monotonic() - started:.1f} s)", quiet)
    return tokenizer, tokenizer


def config_from_data(config, kind, data, tokenizers=None, *, separate_vocabularies=False,
                     overrides=None, total_steps=None):
    """The config fields that the data dictates: fitting a model's config to its dataset.

    Translation: the vocabulary sizes of the learned tokenizers, as
    `vocabulary_size` (shared; `source_vocabulary_size` and
    `target_vocabulary_size` become None when the config has them) or as
    `source_vocabulary_size` and `target_vocabulary_size` (separate).
    Images: `image_size`, `channels` and `num_classes` from the training
    images `(N, H, W, C)` (square only) and the class names. With
    `total_steps`, a config's `decay_steps` (the learning-rate schedule's
    length) becomes `max(1, total_steps)` unless `overrides` sets it.

    `train` builds its model from `{**config, **config_from_data(...)}`;
    `zoo.tuning.load_data` holds these fields fixed during a search.

    Args:
        config: the model's config as a dict (registry defaults and the
            user's overrides): only the fields it has are returned.
        kind: `"translation"` or `"image"` (from `load_data`).
        data: the dataset from `load_data`.
        tokenizers: translation: the `(source, target)` tokenizers
            (`learn_tokenizers`).
        separate_vocabularies: translation: the tokenizers are one per side.
        overrides: the config fields the user set: an image field set to a
            value other than the data's raises a `ValueError`.
        total_steps: the training steps the schedule should last.

    Returns:
        dict of config fields.

    Raises:
        ValueError: images that are not square, or `overrides` that contradict
            the data.
    """
    overrides = overrides or {}
    if kind == "translation":
        if tokenizers is None:
            raise ZooError("tokenizers are required for translation data; see learn_tokenizers")
        source, target = tokenizers
        if separate_vocabularies:
            derived = {"source_vocabulary_size": source.vocab_size,
                       "target_vocabulary_size": target.vocab_size}
        else:
            derived = {"vocabulary_size": source.vocab_size}
            if "source_vocabulary_size" in config:
                derived.update(source_vocabulary_size=None, target_vocabulary_size=None)
    elif kind == "image":
        height, width, channels = data.x_train.shape[1:]
        if height != width:
            raise ZooError(f"the zoo's ViTs take square images; the data's are {height}x{width}")
        derived = {"image_size": int(height), "channels": int(channels),
                   "num_classes": len(data.class_names)}
        for key, value in derived.items():
            if key in overrides and overrides[key] != value:
                raise ZooError(
                    f"{key}={overrides[key]!r} does not fit the data, which has "
                    f"{key}={value!r}; leave it out (it is taken from the data)"
                )
    else:
        raise ZooError(f"kind must be 'translation' or 'image'; received kind={kind!r}")
    if total_steps is not None and "decay_steps" not in overrides:
        derived["decay_steps"] = max(1, int(total_steps))
    return {key: value for key, value in derived.items() if key in config}


def model_config_for(name, overrides, kind, data, tokenizers, training, steps_per_epoch,
                     weights=None):
    """The full config dict: registry defaults < overrides < what the data dictates.

    `training` holds `epochs`, `max_steps`, `separate_vocabularies` and `jit` (a
    run's options): `decay_steps` lasts the training, `jit` sets `jit_compile`.
    With `weights`, a folder the family imports (`registry.family(name)`),
    the folder gives the sizes and the vocabularies (its tokenizers fit them
    already) instead of the registry defaults and the tokenizers.
    """
    base = dataclasses.asdict(registry.config(name, weights=weights, **overrides))
    # epochs None: a budget ends the run (its `max_steps`, else a time limit: not known here).
    total = None if training["epochs"] is None else training["epochs"] * steps_per_epoch
    if training["max_steps"]:
        total = training["max_steps"] if total is None else min(total, training["max_steps"])
    derived = config_from_data(
        base, kind, data, tokenizers, separate_vocabularies=training["separate_vocabularies"],
        overrides=overrides, total_steps=total,
    )
    if weights is not None:
        derived = {key: value for key, value in derived.items() if "vocabulary_size" not in key}
    base.update(derived)
    if training["jit"] is not None and "jit_compile" in base:
        base["jit_compile"] = bool(training["jit"])
    return base
