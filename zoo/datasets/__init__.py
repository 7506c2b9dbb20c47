"""Offline datasets: translation pairs for the seq2seq models, images for ViT.

Nothing here downloads anything, except `fashion_mnist()` as a last resort
when no local copy exists (a convenience for users; tests never take it).

Translation (all return a `TranslationData`, pairs are `(source, target)`):

* `numbers()`: German number words -> English number words, from
  `num2words` ("dreihundertvierundzwanzig" -> "three hundred and
  twenty-four"). German writes units before tens inside one compound word,
  English the other way round in separate words: the model has to learn to
  reorder, which is what attention is for (Bahdanau et al. 2015).
* `dates()`: German dates written out by `babel` ("Dienstag, 5. März 2024",
  "05.03.2024") -> ISO 8601 ("2024-03-05").
* `tsv(path)`: your own `source<TAB>target` file.
* `gettext(language)`: English -> LANG user-interface strings from the
  machine's installed `.mo` catalogs (`zoo.datasets.catalogs`), split by catalog.
* `get_translation_dataset("numbers" | "dates" | "tsv:PATH" | "gettext:LANG", **kwargs)`.

Each takes `progress=False`; with True a `keras.utils.Progbar` on stdout
counts the pairs generated or the lines read.

Images (all return an `ImageData`: uint8 images (N, H, W, C) and int labels;
it unpacks as `(x_train, y_train), (x_test, y_test), class_names`):

* `digits()`: scikit-learn's 8x8 handwritten digits (bundled with sklearn).
* `fashion_mnist(data_dir=None)`: Fashion-MNIST IDX files; by default from
  `/usr/share/datasets/fashion-mnist` (Debian package
  `dataset-fashion-mnist`).
* `images(directory, image_size)`: one sub-folder per class.
* `read_idx(path)`: the IDX reader (plain or gzip).

The modules, one concern each: `pairs` (`TranslationData`), `generated`
(`numbers`, `dates`), `translation_files` (`tsv`, `gettext`), `image_data`
(`ImageData`, `digits`, `images`), `idx_files` (`read_idx`, `fashion_mnist`)
and `specs` (`load`, `dataset_kind`, `get_translation_dataset`). Their public
names are all importable from `zoo.datasets`.
"""

from zoo.datasets.generated import dates, numbers
from zoo.datasets.idx_files import (
    FASHION_MNIST_CLASSES,
    FASHION_MNIST_DIR,
    FASHION_MNIST_PACKAGE,
    fashion_mnist,
    read_idx,
)
from zoo.datasets.image_data import ImageData, digits, images
from zoo.datasets.pairs import PROGRESS_EVERY, TranslationData
from zoo.datasets.specs import (
    DATASETS,
    IMAGE_DATASETS,
    TRANSLATION_DATASETS,
    dataset_kind,
    get_translation_dataset,
    load,
)
from zoo.datasets.translation_files import gettext, tsv

__all__ = [
    "DATASETS",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_DIR",
    "FASHION_MNIST_PACKAGE",
    "IMAGE_DATASETS",
    "PROGRESS_EVERY",
    "TRANSLATION_DATASETS",
    "ImageData",
    "TranslationData",
    "dataset_kind",
    "dates",
    "digits",
    "fashion_mnist",
    "gettext",
    "get_translation_dataset",
    "images",
    "load",
    "numbers",
    "read_idx",
    "tsv",
]
