"""Sampling (`zoo.decode.sampling`): the filters against a numpy reference, the draws against
the softmax (χ² tests with fixed seeds), the tokens against the model's logits, greedy as
T → 0, seeds, each family's cache, XLA, the export's `sample` signature in a fresh process
and `zoo predict --sample`.

The χ² tests use scipy's `chisquare`, each with a control: the same counts against a
wrong distribution must fail it.
"""

import json
import pickle
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy import special, stats
from test_convs2s import tiny_model as convs2s_model
from test_decode import END, PAD, START, padded_source, rnnsearch, transformer
from test_export import SERVE_SCRIPT, text_op_libraries

from zoo import decode, runs
from zoo.decode import sampling
from zoo.decode.sampling import Sampling

from zoo_cli import run_main

V = 16
SOURCE_LENGTHS = [7, 4, 1, 6, 7]
SENTENCES = ["dreihundertvierundzwanzig", "elf", "neunzehntausend", "zwei", "achtzig"]
P_VALUE = 1e-3  # the χ² tests' significance level


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(0)
    return {
        "transformer": transformer(),
        "gru": rnnsearch("gru"),
        "location": rnnsearch("gru", attention="location", location_filters=4,
                              location_kernel_size=5),
        "convs2s": convs2s_model(seed=3),
    }


@pytest.fixture(scope="module")
def source():
    return padded_source(np.random.default_rng(0), SOURCE_LENGTHS)


# === The filters against numpy ===


def numpy_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """The sampling distribution of each row of `logits` (float64, -inf = removed): scale by
    1/T, keep the k best (stable ranks), then the smallest prefix whose mass reaches p."""
    rows = []
    for row in np.asarray(logits, np.float64):
        scaled = (row - row[np.isfinite(row)].max()) / temperature
        order = np.argsort(-scaled, kind="stable")[: top_k or len(row)]
        weights = np.exp(scaled[order])
        weights /= weights.sum()
        kept = np.searchsorted(np.cumsum(weights), top_p) + 1 if top_p is not None else len(order)
        distribution = np.zeros(len(row))
        distribution[order[:kept]] = weights[:kept] / weights[:kept].sum()
        rows.append(distribution)
    return np.array(rows)


def kept(log_weights):
    return np.isfinite(np.asarray(log_weights))


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, None, None), (1.0, 3, None), (0.5, 5, None), (1.0, None, 0.5), (2.0, None, 0.9),
    (0.7, 6, 0.8), (1.0, 1, None), (1.0, None, 1e-6), (1.0, 40, None),
])
def test_filters_equal_numpy(temperature, top_k, top_p):
    rng = np.random.default_rng(1)
    logits = rng.normal(0.0, 2.0, (64, 30))
    logits[:, 0] = -np.inf  # a removed token (the padding id) stays removed
    logits[:4, 5] = logits[:4, 7]  # ties: the lower id ranks first
    expected = numpy_distribution(logits, temperature, top_k, top_p)
    if top_p is not None:  # no mass within float error of p: the set is unambiguous
        for row in numpy_distribution(logits, temperature, top_k):
            mass = np.cumsum(np.sort(row)[::-1])
            assert np.min(np.abs(mass - top_p)) > 1e-5
    got = sampling.filter_logits(logits.astype(np.float32), temperature, top_k or 0,
                                 top_p or 1.0)
    np.testing.assert_array_equal(kept(got), expected > 0)
    np.testing.assert_allclose(tf.nn.softmax(got).numpy(), expected, atol=1e-5)


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    logits = np.log([[0.4, 0.3, 0.2, 0.1]]).astype(np.float32)
    for p, count in [(0.05, 1), (0.39, 1), (0.41, 2), (0.65, 2), (0.75, 3), (0.95, 4), (1.0, 4)]:
        got = kept(sampling.filter_logits(logits, 1.0, 0, p))[0]
        assert got.tolist() == [True] * count + [False] * (4 - count), p
    # After top-k the mass is renormalised: of 0.4 and 0.3, 0.4 / 0.7 < 0.6 <= 0.7 / 0.7.
    assert kept(sampling.filter_logits(logits, 1.0, 2, 0.6))[0].tolist() == [True, True, False, False]
    assert kept(sampling.filter_logits(logits, 1.0, 2, 0.5))[0].tolist() == [True, False, False, False]


def test_tiny_temperatures_keep_the_arg_max_without_overflow():
    logits = np.array([[3e4, -3e4, 2.9e4, -np.inf]], np.float32)
    for temperature in (1e-30, 1e-45):  # 1e-45: a denormal (flushed to 0 by TensorFlow)
        got = sampling.filter_logits(logits, temperature, 0, 1.0).numpy()
        assert got[0, 0] == 0.0 and np.all(got[0, 1:] < -1e30), got  # no NaN, no +inf
        seeds = [sampling.step_seed(seed, 0) for seed in range(20)]
        assert {int(sampling.draw(got, seed)[0]) for seed in seeds} == {0}


def test_uniforms_are_in_the_open_interval_and_uniform():
    u = sampling.uniform([200_000], tf.constant([3, 0], tf.int64)).numpy()
    assert 0.0 < u.min() and u.max() < 1.0
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    assert stats.chisquare(counts).pvalue > P_VALUE


# === The draws against the softmax: χ² ===


def counts_of(tokens, vocabulary):
    return np.bincount(np.asarray(tokens).ravel(), minlength=vocabulary)


def assert_matches(counts, expected):
    """χ² goodness of fit on the tokens of positive probability; the others never drawn."""
    assert counts[expected == 0].sum() == 0
    support = expected > 0
    result = stats.chisquare(counts[support], counts.sum() * expected[support])
    assert result.pvalue > P_VALUE, (counts, expected, result)
    return result


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, None, None), (0.7, 4, None), (1.5, None, 0.8), (1.0, 5, 0.9),
])
def test_draws_follow_the_filtered_softmax(temperature, top_k, top_p):
    logits = np.array([-np.inf, 1.0, 0.5, 0.2, -0.3, -1.0, 0.9, 0.0], np.float32)
    n = 20_000
    batch = np.tile(logits, (n, 1))
    weights = sampling.filter_logits(batch, temperature, top_k or 0, top_p or 1.0)
    tokens = sampling.draw(weights, sampling.step_seed(11, 0))
    expected = numpy_distribution(logits[None], temperature, top_k, top_p)[0]
    counts = counts_of(tokens, len(logits))
    assert_matches(counts, expected)
    # The control: the same counts do not fit another temperature's distribution.
    other = numpy_distribution(logits[None], 2 * temperature, top_k, top_p)[0][expected > 0]
    assert stats.chisquare(counts[expected > 0], n * other / other.sum()).pvalue < 1e-6


def test_first_tokens_of_a_tiny_model_follow_its_softmax(models, source):
    """4000 copies of one source, one token each: the counts fit softmax(first logits)."""
    model, n = models["transformer"], 4000
    rows = np.repeat(source[:1], n, axis=0)
    for temperature, top_k in ((1.0, None), (0.8, 5)):
        tokens = decode.sample(model, rows, temperature=temperature, top_k=top_k, seed=5,
                               max_length=1)
        logits = model({"source": source[:1], "target": np.array([[START]], np.int32)})
        logits = np.array(logits[0], np.float64)  # (1, V), the full model's
        logits[:, PAD] = -np.inf
        expected = numpy_distribution(logits, temperature, top_k)[0]
        counts = counts_of(tokens, V)
        assert_matches(counts, expected)
    uniform = np.where(expected > 0, 1.0 / np.count_nonzero(expected), 0.0)
    assert stats.chisquare(counts[expected > 0], n * uniform[expected > 0]).pvalue < 1e-6


# === Tokens against the model's logits ===


def teacher_forced_logits(model, source, tokens):
    target = np.concatenate([np.full((len(tokens), 1), START), tokens[:, :-1]], axis=1)
    return np.asarray(model({"source": source, "target": target.astype("int32")}), np.float64)


def ranks(model, source, tokens):
    """The rank (0 = best) of each generated token among the non-padding logits, up to [END]."""
    logits = teacher_forced_logits(model, source, tokens)
    logits[..., PAD] = -np.inf
    found = []
    for row, row_logits in zip(tokens, logits):
        for t, token in enumerate(row):
            found.append(int(np.sum(row_logits[t] > row_logits[t, token])))
            if token == END:
                break
    return np.array(found)


def test_top_k_never_emits_a_token_outside_the_k_best(models):
    model = models["transformer"]
    source = padded_source(np.random.default_rng(2), [6] * 32)
    tokens = decode.sample(model, source, temperature=3.0, top_k=3, seed=1, max_length=12)
    found = ranks(model, source, tokens.numpy())
    assert found.max() <= 2 and set(found) == {0, 1, 2}, np.bincount(found)
    # The control: without top-k, as flat, tokens beyond the third come out.
    unfiltered = decode.sample(model, source, temperature=3.0, seed=1, max_length=12)
    assert ranks(model, source, unfiltered.numpy()).max() > 2


@pytest.mark.large
def test_padding_is_never_sampled_and_rows_keep_the_layout(models, source):
    for name, model in models.items():
        tokens, scores = decode.sample(model, source, temperature=5.0, seed=3, max_length=20,
                                       return_score=True)
        tokens = tokens.numpy()
        for row in tokens:
            ends = np.flatnonzero(row == END)
            n = ends[0] + 1 if len(ends) else len(row)
            assert np.all(row[:n] != PAD) and np.all(row[n:] == PAD), (name, row)
        # The score is log p(tokens | source) under the model (temperature 1, no filter).
        log_probs = special.log_softmax(teacher_forced_logits(model, source, tokens), axis=-1)
        expected = []
        for row, lp in zip(tokens, log_probs):
            ends = np.flatnonzero(row == END)
            n = ends[0] + 1 if len(ends) else len(row)
            expected.append(sum(lp[t, row[t]] for t in range(n)))
        np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-4, atol=1e-3)


# === Greedy as T -> 0, seeds, caches, XLA ===


@pytest.mark.large
@pytest.mark.parametrize("family", ["transformer", "gru", "location", "convs2s"])
def test_each_family_samples_with_its_cache_and_under_xla(models, source, family):
    model = models[family]
    greedy = decode.greedy_decode(model, source, max_length=12).numpy()
    cold = decode.sample(model, source, temperature=1e-6, seed=4, max_length=12)
    np.testing.assert_array_equal(cold, greedy)
    warm = decode.sample(model, source, temperature=2.0, seed=4, max_length=12).numpy()
    if family == "transformer":  # (each setting traces or compiles once: seconds each)
        uncached = decode.sample(model, source, temperature=2.0, seed=4, max_length=12,
                                 use_cache=False)
        np.testing.assert_array_equal(uncached, warm)  # the same logits, the same noise
        compiled = decode.sample(model, source, temperature=2.0, seed=4, max_length=12,
                                 jit_compile=True)
        np.testing.assert_array_equal(compiled, warm)  # the same Philox bits under XLA
    again = decode.sample(model, source, temperature=2.0, seed=4, max_length=12)
    other = decode.sample(model, source, temperature=2.0, seed=5, max_length=12).numpy()
    np.testing.assert_array_equal(again, warm)
    assert np.any(other != warm)
    assert np.any(warm != greedy)


def test_a_seed_traces_once_and_tensors_serve_inside_functions(models, source):
    model = models["transformer"]
    expected = decode.sample(model, source, temperature=1.5, top_p=0.9, seed=9, max_length=8)

    @tf.function(autograph=False)
    def inside(seed, temperature):
        return decode.sample(model, source, temperature, tf.constant(0), tf.constant(0.9), seed,
                             max_length=8)

    got = inside(tf.constant(9, tf.int64), tf.constant(1.5))
    np.testing.assert_array_equal(got, expected)
    # The function of this setting: not XLA, a max_length, the zoo's ids, cached, no score.
    function = sampling._FUNCTIONS[model][(False, False, START, END, True, PAD, False, False)]
    traces = function.experimental_get_tracing_count()
    decode.sample(model, source, temperature=0.5, top_k=3, seed=123, max_length=8)
    assert function.experimental_get_tracing_count() == traces


@pytest.mark.parametrize("name, value, message", [
    ("temperature", 0.0, "temperature"), ("temperature", -1.0, "temperature"),
    ("top_k", 0, "top_k"), ("top_p", 0.0, "top_p"), ("top_p", 1.5, "top_p"),
    ("seed", 2**63, "seed"), ("seed", 1.5, "seed"),
])
def test_bad_settings_are_refused(models, source, name, value, message):
    with pytest.raises(ValueError, match=message):
        decode.sample(models["transformer"], source, **{name: value})


def test_zero_temperature_equals_greedy_on_a_trained_model(numbers_run):
    run = runs.load_run(numbers_run.run_dir)
    source = runs.padded_sources(run.source_tokenizer, SENTENCES, run.max_length)
    greedy = decode.greedy_decode(run.model, source, max_length=run.max_length)
    for seed in (0, 1):
        cold = decode.sample(run.model, source, temperature=1e-6, seed=seed,
                             max_length=run.max_length)
        np.testing.assert_array_equal(cold, greedy)
    assert runs.translate(run, SENTENCES, sampling=Sampling(temperature=1e-6, seed=2)) == \
        runs.translate(run, SENTENCES, beam_size=1)


def test_marian_never_samples_its_padding_and_ends_at_the_limit():
    from test_marian import FOLDER

    from zoo.transformer.weights import marian

    model, source_tokenizer, target = marian.import_folder(FOLDER)
    ids = target.special_ids
    source = runs.padded_sources(source_tokenizer, ["The cat sees the old house."] * 8, 64)
    tokens = decode.sample(model, source, temperature=3.0, seed=0, max_length=10,
                           start_id=ids["start"], end_id=ids["end"], pad_id=ids["pad"],
                           force_end=True).numpy()
    for row in tokens:
        n = np.flatnonzero(row == ids["end"])[0] + 1  # every row ends: forced at the limit
        assert np.all(row[:n] != ids["pad"]) and np.all(row[n:] == ids["pad"])
    assert np.any(tokens[:, -1] == ids["end"])  # some row reached the limit


# === The export, in a fresh process, and `zoo predict --sample` ===


def sample_inputs(seed, temperature=1.0, top_k=0, top_p=1.0):
    return {"text": np.array([s.encode() for s in SENTENCES], dtype=object),
            "seed": np.array(seed, np.int64), "temperature": np.array(temperature, np.float32),
            "top_k": np.array(top_k, np.int32), "top_p": np.array(top_p, np.float32)}


@pytest.mark.large
def test_sample_signature_gives_the_same_output_in_a_fresh_process(numbers_run, numbers_export,
                                                                     tmp_path):
    path = numbers_export.saved_models / "1"
    calls = {
        "seed3": ("numbers", "sample", sample_inputs(3, 1.5)),
        "seed3_filtered": ("numbers", "sample", sample_inputs(3, 1.5, 4, 0.9)),
        "seed4": ("numbers", "sample", sample_inputs(4, 1.5)),
        "cold": ("numbers", "sample", sample_inputs(3, 1e-6)),
        "greedy": ("numbers", "greedy", {"text": sample_inputs(0)["text"]}),
        "bad": ("numbers", "sample", sample_inputs(3, 0.0)),
    }
    request = {"exports": {"numbers": str(path)}, "ops": {"numbers": []},
               "op_libraries": text_op_libraries(), "calls": calls}
    (tmp_path / "request.pkl").write_bytes(pickle.dumps(request))
    (tmp_path / "serve.py").write_text(SERVE_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "serve.py"), str(tmp_path / "request.pkl"),
         str(tmp_path / "report.pkl")], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    report = pickle.loads((tmp_path / "report.pkl").read_bytes())
    assert report["imported"] == [] and "sample" in report["signatures"]["numbers"]
    served = {key: value for key, value in report["results"].items()}
    texts = {key: [t.decode() for t in value["translation"]] for key, value in served.items()
             if "translation" in value}
    run = runs.load_run(numbers_run.run_dir)
    for key, settings in (("seed3", Sampling(1.5, seed=3)),
                          ("seed3_filtered", Sampling(1.5, 4, 0.9, 3))):
        assert texts[key] == runs.translate(run, SENTENCES, sampling=settings), key
    assert texts["seed3"] != texts["seed4"]
    np.testing.assert_array_equal(served["cold"]["tokens"], served["greedy"]["tokens"])
    assert served["bad"]["error"] == "InvalidArgumentError"
    assert "temperature" in served["bad"]["message"]


@pytest.mark.large
def test_predict_samples_from_the_run_and_the_export_alike(numbers_run, numbers_export):
    options = ["--sample", "--temperature", 1.5, "--top-k", 5, "--top-p", 0.95, "--seed", 7,
               "--json"]
    from_run = run_main("predict", numbers_run.run_dir, *SENTENCES, *options)
    from_export = run_main("predict", numbers_export.saved_models, *SENTENCES, *options)
    assert from_run.code == 0 and from_export.code == 0, from_export.err[-3000:]
    assert json.loads(from_run.out) == json.loads(from_export.out)
    assert {r["seed"] for r in json.loads(from_run.out)} == {7}
    drawn = run_main("predict", numbers_run.run_dir, "elf", "--sample")
    assert drawn.code == 0 and "sampled with --seed" in drawn.err


@pytest.mark.parametrize("options, message", [
    (["--temperature", 0.5], "--temperature needs --sample"),
    (["--seed", 1], "--seed needs --sample"),
    (["--sample", "--top-p", 1.5], "top_p"),
    (["--sample", "--temperature", 0], "temperature"),
])
def test_predict_refuses_bad_sampling_options_in_one_line(numbers_run, options, message):
    result = run_main("predict", numbers_run.run_dir, "elf", *options)
    assert result.code == 2 and message in result.err
    assert result.err.count("\n") == 1
