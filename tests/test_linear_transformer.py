"""The Transformer with `attention="linear"`: blocks, cached decoding with a constant state, export.

References: the block's full call (for its cached steps), the full model on the whole
prefix (for the cached decoder's logits and tokens), in-process decoding (for the
exported SavedModel).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
import zoo
from zoo import decode

V = 16
SIZES = dict(
    num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=4, intermediate_dim=64,
    vocabulary_size=V, max_length=64, attention="linear",
)


def _source(rng, lengths=(7, 4, 1, 6)):
    source = np.zeros((len(lengths), max(lengths)), "int32")
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(4, V, size=length)
    return source


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    model = zoo.get("transformer-tiny", compile=False, **SIZES)
    rng = np.random.default_rng(1)
    for weight in model.weights:  # wider than the initialisers, so the tokens vary
        if len(weight.shape) >= 2:
            fan_in = weight.shape[-1] if "embedding" in weight.path else weight.shape[0]
            weight.assign(rng.normal(0, 2.0 / np.sqrt(fan_in), weight.shape).astype("float32"))
    return model


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_block_cache_matches_call(norm_first):
    rng = np.random.default_rng(0)
    block = ka.TransformerDecoderBlock(2, 16, norm_first=norm_first, attention="linear")
    y = rng.normal(size=(3, 5, 8)).astype("float32")
    x = rng.normal(size=(3, 4, 8)).astype("float32")
    encoder_mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], bool)
    full = block(y, x, encoder_padding_mask=encoder_mask)
    assert isinstance(block.self_attention, ka.LinearAttention)
    cache = block.empty_self_attention_cache(3, 5)
    shapes = [tuple(c.shape) for c in cache]
    assert shapes == [(3, 2, 4, 4), (3, 2, 4)]  # (S, z): no position axis
    cross = block.compute_cross_attention_cache(x)
    steps = []
    for t in range(5):
        out, cache = block.call_with_cache(y[:, t : t + 1], cache, t, cross, encoder_mask)
        assert [tuple(c.shape) for c in cache] == shapes
        steps.append(out)
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    two_at_once, _ = block.call_with_cache(
        y[:, :2], block.empty_self_attention_cache(3, 5), 0, cross, encoder_mask
    )
    np.testing.assert_allclose(two_at_once, full[:, :2], atol=1e-5)


def test_encoder_block_linear_config_round_trip_and_no_scores():
    block = ka.TransformerEncoderBlock(2, 16, attention="linear")
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    output = block(x, padding_mask=mask)
    assert block.get_config()["attention"] == "linear"
    clone = ka.TransformerEncoderBlock.from_config(block.get_config())
    clone(x, padding_mask=mask)
    clone.set_weights(block.get_weights())
    np.testing.assert_allclose(clone(x, padding_mask=mask), output, atol=1e-6)
    with pytest.raises(ValueError, match="return_attention_scores"):
        block(x, return_attention_scores=True)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"attention": "performer"}, "attention='performer'"),
        ({"attention": "linear", "scoring": "additive"}, "scoring='additive'"),
        ({"attention": "linear", "attention_dropout": 0.1}, "attention_dropout=0.1"),
    ],
)
def test_blocks_reject_bad_attention(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.TransformerDecoderBlock(2, 16, **kwargs)


def test_config_validates_attention():
    with pytest.raises(ValueError, match="attention='flash'"):
        zoo.config("transformer-tiny", attention="flash")
    with pytest.raises(ValueError, match="attention_dropout=0.1"):
        zoo.config("transformer-tiny", attention="linear", attention_dropout=0.1)
    assert zoo.config("transformer-tiny").attention == "softmax"


def test_same_parameter_count_as_softmax(model):
    assert model.count_params() == zoo.config("transformer-tiny", **SIZES).num_params()


def test_cached_step_logits_match_full_model(model):
    rng = np.random.default_rng(2)
    source = _source(rng)
    target = np.concatenate([np.full((4, 1), decode.START_ID), rng.integers(1, V, (4, 7))], 1)
    target = target.astype("int32")
    expected = np.asarray(model({"source": source, "target": target}, training=False))
    stepper = decode._stepper(model, use_cache=True)
    assert isinstance(stepper, decode._TransformerStep)
    state = stepper.prepare(tf.constant(source), 1, target.shape[1])
    for t in range(target.shape[1]):
        logits, state = stepper.step(tf.constant(target[:, t]), tf.constant(t), state)
        np.testing.assert_allclose(logits, expected[:, t], atol=2e-4, rtol=1e-4)


@pytest.mark.large
def test_cached_decoding_equals_uncached_also_under_xla(model):
    source = _source(np.random.default_rng(3))
    cached = decode.greedy_decode(model, source, max_length=8).numpy()
    uncached = decode.greedy_decode(model, source, max_length=8, use_cache=False).numpy()
    np.testing.assert_array_equal(cached, uncached)
    one_beam, _ = decode.beam_search(model, source, beam_size=1, max_length=8)
    np.testing.assert_array_equal(one_beam, cached)  # the state is reordered with the beams
    beam, scores = decode.beam_search(model, source, beam_size=3, max_length=8)

    @tf.function(jit_compile=True)
    def compiled(source):
        return (decode.greedy_decode(model, source, max_length=8),
                *decode.beam_search(model, source, beam_size=3, max_length=8))

    xla_greedy, xla_beam, xla_scores = compiled(tf.constant(source))
    np.testing.assert_array_equal(xla_greedy, cached)
    np.testing.assert_array_equal(xla_beam, beam)
    np.testing.assert_allclose(xla_scores, scores, atol=1e-5)


@pytest.mark.large
def test_saved_keras_model_and_export_decode_the_same(model, tmp_path):
    from zoo import text

    source = _source(np.random.default_rng(4))
    model.save(tmp_path / "linear.keras")
    loaded = keras.saving.load_model(tmp_path / "linear.keras")
    block = loaded.get_layer("decoder_block_0")
    assert block.attention == "linear" and isinstance(block.self_attention, ka.LinearAttention)
    np.testing.assert_array_equal(
        decode.greedy_decode(loaded, source, max_length=10),
        decode.greedy_decode(model, source, max_length=10),
    )
    words = ["one", "two", "three", "four", "five", "six", "seven"]
    tokenizer = text.WordPieceTokenizer(["[PAD]", "[UNK]", "[START]", "[END]"] + words
                                        + [f"w{i}" for i in range(V - 4 - len(words))])
    written = zoo.export(model, tmp_path / "saved", tokenizer=tokenizer, max_length=10,
                         beam_size=2)
    served = tf.saved_model.load(str(written))
    texts = tf.constant(["one two three", "four", "five six seven one"])
    result = served.signatures["greedy"](text=texts)
    ids = tokenizer.tokenize(texts)
    expected = decode.greedy_decode(model, _with_end(ids), max_length=10).numpy()
    tokens = result["tokens"].numpy()
    np.testing.assert_array_equal(tokens[:, : expected.shape[1]], expected)


def _with_end(ids):
    """Token ids `(B, S)` with [END] appended to each row, as the export's preprocessing does."""
    rows = [list(row) + [decode.END_ID] for row in ids.to_list()]
    width = max(len(row) for row in rows)
    return np.array([row + [0] * (width - len(row)) for row in rows], "int32")
