"""The pointer-generator's output distribution: generate from the vocabulary or copy from
the source (See, Liu & Manning 2017, eqs. 8-9; docs/math.md#the-pointer-generator)."""

import keras
from keras import ops

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

# The log-probability of an extended id that no source position holds (and of nothing
# else): finite, so that beam search's sums and the float16 cast stay finite.
IMPOSSIBLE = -1e9
_IMPOSSIBLE_FLOAT16 = -6e4  # float16's largest magnitude is 65504


@keras.saving.register_keras_serializable(package="keras_attention")
class PointerGenerator(keras.layers.Layer):
    """`P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: x_i = w} a_i`, in log space.

    The switch `p_gen = σ(wᵀ f + b)` is computed from the features `f` the
    decoder passes, in See et al. the concatenation `[c_t; s_t; x_t]` of the
    context vector, the decoder state and the decoder input, so that
    `wᵀ f = w_cᵀ c_t + w_sᵀ s_t + w_xᵀ x_t`. The copy distribution puts each
    source position's attention weight `a_i` on that position's id `x_i`
    (a scatter-add: a word repeated in the source gets the sum of its
    positions' weights).

    The ids live in an extended vocabulary of `V + S` entries: `0 … V-1` are
    the fixed vocabulary of the logits; a source token that the vocabulary
    lacks has a temporary id `V + k` of its own example (k < S, the same k for
    every position that holds the same token), so it can be copied although
    the generator cannot produce it. Building those ids is the data
    pipeline's job (`zoo.text.copying`).

    The result is `log P`, computed without leaving log space where it matters:
    `log P(w) = logaddexp(log σ(z) + log_softmax(logits)_w, log σ(-z) + log copy(w))`
    for ids that both parts reach, and the one part alone elsewhere, so no
    `log 0` is taken and no gradient is `NaN`; an extended id that no source
    position holds gets `IMPOSSIBLE` (`-1e9`, `-6e4` in float16), a
    probability of 0 for all purposes. Being log-probabilities, the output may be
    used wherever logits are: `log_softmax(log P) = log P`.

    Args:
        kernel_initializer, bias_initializer: of the switch's `w` and `b`.

    Call arguments:
        logits: the generator's logits over the fixed vocabulary, `(B, T, V)`
            (or one step, `(B, V)`).
        attention: the attention weights over the source, `(B, T, S)` (or
            `(B, S)`); zero at padded positions.
        source_ids: the source tokens' ids in the extended vocabulary,
            int `(B, S)`, each in `[0, V + S)`.
        switch_inputs: the features of `p_gen`, `(B, T, F)` (or `(B, F)`).
        return_switch: also return `p_gen`, `(B, T)` (or `(B,)`).

    Returns:
        `log P` over the extended vocabulary, `(B, T, V + S)` (or `(B, V + S)`),
        and with `return_switch=True`, `p_gen`.

    Example:
        >>> layer = PointerGenerator()
        >>> log_p = layer(keras.random.normal((2, 3, 10)),        # logits, V = 10
        ...               keras.ops.softmax(keras.random.normal((2, 3, 4))),  # S = 4
        ...               keras.ops.array([[5, 11, 10, 3], [2, 2, 10, 0]]),   # 10, 11: OOV
        ...               keras.random.normal((2, 3, 6)))
        >>> tuple(log_p.shape)
        (2, 3, 14)

    References:
        See, Liu, Manning, "Get To The Point: Summarization with
        Pointer-Generator Networks", ACL 2017, section 2.2.
    """

    def __init__(self, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, logits_shape, attention_shape, source_ids_shape, switch_inputs_shape):
        if len(logits_shape) not in (2, 3) or len(attention_shape) != len(logits_shape) \
                or len(switch_inputs_shape) != len(logits_shape):
            raise ValueError(
                "`logits`, `attention` and `switch_inputs` must be (B, T, ·) or all (B, ·); "
                f"received {tuple(logits_shape)}, {tuple(attention_shape)}, "
                f"{tuple(switch_inputs_shape)}."
            )
        if len(source_ids_shape) != 2:
            raise ValueError(f"`source_ids` must be (B, S); received {tuple(source_ids_shape)}.")
        if switch_inputs_shape[-1] is None:
            raise ValueError("the last axis of `switch_inputs` must be known.")
        self.switch_kernel = self.add_weight(
            name="switch_kernel", shape=(switch_inputs_shape[-1], 1),
            initializer=self.kernel_initializer,
        )  # w = [w_c; w_s; w_x]
        self.switch_bias = self.add_weight(
            name="switch_bias", shape=(1,), initializer=self.bias_initializer
        )  # b_ptr
        self.built = True

    def call(self, logits, attention, source_ids, switch_inputs, return_switch=False):
        single_step = len(logits.shape) == 2
        if single_step:
            logits, attention, switch_inputs = (
                ops.expand_dims(x, 1) for x in (logits, attention, switch_inputs)
            )
        logits, attention = ops.cast(logits, "float32"), ops.cast(attention, "float32")
        switch = ops.matmul(ops.cast(switch_inputs, "float32"),
                            ops.cast(self.switch_kernel, "float32"))
        switch = switch + ops.cast(self.switch_bias, "float32")  # z (B, T, 1)
        impossible = _IMPOSSIBLE_FLOAT16 if self.compute_dtype == "float16" else IMPOSSIBLE
        log_generate = ops.log_softmax(logits, axis=-1) + ops.log_sigmoid(switch)  # (B, T, V)
        log_probs = _mix(log_generate, attention, source_ids, switch, impossible)
        if self.compute_dtype == "float16":  # keep -inf out of float16's narrow range
            log_probs = ops.maximum(log_probs, impossible)
        log_probs = ops.cast(log_probs, self.compute_dtype)
        p_gen = ops.cast(ops.sigmoid(switch[..., 0]), self.compute_dtype)
        if single_step:
            log_probs, p_gen = log_probs[:, 0], p_gen[:, 0]
        return (log_probs, p_gen) if return_switch else log_probs

    def compute_output_spec(self, logits, attention, source_ids, switch_inputs,
                            return_switch=False):
        vocabulary, length = logits.shape[-1], attention.shape[-1]
        width = None if vocabulary is None or length is None else vocabulary + length
        output = keras.KerasTensor(tuple(logits.shape[:-1]) + (width,), dtype=self.compute_dtype)
        if not return_switch:
            return output
        return output, keras.KerasTensor(tuple(logits.shape[:-1]), dtype=self.compute_dtype)

    def compute_mask(self, *args, **kwargs):
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config


def _mix(log_generate, attention, source_ids, switch, impossible):
    """`log P` `(B, T, V + S)`: `log_generate` (`log p_gen + log P_vocab`, `(B, T, V)`)
    extended by S impossible ids, with the copy term mixed in at the source's ids.

    Only the S columns the source holds change, so the mixture is computed on
    `(B, T, S)` and written into place: a token's copy mass is the attention summed
    over the positions holding it (`a · [x_j = x_i]`, an S × S product). Positions
    holding the same id hold the same value; only the first of them is written (and
    passes the gradient on), so that it is not counted once per position.
    """
    source_ids = ops.cast(source_ids, "int32")
    batch, length = ops.shape(attention)[0], ops.shape(attention)[1]
    source, vocabulary = ops.shape(attention)[2], ops.shape(log_generate)[-1]
    same = ops.equal(source_ids[:, :, None], source_ids[:, None, :])  # (B, S, S)
    copied = ops.matmul(attention, ops.cast(same, attention.dtype))  # (B, T, S): Σ_{x_j = x_i} a_j
    has_copy = copied > 0
    log_copy = ops.log(ops.where(has_copy, copied, 1.0)) + ops.log_sigmoid(-switch)
    ids = ops.broadcast_to(source_ids[:, None, :], (batch, length, source))  # (B, T, S)
    in_vocabulary = ids < vocabulary
    generated = _gather(log_generate, ops.where(in_vocabulary, ids, 0))
    generated = ops.where(in_vocabulary, generated, impossible)
    mixed = ops.where(has_copy, ops.logaddexp(generated, log_copy), generated)  # (B, T, S)
    earlier = ops.triu(ops.ones((source, source), "int32"), k=1) > 0  # [j, i]: j < i
    first = ops.logical_not(ops.any(ops.logical_and(same, earlier[None]), axis=1))  # (B, S)
    first = ops.broadcast_to(first[:, None, :], (batch, length, source))  # (B, T, S)
    rows = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None, None], ops.shape(ids))
    steps = ops.broadcast_to(ops.arange(length, dtype="int32")[None, :, None], ops.shape(ids))
    extra = ops.full((batch, length, source), impossible, log_generate.dtype)
    full = ops.concatenate([log_generate, extra], axis=-1)  # (B, T, V + S)
    return _write(full, rows, steps, ids, mixed, first)


def _gather(values, ids):
    """`values[b, t, ids[b, t, s]]`: `(B, T, V)`, `(B, T, S)` -> `(B, T, S)`."""
    if keras.backend.backend() == "tensorflow":
        return tf.gather(values, ids, batch_dims=2)  # 2.9x faster than take_along_axis's path
    return ops.take_along_axis(values, ids, axis=-1)


def _write(full, rows, steps, ids, mixed, first):
    """`full` `(B, T, V + S)` with `mixed` `(B, T, S)` written at `[b, t, ids[b, t, s]]`.

    Where several positions hold an id, only the `first` passes the gradient on. On
    TensorFlow the later ones write the same value under `stop_gradient`
    (`tensor_scatter_nd_update` hands every write the gradient); elsewhere they write to
    a spare column, cut off afterwards, so that each column is written once whatever a
    backend's order of duplicate writes (JAX's scatter gives the gradient to one of them).
    """
    if keras.backend.backend() == "tensorflow":
        mixed = ops.where(first, mixed, ops.stop_gradient(mixed))
        indices = ops.reshape(ops.stack([rows, steps, ids], axis=-1), (-1, 3))
        return tf.tensor_scatter_nd_update(full, indices, ops.reshape(mixed, (-1,)))
    spare = ops.shape(full)[-1]
    ids = ops.where(first, ids, spare)
    indices = ops.reshape(ops.stack([rows, steps, ids], axis=-1), (-1, 3))
    padded = ops.pad(full, [[0, 0], [0, 0], [0, 1]])  # (B, T, V + S + 1)
    padded = ops.scatter_update(padded, indices, ops.reshape(mixed, (-1,)))
    return padded[..., :-1]  # (B, T, V + S)


def fixed_vocabulary_ids(ids, vocabulary_size, unknown_id):
    """Ids in the extended vocabulary -> the fixed one: each copied id `>= V` becomes
    `unknown_id` (See et al. feed the decoder `[UNK]` after copying an
    out-of-vocabulary word). Any int shape; works on symbolic tensors too."""
    return ops.where(ops.greater_equal(ids, vocabulary_size), unknown_id, ids)
