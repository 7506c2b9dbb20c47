"""ConvS2S's training recipe (Gehring et al., 2017): Nesterov SGD with the
gradient's global norm clipped, or Adam; masked cross-entropy.

`compile_model` is the family's recipe (`zoo.convs2s.FAMILY.recipe`).
"""

import keras

import keras_attention as ka


def compile_model(model, config):
    """The paper's recipe (Nesterov SGD, the gradient's global norm clipped) or Adam (clipped
    alike); masked cross-entropy and accuracy."""
    clipping = dict(global_clipnorm=config.global_clipnorm, clipnorm=config.clipnorm)
    if config.optimizer == "nesterov":
        optimizer = keras.optimizers.SGD(
            config.learning_rate, momentum=config.momentum, nesterov=True, **clipping
        )
    else:
        optimizer = keras.optimizers.Adam(config.learning_rate, **clipping)
    model.compile(
        optimizer=optimizer,
        loss=ka.MaskedSparseCategoricalCrossentropy(label_smoothing=config.label_smoothing),
        metrics=[ka.MaskedAccuracy()],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )
