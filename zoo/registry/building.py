"""`zoo.get` (`zoo.registry.get`): build a registered model, in a strategy's scope, and
compile it with its family's recipe.

The half of the registry that needs Keras (and TensorFlow's strategies): kept
apart so that `zoo.registry` itself, what `zoo list` and `zoo describe` read,
imports neither.
"""

import contextlib

from keras_attention import backends
from zoo import registry
from zoo.errors import ZooError

if backends.is_tensorflow():
    from zoo import distribute  # tf.distribute; on JAX, keras.distribution needs nothing here


def get(name, *, weights=None, strategy=None, compile=True, **overrides):  # noqa: A002
    """Build the model `name` (optionally inside `strategy.scope()`) and compile it.

    Args:
        name: a registry name (`zoo.list()`).
        weights: a pretrained checkpoint to start from (ViT: Google `.npz`, timm
            `.safetensors` / `.pth`, a Hugging Face folder; `zoo.vit.weights.checkpoint`).
            The file sets the config fields it implies and the family's
            fine-tuning recipe; `overrides` still win (e.g. `image_size=384`
            resamples the position embeddings, `num_classes=K` makes a new head).
            Or a folder the family imports (Transformer: a Hugging Face Marian /
            OPUS-MT folder, `zoo.transformer.weights.marian`): the sizes come from the folder.
        strategy: a `tf.distribute.Strategy` or a name of
            `zoo.distribute.STRATEGIES` (`"mirrored"`, ...); the model and its
            optimizer are created inside its scope, and `model.fit` then
            distributes its dataset over the replicas (see `zoo.distribute`).
        compile: compile with the family's training recipe.
        **overrides: config fields to change (`zoo.config(name).__dataclass_fields__`).

    Returns:
        A `keras.Model`.

    Raises:
        ValueError: an unknown name, a bad config value, or `jit_compile=True`
            under a strategy (given or in scope) with several CPU replicas
            (`zoo.distribute.check_jit_compile`).
    """
    item = registry.entry(name)
    checkpoint = importer = None
    if weights is not None:
        importer = registry.family_attr(item.config, "import_weights")
        if importer is None:
            checkpoint, overrides = registry.read_weights(name, weights, overrides)
    cfg = registry.config(name, **overrides)
    if strategy is not None:
        backends.require_tensorflow(
            "zoo.get(strategy=...)",
            "on JAX, call keras.distribution.set_distribution(keras.distribution.DataParallel()) "
            "before zoo.get",
        )
    if isinstance(strategy, str):
        strategy = distribute.get_strategy(strategy)
    if compile and backends.is_tensorflow():
        # `strategy`, or the one whose scope this is called in.
        distribute.check_jit_compile(strategy, getattr(cfg, "jit_compile", False))
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        if importer is not None:
            model, cfg = importer(weights, item.config, **overrides)
        else:
            model = item.builder(cfg)
            if checkpoint is not None:
                checkpoint.load_into(model, cfg, name)
        if compile:
            compile_fn = item.compile_fn or registry.family_attr(cfg, "compile_fn")
            if compile_fn is not None:
                compile_fn(model, cfg)
            elif not model.compiled:
                raise ZooError(
                    f"Model {name!r} has no training recipe: register it with a `compile_fn`, "
                    "use one of the zoo's config classes, or call zoo.get(..., compile=False)."
                )
            if backends.is_tensorflow():
                # Keras fixes for training under a strategy (clipping, multi-worker; zoo.distribute).
                distribute.prepare_model(model)
    return model


__all__ = ["get"]
