"""Multi-head attention (docs/math.md#multi-head-attention)."""

import math

import keras
from keras import ops

from keras_attention import checks, chunked, fused, kv_cache, masks, quantization, xla
from keras_attention import ops as attention_ops
from keras_attention.keras_weights import KERAS_WEIGHT_MAP, copy_keras_weights

SCORINGS = ("scaled_dot", "dot", "additive")
PROJECTIONS = ("query", "key", "value")
# Each kernel and the number of its leading axes summed over in its product (int8 scales
# are per unit of the other axes): (D, N, H) for the projections, (N, H, Do) for the output.
CONTRACTING_AXES = {"query_kernel": 1, "key_kernel": 1, "value_kernel": 1, "output_kernel": 2}
# The constructor's arguments that `get_config` returns as they are (the initializers serialized).
CONFIG_ATTRIBUTES = ("num_heads", "key_dim", "value_dim", "output_dim", "dropout", "use_bias",
                     "scoring", "seed", "chunk_size", "flash_attention")
# `keras_attention.keras_weights`'s two names are importable from here too, with the layer.
__all__ = ["KERAS_WEIGHT_MAP", "SCORINGS", "MultiHeadAttention", "copy_keras_weights",
           "fused_by_default"]
fused_by_default = fused.fused_by_default


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention: `W_o [head_1; …; head_N]`, `head_i = f(W_i^q q, W_i^k k, W_i^v v)`.

    A drop-in for `keras.layers.MultiHeadAttention` (same call signature, same
    weight shapes, so weights copy across) with a choice of the pooling `f`:
    scaled dot product (the Transformer's), plain dot product, or additive
    (Bahdanau) scoring per head. For self-attention the query, key and value
    projections run as one matrix multiplication.

    Args:
        num_heads: N, the number of heads.
        key_dim: H, size of each head's query and key (p_q = p_k).
        value_dim: size of each head's value (p_v); defaults to `key_dim`.
        output_dim: size of the output (p_o); defaults to the query's feature size.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        scoring: `"scaled_dot"` (`qᵀk/√H`), `"dot"` (`qᵀk`) or `"additive"`
            (`w_vᵀ tanh(q + k)` on the projected query and key, one `w_v` per head).
        kernel_initializer, bias_initializer: initializers of the projections.
        seed: seed of the attention dropout.
        chunk_size: None (default) computes the `(B, N, T, S)` scores at once; an integer C
            the same attention exactly, C keys at a time with an online softmax
            (`ka.chunked`), in O(T·C) memory forward and backward instead of O(T·S).
            Dot-product scorings only, without attention dropout or returned weights.
        flash_attention: as `keras.layers.MultiHeadAttention`'s. None (default):
            `keras.ops.dot_product_attention`, the backend's fused attention, where it is
            one (PyTorch; JAX on a GPU or TPU) and the call allows it (dot-product scoring,
            no `chunk_size`, no returned weights, no attention dropout active), else the
            explicit path. True: always the fused op. False: always the explicit path, the
            reference (`(B, N, T, S)` scores, a float32 softmax). `keras_attention.fused`.

    Call arguments:
        query: `(B, T, Dq)`.
        value: `(B, S, Dv)`.
        key: `(B, S, Dk)`; defaults to `value`.
        query_mask, value_mask, key_mask: padding masks `(B, T)` / `(B, S)`,
            filled in by Keras from the inputs' masks (e.g. `mask_zero=True`).
        attention_mask: bool, broadcastable to `(B, T, S)`; True = may attend.
        return_attention_scores: also return the weights `(B, N, T, S)`.
        training: whether attention dropout is active.
        use_causal_mask: query `t` attends only keys `<= t`.

    Returns:
        `(B, T, output_dim)`, and the attention weights `(B, N, T, S)` when
        `return_attention_scores=True`. Queries whose keys are all masked get
        zero weights (their output is the output bias).

    int8: `layer.quantize("int8")`, or `keras.Model.quantize("int8")` on a model holding
    the layer, stores the four projection kernels as int8 with one scale per output unit
    (`keras_attention.quantization`); inputs are quantized per row at call time.

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.2.2.
    """

    def __init__(self, num_heads, key_dim, value_dim=None, output_dim=None, dropout=0.0,
                 use_bias=True, scoring="scaled_dot", kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", seed=None, chunk_size=None, flash_attention=None,
                 **kwargs):
        super().__init__(**kwargs)
        checks.check_positive_int("num_heads", num_heads)
        checks.check_positive_int("key_dim", key_dim)
        checks.check_positive_int("value_dim", value_dim, allow_none=True)
        checks.check_positive_int("output_dim", output_dim, allow_none=True)
        checks.check_rate("dropout", dropout)
        if scoring not in SCORINGS:
            raise ValueError(f"`scoring` must be one of {SCORINGS}; received scoring={scoring!r}.")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.output_dim = output_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.scoring = scoring
        self._key_major = scoring != "additive"  # cached keys `(B, N, H, S)`, ready for q @ kᵀ
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        checks.check_positive_int("chunk_size", chunk_size, allow_none=True)
        if chunk_size is not None and (scoring == "additive" or dropout > 0.0):
            raise ValueError(
                "`chunk_size` needs dot-product scoring without attention dropout; received "
                f"chunk_size={chunk_size}, scoring={scoring!r}, dropout={dropout}."
            )
        self.chunk_size = chunk_size
        fused.check_flash_attention(flash_attention, scoring, chunk_size)
        self.flash_attention = flash_attention
        self.supports_masking = True
        # A seed generator, not a `Dropout` sublayer: the layer stays a leaf, which
        # `keras.Model.quantize` needs to reach it. Made only for dropout, as `Dropout` does
        # (a generator without a seed draws one from Python's random state).
        self._dropout_seed = keras.random.SeedGenerator(seed) if dropout > 0.0 else None

    # === Weights ===

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        checks.check_attention_shapes(query_shape, value_shape, key_shape)
        self._feature_sizes = {"query": query_shape[-1], "key": key_shape[-1],
                               "value": value_shape[-1]}
        self._create_weights(int8=self.quantization_mode == "int8")
        self.built = True

    def _create_weights(self, int8):
        """The projections' kernels and biases (kernels int8 with their scales when `int8`)."""
        n, hk, hv = self.num_heads, self.key_dim, self.value_dim
        sizes = self._feature_sizes
        out_dim = self.output_dim or sizes["query"]

        def kernel(name, shape):
            if int8:
                return quantization.add_int8_kernel(self, name, shape, CONTRACTING_AXES[name])
            return self.add_weight(name=name, shape=shape, initializer=self.kernel_initializer)

        def bias(name, shape):
            if not self.use_bias:
                return None
            return self.add_weight(name=name, shape=shape, initializer=self.bias_initializer)

        self.query_kernel = kernel("query_kernel", (sizes["query"], n, hk))
        self.query_bias = bias("query_bias", (n, hk))
        self.key_kernel = kernel("key_kernel", (sizes["key"], n, hk))
        self.key_bias = bias("key_bias", (n, hk))
        self.value_kernel = kernel("value_kernel", (sizes["value"], n, hv))
        self.value_bias = bias("value_bias", (n, hv))
        if self.scoring == "additive":
            self.score_kernel = self.add_weight(
                name="score_kernel", shape=(n, hk), initializer=self.kernel_initializer
            )
        self.output_kernel = kernel("output_kernel", (n, hv, out_dim))
        self.output_bias = bias("output_bias", (out_dim,))

    # === int8 weights (`keras.Model.quantize("int8")`, `keras_attention.quantization`) ===

    def quantize(self, mode=None, type_check=True, config=None):
        """Store the four projection kernels as int8 with one scale per output unit (`"int8"`
        only); inputs are quantized per row at call time, the attention stays float."""
        if mode != "int8":
            raise NotImplementedError(
                f"{type(self).__name__} supports quantize('int8') only; received mode={mode!r}.")
        quantization.quantize_kernels(self, CONTRACTING_AXES)

    def _int8_call(self, *args, **kwargs):
        return self.call(*args, **kwargs)  # the int8 projections are inside `_project`

    def _projection(self, inputs, names):
        """`inputs (M, D) @ [W_a W_b …] + [b_a b_b …]` for the kernels `<name>_kernel`."""
        kernels = [getattr(self, f"{name}_kernel") for name in names]  # (D, N, H) or (N, H, Do)
        flat = [ops.reshape(k, (math.prod(k.shape[: CONTRACTING_AXES[f"{name}_kernel"]]), -1))
                for name, k in zip(names, kernels)]
        kernel = xla.unfused(flat[0] if len(flat) == 1 else ops.concatenate(flat, axis=1))
        if self.quantization_mode == "int8":
            scales = [ops.reshape(getattr(self, f"{name}_kernel_scale"), (-1,)) for name in names]
            scale = scales[0] if len(scales) == 1 else ops.concatenate(scales, axis=0)
            projected = quantization.int8_matmul(inputs, kernel, scale, self.compute_dtype)
        else:
            projected = ops.matmul(inputs, kernel)
        if self.use_bias:
            biases = [ops.reshape(getattr(self, f"{name}_bias"), (-1,)) for name in names]
            projected = xla.add_bias(
                projected, biases[0] if len(biases) == 1 else ops.concatenate(biases, 0))
        return projected

    # === Forward pass ===

    def _project(self, inputs, names, key_major=(), heads_first=True):
        """One matmul for several projections of the same input.

        inputs `(B, L, D)`; names of kernels `(D, N, H_i)`, e.g. `("query", "key")` ->
        list of `(B, N, L, H_i)`, or `(B, N, H_i, L)` for the indices in `key_major`
        (ready for `q @ kᵀ`); with `heads_first=False`, `(B, L, N, H_i)` as the matmul
        gives them (the layout of `keras.ops.dot_product_attention`).
        """
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        shapes = [getattr(self, f"{name}_kernel").shape[1:] for name in names]
        projected = self._projection(ops.reshape(inputs, (-1, inputs.shape[-1])), names)
        sizes = [heads * size for heads, size in shapes]
        if len(names) == 1:
            parts = [projected]  # (B*L, N·H)
        else:
            boundaries = [sum(sizes[: i + 1]) for i in range(len(sizes) - 1)]
            parts = ops.split(projected, boundaries, axis=-1)
        outputs = []
        for i, (part, (heads, size)) in enumerate(zip(parts, shapes)):
            part = ops.reshape(part, (batch, length, heads, size))  # (B, L, N, H)
            if heads_first:
                part = ops.transpose(part, (0, 2, 3, 1) if i in key_major else (0, 2, 1, 3))
            outputs.append(part)
        return outputs

    def _attend(self, query, key, value, mask, training, matmul=ops.matmul):
        """query `(B, N, T, H)`, key `(B, N, H, S)` (or `(B, N, S, H)` for additive),
        value `(B, N, S, Hv)` -> output `(B, N, T, Hv)`, weights `(B, N, T, S)`; `matmul`:
        `kv_cache.batched_matmul` for `call_with_cache`'s one-query steps, where it pays."""
        if self.scoring == "additive":
            score_kernel = ops.reshape(self.score_kernel, (self.num_heads, 1, 1, self.key_dim))
            scores = attention_ops.additive_scores(query, key, score_kernel)
        else:
            if self.scoring == "scaled_dot":
                query = ops.multiply(query, ops.cast(1.0 / math.sqrt(self.key_dim), query.dtype))
            scores = matmul(query, key)  # (B, N, T, S)
        # The softmax runs in float32 also under mixed precision.
        weights = attention_ops.masked_softmax(ops.cast(scores, "float32"), mask)
        weights = ops.cast(weights, self.compute_dtype)
        attended = weights
        if training and self.dropout > 0.0:
            attended = keras.random.dropout(weights, self.dropout, seed=self._dropout_seed)
        return matmul(attended, value), weights  # (B, N, T, Hv)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        self_attention = value is query and (key is None or key is query)
        if key is None:
            key = value
        checks.check_attention_inputs(query, value, key, self._feature_sizes)
        if fused.uses_fused(self, training, return_attention_scores):
            heads = fused.attend(self, query, value, key, self_attention, query_mask, value_mask,
                                 key_mask, attention_mask, use_causal_mask)
            return self._combine_heads(heads, query, heads_first=False)
        if self.chunk_size is None:
            mask = masks.call_mask(
                query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask
            )
        elif return_attention_scores:
            self._refuse_scores()
        key_major = () if self.scoring == "additive" or self.chunk_size else (1,)
        if self_attention:
            q, k, v = self._project(query, PROJECTIONS, key_major=key_major)
        else:
            (q,) = self._project(query, ("query",))
            k, v = self._project_key_value(value, key, (0,) if key_major else ())
        if self.chunk_size is None:
            heads, weights = self._attend(q, k, v, mask, training)  # (B, N, T, Hv)
        else:
            heads = chunked.attend(self, q, k, v, query_mask, value_mask, key_mask,
                                   attention_mask, use_causal_mask)
        output = self._combine_heads(heads, query)
        if return_attention_scores:
            return output, weights
        return output

    def _refuse_scores(self):
        raise ValueError("`return_attention_scores=True` needs the full weights, which "
                         f"`chunk_size` avoids computing; received chunk_size={self.chunk_size}.")

    def _combine_heads(self, heads, query, heads_first=True):
        """`W_o [head_1; …; head_N]`: heads `(B, N, T, Hv)` (`(B, T, N, Hv)` with
        `heads_first=False`) -> `(B, T, Do)`."""
        batch, length = ops.shape(query)[0], ops.shape(query)[1]
        if heads_first:
            heads = ops.transpose(heads, (0, 2, 1, 3))  # (B, T, N, Hv)
        heads = ops.reshape(heads, (-1, self.num_heads * self.value_dim))  # (B*T, N*Hv)
        output = self._projection(heads, ("output",))  # (B*T, Do)
        return ops.reshape(output, (batch, length, self.output_kernel.shape[-1]))  # (B, T, Do)

    # === Incremental decoding (key/value cache) ===

    def compute_key_value(self, value, key=None):
        """Project the keys and values once, e.g. the encoder output for cross-attention:
        value `(B, S, Dv)`, key `(B, S, Dk)` (default `value`) -> `(key, value)` in the
        layout `call_with_cache` takes: keys `(B, N, H, S)` (`(B, N, S, H)` with additive
        scoring), values `(B, N, S, Hv)`."""
        return self._project_key_value(value, key, (0,) if self._key_major else ())

    def _project_key_value(self, value, key, key_major, heads_first=True):
        """Keys and values `(B, N, ·, ·)` (`(B, S, N, ·)` with `heads_first=False`), in one
        matmul when `key` is `value` (or None)."""
        if key is None or key is value:
            return self._project(value, ("key", "value"), key_major, heads_first)
        (k,) = self._project(key, ("key",), key_major, heads_first)
        (v,) = self._project(value, ("value",), heads_first=heads_first)
        return k, v

    def empty_cache(self, batch_size, length, dtype=None):
        """Zero key/value buffers for `length` positions, laid out as in `compute_key_value`."""
        dtype = dtype or self.compute_dtype
        n, hk, hv = self.num_heads, self.key_dim, self.value_dim
        key_shape = (batch_size, n, hk, length) if self._key_major else (batch_size, n, length, hk)
        return ops.zeros(key_shape, dtype), ops.zeros((batch_size, n, length, hv), dtype)

    def grow_cache(self, key_cache, value_cache, length):
        """The buffers of `empty_cache` padded with zeros to `length` positions."""
        return (kv_cache.grow(key_cache, length, 3 if self._key_major else 2),
                kv_cache.grow(value_cache, length, 2))

    def call_with_cache(
        self, query, key_cache, value_cache, cache_index=None, value_mask=None, training=None,
        return_attention_scores=False,
    ):
        """Attention of new queries against cached keys and values (incremental decoding).

        Self-attention (`cache_index` given): `query` `(B, T, D)` holds the inputs at
        positions `cache_index … cache_index + T - 1`. Their keys and values are written
        into the buffers there (`kv_cache.write_positions`), and each query attends to the
        positions up to its own, so one token per call costs O(L) for buffers of L
        positions. The buffers come from `empty_cache` (fixed size: static shapes for XLA).

        Cross-attention (`cache_index=None`): the buffers are the projected encoder
        keys and values from `compute_key_value`, left unchanged; `value_mask` `(B, S)`
        masks the encoder padding.

        Always the explicit path, whatever `flash_attention`: one query against key-major
        buffers `(B, N, H, L)` is a matrix-vector product the fused op cannot speed up.

        Args:
            query: `(B, T, Dq)`.
            key_cache, value_cache: as returned by `empty_cache` / `compute_key_value`.
            cache_index: int or scalar int tensor, the position of `query[:, 0]`.
            value_mask: `(B, L)` or `(B, S)`, True for keys that may be attended.
            training, return_attention_scores: as in `call` (weights `(B, N, T, L)`).

        Returns:
            `(output (B, T, Do), key_cache, value_cache)`, the buffers updated, and the
            weights last with `return_attention_scores`.
        """
        checks.check_rank_3("query", query.shape)
        index = None if cache_index is None else ops.cast(cache_index, "int32")
        if index is None:
            (q,) = self._project(query, ("query",))
        else:
            q, key_cache, value_cache = self._write_step(query, key_cache, value_cache, index)
        mask = kv_cache.cache_mask(value_mask, index, ops.shape(query)[1],
                                   ops.shape(value_cache)[2])  # (B, 1, T, L)
        heads, weights = self._attend(q, key_cache, value_cache, mask, training,
                                      matmul=kv_cache.batched_matmul)  # (B, N, T, Hv)
        output = self._combine_heads(heads, query)
        if return_attention_scores:
            return output, key_cache, value_cache, weights
        return output, key_cache, value_cache

    def _write_step(self, query, key_cache, value_cache, index):
        """The step's query `(B, N, T, H)`, and the buffers with its keys and values written
        at positions `index …` (`kv_cache.write_positions`)."""
        key_major = (1,) if self._key_major else ()
        q, k, v = self._project(query, PROJECTIONS, key_major=key_major)
        key_cache = kv_cache.write_positions(key_cache, k, index,
                                             axis=3 if self._key_major else 2)
        return q, key_cache, kv_cache.write_positions(value_cache, v, index, axis=2)

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        out_dim = self.output_dim or query_shape[-1]
        return tuple(query_shape[:-1]) + (out_dim,)

    def compute_output_spec(self, query, value, key=None, *args, return_attention_scores=False,
                            **kwargs):
        shape = self.compute_output_shape(query.shape, value.shape)
        output = keras.KerasTensor(shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        if self.chunk_size is not None:
            self._refuse_scores()
        if self.flash_attention is True:
            fused.uses_fused(self, kwargs.get("training"), return_attention_scores)
        weights_shape = (query.shape[0], self.num_heads, query.shape[1], value.shape[1])
        return output, keras.KerasTensor(weights_shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in CONFIG_ATTRIBUTES})
        for name in ("kernel_initializer", "bias_initializer"):
            config[name] = keras.initializers.serialize(getattr(self, name))
        return config
