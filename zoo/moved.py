"""The module paths of earlier versions, kept importable after `zoo/` became packages.

`zoo.vit_checkpoints`, `zoo.marian`, `zoo.pipeline`, ... were flat modules
until version 0.2. Code written against them (and `.keras` files or pickles
that name them) keeps working: `import zoo.pipeline` and
`from zoo.marian import import_folder` load the new module
(`zoo.datasets.pipeline`, `zoo.transformer.weights.marian`) and register it under
the old name too, so both names are the same module object. New code should
use the new paths; `MOVED` is the table.

Names that left a module which stays (the families' decoding steps left `zoo.decode`,
their recipes their `model` modules, when every family took the same shape) are
`MOVED_NAMES`: the module's `__getattr__` (`names_getattr`) gives them from their new
module, so `from zoo.decode.steps import TransformerStep` and
`zoo.transformer.model.compile_model` still work.

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
    "zoo.marian": "zoo.transformer.weights.marian",
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
    "zoo.transformer.marian": "zoo.transformer.weights.marian",
    "zoo.transformer.marian_config": "zoo.transformer.weights.marian_config",
    "zoo.vit_checkpoints": "zoo.vit.weights.checkpoint",
    "zoo.vit_huggingface": "zoo.vit.weights.huggingface",
    "zoo.vit_npz": "zoo.vit.weights.npz",
    "zoo.vit_pretrained": "zoo.vit.weights.pretrained",
    "zoo.vit_recipe": "zoo.vit.recipe",
    "zoo.vit_resample": "zoo.vit.weights.resample",
    "zoo.vit_timm": "zoo.vit.weights.timm",
}

# {module that stays: {old name: "new.module.name"}}.
MOVED_NAMES = {
    "zoo.decode": {
        "_RNNSearchStep": "zoo.seq2seq.decoding.RNNSearchStep",
        "_TransformerStep": "zoo.transformer.decoding.TransformerStep",
    },
    "zoo.decode.copy_steps": {
        "CopyFullModelStep": "zoo.decode.steps.CopyFullModelStep",
        "CopyRNNSearchStep": "zoo.seq2seq.decoding.CopyRNNSearchStep",
        "CopyTransformerStep": "zoo.transformer.decoding.CopyTransformerStep",
    },
    "zoo.decode.steps": {
        "IncrementalDecoder": "zoo.convs2s.decoding.IncrementalDecoder",
        "RNNSearchStep": "zoo.seq2seq.decoding.RNNSearchStep",
        "TransformerStep": "zoo.transformer.decoding.TransformerStep",
        "tied_logits": "zoo.transformer.decoding.tied_logits",
    },
    "zoo.convs2s.model": {"compile_model": "zoo.convs2s.recipe.compile_model"},
    "zoo.seq2seq.model": {"compile_model": "zoo.seq2seq.recipe.compile_model"},
    "zoo.transformer.model": {"compile_model": "zoo.transformer.recipe.compile_model"},
}


def moved_name(module, name):
    """The object `MOVED_NAMES` gives for `module.name` (its new module imported)."""
    new_module, _, new_name = MOVED_NAMES[module][name].rpartition(".")
    return getattr(importlib.import_module(new_module), new_name)


def names_getattr(module):
    """The `__getattr__` of a module that stays (PEP 562): its `MOVED_NAMES` from their new
    modules; any other missing name an `AttributeError`."""

    def __getattr__(name):
        if name in MOVED_NAMES[module]:
            return moved_name(module, name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


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
