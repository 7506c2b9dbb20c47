"""The CTranslate2 export's weight mapping (`zoo.export.ctranslate2.variables`) without
CTranslate2: a numpy Transformer that computes what CTranslate2's does (its `TransformerSpec`:
pre- or post-norm, fused attention projections, embeddings scaled then positions added, the
projection's bias) gives the Keras model's logits from the exported variables, for each choice
the zoo's config makes. Also the refusals (RNNsearch, ConvS2S, ViT, copying, linear attention)
and the missing-package line, which need no CTranslate2 either. CTranslate2 itself runs in
tests/test_export_deploy.py (`make test-deploy`)."""

import pathlib
import re

import missing_modules
import numpy as np
import pytest
import scipy.special

import zoo
from zoo.errors import ZooError
from zoo.export import ctranslate2 as specs
from zoo.export import ctranslate2_export

from zoo_cli import run_main

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
V = 23
SMALL = dict(num_encoder_layers=2, num_decoder_layers=2, d_model=16, num_heads=2,
             intermediate_dim=24, vocabulary_size=V, max_length=12)
CONFIGS = {
    "post-norm, sinusoidal, relu, shared and tied": {},
    "pre-norm, learned, gelu, separate and untied": dict(
        norm_first=True, positional="learned", activation="gelu", source_vocabulary_size=V,
        target_vocabulary_size=V + 4, tie_embeddings=False),
    "Marian's: halves, swish, unscaled, logits bias, padding last": dict(
        positional_layout="halves", activation="swish", scale_embeddings=False,
        final_logits_bias=True, pad_id=V - 1, start_id=V - 1, end_id=0, layer_norm_epsilon=1e-5),
    "pre-norm, separate vocabularies, tied target": dict(
        norm_first=True, source_vocabulary_size=V + 2, target_vocabulary_size=V,
        tie_embeddings=True),
}


def randomized(overrides):
    """A small Transformer whose norms and biases are random too (not ones and zeros)."""
    model = zoo.get("transformer-tiny", compile=False, **SMALL, **overrides)
    rng = np.random.default_rng(0)
    for weight in model.weights:
        if any(part in weight.path for part in ("bias", "beta", "gamma")):
            value = rng.normal(0, 0.3, weight.shape) + (1 if "gamma" in weight.path else 0)
            weight.assign(value.astype("float32"))
    return model


# === CTranslate2's Transformer, in numpy ===


def layer_norm(x, values, prefix, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * values[f"{prefix}/gamma"] + values[f"{prefix}/beta"]


def linear(x, values, prefix):
    return x @ values[f"{prefix}/weight"].T + values[f"{prefix}/bias"]


def attention(query, memory, values, prefix, heads, causal):
    """`linear_0` q, k, v (self) or q then `linear_1` k, v (cross); the last linear the output."""
    if memory is None:
        q, k, v = np.split(linear(query, values, f"{prefix}/linear_0"), 3, -1)
        out = f"{prefix}/linear_1"
    else:
        q = linear(query, values, f"{prefix}/linear_0")
        k, v = np.split(linear(memory, values, f"{prefix}/linear_1"), 2, -1)
        out = f"{prefix}/linear_2"
    split = lambda x: x.reshape(x.shape[0], heads, -1).transpose(1, 0, 2)  # noqa: E731
    q, k, v = split(q), split(k), split(v)  # (N, L, H)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[1:], bool)), scores, -np.inf)
    weights = scipy.special.softmax(scores, -1)
    context = (weights @ v).transpose(1, 0, 2).reshape(query.shape[0], -1)
    return linear(context, values, out)


ACTIVATIONS = {"RELU": lambda x: np.maximum(x, 0),
               "GELU": lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2))),
               "SWISH": lambda x: x * scipy.special.expit(x)}


def sublayer(x, values, prefix, pre_norm, epsilon, fn):
    """CTranslate2's residual block: `x + fn(LN(x))` (pre-norm) or `LN(x + fn(x))`."""
    norm = f"{prefix}/layer_norm"
    if pre_norm:
        return x + fn(layer_norm(x, values, norm, epsilon))
    return layer_norm(x + fn(x), values, norm, epsilon)


def ct2_logits(structure, values, source, target):
    """Logits (T, V) of one unpadded source and decoder input (id lists)."""
    pre, epsilon, heads = structure["pre_norm"], structure["layer_norm_epsilon"], structure["num_heads"]
    activation = ACTIVATIONS[structure["activation"]]

    def embed(side, name, ids):
        x = values[f"{side}/{name}/weight"][ids] * values[f"{side}/scale_embeddings"]
        return x + values[f"{side}/position_encodings/encodings"][:len(ids)]

    def ffn(x, prefix):
        return linear(activation(linear(x, values, f"{prefix}/linear_0")), values, f"{prefix}/linear_1")

    x = embed("encoder", "embeddings_0", source)
    for i in range(structure["num_encoder_layers"]):
        p = f"encoder/layer_{i}"
        x = sublayer(x, values, f"{p}/self_attention", pre, epsilon,
                     lambda h, p=p: attention(h, None, values, f"{p}/self_attention", heads, False))
        x = sublayer(x, values, f"{p}/ffn", pre, epsilon, lambda h, p=p: ffn(h, f"{p}/ffn"))
    if pre:
        x = layer_norm(x, values, "encoder/layer_norm", epsilon)
    y = embed("decoder", "embeddings", target)
    for i in range(structure["num_decoder_layers"]):
        p = f"decoder/layer_{i}"
        y = sublayer(y, values, f"{p}/self_attention", pre, epsilon,
                     lambda h, p=p: attention(h, None, values, f"{p}/self_attention", heads, True))
        y = sublayer(y, values, f"{p}/attention", pre, epsilon,
                     lambda h, p=p: attention(h, x, values, f"{p}/attention", heads, False))
        y = sublayer(y, values, f"{p}/ffn", pre, epsilon, lambda h, p=p: ffn(h, f"{p}/ffn"))
    if pre:
        y = layer_norm(y, values, "decoder/layer_norm", epsilon)
    return linear(y, values, "decoder/projection")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_exported_variables_compute_the_models_logits(name):
    overrides = CONFIGS[name]
    model = randomized(overrides)
    pad = overrides.get("pad_id", 0)
    structure, values = specs.variables(model, pad)
    assert structure["pre_norm"] == overrides.get("norm_first", False)
    assert structure["tied_embeddings"] == overrides.get("tie_embeddings", True)
    # Two sources of different lengths in one padded batch (the zoo masks the padding; here
    # each runs alone, unpadded, as CTranslate2 runs it with its lengths).
    end, start = overrides.get("end_id", 3), overrides.get("start_id", 2)
    sources = [[5, 6, 7, 8, 9, end], [10, 11, end]]
    targets = [[start, 12, 13, 14], [start, 15, 16, 17]]
    padded = np.full((2, 6), pad, np.int32)
    for row, ids in enumerate(sources):
        padded[row, :len(ids)] = ids
    logits = np.asarray(model({"source": padded, "target": np.array(targets, np.int32)}))
    for row in range(2):
        got = ct2_logits(structure, values, sources[row], targets[row])
        others = np.arange(logits.shape[-1]) != pad
        np.testing.assert_allclose(got[:, others], logits[row][:, others], atol=1e-4, rtol=0)
        # The padding id is never generated: its logit is lowered (float32's spacing at 1e4).
        np.testing.assert_allclose(got[:, pad], logits[row][:, pad] + specs.PAD_LOGIT_BIAS,
                                   atol=2e-3, rtol=0)
    assert set(values) == set(_expected_names(structure))  # every variable of the spec, no more


def _expected_names(structure):
    """The variable names a CTranslate2 TransformerSpec of this structure holds."""
    names = []
    for side, count, embedding in (("encoder", structure["num_encoder_layers"], "embeddings_0"),
                                   ("decoder", structure["num_decoder_layers"], "embeddings")):
        names += [f"{side}/{embedding}/weight", f"{side}/position_encodings/encodings",
                  f"{side}/scale_embeddings"]
        if structure["pre_norm"]:
            names += [f"{side}/layer_norm/gamma", f"{side}/layer_norm/beta"]
        for i in range(count):
            prefix = f"{side}/layer_{i}"
            blocks = [("self_attention", 2)] + ([("attention", 3)] if side == "decoder" else [])
            for block, linears in blocks:
                names += [f"{prefix}/{block}/layer_norm/{p}" for p in ("gamma", "beta")]
                names += [f"{prefix}/{block}/linear_{j}/{p}" for j in range(linears)
                          for p in ("weight", "bias")]
            names += [f"{prefix}/ffn/layer_norm/{p}" for p in ("gamma", "beta")]
            names += [f"{prefix}/ffn/linear_{j}/{p}" for j in range(2) for p in ("weight", "bias")]
    return names + ["decoder/projection/weight", "decoder/projection/bias"]


def test_vocabularies_are_unique_and_fill_the_model():
    class Pieces:
        def get_vocabulary(self):
            return ["[PAD]", "a", "", "a", b"b"]

    assert specs.vocabulary(Pieces(), 7) == ["[PAD]", "a", "<zoo_unused_2>", "<zoo_unused_3>",
                                            "b", "<zoo_unused_5>", "<zoo_unused_6>"]


def test_translate_options_decode_as_the_export():
    options = ctranslate2_export.translate_options(4, 0.6, 128, 100, force_end=False)
    assert options == {"beam_size": 4, "length_penalty": 0.6, "max_input_length": 128,
                       "max_decoding_length": 100, "min_decoding_length": 0,
                       "return_end_token": True}
    # The forced end token is the last of max_new_tokens: CTranslate2 stops one earlier.
    assert ctranslate2_export.translate_options(4, 1.0, 64, 63, True)["max_decoding_length"] == 62


def test_models_ctranslate2_cannot_hold_are_refused_in_one_line(tmp_path):
    copying = zoo.get("transformer-tiny", compile=False, copy=True, **SMALL)
    linear_attention = zoo.get("transformer-tiny", compile=False, attention="linear", **SMALL)
    vit = zoo.get("vit-tiny", compile=False, image_size=8, channels=3, patch_size=4,
                  num_layers=1, hidden_dim=16, num_heads=2, mlp_dim=32, num_classes=4)
    for model, message in ((copying, "copying (pointer-generator)"),
                           (linear_attention, "softmax attention"), (vit, "this is a ViT")):
        with pytest.raises(ZooError, match=re.escape(message)) as raised:
            zoo.export(model, tmp_path / "out", format="ctranslate2")
        assert "\n" not in str(raised.value) and "SavedModel" in str(raised.value)
    with pytest.raises(ZooError, match="jit_compile is for SavedModels"):
        zoo.export(randomized({}), tmp_path / "out", format="ctranslate2", jit_compile=True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("run, kind", [("run_v2_seq2seq", "an RNNsearch"),
                                       ("run_v2_convs2s", "a ConvS2S")])
def test_rnnsearch_and_convs2s_runs_are_refused_in_one_line(run, kind, tmp_path):
    code, out, err = run_main("export", FIXTURES / run, "--format", "ctranslate2",
                              "--to", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("zoo export: error: export: format='ctranslate2' is for Transformer")
    assert f"this is {kind} model" in err and not (tmp_path / "out").exists()


def test_a_vit_run_and_jit_are_refused_by_the_cli(tmp_path):
    code, _, err = run_main("export", FIXTURES / "run_v1_vit", "--format", "ctranslate2",
                            "--to", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1
    assert "--format ctranslate2 is for Transformer translation runs" in err
    code, _, err = run_main("export", FIXTURES / "run_v1_transformer", "--format", "ctranslate2",
                            "--jit", "--to", tmp_path / "out")
    assert code == 2 and "--jit is for SavedModels" in err and not (tmp_path / "out").exists()


def test_a_missing_ctranslate2_says_how_to_install_it(monkeypatch, tmp_path):
    missing_modules.hide(monkeypatch, "ctranslate2")
    specs._ctranslate2.cache_clear()
    try:
        code, out, err = run_main("export", FIXTURES / "run_v1_transformer", "--format",
                                  "ctranslate2", "--to", tmp_path / "out")
    finally:
        specs._ctranslate2.cache_clear()
    assert code == 2 and err.count("\n") == 1
    assert "needs ctranslate2, which is not installed: pip install -e '.[deploy]'" in err
    assert not (tmp_path / "out").exists()
