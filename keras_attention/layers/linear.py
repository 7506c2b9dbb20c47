"""Linear attention ("Transformers are RNNs", Katharopoulos et al. 2020)."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import check_positive_int


def feature_map(x):
    """`φ(x) = elu(x) + 1`, the positive feature map of the paper (section 3.2.1)."""
    return ops.elu(x) + 1.0


def _normalise(numerator, denominator):
    """`numerator / denominator` per query; 0 where no key is visible (denominator 0)."""
    visible = denominator > 0.0
    safe = ops.where(visible, denominator, ops.ones_like(denominator))
    return ops.where(ops.expand_dims(visible, -1), numerator / ops.expand_dims(safe, -1), 0.0)


@keras.saving.register_keras_serializable(package="keras_attention")
class LinearAttention(keras.layers.Layer):
    """Multi-head linear attention: `V'_t = φ(q_t)ᵀ Σ_s φ(k_s) v_sᵀ / φ(q_t)ᵀ Σ_s φ(k_s)`.

    The softmax similarity `exp(qᵀk/√H)` of `MultiHeadAttention` replaced by the kernel
    `φ(q)ᵀφ(k)` with `φ(x) = elu(x) + 1` (Katharopoulos et al., eq. 4–7), so the sums
    over keys can be taken once and shared by every query:

    - non-causal: `S = Σ_s φ(k_s) v_sᵀ` `(B, N, H, Hv)` and `z = Σ_s φ(k_s)` `(B, N, H)`,
      O(n·H·Hv) per head instead of O(n²·H);
    - causal (`use_causal_mask=True`): the same sums as cumulative sums over positions
      (eq. 8–10), `S_t = Σ_{s≤t} φ(k_s) v_sᵀ`;
    - recurrent (`initial_state` / `step`): the causal form one position at a time with a
      constant-size state `(S, z)`, an RNN for auto-regressive decoding (eq. 16–20).

    Heads and projections are those of `ka.MultiHeadAttention` (same weight names and
    shapes). The feature-map sums run in float32, also under mixed precision.

    Args:
        num_heads: N, the number of heads.
        key_dim: H, size of each head's query and key.
        value_dim: size of each head's value (Hv); defaults to `key_dim`.
        output_dim: size of the output; defaults to the query's feature size.
        use_bias: whether the projections have biases.
        kernel_initializer, bias_initializer: initializers of the projections.

    Call arguments:
        query: `(B, T, Dq)`.
        value: `(B, S, Dv)`.
        key: `(B, S, Dk)`; defaults to `value`.
        query_mask, value_mask, key_mask: padding masks `(B, T)` / `(B, S)`, filled in by
            Keras from the inputs' masks. Masked keys contribute nothing; masked queries
            get zero heads (their output is the output bias).
        attention_mask: bool, broadcastable to `(B, T, S)`. An explicit mask has no
            linear form: the layer then computes the `(B, N, T, S)` similarities
            `φ(q)ᵀφ(k)` (O(T·S) memory), exact but quadratic.
        use_causal_mask: query `t` attends only keys `<= t` (needs T <= S).
        training: unused (no dropout), accepted for a uniform signature.

    Returns:
        `(B, T, output_dim)`. A query that sees no key gets zero heads.

    References:
        Katharopoulos, Vyas, Pappas, Fleuret, "Transformers are RNNs: Fast
        Autoregressive Transformers with Linear Attention", ICML 2020.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        output_dim=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_positive_int("output_dim", output_dim, allow_none=True)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim if value_dim is not None else key_dim
        self.output_dim = output_dim
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    # === Weights ===

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3 or shape[-1] is None:
                raise ValueError(
                    f"`{name}` must have rank 3 (batch, length, features) with known features; "
                    f"received {name}.shape={tuple(shape)}."
                )
        n, hk, hv = self.num_heads, self.key_dim, self.value_dim
        out_dim = self.output_dim or query_shape[-1]

        def kernel(name, shape):
            return self.add_weight(name=name, shape=shape, initializer=self.kernel_initializer)

        def bias(name, shape):
            if not self.use_bias:
                return None
            return self.add_weight(name=name, shape=shape, initializer=self.bias_initializer)

        self.query_kernel = kernel("query_kernel", (query_shape[-1], n, hk))
        self.query_bias = bias("query_bias", (n, hk))
        self.key_kernel = kernel("key_kernel", (key_shape[-1], n, hk))
        self.key_bias = bias("key_bias", (n, hk))
        self.value_kernel = kernel("value_kernel", (value_shape[-1], n, hv))
        self.value_bias = bias("value_bias", (n, hv))
        self.output_kernel = kernel("output_kernel", (n, hv, out_dim))
        self.output_bias = bias("output_bias", (out_dim,))
        self.built = True

    # === Forward pass ===

    def _project(self, inputs, kernel, bias):
        """`(B, L, D)` -> `(B, N, L, H)` in float32 (the sums below run in float32)."""
        projected = ops.einsum("bld,dnh->bnlh", inputs, kernel)
        if self.use_bias:
            projected = projected + ops.expand_dims(bias, 1)  # (N, 1, H)
        return ops.cast(projected, "float32")

    def _check_feature_size(self, name, tensor, kernel):
        if len(tensor.shape) != 3 or tensor.shape[-1] != kernel.shape[0]:
            raise ValueError(
                f"`{name}` must have shape (B, L, {kernel.shape[0]}); "
                f"received {name}.shape={tuple(tensor.shape)}."
            )

    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, use_causal_mask=False, training=None):
        key = value if key is None else key
        for name, tensor, kernel in (("query", query, self.query_kernel),
                                     ("key", key, self.key_kernel),
                                     ("value", value, self.value_kernel)):
            self._check_feature_size(name, tensor, kernel)
        if use_causal_mask and None not in (query.shape[1], key.shape[1]):
            if query.shape[1] > key.shape[1]:
                raise ValueError(
                    "`use_causal_mask=True` needs T <= S; received "
                    f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}."
                )
        q = feature_map(self._project(query, self.query_kernel, self.query_bias))  # (B, N, T, H)
        k = feature_map(self._project(key, self.key_kernel, self.key_bias))  # (B, N, S, H)
        v = self._project(value, self.value_kernel, self.value_bias)  # (B, N, S, Hv)
        for mask in (value_mask, key_mask):
            if mask is not None:  # a masked key adds nothing to any sum
                k = k * ops.cast(mask, "float32")[:, None, :, None]
        if attention_mask is not None:
            heads = self._quadratic(q, k, v, query, key, attention_mask, use_causal_mask)
        elif use_causal_mask:
            heads = self._causal(q, k, v)
        else:
            heads = self._global(q, k, v)
        if query_mask is not None:
            heads = heads * ops.cast(query_mask, "float32")[:, None, :, None]
        return self._combine_heads(heads)

    def _global(self, q, k, v):
        """Non-causal: one `S = Σ φ(k) vᵀ`, `z = Σ φ(k)` shared by every query."""
        state = ops.einsum("bnsh,bnsv->bnhv", k, v)  # (B, N, H, Hv)
        normaliser = ops.sum(k, axis=2)  # (B, N, H)
        numerator = ops.einsum("bnth,bnhv->bntv", q, state)
        denominator = ops.einsum("bnth,bnh->bnt", q, normaliser)
        return _normalise(numerator, denominator)  # (B, N, T, Hv)

    def _causal(self, q, k, v):
        """Causal: `S_t`, `z_t` as cumulative sums over key positions (T <= S, aligned at 0)."""
        length = ops.shape(q)[2]
        states = ops.cumsum(ops.einsum("bnsh,bnsv->bnshv", k, v), axis=2)[:, :, :length]
        normalisers = ops.cumsum(k, axis=2)[:, :, :length]  # (B, N, T, H)
        numerator = ops.einsum("bnth,bnthv->bntv", q, states)
        denominator = ops.sum(q * normalisers, axis=-1)
        return _normalise(numerator, denominator)

    def _quadratic(self, q, k, v, query, key, attention_mask, use_causal_mask):
        """With an explicit mask: `(φ(Q)φ(K)ᵀ ∘ M) V`, normalised by its row sums."""
        rank = len(attention_mask.shape)
        if rank not in (2, 3):
            raise ValueError(
                "`attention_mask` must have shape (B, T, S) or (T, S); received "
                f"attention_mask.shape={tuple(attention_mask.shape)}."
            )
        expected = (query.shape[0], query.shape[1], key.shape[1])[-rank:]
        attention_ops._check_mask_broadcasts(attention_mask, expected, name="attention_mask")
        mask = ops.cast(attention_mask, "bool")
        if use_causal_mask:
            mask = ops.logical_and(
                mask, attention_ops.causal_mask(ops.shape(query)[1], ops.shape(key)[1])
            )
        mask = ops.expand_dims(mask, -3)  # (B, 1, T, S)
        similarities = ops.where(mask, ops.einsum("bnth,bnsh->bnts", q, k), 0.0)
        return _normalise(ops.matmul(similarities, v), ops.sum(similarities, axis=-1))

    def _combine_heads(self, heads):
        """`W_o [head_1; …; head_N]`: heads `(B, N, T, Hv)` -> `(B, T, Do)`."""
        heads = ops.cast(heads, self.compute_dtype)
        output = ops.einsum("bntv,nvo->bto", heads, self.output_kernel)
        if self.use_bias:
            output = output + self.output_bias
        return output

    # === Recurrent form (auto-regressive decoding) ===

    def initial_state(self, batch_size):
        """The empty state `(S (B, N, H, Hv), z (B, N, H))`, zeros in float32."""
        n, hk, hv = self.num_heads, self.key_dim, self.value_dim
        return (ops.zeros((batch_size, n, hk, hv), "float32"),
                ops.zeros((batch_size, n, hk), "float32"))

    def step(self, query, key, value, state, key_mask=None):
        """One position of the causal form: `S += φ(k) vᵀ`, `z += φ(k)`, read with `φ(q)`.

        Args:
            query: `(B, Dq)`, the input at the new position.
            key: `(B, Dk)`; value: `(B, Dv)` (pass `query` again for self-attention).
            state: `(S, z)` from `initial_state` or the previous step.
            key_mask: optional bool `(B,)`; False leaves the state unchanged (padding).

        Returns:
            `(output (B, Do), (S, z))`. Steps 1…t give the outputs of
            `call(x[:, :t], use_causal_mask=True)`, at O(1) cost per step.
        """
        summed, normaliser = state
        expand = lambda x: ops.expand_dims(x, 1)  # noqa: E731  (B, D) -> (B, 1, D)
        for name, tensor, kernel in (("query", query, self.query_kernel),
                                     ("key", key, self.key_kernel),
                                     ("value", value, self.value_kernel)):
            if len(tensor.shape) != 2:
                raise ValueError(
                    f"`{name}` of a step must have shape (B, D); received "
                    f"{name}.shape={tuple(tensor.shape)}."
                )
            self._check_feature_size(name, expand(tensor), kernel)
        q = feature_map(self._project(expand(query), self.query_kernel, self.query_bias))
        k = feature_map(self._project(expand(key), self.key_kernel, self.key_bias))[:, :, 0]
        v = self._project(expand(value), self.value_kernel, self.value_bias)[:, :, 0]
        if key_mask is not None:
            k = k * ops.cast(key_mask, "float32")[:, None, None]  # (B, N, H)
        summed = summed + ops.einsum("bnh,bnv->bnhv", k, v)
        normaliser = normaliser + k
        numerator = ops.einsum("bnth,bnhv->bntv", q, summed)  # (B, N, 1, Hv)
        denominator = ops.einsum("bnth,bnh->bnt", q, normaliser)
        output = self._combine_heads(_normalise(numerator, denominator))
        return output[:, 0], (summed, normaliser)

    def call_with_state(self, query, state, training=None):
        """Causal self-attention of new positions `(B, T, D)` given the state of the earlier ones.

        The recurrent form over the T positions (T is usually 1 when decoding).

        Returns:
            `(output (B, T, Do), state)`.
        """
        outputs = []
        for t in range(query.shape[1]):
            output, state = self.step(query[:, t], query[:, t], query[:, t], state)
            outputs.append(output)
        return ops.stack(outputs, axis=1), state

    # === Cross-attention over a fixed memory (encoder output) ===

    def compute_key_value(self, value, key=None):
        """`(φ(K) (B, N, S, H), V (B, N, S, Hv))` of a memory, in float32, computed once."""
        key = value if key is None else key
        return (feature_map(self._project(key, self.key_kernel, self.key_bias)),
                self._project(value, self.value_kernel, self.value_bias))

    def call_with_cache(self, query, key_cache, value_cache, cache_index=None, value_mask=None,
                        training=None):
        """Non-causal attention of `query` `(B, T, Dq)` over keys/values from `compute_key_value`.

        The signature of `MultiHeadAttention.call_with_cache` for cross-attention;
        returns `(output (B, T, Do), key_cache, value_cache)`.
        """
        if cache_index is not None:
            raise ValueError(
                "LinearAttention.call_with_cache is for cross-attention (cache_index=None); "
                f"use call_with_state for self-attention. Received cache_index={cache_index!r}."
            )
        keys = key_cache
        if value_mask is not None:
            keys = keys * ops.cast(value_mask, "float32")[:, None, :, None]
        q = feature_map(self._project(query, self.query_kernel, self.query_bias))
        return self._combine_heads(self._global(q, keys, value_cache)), key_cache, value_cache

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "output_dim": self.output_dim,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
