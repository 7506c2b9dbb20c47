"""The module paths of earlier versions, kept importable after `zoo/` became packages.

`zoo.vit_checkpoints`, `zoo.marian`, `zoo.pipeline`, ... were flat modules
until version 0.2. Code written against them (and `.keras` files or pickles
that name them) keeps working: `import zoo.pipeline` and
`from zoo.marian import import_folder` load the new module
(`zoo.datasets.pipeline`, `zoo.transformer.marian`) and register it under
the old name too, so both names are the same module object. New code should
use the new paths; `MOVED` is the table.

The finder is installed once, by `import zoo`, at the end of `sys.meta_path`,
so it is asked only for names no real module answers.
"""

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "zoo.augmentation": "zoo.vit.augmentation",
    "zoo.catalogs": "zoo.datasets.catalogs",
    "zoo.convs2s_layers": "zoo.convs2s.layers",
    "zoo.decode_loops": "zoo.decode.loops",
    "zoo.decode_steps": "zoo.decode.steps",
    "zoo.demo": "zoo.runs.demo",
    "zoo.export_image": "zoo.export.image",
    "zoo.export_translation": "zoo.export.translation",
    "zoo.hf_beam": "zoo.decode.hf_beam",
    "zoo.marian": "zoo.transformer.marian",
    "zoo.marian_tokenizer": "zoo.text.marian",
    "zoo.metrics": "zoo.runs.scores",
    "zoo.pipeline": "zoo.datasets.pipeline",
    "zoo.plot_attention": "zoo.plot.attention",
    "zoo.plot_figures": "zoo.plot.figures",
    "zoo.plot_training": "zoo.plot.training",
    "zoo.plot_vit": "zoo.plot.vit",
    "zoo.preparation": "zoo.datasets.preparation",
    "zoo.search_steps": "zoo.decode.search_steps",
    "zoo.sentencepiece_tokenizer": "zoo.text.sentencepiece",
    "zoo.seq2seq_decoder": "zoo.seq2seq.decoder",
    "zoo.tensor_files": "zoo.checkpoints",
    "zoo.tokenizers": "zoo.text.tokenizers",
    "zoo.tokens": "zoo.text.special",
    "zoo.torch_checkpoint": "zoo.checkpoints",
    "zoo.vit_checkpoints": "zoo.vit.weights.checkpoint",
    "zoo.vit_huggingface": "zoo.vit.weights.huggingface",
    "zoo.vit_npz": "zoo.vit.weights.npz",
    "zoo.vit_pretrained": "zoo.vit.weights.pretrained",
    "zoo.vit_recipe": "zoo.vit.recipe",
    "zoo.vit_resample": "zoo.vit.weights.resample",
    "zoo.vit_timm": "zoo.vit.weights.timm",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name by importing its new module and returning that very object."""

    def __init__(self, new_name):
        self.new_name = new_name
        self.own_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.new_name)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run, the module is loaded: give it back its own spec and loader.

        (The import system stamped the old name's on it after `create_module`.)
        """
        module.__spec__, module.__loader__ = self.own_spec, self.own_spec.loader


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Answers `MOVED`'s old names with their new modules."""

    def find_spec(self, fullname, path=None, target=None):
        new_name = MOVED.get(fullname)
        if new_name is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new_name))


def install():
    """Put the finder at the end of `sys.meta_path` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
