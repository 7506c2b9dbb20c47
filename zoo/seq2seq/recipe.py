"""RNNsearch's training recipe: Adam with the gradient's global norm clipped, masked
cross-entropy (with `copy`, the pointer-generator's mixture negative log-likelihood).

`compile_model` is the family's recipe (`zoo.seq2seq.FAMILY.recipe`).
"""

import keras

import keras_attention as ka


def compile_model(model, config):
    """Adam with the gradient's global norm clipped, masked cross-entropy (with `copy`: the
    mixture's negative log-likelihood), masked accuracy."""
    if config.copy:
        loss = ka.PointerGeneratorCrossentropy(config.target_vocab,
                                               label_smoothing=config.label_smoothing)
    else:
        loss = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=config.label_smoothing)
    model.compile(
        optimizer=keras.optimizers.Adam(config.learning_rate,
                                        global_clipnorm=config.global_clipnorm,
                                        clipnorm=config.clipnorm),
        loss=loss,
        metrics=[ka.MaskedAccuracy()],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )
