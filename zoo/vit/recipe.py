"""The ViT training recipe (`ViTConfig`'s recipe fields): AdamW with warm-up and cosine
decay and global-norm clipping, the keras_attention loss and metric, and linear probing
(`freeze_backbone`).

Both are importable from `zoo.vit` too.
"""

import keras

import keras_attention as ka

# The whole gradient is rescaled to norm at most 1 (Dosovitskiy et al. 2021, appendix B.1:
# "gradient clipping at global norm 1"); Keras' `clipnorm` would clip each variable's alone.
GLOBAL_CLIPNORM = 1.0


def freeze_backbone(model):
    """Make every layer of a ViT but its `head` non-trainable (`trainable_backbone=False`).

    `keras.saving.load_model` restores the layers' flags but re-creates the
    variables of composite layers (the encoder blocks) as trainable: call it
    again on a loaded model.
    """
    for layer in model.layers:
        if layer.name != "head":
            layer.trainable = False
            for variable in layer.weights:  # also those of sub-layers made in `build`
                variable.trainable = False
    return model


def compile_model(model, config):
    """AdamW, linear warm-up to `learning_rate` then cosine decay, the gradient's global norm
    clipped at 1 (docs/math.md#gradient-clipping); cross-entropy; accuracy."""
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if config.warmup_steps else config.learning_rate,
        decay_steps=config.decay_steps,
        warmup_target=config.learning_rate if config.warmup_steps else None,
        warmup_steps=config.warmup_steps,
    )
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay,
                                       global_clipnorm=GLOBAL_CLIPNORM)
    optimizer.exclude_from_weight_decay(
        var_names=["bias", "gamma", "beta", "position_embeddings", "token"]
    )
    # The keras_attention loss and metric with no padding (`pad_id=None`): the
    # sparse cross-entropy (label smoothing as Keras' categorical one) and
    # accuracy, exact under a tf.distribute strategy whatever the split of a
    # batch over the replicas (Keras' own are not on an uneven last batch).
    model.compile(
        optimizer=optimizer,
        loss=ka.MaskedSparseCategoricalCrossentropy(
            pad_id=None, label_smoothing=config.label_smoothing, from_logits=True,
            name="sparse_categorical_crossentropy",
        ),
        metrics=[ka.MaskedAccuracy(pad_id=None, name="accuracy")],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )


