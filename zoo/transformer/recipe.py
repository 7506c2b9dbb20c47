"""The Transformer's training recipe (Vaswani et al., 2017, sections 5.3 and 5.4): Adam with
β1 0.9, β2 0.98, ε 1e-9 under the warm-up schedule, label smoothing 0.1; with `copy`, the
pointer-generator's mixture negative log-likelihood.

`compile_model` is the family's recipe (`zoo.transformer.FAMILY.recipe`).
"""

import keras

import keras_attention as ka


def compile_model(model, config):
    """The paper's recipe: Adam(0.9, 0.98, 1e-9), warm-up schedule, label smoothing 0.1
    (with `copy`, on the mixture's negative log-likelihood)."""
    schedule = ka.TransformerSchedule(
        config.d_model, warmup_steps=config.warmup_steps, scale=config.learning_rate_scale
    )
    if config.copy:
        loss = ka.PointerGeneratorCrossentropy(config.target_vocab, pad_id=config.pad_id,
                                               label_smoothing=config.label_smoothing)
    else:
        loss = ka.MaskedSparseCategoricalCrossentropy(
            label_smoothing=config.label_smoothing, pad_id=config.pad_id
        )
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        metrics=[ka.MaskedAccuracy(pad_id=config.pad_id)],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )
