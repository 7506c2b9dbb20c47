"""Tests of every public layer, the schedule, the loss and the metric (docs/math.md).

The shared check (`tests/layer_checks.py`) runs on every layer; the rest compares
each layer with a direct numpy implementation of its formula, using the
layer's own weights, and checks the equivalences between paths (implicit vs
explicit masks, incremental vs full positional encodings, cached vs fresh keys).
"""

import math

import keras
import numpy as np
import pytest

import keras_attention as ka

# pytest puts tests/ (no __init__.py) on sys.path
import backends
from layer_checks import run_layer_checks

B, L, D = 2, 5, 8


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _mask(*rows):
    return np.array(rows, dtype=bool)


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def _traced(fn):
    """`fn` traced with symbolic arguments, as in a compiled decoding step: a TensorFlow graph
    (`tf.function`), `jax.jit`; PyTorch runs it eagerly (its tensors are never symbolic)."""
    if backends.BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    return backends.compiled(fn) or fn


# === The shared layer check on every public layer ===

PADDING = _mask([1, 1, 1, 1, 0], [1, 1, 1, 0, 0])  # (B, L)
IDS = np.array([[3, 1, 4, 1, 0], [5, 9, 2, 0, 0]], dtype="int32")  # 0 = padding

# id -> (factory, inputs, call_kwargs, weights whose gradient may be exactly 0)
LAYER_CASES = {
    "mha_scaled_dot": (
        lambda: ka.MultiHeadAttention(num_heads=2, key_dim=4, name="mha"),
        {
            "query": _x(B, 4, D),
            "value": _x(B, L, 6, seed=1),
            "key": _x(B, L, 3, seed=2),
            "value_mask": PADDING,
        },
        {"return_attention_scores": True},
        # Adding b_k to every key adds the same q·b_k to a whole row of scores: the
        # softmax cancels it, so the key bias has zero gradient under dot scoring.
        ("key_bias",),
    ),
    "mha_dot_self_causal": (
        lambda: ka.MultiHeadAttention(
            num_heads=2, key_dim=3, value_dim=5, output_dim=7, scoring="dot", name="mha"
        ),
        {"query": _x(B, L, D), "value": "query"},
        {"use_causal_mask": True},
        ("key_bias",),
    ),
    "mha_chunked_self_causal": (
        lambda: ka.MultiHeadAttention(num_heads=2, key_dim=4, chunk_size=2, name="mha"),
        {"query": _x(B, L, D), "value": "query", "value_mask": PADDING},
        {"use_causal_mask": True},
        ("key_bias",),
    ),
    "location_aware_step": (
        lambda: ka.LocationAwareAttention(6, filters=3, kernel_size=3, name="location"),
        {
            "query": _x(B, 4),
            "value": _x(B, L, D, seed=1),
            "previous_alignment": np.abs(_x(B, L, seed=2)),
            "value_mask": PADDING,
        },
        {"return_attention_scores": True},
        (),
    ),
    "location_aware_sequence": (
        lambda: ka.LocationAwareAttention(6, filters=2, kernel_size=4, name="location"),
        {"query": _x(B, 3, 4), "value": _x(B, L, D, seed=1),
         "previous_alignment": np.abs(_x(B, 3, L, seed=2))},
        {},
        (),
    ),
    "multi_resolution": (
        lambda: ka.MultiResolutionAttention(5, filters=2, kernel_sizes=(1, 3), name="multires"),
        {
            "query": _x(B, 4),
            "value": _x(B, L, D, seed=1),
            "previous_alignment": np.abs(_x(B, 2, L, seed=2)),
            "value_mask": PADDING,
        },
        {"return_attention_scores": True},
        (),
    ),
    "monotonic_step_mocha": (
        lambda: ka.MonotonicAttention(6, chunk_size=2, seed=1, name="monotonic"),
        {
            "query": _x(B, 4),
            "value": _x(B, L, D, seed=1),
            "previous_alignment": np.eye(L, dtype="float32")[[0, 1]],
            "value_mask": PADDING,
        },
        {"return_attention_scores": True, "return_alignment": True},
        (),
    ),
    "monotonic_sequence": (
        lambda: ka.MonotonicAttention(5, score_bias_init=0.5, name="monotonic"),
        {"query": _x(B, 3, 4), "value": _x(B, L, D, seed=1),
         "previous_alignment": np.abs(_x(B, 3, L, seed=2))},
        {},
        (),
    ),
    "linear_cross_padding": (
        lambda: ka.LinearAttention(num_heads=2, key_dim=4, value_dim=3, name="linear"),
        {
            "query": _x(B, 4, D),
            "value": _x(B, L, 6, seed=1),
            "key": _x(B, L, 3, seed=2),
            "value_mask": PADDING,
        },
        {},
        (),
    ),
    "linear_self_causal": (
        lambda: ka.LinearAttention(num_heads=2, key_dim=4, output_dim=5, name="linear"),
        {"query": _x(B, L, D), "value": "query", "query_mask": PADDING},
        {"use_causal_mask": True},
        (),
    ),
    "causal_conv_dilated": (
        lambda: ka.CausalConv1D(6, 3, dilation_rate=2, activation="tanh", name="conv"),
        {"inputs": _x(B, L, D), "mask": PADDING},
        {},
        (),
    ),
    "dilated_residual_block_projected": (
        lambda: ka.DilatedResidualBlock(6, 2, dilation_rate=2, dropout=0.1, name="block"),
        {"inputs": _x(B, L, D)},
        {},
        (),
    ),
    "dilated_residual_block_identity": (
        lambda: ka.DilatedResidualBlock(D, 3, name="block"),
        {"inputs": _x(B, L, D), "mask": PADDING},
        {},
        (),
    ),
    "mha_additive": (
        lambda: ka.MultiHeadAttention(num_heads=2, key_dim=4, scoring="additive", name="mha"),
        {"query": _x(B, 4, D), "value": _x(B, L, D, seed=1), "value_mask": PADDING},
        {},
        (),
    ),
    "bahdanau_sequence": (
        lambda: ka.BahdanauAttention(units=6, name="bahdanau"),
        {"query": _x(B, 3, 7), "value": _x(B, L, 4, seed=1), "value_mask": PADDING},
        {"return_attention_scores": True},
        (),
    ),
    "bahdanau_step_with_key": (
        lambda: ka.BahdanauAttention(units=6, name="bahdanau"),
        {"query": _x(B, 7), "value": _x(B, L, 4, seed=1), "key": _x(B, L, 3, seed=2)},
        {},
        (),
    ),
    "sinusoidal": (
        lambda: ka.SinusoidalPositionalEncoding(name="positional"),
        {"inputs": _x(B, L, 7)},
        {},
        (),
    ),
    "position_embedding": (
        lambda: ka.PositionEmbedding(sequence_length=8, name="positional"),
        {"inputs": _x(B, L, D)},
        {},
        (),
    ),
    "token_and_position_sinusoidal": (
        lambda: ka.TokenAndPositionEmbedding(
            10, 8, D, mask_zero=True, dropout=0.1, name="embedding"
        ),
        {"inputs": IDS},
        {},
        (),
    ),
    "token_and_position_sinusoidal_halves": (
        lambda: ka.TokenAndPositionEmbedding(
            10, 8, D, scale_embeddings=False, layout="halves", name="embedding"
        ),
        {"inputs": IDS},
        {},
        (),
    ),
    "token_and_position_learned": (
        lambda: ka.TokenAndPositionEmbedding(10, 8, D, positional="learned", name="embedding"),
        {"inputs": IDS},
        {},
        (),
    ),
    "feed_forward": (
        lambda: ka.PositionwiseFeedForward(16, dropout=0.1, name="ffn"),
        {"inputs": _x(B, L, D)},
        {},
        (),
    ),
    "encoder_post_norm": (
        lambda: ka.TransformerEncoderBlock(2, 16, dropout=0.1, name="encoder"),
        {"inputs": _x(B, L, D), "padding_mask": PADDING},
        {"return_attention_scores": True},
        ("key_bias",),
    ),
    "encoder_pre_norm": (
        lambda: ka.TransformerEncoderBlock(
            2, 16, norm_first=True, activation="gelu", name="encoder"
        ),
        {"inputs": _x(B, L, D), "padding_mask": PADDING},
        {},
        ("key_bias",),
    ),
    "decoder_only": (
        lambda: ka.TransformerDecoderBlock(2, 16, name="decoder"),
        {"decoder_sequence": _x(B, 4, D)},
        {},
        ("key_bias",),
    ),
    "decoder_cross": (
        lambda: ka.TransformerDecoderBlock(2, 16, norm_first=True, name="decoder"),
        {
            "decoder_sequence": _x(B, 4, D),
            "encoder_sequence": _x(B, L, D, seed=1),
            "encoder_padding_mask": PADDING,
        },
        {"return_attention_scores": True},
        ("key_bias",),
    ),
    "patch_embedding": (
        lambda: ka.PatchEmbedding(patch_size=2, embedding_dim=D, name="patches"),
        {"inputs": _x(B, 4, 6, 3)},
        {},
        (),
    ),
    "class_token": (
        lambda: ka.ClassToken(name="class_token"),
        {"inputs": _x(B, L, D)},
        {},
        (),
    ),
    "pointer_generator": (
        lambda: ka.PointerGenerator(name="pointer_generator"),
        {
            "logits": _x(B, 4, 9),
            "attention": np.abs(_x(B, 4, L, seed=1)) * PADDING[:, None, :],
            "source_ids": IDS,  # 9 = V + 0: a source token outside the vocabulary
            "switch_inputs": _x(B, 4, 6, seed=2),
        },
        {"return_switch": True},
        (),
    ),
    "sequence_pooling": (
        lambda: ka.SequencePooling(name="pooling"),
        {"inputs": _x(B, L, D), "mask": PADDING},
        {"return_attention_scores": True},
        (),
    ),
}


def test_every_public_layer_has_a_case():
    layers = {name for name in ka.layers.__all__}
    covered = {type(factory()).__name__ for factory, *_ in LAYER_CASES.values()}
    assert layers == covered


def _richest_case_per_class():
    """Per layer class, the case with the most inputs and call options (then by name)."""
    chosen = {}
    for case in sorted(LAYER_CASES, key=lambda c: (-len(LAYER_CASES[c][1]) - len(LAYER_CASES[c][2]), c)):
        chosen.setdefault(type(LAYER_CASES[case][0]()).__name__, case)
    return set(chosen.values())


# XLA and mixed precision run once per layer class (see `run_layer_checks`).
COMPILED_CASES = _richest_case_per_class()


@pytest.mark.parametrize("case", sorted(LAYER_CASES))
def test_shared_layer_checks(case, tmp_path):
    factory, inputs, call_kwargs, allow_zero = LAYER_CASES[case]
    compiled = case in COMPILED_CASES
    run_layer_checks(factory, inputs, tmp_path, call_kwargs, allow_zero_gradients=allow_zero,
                     jit=compiled, mixed_precision=compiled)


def test_compiled_checks_cover_every_layer_class():
    classes = {type(LAYER_CASES[case][0]()).__name__ for case in COMPILED_CASES}
    assert classes == set(ka.layers.__all__)


# === numpy references ===


def np_masked_softmax(scores, mask=None):
    """Softmax over the last axis; masked entries get weight 0, all-masked rows are 0."""
    mask = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    shifted = np.where(mask, scores, -np.inf)
    top = shifted.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    exp = np.where(mask, np.exp(shifted - top), 0.0)
    total = exp.sum(-1, keepdims=True)
    return np.where(total > 0, exp / np.where(total > 0, total, 1.0), 0.0)


def np_layer_norm(norm, x, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    normalized = (x - mean) / np.sqrt(variance + epsilon)
    return normalized * _np(norm.gamma) + _np(norm.beta)


def np_dense(dense, x):
    return x @ _np(dense.kernel) + _np(dense.bias)


def np_feed_forward(ffn, x):
    """max(0, x W1 + b1) W2 + b2 (relu)."""
    return np_dense(ffn.output_dense, np.maximum(0.0, np_dense(ffn.inner_dense, x)))


def np_multi_head(mha, query, value, mask=None):
    """W_o [head_1; ...; head_N] with scaled dot-product heads; mask (B, T, S)."""
    q = np.einsum("btd,dnh->bnth", query, _np(mha.query_kernel)) + _np(mha.query_bias)[:, None]
    k = np.einsum("bsd,dnh->bnsh", value, _np(mha.key_kernel)) + _np(mha.key_bias)[:, None]
    v = np.einsum("bsd,dnh->bnsh", value, _np(mha.value_kernel)) + _np(mha.value_bias)[:, None]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (B, N, T, S)
    weights = np_masked_softmax(scores, None if mask is None else mask[:, None])
    heads = weights @ v  # (B, N, T, Hv)
    return np.einsum("bnth,nho->bto", heads, _np(mha.output_kernel)) + _np(mha.output_bias)


def np_sublayer(block, norm, fn, x):
    epsilon = block.layer_norm_epsilon  # the block's argument, not the norm's attribute
    if block.norm_first:
        return x + fn(np_layer_norm(norm, x, epsilon))
    return np_layer_norm(norm, x + fn(x), epsilon)


def np_attention_sublayer(block, norm, attention, x, mask, memory=None):
    """`np_sublayer` of an attention: over the normed `x` itself, or over `memory`
    (cross-attention)."""
    return np_sublayer(
        block, norm, lambda h: np_multi_head(attention, h, h if memory is None else memory, mask), x
    )


def np_feed_forward_sublayer(block, x):
    return np_sublayer(
        block, block.feed_forward_norm, lambda h: np_feed_forward(block.feed_forward, h), x
    )


def np_encoder_block(block, x, padding):
    mask = padding[:, :, None] & padding[:, None, :]  # (B, S, S)
    x = np_attention_sublayer(block, block.self_attention_norm, block.self_attention, x, mask)
    return np_feed_forward_sublayer(block, x)


def np_decoder_block(block, y, x, decoder_padding, encoder_padding):
    length = y.shape[1]
    causal = np.tril(np.ones((length, length), bool))
    self_mask = causal & decoder_padding[:, :, None] & decoder_padding[:, None, :]
    cross_mask = decoder_padding[:, :, None] & encoder_padding[:, None, :]
    y = np_attention_sublayer(block, block.self_attention_norm, block.self_attention, y,
                              self_mask)
    y = np_attention_sublayer(block, block.cross_attention_norm, block.cross_attention, y,
                              cross_mask, memory=x)
    return np_feed_forward_sublayer(block, y)


def np_sinusoidal(length, depth, start=0, base=10000.0):
    """The formula of docs/math.md#positional-encodings, one entry at a time."""
    table = np.zeros((length, depth))
    for i in range(length):
        for column in range(depth):
            j = column // 2
            angle = (start + i) / base ** (2 * j / depth)
            table[i, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table


def randomize_weights(layer, seed=0, scale=0.5):
    """Random non-zero values for every weight (biases, gammas and betas included)."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [(scale * rng.standard_normal(w.shape)).astype("float32") for w in layer.get_weights()]
    )


# === Positional encodings ===


@pytest.mark.parametrize("depth", [8, 7])
def test_sinusoidal_values_match_the_formula(depth):
    x = _x(B, 12, depth)
    out = _np(ka.SinusoidalPositionalEncoding()(x))
    np.testing.assert_allclose(
        out - x, np.broadcast_to(np_sinusoidal(12, depth), x.shape), atol=2e-6
    )
    zeros = np.zeros((1, 12, depth), "float32")
    np.testing.assert_allclose(
        _np(ka.SinusoidalPositionalEncoding()(zeros))[0], np_sinusoidal(12, depth), atol=2e-6
    )


def test_sinusoidal_max_wavelength_is_the_base():
    zeros = np.zeros((1, 6, 4), "float32")
    out = _np(ka.SinusoidalPositionalEncoding(max_wavelength=100)(zeros))[0]
    np.testing.assert_allclose(out, np_sinusoidal(6, 4, base=100.0), atol=2e-6)


def test_sinusoidal_incremental_matches_full():
    x = _x(B, 9, 6)
    layer = ka.SinusoidalPositionalEncoding()
    full = _np(layer(x))
    for t in range(9):
        step = _np(layer(x[:, t : t + 1], start_index=t))
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-6)
    # A tensor start_index inside a compiled decoding step gives the same.
    step_fn = _traced(lambda x, t: layer(x, start_index=t))
    start = keras.ops.convert_to_tensor(4, "int32")
    np.testing.assert_allclose(_np(step_fn(x[:, 4:7], start)), full[:, 4:7], atol=1e-6)


def test_sinusoidal_relative_position_is_a_rotation():
    depth, delta = 6, 3
    table = np_sinusoidal(20, depth)
    out = _np(ka.SinusoidalPositionalEncoding()(np.zeros((1, 20, depth), "float32")))[0]
    for j in range(depth // 2):
        omega = 1.0 / 10000 ** (2 * j / depth)
        c, s = math.cos(delta * omega), math.sin(delta * omega)
        rotation = np.array([[c, s], [-s, c]])
        pairs = out[:, 2 * j : 2 * j + 2]  # (L, 2)
        np.testing.assert_allclose(pairs[:-delta] @ rotation.T, pairs[delta:], atol=1e-5)
        np.testing.assert_allclose(pairs, table[:, 2 * j : 2 * j + 2], atol=2e-6)


def test_sinusoidal_lengths_unknown_at_build_time():
    inputs = keras.Input((None, 6))
    model = keras.Model(inputs, ka.SinusoidalPositionalEncoding()(inputs))
    for length in (3, 11):
        out = _np(model(np.zeros((2, length, 6), "float32")))
        np.testing.assert_allclose(out[1], np_sinusoidal(length, 6), atol=2e-6)


@pytest.mark.tensorflow_only
def test_sinusoidal_traced_with_unknown_lengths():
    """A TensorFlow graph traced for any batch and length (`input_signature`), as an export."""
    import tensorflow as tf

    traced = tf.function(
        ka.SinusoidalPositionalEncoding(), input_signature=[tf.TensorSpec((None, None, 6))]
    )
    np.testing.assert_allclose(
        _np(traced(np.zeros((1, 4, 6), "float32")))[0], np_sinusoidal(4, 6), atol=2e-6
    )


def test_sinusoidal_keeps_the_mask():
    ids = np.array([[1, 2, 0]])
    embedded = keras.layers.Embedding(5, 4, mask_zero=True)(ids)
    out = ka.SinusoidalPositionalEncoding()(embedded)
    np.testing.assert_array_equal(_np(out._keras_mask), ids != 0)


def test_position_embedding_adds_the_table_and_slices_incrementally():
    layer = ka.PositionEmbedding(sequence_length=8)
    x = _x(B, L, D)
    out = _np(layer(x))
    table = _np(layer.position_embeddings)
    np.testing.assert_allclose(out, x + table[:L], atol=1e-6)
    step = _np(layer(x[:, 2:4], start_index=2))
    np.testing.assert_allclose(step, out[:, 2:4], atol=1e-6)
    with pytest.raises(ValueError, match="sequence_length=8"):
        layer(_x(1, 9, D))


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_token_and_position_embedding_is_scaled_embedding_plus_position(positional):
    layer = ka.TokenAndPositionEmbedding(10, 8, D, positional=positional)
    out = _np(layer(IDS))
    embeddings = _np(layer.embeddings)
    assert embeddings.shape == (10, D)
    if positional == "learned":
        positions = _np(layer.position_embedding.position_embeddings)[:L]
    else:
        positions = np_sinusoidal(L, D)
    np.testing.assert_allclose(out, embeddings[IDS] * math.sqrt(D) + positions, atol=1e-5)
    # Incremental: ids from position 3 on.
    step = _np(layer(IDS[:, 3:], start_index=3))
    np.testing.assert_allclose(step, out[:, 3:], atol=1e-6)


def test_token_and_position_embedding_without_scaling():
    layer = ka.TokenAndPositionEmbedding(10, 8, D, scale_embeddings=False)
    out = _np(layer(IDS))
    np.testing.assert_allclose(out, _np(layer.embeddings)[IDS] + np_sinusoidal(L, D), atol=1e-5)


def test_token_and_position_embedding_dropout_only_in_training():
    layer = ka.TokenAndPositionEmbedding(10, 8, D, dropout=0.5)
    inference = _np(layer(IDS))
    np.testing.assert_array_equal(inference, _np(layer(IDS, training=False)))
    trained = _np(layer(IDS, training=True))
    dropped = trained == 0
    assert 0 < dropped.mean() < 1
    np.testing.assert_allclose(trained[~dropped], 2 * inference[~dropped], rtol=1e-5)


def test_token_and_position_embedding_mask_zero():
    layer = ka.TokenAndPositionEmbedding(10, 8, D, mask_zero=True)
    out = layer(IDS)
    np.testing.assert_array_equal(_np(out._keras_mask), IDS != 0)
    np.testing.assert_array_equal(_np(layer.compute_mask(IDS)), IDS != 0)
    ids = keras.Input((None,), dtype="int32")
    assert tuple(layer(ids)._keras_mask.shape) == (None, None)
    assert ka.TokenAndPositionEmbedding(10, 8, D).compute_mask(IDS) is None


def test_implicit_mask_from_embedding_equals_explicit_padding_mask():
    embedding = ka.TokenAndPositionEmbedding(10, 8, D, mask_zero=True)
    encoder = ka.TransformerEncoderBlock(2, 16)
    ids = keras.Input((None,), dtype="int32")
    implicit = keras.Model(ids, encoder(embedding(ids)))
    randomize_weights(encoder)

    embedded = embedding(IDS)
    unmasked = keras.ops.copy(embedded)  # drops the Keras mask
    assert getattr(unmasked, "_keras_mask", None) is None
    explicit = _np(encoder(unmasked, padding_mask=IDS != 0))
    no_mask = _np(encoder(unmasked))
    real = IDS != 0
    np.testing.assert_allclose(_np(implicit(IDS))[real], explicit[real], atol=1e-5)
    np.testing.assert_allclose(_np(encoder(embedded))[real], explicit[real], atol=1e-5)
    assert not np.allclose(no_mask[real], explicit[real], atol=1e-3)  # the mask matters
    # The block keeps the mask for the next one.
    np.testing.assert_array_equal(_np(encoder(embedded)._keras_mask), real)


def test_token_and_position_embedding_reverse_is_tied_logits():
    layer = ka.TokenAndPositionEmbedding(10, 8, D)
    layer.build()
    hidden = _x(B, 3, D)
    logits = _np(layer(hidden, reverse=True))
    np.testing.assert_allclose(logits, hidden @ _np(layer.embeddings).T, atol=1e-5)
    inputs = keras.Input((None, D))
    assert tuple(layer(inputs, reverse=True).shape) == (None, None, 10)
    with pytest.raises(ValueError, match="size 8"):
        layer(_x(B, 3, D + 1), reverse=True)


def test_token_and_position_embedding_rejects_long_sequences():
    for positional in ("sinusoidal", "learned"):
        layer = ka.TokenAndPositionEmbedding(10, 4, D, positional=positional)
        with pytest.raises(ValueError, match="sequence_length=4.*length 5"):
            layer(IDS)


# === Feed-forward ===


def test_feed_forward_matches_numpy():
    ffn = ka.PositionwiseFeedForward(16)
    x = _x(B, L, D)
    ffn(x)
    randomize_weights(ffn)
    out = _np(ffn(x))
    np.testing.assert_allclose(out, np_feed_forward(ffn, x), atol=1e-5)
    assert (np_dense(ffn.inner_dense, x) < 0).any()  # relu is exercised
    # The same weights at every position: each position alone gives the same output.
    for t in range(L):
        np.testing.assert_allclose(_np(ffn(x[:, t : t + 1]))[:, 0], out[:, t], atol=1e-5)
    np.testing.assert_allclose(_np(ffn(x[:, ::-1])), out[:, ::-1], atol=1e-5)


def test_feed_forward_output_dim_and_no_bias():
    ffn = ka.PositionwiseFeedForward(16, output_dim=3, use_bias=False)
    out = ffn(_x(B, L, D))
    assert tuple(out.shape) == (B, L, 3)
    assert [tuple(w.shape) for w in ffn.weights] == [(D, 16), (16, 3)]


# === Transformer blocks ===


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_block_matches_numpy(norm_first):
    # A large epsilon on purpose: with x of unit scale it changes the outputs visibly.
    block = ka.TransformerEncoderBlock(2, 16, norm_first=norm_first, layer_norm_epsilon=0.5)
    x = _x(B, L, D)
    block(x)
    randomize_weights(block)
    expected = np_encoder_block(block, x, PADDING)
    out, weights = block(x, padding_mask=PADDING, return_attention_scores=True)
    np.testing.assert_allclose(_np(out), expected, atol=1e-4)
    assert tuple(weights.shape) == (B, 2, L, L)
    np.testing.assert_array_equal(_np(weights) * ~PADDING[:, None, None, :], 0.0)
    # Post- and pre-norm really differ.
    block.norm_first = not norm_first
    assert not np.allclose(_np(block(x, padding_mask=PADDING)), expected, atol=1e-2)


def test_encoder_block_dropout_is_inactive_at_inference():
    block = ka.TransformerEncoderBlock(2, 16, dropout=0.5, attention_dropout=0.5)
    x = _x(B, L, D)
    np.testing.assert_array_equal(_np(block(x)), _np(block(x, training=False)))
    assert not np.allclose(_np(block(x, training=True)), _np(block(x)))


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_block_matches_numpy(norm_first):
    block = ka.TransformerDecoderBlock(2, 16, norm_first=norm_first, layer_norm_epsilon=0.5)
    y, x = _x(B, 4, D), _x(B, L, D, seed=1)
    decoder_padding = _mask([1, 1, 1, 1], [1, 1, 0, 0])
    block(y, x)
    randomize_weights(block)
    out = block(y, x, decoder_padding_mask=decoder_padding, encoder_padding_mask=PADDING)
    expected = np_decoder_block(block, y, x, decoder_padding, PADDING)
    np.testing.assert_allclose(_np(out), expected, atol=1e-4)


def _decoder_with_cross_attention():
    block = ka.TransformerDecoderBlock(2, 16)
    block(_x(B, 4, D), _x(B, L, D))
    randomize_weights(block)
    return block


@pytest.mark.parametrize("cross", [False, True], ids=["decoder_only", "cross_attention"])
def test_decoder_block_is_causal(cross):
    block = _decoder_with_cross_attention() if cross else ka.TransformerDecoderBlock(2, 16)
    encoder = (_x(B, L, D, seed=1),) if cross else ()
    y = _x(B, 6, D)
    out = _np(block(y, *encoder))
    changed = y.copy()
    changed[:, 3:] = _x(B, 3, D, seed=7)
    out_changed = _np(block(changed, *encoder))
    np.testing.assert_allclose(out_changed[:, :3], out[:, :3], atol=1e-5)
    assert not np.allclose(out_changed[:, 3:], out[:, 3:], atol=1e-3)
    # Without the causal mask the past does see the future.
    unmasked = _np(block(y, *encoder, use_causal_mask=False))
    unmasked_changed = _np(block(changed, *encoder, use_causal_mask=False))
    assert not np.allclose(unmasked[:, :3], unmasked_changed[:, :3], atol=1e-3)


def test_decoder_block_ignores_padded_encoder_positions():
    block = _decoder_with_cross_attention()
    y, x = _x(B, 4, D), _x(B, L, D, seed=1)
    out = _np(block(y, x, encoder_padding_mask=PADDING))
    changed = x.copy()
    changed[~PADDING] = 100.0 * _x(int((~PADDING).sum()), D, seed=3)
    np.testing.assert_allclose(_np(block(y, changed, encoder_padding_mask=PADDING)), out, atol=1e-5)
    assert not np.allclose(_np(block(y, changed)), out, atol=1e-3)  # the mask matters
    # The encoder's Keras mask is the default encoder_padding_mask.
    embedding = ka.TokenAndPositionEmbedding(10, 8, D, mask_zero=True)
    encoded = embedding(IDS)
    implicit = _np(block(y, encoded))
    explicit = _np(block(y, keras.ops.copy(encoded), encoder_padding_mask=IDS != 0))
    np.testing.assert_allclose(implicit, explicit, atol=1e-5)


def test_decoder_block_attention_scores():
    block = _decoder_with_cross_attention()
    y, x = _x(B, 4, D), _x(B, L, D, seed=1)
    out, self_weights, cross_weights = block(
        y, x, encoder_padding_mask=PADDING, return_attention_scores=True
    )
    assert tuple(out.shape) == (B, 4, D)
    assert tuple(self_weights.shape) == (B, 2, 4, 4)
    assert tuple(cross_weights.shape) == (B, 2, 4, L)
    self_weights, cross_weights = _np(self_weights), _np(cross_weights)
    np.testing.assert_allclose(cross_weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(self_weights.sum(-1), 1.0, atol=1e-5)
    assert (cross_weights >= 0).all()
    np.testing.assert_array_equal(cross_weights * ~PADDING[:, None, None, :], 0.0)
    np.testing.assert_array_equal(np.triu(self_weights, k=1), 0)  # causal
    decoder_only = ka.TransformerDecoderBlock(2, 16)
    _, self_only, cross_none = decoder_only(y, return_attention_scores=True)
    assert tuple(self_only.shape) == (B, 2, 4, 4) and cross_none is None


@pytest.mark.parametrize("block_class", [ka.TransformerEncoderBlock, ka.TransformerDecoderBlock])
def test_blocks_reject_d_model_not_divisible_by_num_heads(block_class):
    with pytest.raises(ValueError, match="num_heads=3, d_model=8"):
        block_class(3, 16)(_x(B, L, D))
    out = block_class(3, 16, key_dim=4)(_x(B, L, D))  # an explicit head size is fine
    assert tuple(out.shape) == (B, L, D)


def test_decoder_block_cross_attention_needs_an_encoder():
    block = _decoder_with_cross_attention()
    with pytest.raises(ValueError, match="with cross-attention"):
        block(_x(B, 4, D))
    decoder_only = ka.TransformerDecoderBlock(2, 16)
    decoder_only(_x(B, 4, D))
    with pytest.raises(ValueError, match="without cross-attention"):
        decoder_only(_x(B, 4, D), _x(B, L, D))


# === Vision ===


@pytest.mark.parametrize("patch_size", [2, 3])
def test_patch_embedding_matches_numpy(patch_size):
    p, channels = patch_size, 3
    images = _x(B, 2 * p, 3 * p, channels)
    layer = ka.PatchEmbedding(patch_size=p, embedding_dim=D)
    layer(images)
    randomize_weights(layer)
    out = _np(layer(images))
    kernel = _np(layer.projection.kernel)  # (P, P, C, D)
    bias = _np(layer.projection.bias)
    patches = []
    for row in range(2):  # row-major
        for col in range(3):
            patch = images[:, row * p : (row + 1) * p, col * p : (col + 1) * p, :]  # (B, P, P, C)
            patches.append(patch.reshape(B, p * p * channels))
    patches = np.stack(patches, 1)  # (B, N, P·P·C)
    expected = patches @ kernel.reshape(p * p * channels, D) + bias
    assert out.shape == (B, 6, D)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_patch_embedding_rejects_sizes_not_divisible_by_patch_size():
    with pytest.raises(ValueError, match="width=5, patch_size=2"):
        ka.PatchEmbedding(2, D)(_x(1, 4, 5, 3))
    with pytest.raises(ValueError, match="height=3, patch_size=2"):
        ka.PatchEmbedding(2, D)(_x(1, 3, 4, 3))


def test_class_token_prepends_the_same_learned_vector():
    layer = ka.ClassToken()
    x = _x(3, L, D)
    layer(x)
    randomize_weights(layer)
    out = _np(layer(x))
    token = _np(layer.token).reshape(D)
    assert out.shape == (3, L + 1, D)
    np.testing.assert_array_equal(out[:, 0], np.broadcast_to(token, (3, D)))
    np.testing.assert_array_equal(out[:, 1:], x)
    inputs = keras.Input((None, D))
    assert tuple(layer(inputs).shape) == (None, None, D)


@pytest.mark.parametrize("masked", [False, True])
def test_sequence_pooling_matches_numpy(masked):
    """α = softmax(x w) over the tokens, z = Σ_t α_t x_t (SeqPool)."""
    x = _x(B, L, D)
    layer = ka.SequencePooling()
    layer(x)
    randomize_weights(layer)
    mask = PADDING if masked else None
    out, weights = layer(x, mask=mask, return_attention_scores=True)
    assert [w.name for w in layer.weights] == ["kernel"]  # no bias: the softmax cancels it
    scores = (x @ _np(layer.kernel))[..., 0]  # (B, L)
    expected_weights = np_masked_softmax(scores, mask)
    np.testing.assert_allclose(_np(weights), expected_weights, atol=1e-6)
    np.testing.assert_allclose(_np(out), np.einsum("bt,btd->bd", expected_weights, x), atol=1e-5)
    if masked:
        assert np.all(_np(weights)[~PADDING] == 0)
    # A Keras mask from the previous layer is used the same way.
    embedded = keras.layers.Masking(0.0)(x * PADDING[..., None])
    np.testing.assert_allclose(_np(layer(embedded)), _np(layer(x * PADDING[..., None], mask=PADDING)),
                               atol=1e-6)


# === Bahdanau ===


def np_bahdanau(layer, query, value, key=None, mask=None):
    """e = v_a · tanh(W_a s + U_a h), α = softmax(e), c = Σ α h; query (B, T, Dq)."""
    key = value if key is None else key
    projected_query = query @ _np(layer.query_kernel)  # (B, T, U)
    projected_key = key @ _np(layer.key_kernel)  # (B, S, U)
    features = np.tanh(projected_query[:, :, None, :] + projected_key[:, None, :, :])
    scores = features @ _np(layer.score_kernel)  # (B, T, S)
    weights = np_masked_softmax(scores, None if mask is None else mask[:, None, :])
    return weights @ value, weights


@pytest.mark.parametrize("single_step", [True, False], ids=["state", "sequence"])
def test_bahdanau_matches_numpy(single_step):
    query = _x(B, 7) if single_step else _x(B, 3, 7)
    value, key = _x(B, L, 4, seed=1), _x(B, L, 3, seed=2)
    layer = ka.BahdanauAttention(units=6)
    context, weights = layer(
        query, value, key=key, value_mask=PADDING, return_attention_scores=True
    )
    query3 = query[:, None] if single_step else query
    expected_context, expected_weights = np_bahdanau(layer, query3, value, key, PADDING)
    if single_step:
        expected_context, expected_weights = expected_context[:, 0], expected_weights[:, 0]
    assert tuple(context.shape) == expected_context.shape
    np.testing.assert_allclose(_np(context), expected_context, atol=1e-5)
    np.testing.assert_allclose(_np(weights), expected_weights, atol=1e-6)
    np.testing.assert_allclose(_np(weights).sum(-1), 1.0, atol=1e-6)
    # Without key, the value is the key.
    keyless = ka.BahdanauAttention(units=6)
    out = keyless(query3, value)
    np.testing.assert_allclose(_np(out), np_bahdanau(keyless, query3, value)[0], atol=1e-5)


def test_bahdanau_value_mask():
    layer = ka.BahdanauAttention(units=6)
    query, value = _x(B, 7), _x(B, L, 4, seed=1)
    context, weights = layer(query, value, value_mask=PADDING, return_attention_scores=True)
    np.testing.assert_array_equal(_np(weights)[~PADDING], 0.0)
    changed = value.copy()
    changed[~PADDING] = _x(int((~PADDING).sum()), 4, seed=5) * 100
    np.testing.assert_allclose(
        _np(layer(query, changed, value_mask=PADDING)), _np(context), atol=1e-6
    )
    assert not np.allclose(_np(layer(query, changed)), _np(context), atol=1e-3)
    # The value's Keras mask is the default value_mask.
    values = keras.Input((L, 4))
    states = keras.Input((7,))
    masked = keras.layers.Masking(mask_value=0.0)(values)
    model = keras.Model([states, values], layer(states, masked))
    zeroed = np.where(PADDING[..., None], value, 0.0).astype("float32")
    np.testing.assert_allclose(_np(model([query, zeroed])), _np(context), atol=1e-6)


def test_bahdanau_all_masked_gives_zeros():
    layer = ka.BahdanauAttention(units=6)
    query, value = _x(B, 7), _x(B, L, 4, seed=1)
    nothing = np.zeros((B, L), bool)
    context, weights = layer(query, value, value_mask=nothing, return_attention_scores=True)
    np.testing.assert_array_equal(_np(context), 0.0)
    np.testing.assert_array_equal(_np(weights), 0.0)
    _, grads = backends.gradients(
        lambda query, value: keras.ops.sum(layer(query, value, value_mask=nothing)),
        [query, value], layer.trainable_weights,
    )
    for gradient in grads:
        assert np.all(np.isfinite(gradient))


def test_bahdanau_projected_key_gives_identical_results():
    layer = ka.BahdanauAttention(units=6)
    query, value, key = _x(B, 3, 7), _x(B, L, 4, seed=1), _x(B, L, 3, seed=2)
    fresh = layer(query, value, key=key, value_mask=PADDING, return_attention_scores=True)
    projected = layer.project_key(key)
    assert tuple(projected.shape) == (B, L, 6)
    cached = layer(
        query, value, value_mask=PADDING, projected_key=projected, return_attention_scores=True
    )
    for a, b in zip(fresh, cached):
        np.testing.assert_array_equal(_np(a), _np(b))
    # Step by step with the cached keys equals the whole sequence of queries.
    for t in range(3):
        step = layer(query[:, t], value, value_mask=PADDING, projected_key=projected)
        np.testing.assert_allclose(_np(step), _np(fresh[0])[:, t], atol=1e-6)


def test_bahdanau_rejects_wrong_shapes():
    layer = ka.BahdanauAttention(units=6)
    layer(_x(B, 7), _x(B, L, 4))
    with pytest.raises(ValueError, match="7"):
        layer(_x(B, 5), _x(B, L, 4))
    with pytest.raises(ValueError, match="same length"):
        layer(_x(B, 7), _x(B, L, 4), key=_x(B, L + 1, 4))
    with pytest.raises(ValueError, match=r"\(B, Dq\) or \(B, T, Dq\)"):
        ka.BahdanauAttention(units=6)(_x(B, 1, 1, 7), _x(B, L, 4))
    with pytest.raises(ValueError, match=r"`value` must have shape \(B, S, D\)"):
        ka.BahdanauAttention(units=6)(_x(B, 7), _x(B, 4))


# === Schedule ===


def np_schedule(step, d_model, warmup, scale=1.0):
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def test_transformer_schedule_matches_the_formula():
    schedule = ka.TransformerSchedule(d_model=512, warmup_steps=4000)
    for step in (1, 4000, 8000, 100_000):
        got = float(_np(schedule(step - 1)))  # iteration = step - 1
        assert got == pytest.approx(np_schedule(step, 512, 4000), rel=1e-5)
    scaled = ka.TransformerSchedule(d_model=64, warmup_steps=10, scale=2.0)
    assert float(_np(scaled(4))) == pytest.approx(np_schedule(5, 64, 10, 2.0), rel=1e-5)


def test_transformer_schedule_peaks_at_warmup():
    schedule = ka.TransformerSchedule(d_model=64, warmup_steps=50)
    rates = _np(schedule(np.arange(200)))
    assert int(np.argmax(rates)) == 49  # iteration 49 is step 50
    assert (np.diff(rates[:50]) > 0).all()
    assert (np.diff(rates[49:]) < 0).all()
    assert rates[0] > 0


def test_transformer_schedule_config_and_optimizer():
    schedule = ka.TransformerSchedule(d_model=32, warmup_steps=10, scale=0.5)
    config = schedule.get_config()
    assert config == {"d_model": 32, "warmup_steps": 10, "scale": 0.5}
    clone = ka.TransformerSchedule.from_config(config)
    assert float(_np(clone(3))) == float(_np(schedule(3)))
    restored = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(schedule)
    )
    assert isinstance(restored, ka.TransformerSchedule) and restored.get_config() == config

    variable = keras.Variable(np.ones(3, "float32"))
    optimizer = keras.optimizers.Adam(schedule)
    optimizer.build([variable])
    for iteration in range(3):
        assert float(_np(optimizer.learning_rate)) == pytest.approx(
            np_schedule(iteration + 1, 32, 10, 0.5), rel=1e-5
        )
        optimizer.apply_gradients([(keras.ops.ones(3, "float32"), variable)])
    copy = keras.optimizers.Adam.from_config(optimizer.get_config())  # a fresh optimizer
    assert float(_np(copy.learning_rate)) == pytest.approx(np_schedule(1, 32, 10, 0.5), rel=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_model": 0}, "d_model"),
        ({"d_model": 64.0}, "d_model"),
        ({"d_model": 64, "warmup_steps": 0}, "warmup_steps"),
        ({"d_model": 64, "scale": 0.0}, "scale"),
    ],
)
def test_transformer_schedule_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.TransformerSchedule(**kwargs)


# === Loss and metric ===


def np_masked_cross_entropy(
    labels, predictions, pad_id=0, smoothing=0.0, from_logits=True, weights=None
):
    if from_logits:
        shifted = predictions - predictions.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    else:
        log_probs = np.log(np.clip(predictions, 1e-7, 1.0))
    vocabulary = predictions.shape[-1]
    target = (1 - smoothing) * np.eye(vocabulary)[labels] + smoothing / vocabulary
    per_token = -(target * log_probs).sum(-1)
    mask = (labels != pad_id).astype("float64")
    if weights is not None:
        mask = mask * np.broadcast_to(
            weights.reshape(weights.shape + (1,) * (2 - weights.ndim)), mask.shape
        )
    return (per_token * mask).sum() / mask.sum(), per_token * (labels != pad_id)


LABELS = np.array([[3, 1, 4, 0, 0], [2, 2, 0, 0, 0], [5, 1, 3, 2, 4]], dtype="int32")
LOGITS = _x(3, 5, 6, seed=11) * 2


@pytest.mark.parametrize("from_logits", [True, False])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_matches_numpy(from_logits, smoothing):
    predictions = LOGITS if from_logits else _np(keras.ops.softmax(LOGITS))
    loss = ka.MaskedSparseCategoricalCrossentropy(
        label_smoothing=smoothing, from_logits=from_logits
    )
    expected, _ = np_masked_cross_entropy(LABELS, predictions, 0, smoothing, from_logits)
    assert float(_np(loss(LABELS, predictions))) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_loss_equals_keras_without_padding(smoothing):
    labels = np.where(LABELS == 0, 1, LABELS)  # no padding
    ours = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)(labels, LOGITS)
    reference = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    theirs = reference(np.eye(6)[labels], LOGITS)
    assert float(_np(ours)) == pytest.approx(float(_np(theirs)), rel=1e-5)
    if smoothing == 0.0:
        sparse = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, LOGITS)
        assert float(_np(ours)) == pytest.approx(float(_np(sparse)), rel=1e-5)


def test_loss_ignores_padding():
    loss = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    base = float(_np(loss(LABELS, LOGITS)))
    changed = LOGITS.copy()
    changed[LABELS == 0] = _x(int((LABELS == 0).sum()), 6, seed=4) * 10
    assert float(_np(loss(LABELS, changed))) == pytest.approx(base, rel=1e-6)
    # Extra padded positions change nothing either (a token-level mean over real tokens).
    longer_labels = np.concatenate([LABELS, np.zeros((3, 4), "int32")], 1)
    longer_logits = np.concatenate([LOGITS, _x(3, 4, 6, seed=9)], 1)
    assert float(_np(loss(longer_labels, longer_logits))) == pytest.approx(base, rel=1e-6)
    # A pad_id other than 0.
    shifted = ka.MaskedSparseCategoricalCrossentropy(pad_id=5, label_smoothing=0.1)
    expected, _ = np_masked_cross_entropy(LABELS, LOGITS, pad_id=5, smoothing=0.1)
    assert float(_np(shifted(LABELS, LOGITS))) == pytest.approx(expected, rel=1e-5)


def test_loss_sample_weight():
    loss = ka.MaskedSparseCategoricalCrossentropy()
    per_sequence = np.array([1.0, 0.0, 3.0], "float32")
    expected, _ = np_masked_cross_entropy(LABELS, LOGITS, weights=per_sequence)
    got = float(_np(loss(LABELS, LOGITS, sample_weight=per_sequence)))
    assert got == pytest.approx(expected, rel=1e-5)
    per_token = np.random.default_rng(2).uniform(0.5, 2.0, LABELS.shape).astype("float32")
    expected, _ = np_masked_cross_entropy(LABELS, LOGITS, weights=per_token)
    got = float(_np(loss(LABELS, LOGITS, sample_weight=per_token)))
    assert got == pytest.approx(expected, rel=1e-5)


def test_loss_reductions():
    _, per_token = np_masked_cross_entropy(LABELS, LOGITS, smoothing=0.1)
    none = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, reduction=None)
    got = _np(none(LABELS, LOGITS))
    assert got.shape == LABELS.shape
    np.testing.assert_allclose(got, per_token, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[LABELS == 0], 0.0)
    total = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1, reduction="sum")
    assert float(_np(total(LABELS, LOGITS))) == pytest.approx(per_token.sum(), rel=1e-5)


def test_loss_all_padding_is_zero():
    loss = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    value = float(_np(loss(np.zeros((2, 3), "int32"), _x(2, 3, 6))))
    assert value == 0.0


def test_loss_config_round_trip():
    loss = ka.MaskedSparseCategoricalCrossentropy(pad_id=2, label_smoothing=0.1, from_logits=False)
    clone = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(clone, ka.MaskedSparseCategoricalCrossentropy)
    assert (clone.pad_id, clone.label_smoothing, clone.from_logits) == (2, 0.1, False)


def test_masked_accuracy_accumulates_token_counts():
    metric = ka.MaskedAccuracy()
    other_labels = np.array([[1, 0, 0, 0, 0], [2, 3, 0, 0, 0]], dtype="int32")
    other_logits = _x(2, 5, 6, seed=12)
    batches = [(LABELS, LOGITS), (other_labels, other_logits)]
    correct = count = 0
    batch_means = []
    for labels, logits in batches:
        metric.update_state(labels, logits)
        real = labels != 0
        hits = (logits.argmax(-1) == labels) & real
        correct, count = correct + hits.sum(), count + real.sum()
        batch_means.append(hits.sum() / real.sum())
    assert float(_np(metric.result())) == pytest.approx(correct / count, rel=1e-6)
    assert not np.isclose(correct / count, np.mean(batch_means))  # the data can tell them apart
    assert 0 < correct < count
    metric.reset_state()
    assert float(_np(metric.result())) == 0.0


# === Bad input ===


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: ka.MultiHeadAttention(num_heads=0, key_dim=4), "num_heads"),
        (lambda: ka.MultiHeadAttention(num_heads=2, key_dim=-1), "key_dim"),
        (lambda: ka.MultiHeadAttention(num_heads=2, key_dim=4, dropout=1.0), "dropout"),
        (lambda: ka.MultiHeadAttention(num_heads=2, key_dim=4, scoring="cosine"), "scoring"),
        (lambda: ka.BahdanauAttention(units=0), "units"),
        (lambda: ka.SinusoidalPositionalEncoding(max_wavelength=0), "max_wavelength"),
        (lambda: ka.PositionEmbedding(sequence_length=0), "sequence_length"),
        (lambda: ka.TokenAndPositionEmbedding(0, 8, D), "vocabulary_size"),
        (lambda: ka.TokenAndPositionEmbedding(10, -8, D), "sequence_length"),
        (lambda: ka.TokenAndPositionEmbedding(10, 8, 0), "embedding_dim"),
        (lambda: ka.TokenAndPositionEmbedding(10, 8, D, dropout=1.0), "dropout"),
        (lambda: ka.TokenAndPositionEmbedding(10, 8, D, dropout=-0.1), "dropout"),
        (lambda: ka.TokenAndPositionEmbedding(10, 8, D, positional="rotary"), "positional"),
        (lambda: ka.PositionwiseFeedForward(0), "intermediate_dim"),
        (lambda: ka.PositionwiseFeedForward(16, output_dim=0), "output_dim"),
        (lambda: ka.PositionwiseFeedForward(16, dropout=1.5), "dropout"),
        (lambda: ka.TransformerEncoderBlock(0, 16), "num_heads"),
        (lambda: ka.TransformerEncoderBlock(2, 0), "intermediate_dim"),
        (lambda: ka.TransformerEncoderBlock(2, 16, dropout=1.0), "dropout"),
        (lambda: ka.TransformerDecoderBlock(2, 16, attention_dropout=-0.5), "attention_dropout"),
        (lambda: ka.TransformerDecoderBlock(2, 16, scoring="cosine"), "scoring"),
        (lambda: ka.PatchEmbedding(0, D), "patch_size"),
        (lambda: ka.PatchEmbedding(2, 0), "embedding_dim"),
        (lambda: ka.MaskedSparseCategoricalCrossentropy(label_smoothing=1.0), "label_smoothing"),
    ],
)
def test_bad_arguments_raise(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ka.SinusoidalPositionalEncoding()(_x(B, D)), r"\(B, L, D\)"),
        (lambda: ka.PositionEmbedding(8)(_x(B, D)), r"\(B, L, D\)"),
        (lambda: ka.TokenAndPositionEmbedding(10, 8, D)(IDS[..., None]), r"ids of shape \(B, L\)"),
        (lambda: ka.PatchEmbedding(2, D)(_x(B, 4, 4)), r"\(B, H, W, C\)"),
        (lambda: ka.ClassToken()(_x(B, D)), r"\(B, N, D\)"),
        (lambda: ka.SequencePooling()(_x(B, D)), r"\(B, T, D\)"),
        (lambda: ka.MultiHeadAttention(2, 4)(_x(B, D), _x(B, L, D)), "rank 3"),
        (lambda: ka.TransformerEncoderBlock(2, 16)(_x(B, D)), "rank 3"),
        (lambda: ka.MaskedSparseCategoricalCrossentropy()(LABELS, LOGITS[..., 0]), "one more axis"),
    ],
)
def test_bad_ranks_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# === Learning works ===


@pytest.mark.large
def test_tiny_transformer_learns_to_copy():
    """Encoder-decoder with one tied embedding overfits one batch of a copy task."""
    vocabulary, length, width, batch = 10, 6, 32, 16
    rng = np.random.default_rng(0)
    source = rng.integers(2, vocabulary, size=(batch, length)).astype("int32")
    source[::4, -2:] = 0  # some padding
    decoder_input = np.concatenate([np.ones((batch, 1), "int32"), source[:, :-1]], 1)

    embedding = ka.TokenAndPositionEmbedding(vocabulary, length, width, mask_zero=True)
    encoder_ids = keras.Input((length,), dtype="int32")
    decoder_ids = keras.Input((length,), dtype="int32")
    encoded = ka.TransformerEncoderBlock(4, 64)(embedding(encoder_ids))
    decoded = ka.TransformerDecoderBlock(4, 64)(embedding(decoder_ids), encoded)
    logits = embedding(decoded, reverse=True)  # weight tying: x Eᵀ
    model = keras.Model([encoder_ids, decoder_ids], logits)
    assert sum("embeddings" in w.path for w in model.weights) == 1  # one shared matrix

    model.compile(keras.optimizers.Adam(3e-3), ka.MaskedSparseCategoricalCrossentropy())
    model.optimizer.build(model.trainable_variables)  # before fit: its step traced once
    inputs = (source, decoder_input)
    initial = model.evaluate(inputs, source, batch_size=batch, verbose=0)
    # 150 steps on the one batch, in one epoch (not 150 epochs of one step: each epoch
    # costs a fresh iterator and the callbacks' work): the batch repeated, in order.
    steps = 150
    repeated = tuple(np.tile(array, (steps, 1)) for array in (*inputs, source))
    model.fit(repeated[:2], repeated[2], batch_size=batch, shuffle=False, epochs=1, verbose=0)
    final = model.evaluate(inputs, source, batch_size=batch, verbose=0)
    assert final <= 0.1 * initial, (initial, final)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_positions_past_sequence_length_raise_value_error(positional):
    layer = ka.TokenAndPositionEmbedding(20, 8, 4, positional=positional)
    ids = np.ones((1, 3), "int32")
    layer(ids, start_index=5)  # positions 5..7: fine
    with pytest.raises(ValueError, match="sequence_length=8.*start_index=6"):
        layer(ids, start_index=6)
    with pytest.raises(ValueError, match="sequence_length=8"):
        ka.PositionEmbedding(8)(np.zeros((1, 3, 4), "float32"), start_index=7)
