"""Weights shared with Keras' own `keras.layers.MultiHeadAttention`.

Our `MultiHeadAttention` has the same weight shapes, so weights copy across:
the equivalence tests and the benchmarks compare the two layers this way.
"""

# Our weight name -> (sub-layer, variable) of `keras.layers.MultiHeadAttention`.
KERAS_WEIGHT_MAP = {
    "query_kernel": ("_query_dense", "kernel"),
    "query_bias": ("_query_dense", "bias"),
    "key_kernel": ("_key_dense", "kernel"),
    "key_bias": ("_key_dense", "bias"),
    "value_kernel": ("_value_dense", "kernel"),
    "value_bias": ("_value_dense", "bias"),
    "output_kernel": ("_output_dense", "kernel"),
    "output_bias": ("_output_dense", "bias"),
}


def copy_keras_weights(layer, reference):
    """Give `layer` (our `MultiHeadAttention`, built) the weights of `reference`
    (a built `keras.layers.MultiHeadAttention` of the same sizes)."""
    for name, (sublayer, variable) in KERAS_WEIGHT_MAP.items():
        getattr(layer, name).assign(getattr(getattr(reference, sublayer), variable))
