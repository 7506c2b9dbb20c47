"""`layout_map`: how a Transformer or a ViT of the zoo splits its weights over the `"model"` axis
of a device mesh, for `keras.distribution.ModelParallel` (JAX), after keras-hub's
`Backbone.get_layout_map`.

    devices = keras.distribution.list_devices()                      # e.g. 8
    mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"), devices)
    layouts = zoo.layout_map("transformer-tiny", mesh)                # or a built model
    with keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch").scope():
        model = zoo.get("transformer-tiny")                          # each kernel split on "model"
        model.fit(dataset)                                           # each batch split on "batch"

What is split, on the model axis of M devices (every other weight, the biases, norms,
position embeddings and ViT's class token and pooling among them, is replicated; the
optimizer's variables follow their weight's layout):

- attention, the query, key and value kernels `(D, N, H)` over the heads N
  (`(None, "model", None)`) and the output kernel `(N, H, D)` over N too
  (`("model", None, None)`): each device computes whole heads (Megatron-LM's split).
  Where M does not divide N: over D, `("model", None, None)` and `(None, None, "model")`.
- feed-forward, the inner kernel `(D, F)` over F (`(None, "model")`) and the output kernel
  `(F, D)` over F (`("model", None)`); over D where M does not divide F.
- Transformer, the token embeddings `(V, D)` (shared, or source and target) over their
  vocabulary (`("model", None)`) and an untied output projection `(D, V)` over V
  (`(None, "model")`); over D where M does not divide V, or with `split_vocabulary=False`.
- ViT, the patch embedding's kernel `(P, P, C, D)` over D (`(None, None, None, "model")`)
  and the head `(D, K)` over D (`("model", None)`: K is the data's number of classes).

`model_parallel(name, N)` is that distribution over the local devices, a mesh
`(devices // N, N)`: what `zoo train --model-parallel N` trains under.

JAX splits a dimension in equal parts only, so the map depends on the sizes: those of the
model given, or of the name's config. The keys are regular expressions that `LayoutMap`
matches against whole variable paths (`re.fullmatch`, Keras >= 3.14), e.g.
`(encoder|decoder)_block_\\d+/(self|cross)_attention/(query|key|value)_kernel`; a path matches
one key at most.
"""

import re

import keras

from keras_attention import backends
from zoo import registry
from zoo.errors import ZooError

# The blocks of each family, as their variable paths begin.
_TRANSFORMER_BLOCKS = r"(encoder|decoder)_block_\d+"
_VIT_BLOCKS = r"encoder_block_\d+"
_EMBEDDINGS = {side: f"{side}_embedding/token_embedding/embeddings"
               for side in ("shared", "source", "target")}
_OUTPUT_PROJECTION = "output_projection/kernel"
# The dimensions each key may be split on, the preferred one first (see the docstring).
_VOCABULARY_SPLITS = {**{key: (0, 1) for key in _EMBEDDINGS.values()}, _OUTPUT_PROJECTION: (1, 0)}
_VOCABULARY_DIMENSION = {**{key: 0 for key in _EMBEDDINGS.values()}, _OUTPUT_PROJECTION: 1}
_VIT_SPLITS = {"patch_embedding/projection/kernel": (3,), "head/kernel": (0,)}
_NAMES = {"seq2seq": "an RNNsearch", "convs2s": "a ConvS2S", "custom": "a custom"}


def _block_splits(blocks):
    """The attention and feed-forward kernels of `blocks` (a path pattern): key -> dimensions."""
    return {
        rf"{blocks}/(self|cross)_attention/(query|key|value)_kernel": (1, 0),  # (D, N, H)
        rf"{blocks}/(self|cross)_attention/output_kernel": (0, 2),  # (N, H, D)
        rf"{blocks}/feed_forward/inner_dense/kernel": (1, 0),  # (D, F)
        rf"{blocks}/feed_forward/output_dense/kernel": (0, 1),  # (F, D)
    }


SPLITS = {
    "transformer": {**_block_splits(_TRANSFORMER_BLOCKS), **_VOCABULARY_SPLITS},
    "vit": {**_block_splits(_VIT_BLOCKS), **_VIT_SPLITS},
}


def layout_map(model_or_name, device_mesh, *, model_parallel_dim_name="model",
               split_vocabulary=True, **overrides):
    """The `keras.distribution.LayoutMap` of a zoo Transformer or ViT over `device_mesh`.

    Args:
        model_or_name: a built model of the zoo (`zoo.get`, or a loaded `.keras` file), or a
            registry name (`"transformer-tiny"`, `"vit-b16"`, ...).
        device_mesh: a `keras.distribution.DeviceMesh` with an axis `model_parallel_dim_name`
            (its other axes, e.g. `"batch"`, replicate the weights).
        model_parallel_dim_name: the mesh axis the weights are split over.
        split_vocabulary: split the Transformer's embeddings and output projection over
            their vocabulary V where the model axis divides it (else over D). False: over D
            always, for a vocabulary not known yet (`zoo train` learns it from the data:
            at most the config's `vocabulary_size`).
        **overrides: with a name, the config fields (and `weights`) that decide the sizes,
            as `zoo.config(name, **overrides)` takes them.

    Returns:
        A `LayoutMap` from path patterns to layouts of the weights' rank, such as
        `(None, "model", None)`; a kernel no dimension of which the axis divides is left
        out (replicated).

    Raises:
        ZooError: a family other than the Transformer and the ViT, an unknown name, or a
            mesh without the axis.
    """
    size = _axis_size(device_mesh, model_parallel_dim_name)
    family, shapes = _shapes(model_or_name, overrides)
    layouts = keras.distribution.LayoutMap(device_mesh)
    for key, dimensions in SPLITS[family].items():
        if key not in shapes:
            continue  # no such weight in this model (a tied output projection, ...)
        if not split_vocabulary and key in _VOCABULARY_DIMENSION:
            dimensions = tuple(d for d in dimensions if d != _VOCABULARY_DIMENSION[key])
        layout = _split(shapes[key], dimensions, size, model_parallel_dim_name)
        if layout is not None:
            layouts[key] = layout
    return layouts


def model_parallel(name, size, strategy=None, **overrides):
    """`keras.distribution.ModelParallel` of the zoo model `name` over the local devices (JAX):
    a mesh `(devices // size, size)` of axes `("batch", "model")`, the weights split over
    `"model"` (`layout_map(name, mesh, split_vocabulary=False, **overrides)`: `zoo train`
    learns its vocabulary from the data), each batch over `"batch"`. `zoo train
    --model-parallel N` trains in its `.scope()`, where `zoo.distribute.place("default")`
    takes it: `num_replicas_in_sync` is then the batch axis's size.

    Args:
        name: a registry name of the Transformer or ViT family.
        size: the devices each weight is split over.
        strategy: `--strategy`, which it replaces: None or `"default"` only.
        **overrides: the config fields (and `weights`) that decide the sizes.

    Raises:
        BackendError: a backend other than JAX.
        ZooError: a `strategy`, a `size` that does not divide the devices, or a family
            without a layout map.
    """
    if backends.backend() != "jax":
        raise backends.BackendError(
            "--model-parallel needs the JAX backend (keras.distribution.ModelParallel): "
            f"KERAS_BACKEND=jax (this process runs Keras on {backends.backend()}).")
    if strategy not in (None, "default"):
        raise ZooError("--model-parallel splits each batch over the devices the weights are not "
                       f"split over: it takes no --strategy (received {strategy!r}).")
    devices = keras.distribution.list_devices()
    if len(devices) % size:
        raise ZooError(f"--model-parallel {size} must divide the {len(devices)} devices "
                       "(keras.distribution.list_devices()).")
    mesh = keras.distribution.DeviceMesh((len(devices) // size, size), ("batch", "model"),
                                         devices)
    layouts = layout_map(name, mesh, split_vocabulary=False, **overrides)
    return keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")


def _axis_size(device_mesh, axis):
    """The number of devices along the mesh axis `axis`."""
    names = list(device_mesh.axis_names)
    if axis not in names:
        raise ZooError(f"zoo.layout_map splits the weights over the device mesh's {axis!r} "
                       f"axis, which it lacks (its axes: {', '.join(map(repr, names))}).")
    return int(device_mesh.shape[names.index(axis)])


def _split(shapes, dimensions, size, axis):
    """The layout splitting the first of `dimensions` that `size` divides in every one of
    `shapes` (the weights a key matches), or None."""
    for dimension in dimensions:
        if all(shape[dimension] % size == 0 for shape in shapes):
            rank = len(shapes[0])
            return tuple(axis if i == dimension else None for i in range(rank))
    return None


def _shapes(model_or_name, overrides):
    """`(family, {key: [shape of each weight it matches]})`, from a built model's weights or
    from a name's config."""
    if isinstance(model_or_name, str):
        family = registry.entry(model_or_name).family
        what = repr(model_or_name)
    else:
        if overrides:
            raise ZooError("zoo.layout_map takes config fields with a name only; the built "
                           f"model's sizes are its own (received {', '.join(overrides)}).")
        found = registry.family_of_model(model_or_name)
        family = found.name if found else "custom"
        what = f"the model {getattr(model_or_name, 'name', model_or_name)!r}"
    if family not in SPLITS:
        raise ZooError(f"no layout map for {what}, {_NAMES.get(family, 'a ' + family)} model: "
                       "zoo.layout_map (and zoo train --model-parallel) splits the Transformer "
                       "and ViT families only (transformer-*, vit-*).")
    if isinstance(model_or_name, str):
        config = registry.config(model_or_name, **overrides)
        shapes = (_transformer_shapes if family == "transformer" else _vit_shapes)(config)
        return family, {key: [shape] for key, shape in shapes.items()}
    matched = {}
    for weight in model_or_name.weights:
        for key in SPLITS[family]:
            if re.fullmatch(key, weight.path):
                matched.setdefault(key, []).append(tuple(weight.shape))
    return family, matched


def _block_shapes(blocks, d, n, f):
    """The shapes of the block kernels of `_block_splits(blocks)`: D, N heads, F."""
    h = d // n
    keys = list(_block_splits(blocks))
    return dict(zip(keys, [(d, n, h), (n, h, d), (d, f), (f, d)]))


def _transformer_shapes(config):
    """Key -> shape of a `TransformerConfig`'s split weights (zoo.transformer.model.build)."""
    d = config.d_model
    shapes = _block_shapes(_TRANSFORMER_BLOCKS, d, config.num_heads, config.intermediate_dim)
    if config.shared_vocabulary:
        shapes[_EMBEDDINGS["shared"]] = (config.vocabulary_size, d)
    else:
        shapes[_EMBEDDINGS["source"]] = (config.source_vocab, d)
        shapes[_EMBEDDINGS["target"]] = (config.target_vocab, d)
    if not config.tie_embeddings:
        shapes[_OUTPUT_PROJECTION] = (d, config.target_vocab)
    return shapes


def _vit_shapes(config):
    """Key -> shape of a `ViTConfig`'s split weights (zoo.vit.model.build)."""
    d, p = config.hidden_dim, config.patch_size
    shapes = _block_shapes(_VIT_BLOCKS, d, config.num_heads, config.mlp_dim)
    channels = config.channels * (5 if config.shifted_patches else 1)  # ShiftedImages: 5C
    shapes["patch_embedding/projection/kernel"] = (p, p, channels, d)
    shapes["head/kernel"] = (d, config.num_classes)
    return shapes
