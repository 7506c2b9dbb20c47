"""One resolver for every dataset spec, what `zoo train --data` takes: `load`."""

import numpy as np

from keras_attention.checks import check_int
from zoo.datasets.generated import dates, numbers
from zoo.datasets.idx_files import fashion_mnist
from zoo.datasets.image_data import digits, images
from zoo.datasets.translation_files import gettext, tsv
from zoo.errors import ZooError

TRANSLATION_DATASETS = ("numbers", "dates", "tsv:PATH", "gettext:LANG", "gettext-long:LANG")
IMAGE_DATASETS = ("digits", "fashion-mnist", "images:DIR")
DATASETS = TRANSLATION_DATASETS + IMAGE_DATASETS
# `load`'s (train_size, test_size) defaults of the generated datasets.
_GENERATED_SIZES = {"numbers": (20_000, 1_000), "dates": (10_000, 1_000)}


def get_translation_dataset(spec, **kwargs):
    """Build a translation dataset from its name: "numbers", "dates", "tsv:PATH", "gettext:LANG",
    "gettext-long:LANG".

    `kwargs` go to `numbers`, `dates`, `tsv` or `gettext`.
    """
    if not isinstance(spec, str):
        raise ZooError(f"spec must be a str; received {spec!r}")
    if spec == "numbers":
        return numbers(**kwargs)
    if spec == "dates":
        return dates(**kwargs)
    if spec.startswith("tsv:"):
        path = spec[len("tsv:") :]
        if not path:
            raise ZooError(f"'tsv:' needs a path, e.g. 'tsv:data/train.tsv'; received {spec!r}")
        return tsv(path, **kwargs)
    if spec.startswith("gettext:"):
        return gettext(spec[len("gettext:"):], **kwargs)
    if spec.startswith("gettext-long:"):
        return gettext(spec[len("gettext-long:"):], long=True, **kwargs)
    raise ZooError(
        f"unknown translation dataset {spec!r}; available: {', '.join(TRANSLATION_DATASETS)}"
    )


def dataset_kind(spec):
    """`"translation"` or `"image"` for a dataset spec, without loading anything.

    Raises:
        ValueError: `spec` names no dataset (the message lists them).
    """
    if not isinstance(spec, str):
        raise ZooError(f"spec must be a str; received {spec!r}")
    if spec in ("numbers", "dates") or spec.startswith(("tsv:", "gettext:", "gettext-long:")):
        return "translation"
    if spec in ("digits", "fashion-mnist", "fashion_mnist") or spec.startswith("images:"):
        return "image"
    raise ZooError(f"unknown dataset {spec!r}; available: {', '.join(DATASETS)}")


def _subset(rng_seed, items_or_arrays, size, what):
    """The first `size` items of a seeded permutation (all of them when `size` is None)."""
    count = len(items_or_arrays[0])
    if size is None or size >= count:
        return items_or_arrays
    check_int(what, size, 1 if what == "train_size" else 0)
    keep = np.sort(np.random.default_rng(rng_seed).permutation(count)[:size])
    return [
        item[keep] if isinstance(item, np.ndarray) else [item[i] for i in keep]
        for item in items_or_arrays
    ]


def _load_translation(spec, data_dir, train_size, test_size, test_ratio, test_path, seed,
                      progress):
    """`load` for a translation spec."""
    if spec in _GENERATED_SIZES:
        default_train, default_test = _GENERATED_SIZES[spec]
        return get_translation_dataset(
            spec,
            num_train=default_train if train_size is None else train_size,
            num_test=default_test if test_size is None else test_size,
            seed=seed,
            progress=progress,
        )
    if spec.startswith(("gettext:", "gettext-long:")):
        options = {"locale_dir": data_dir}
    else:
        options = {"test_path": test_path, "progress": progress}
    data = get_translation_dataset(
        spec, test_ratio=0.05 if test_ratio is None else test_ratio, seed=seed, **options
    )
    (data.train_pairs,) = _subset(seed, [data.train_pairs], train_size, "train_size")
    (data.test_pairs,) = _subset(seed + 1, [data.test_pairs], test_size, "test_size")
    return data


def _load_images(spec, data_dir, train_size, test_size, test_ratio, image_size, color_mode,
                 seed):
    """`load` for an image spec."""
    if spec == "digits":
        data = digits(test_ratio=0.2 if test_ratio is None else test_ratio, seed=seed)
    elif spec in ("fashion-mnist", "fashion_mnist"):
        data = fashion_mnist(data_dir)
    else:
        directory = spec[len("images:") :]
        if not directory:
            raise ZooError(f"'images:' needs a folder, e.g. 'images:photos/'; received {spec!r}")
        if image_size is None:
            raise ZooError("images: datasets need image_size=(height, width); received None")
        data = images(
            directory,
            image_size,
            test_ratio=0.2 if test_ratio is None else test_ratio,
            seed=seed,
            color_mode=color_mode,
        )
    data.x_train, data.y_train = _subset(seed, [data.x_train, data.y_train], train_size, "train_size")
    data.x_test, data.y_test = _subset(seed + 1, [data.x_test, data.y_test], test_size, "test_size")
    return data


def load(
    spec,
    data_dir=None,
    *,
    train_size=None,
    test_size=None,
    test_ratio=None,
    test_path=None,
    image_size=None,
    color_mode="rgb",
    seed=0,
    progress=False,
):
    """Any dataset from its spec, as `zoo train --data SPEC` names it.

    Specs: `numbers`, `dates`, `tsv:PATH`, `gettext:LANG`, `gettext-long:LANG`, `digits`,
    `fashion-mnist`, `images:DIR`. Options that a dataset does not use are ignored.

    Args:
        spec: the dataset spec.
        data_dir: `fashion-mnist`: the folder with the IDX files (default
            `/usr/share/datasets/fashion-mnist` when present); `gettext:`,
            `gettext-long:`: the locale folder (default `/usr/share/locale`).
        train_size, test_size: `numbers`/`dates`: how many pairs to generate
            (defaults 20,000/1,000 and 10,000/1,000); any other dataset: keep
            a random subset of that many (fixed by `seed`), None for all.
        test_ratio: the held-out share for `tsv:` without `test_path`,
            `gettext:` and `gettext-long:` (default 0.05), `digits` and `images:` (default 0.2).
        test_path: `tsv:` only: a second file holding the test pairs.
        image_size: `images:` only: `(height, width)` or an int; required.
        color_mode: `images:` only: "rgb", "grayscale" or "rgba".
        seed: generation, split and subset seed.
        progress: `numbers`/`dates`/`tsv:` only: show a `keras.utils.Progbar`
            on stdout while pairs are generated or lines read. Image datasets
            load in about a second and show none.

    Returns:
        `TranslationData` or `ImageData`; `metadata["spec"]` is `spec`.

    Raises:
        ValueError: unknown spec, bad option; FileNotFoundError: missing file.
    """
    kind = dataset_kind(spec)
    for name, value in (("train_size", train_size), ("test_size", test_size)):
        if value is not None:
            check_int(name, value, 1 if name == "train_size" else 0)
    if kind == "translation":
        data = _load_translation(spec, data_dir, train_size, test_size, test_ratio, test_path,
                                 seed, progress)
    else:
        data = _load_images(spec, data_dir, train_size, test_size, test_ratio, image_size,
                            color_mode, seed)
    data.metadata["spec"] = spec
    return data
