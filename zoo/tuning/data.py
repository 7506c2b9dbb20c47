"""A dataset spec (as `zoo train --data` names it) made ready for `tune`."""

import dataclasses
import functools
import math
from typing import Callable

from zoo import distribute, registry
from zoo.datasets import preparation
from zoo.tuning.space import FIT_ARGUMENTS, SearchSpace


@dataclasses.dataclass
class TuningData:
    """Data for `tune` from a dataset spec (what `load_data` returns).

    Attributes:
        train, validation: functions `global_batch_size -> tf.data.Dataset` of
            `(x, y)` batches (validation None without a validation share).
        fixed: the config fields the data dictates (`vocabulary_size`, or
            `image_size`, `channels`, `num_classes`, `decay_steps`).
        kind: `"translation"` or `"image"`.
        num_train, num_validation: examples in each split.
    """

    train: Callable
    validation: Callable | None
    fixed: dict
    kind: str
    num_train: int
    num_validation: int


def load_data(name, spec, *, fixed=None, space=None, val_ratio=0.1, seed=0, epochs=1,
              steps_per_epoch=None, quiet=False, **options):
    """Load a dataset named as `zoo train --data` names it, ready for `tune`.

    Reuses `zoo.datasets.preparation`, as `zoo train` does: translation pairs get a shared WordPiece
    vocabulary of at most the config's `vocabulary_size` tokens (learned once,
    on the training split) and the teacher-forcing pipeline; images are batched
    uint8 arrays. A seeded share `val_ratio` of the training split is held out
    for validation; the test split is not used.

    Args:
        name: the registry name (decides translation or images).
        spec: `numbers`, `dates`, `tsv:PATH`, `digits`, `fashion-mnist`, `images:DIR`.
        fixed: the user's fixed config fields (the tokenizer's size cap,
            `max_length`, `image_size` for `images:`) and `batch_size`; a value
            that contradicts the data raises a `ValueError`.
        space: the search-space overrides (their `batch_size` values count
            for `decay_steps`).
        val_ratio: the validation share, in (0, 1) for a `val_*` objective.
        seed: the split and generation seed.
        epochs, steps_per_epoch: for ViT's `decay_steps` unless fixed: epochs ×
            steps per epoch (at most `steps_per_epoch`) at the smallest batch
            size of the family's search space, so that no trial's learning rate
            decays past zero.
        quiet: print nothing.
        **options: `zoo.datasets.load` options (`data_dir`, `train_size`, ...).

    Returns:
        A `TuningData`.
    """
    fixed_batch = dict(fixed or {}).get("batch_size")
    fixed = {k: v for k, v in dict(fixed or {}).items() if k not in FIT_ARGUMENTS}
    base = dataclasses.asdict(registry.config(name, **fixed))
    options = {key: options.get(key) for key in preparation.DATA_OPTIONS}
    kind, data = preparation.load_data(name, spec, options, base, seed, quiet)
    if kind == "translation":
        tokenizers = preparation.learn_tokenizers(data.train_pairs, base, quiet=quiet)
        count = len(data.train_pairs)

        def make(global_batch):
            return preparation.translation_datasets(
                data.train_pairs, *tokenizers, global_batch, base["max_length"], val_ratio, seed,
                copy=base.get("copy", False),
            )
    else:
        tokenizers = None
        count = len(data.x_train)

        def make(global_batch):
            return preparation.image_datasets(data.x_train, data.y_train, global_batch, val_ratio, seed)

    datasets_for = functools.lru_cache(maxsize=4)(make)
    train_index, validation_index = preparation.split_validation(count, val_ratio, seed)
    num_train, num_validation = len(train_index), len(validation_index)
    total_steps = None
    if "decay_steps" in base and "decay_steps" not in fixed:
        batch_sizes = [fixed_batch or 16]
        search = registry.search_space(name)
        if not fixed_batch and isinstance(search, SearchSpace) and "batch_size" in search.params:
            search = search.replace(**{k: v for k, v in (space or {}).items() if k == "batch_size"})
            batch_sizes = list(search.params["batch_size"].candidates(base))
        steps = math.ceil(num_train / min(batch_sizes))
        if steps_per_epoch:
            steps = min(steps, steps_per_epoch)
        total_steps = epochs * steps
    derived = preparation.config_from_data(
        base, kind, data, tokenizers, overrides=fixed, total_steps=total_steps
    )

    def train_data(global_batch):
        return distribute.shard_by_data(datasets_for(global_batch)[0])

    def validation_data(global_batch):
        return distribute.shard_by_data(datasets_for(global_batch)[1])

    return TuningData(
        train_data, validation_data if num_validation else None, derived, kind, num_train,
        num_validation,
    )
