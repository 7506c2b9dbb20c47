"""Tests for zoo/export.py: TF Serving SavedModels, checked in a fresh process.

A module fixture builds tiny models (a Transformer trained a few steps on a
copy task, an RNNsearch with separate source and target tokenizers loaded from
a `.keras` file, an RGB and a grayscale ViT), exports them with `zoo.export`,
computes in-process references with `zoo.decode` and the models, then runs ONE
subprocess that loads every export the way TF Serving does: TensorFlow plus the
tensorflow-text op libraries TF Serving links, nothing else. `keras`,
`tf_keras`, the `tensorflow_text` Python package (which needs Keras), `zoo` and
`keras_attention` are made unimportable there. The subprocess calls every
signature on normal and bad input and reports outputs, errors, and which graph
ops core TensorFlow does not register.
"""

import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text
from tensorflow.core.protobuf import saved_model_pb2

import zoo
from zoo import decode, text
from zoo.datasets import pipeline
from zoo.export import translation_module

# `make test-large` (every test here uses the module's exports and their one serving process).
pytestmark = pytest.mark.large

SEED = 1234
START, END = 2, 3
MAX_LENGTH = 10
BEAM_SIZE, ALPHA = 3, 0.6

ENGLISH = [
    "one two three four five six seven eight nine ten",
    "eleven twelve thirteen fourteen fifteen",
    "the cat sat on the mat",
    "a dog and a bird",
]
GERMAN = [
    "eins zwei drei vier fünf sechs sieben acht neun zehn",
    "die katze saß auf der matte",
    "ein hund und ein vogel",
]
LONG = " ".join(ENGLISH[0].split() * 3)  # 30 words: more than MAX_LENGTH - 1 tokens
INVALID_UTF8 = b"a dog \xff\xfe and \xc3"
# What the tokenizer's UTF-8 repair makes of INVALID_UTF8: one U+FFFD per bad byte.
REPAIRED = "a dog \ufffd\ufffd and \ufffd"
TEXTS = [
    "one two three",
    "the cat sat on the mat",
    "",  # empty string: the source is [END] alone
    LONG,  # cut to MAX_LENGTH - 1 tokens
    " ".join(LONG.split()[: MAX_LENGTH - 1]),  # its first MAX_LENGTH - 1 words
    "a bird 😀 über ☃ 猫",  # emoji and other non-ASCII text: [UNK]s
    INVALID_UTF8,
    REPAIRED,
]
GERMAN_TEXTS = [
    "eins zwei drei",
    "die katze saß auf der matte",
    "",
    " ".join(GERMAN[0].split() * 3),
    "ein vogel 😀 ☃",
    b"ein hund \xff und \xc3",
]
TRANSLATION_SIGNATURES = ("serving_default", "greedy")
# The fresh process compiles 8 XLA programs (2 models x 2 signatures x 2 source buckets):
# LLVM's optimisation level 0 halves their compile time and changes no result.
FAST_XLA_FLAGS = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
CLASS_NAMES = ["cat", "dog", "bird", "fish", "frog"]

SERVE_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    # TF Serving runs no Python: nothing of Keras, tensorflow_text's Python
    # package or this repository may be needed to load and call the exports.
    BLOCKED = ("keras", "tf_keras", "tensorflow_text", "zoo", "keras_attention")
    for name in BLOCKED:
        sys.modules[name] = None  # `import name` now raises ImportError
    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    with open(sys.argv[1], "rb") as file:
        request = pickle.load(file)
    report = {"not_core_ops": {}, "signatures": {}, "results": {}}
    for name, ops in request["ops"].items():
        report["not_core_ops"][name] = sorted(op for op in ops if op_def_registry.get(op) is None)
    for library in request["op_libraries"]:  # what TF Serving's model server links
        tf.load_op_library(library)
    loaded = {}
    for name, path in request["exports"].items():
        loaded[name] = tf.saved_model.load(path)
        report["signatures"][name] = sorted(loaded[name].signatures)
    for key, (name, signature, inputs) in request["calls"].items():
        function = loaded[name].signatures[signature]
        tensors = {
            k: tf.constant(v, dtype=tf.string if v.dtype == object else None)
            for k, v in inputs.items()
        }
        try:
            report["results"][key] = {k: v.numpy() for k, v in function(**tensors).items()}
        except tf.errors.OpError as error:
            report["results"][key] = {"error": type(error).__name__, "message": error.message}
    # TF Serving's default (--xla_cpu_compilation_enabled=false) calls this:
    # requests that need an XLA compilation fail from here on.
    if request.get("calls_without_xla"):
        import ctypes, pathlib
        library = pathlib.Path(tf.__file__).parent / "libtensorflow_cc.so.2"
        ctypes.CDLL(str(library))._ZN10tensorflow21DisableXlaCompilationEv()
    for key, (name, signature, inputs) in request.get("calls_without_xla", {}).items():
        function = loaded[name].signatures[signature]
        try:
            outputs = function(text=tf.constant(inputs["text"], dtype=tf.string))
            report["results"][key] = {k: v.numpy() for k, v in outputs.items()}
        except tf.errors.OpError as error:
            report["results"][key] = {"error": type(error).__name__, "message": error.message}
    report["imported"] = sorted(
        m for m, module in sys.modules.items() if m.split(".")[0] in BLOCKED and module is not None
    )
    with open(sys.argv[2], "wb") as file:
        pickle.dump(report, file)
    """
)


# === Helpers ===


def graph_facts(export_path):
    """Op types of a SavedModel (graph and function library) and whether any
    function must be XLA-compiled (`tf.function(jit_compile=True)`)."""
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((pathlib.Path(export_path) / "saved_model.pb").read_bytes())
    graph = saved_model.meta_graphs[0].graph_def
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    attrs = [n.attr for n in nodes] + [f.attr for f in graph.library.function]
    xla = any("_XlaMustCompile" in a and a["_XlaMustCompile"].b for a in attrs)
    return sorted({node.op for node in nodes}), xla


def text_op_libraries():
    """The tensorflow-text op libraries TF Serving links (paths in this environment)."""
    directory = pathlib.Path(tensorflow_text.__file__).parent / "python" / "ops"
    return [str(directory / name) for name in zoo.export.TF_SERVING_TEXT_OP_LIBRARIES]


def source_ids(tokenizer, texts):
    """The pipeline convention in numpy: tokens[:MAX_LENGTH - 1] + [END], 0-padded."""
    rows = [ids[: MAX_LENGTH - 1] + [END] for ids in tokenizer.tokenize(texts).to_list()]
    source = np.zeros((len(rows), max(len(r) for r in rows)), np.int32)
    for index, row in enumerate(rows):
        source[index, : len(row)] = row
    return source


def stepwise_log_prob(model, source, tokens):
    """Σ_t log p(y_t | y_<t, x) up to and including [END]: one full-model call per step."""
    batch, length = tokens.shape
    target = np.full((batch, 1), START, np.int32)
    total = np.zeros(batch)
    ended = np.zeros(batch, bool)
    for t in range(length):
        logits = model({"source": source, "target": target}, training=False)
        log_probs = tf.nn.log_softmax(logits[:, -1].numpy().astype(np.float64)).numpy()
        total += np.where(ended, 0.0, log_probs[np.arange(batch), tokens[:, t]])
        ended |= tokens[:, t] == END
        target = np.concatenate([target, tokens[:, t : t + 1]], axis=1)
    return total


def to_array(texts):
    return np.array([t.encode("utf-8") if isinstance(t, str) else t for t in texts], dtype=object)


def decoded_lengths(tokens):
    """Tokens up to and including [END] per row (L when there is none)."""
    return [list(row).index(END) + 1 if END in row else len(row) for row in tokens]


def translation_case(name, model, tokenizers, texts, path, **kwargs):
    """Export, queue the subprocess calls and compute the in-process references."""
    written = zoo.export(model, path, max_length=MAX_LENGTH, beam_size=BEAM_SIZE, alpha=ALPHA, **kwargs)
    source_tokenizer, target_tokenizer = tokenizers
    source = source_ids(source_tokenizer, texts)
    greedy = decode.greedy_decode(model, source, max_length=MAX_LENGTH).numpy()
    beam, beam_scores = decode.beam_search(
        model, source, beam_size=BEAM_SIZE, alpha=ALPHA, max_length=MAX_LENGTH
    )
    beam = beam.numpy()
    # Both outputs' log-probabilities in one batch (rows are independent).
    greedy_log_prob, beam_log_prob = np.split(
        stepwise_log_prob(model, np.concatenate([source, source]), np.concatenate([greedy, beam])), 2
    )
    expected = {
        "greedy": {
            "tokens": greedy,
            "translation": target_tokenizer.detokenize(greedy).numpy(),
            "score": greedy_log_prob,
        },
        "serving_default": {
            "tokens": beam,
            "translation": target_tokenizer.detokenize(beam).numpy(),
            "score": beam_scores.numpy(),
            # The documented meaning of the beam score, from scratch.
            "score_from_log_prob": beam_log_prob
            / decode.length_penalty(np.array(decoded_lengths(beam)), ALPHA).numpy(),
        },
    }
    calls = {}
    for signature in TRANSLATION_SIGNATURES:
        calls[f"{name}/{signature}/batch"] = (name, signature, {"text": to_array(texts)})
        calls[f"{name}/{signature}/empty"] = (name, signature, {"text": to_array([])})
        for index, row in enumerate(texts):
            calls[f"{name}/{signature}/row{index}"] = (name, signature, {"text": to_array([row])})
    return written, expected, calls


def train_copy_task(model, tokenizer):
    """A few steps on "copy the sentence", so decoding ends at varied lengths."""
    rng = np.random.default_rng(SEED)
    words = " ".join(ENGLISH).split()
    pairs = []
    for _ in range(256):
        sentence = " ".join(rng.choice(words, rng.integers(1, 5)))
        pairs.append((sentence, sentence))
    dataset = pipeline.make_translation_dataset(pairs, tokenizer, tokenizer, 32, MAX_LENGTH, seed=0)
    model.fit(dataset, epochs=4, verbose=0)


def encode_png(image):
    return tf.io.encode_png(image).numpy()


def vit_probabilities(model, images):
    """float images (B, H, W, C) in [0, 255] -> softmax of the model's logits."""
    return tf.nn.softmax(model(np.asarray(images, np.float32), training=False)).numpy()


def decode_resize(data, channels, size):
    """In-process reference of the bytes pipeline: TF's own decoder channel
    conversion, then a bilinear antialiased resize to the model's size."""
    image = tf.io.decode_image(data, channels=channels, expand_animations=False)
    return tf.image.resize(tf.cast(image, tf.float32), size, antialias=True).numpy()


# === The exports and the one fresh process ===


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    keras.utils.set_random_seed(SEED)
    root = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(SEED)
    exports, expected, calls, extra = {}, {}, {}, {}

    # --- Transformer, shared vocabulary; tokenizer passed as a saved directory ---
    english = text.WordPieceTokenizer.from_corpus(ENGLISH, 80, min_frequency=1)
    sizes = dict(
        vocabulary_size=english.vocab_size, num_encoder_layers=1, num_decoder_layers=1,
        d_model=32, num_heads=2, intermediate_dim=64, max_length=MAX_LENGTH, dropout=0.0,
        warmup_steps=50,
    )
    transformer = zoo.get("transformer-tiny", **sizes)
    train_copy_task(transformer, english)
    # Trained with the jit_compile=True recipe's compile (the XLA trap).
    zoo.transformer.compile_model(transformer, zoo.config("transformer-tiny", **sizes, jit_compile=True))
    vocabulary_directory = english.save(root / "english_tokenizer")
    path, expected["transformer"], new_calls = translation_case(
        "transformer", transformer, (english, english), TEXTS, root / "saved_models" / "numbers",
        tokenizer=str(vocabulary_directory),
    )
    exports["transformer"] = path
    calls.update(new_calls)
    extra["transformer_jit_compile"] = transformer.jit_compile
    # The vocabulary files are gone: the export must carry what it needs.
    shutil.rmtree(vocabulary_directory)

    # --- RNNsearch, separate vocabularies, loaded back from a .keras file ---
    german = text.WordPieceTokenizer.from_corpus(GERMAN, 70, min_frequency=1)
    rnn = zoo.get(
        "seq2seq-bahdanau-small", compile=False, source_vocabulary_size=german.vocab_size,
        target_vocabulary_size=english.vocab_size, embedding_dim=8, encoder_units=8,
        decoder_units=8, attention_units=8, maxout_units=8,
    )
    for variable in rnn.weights:  # untrained: random weights, and [END] made likely
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
    bias = next(v for v in rnn.weights if v.path == "output_projection/bias")
    bias.assign(np.eye(english.vocab_size, dtype=np.float32)[END] * 3.0)
    rnn.save(root / "rnn.keras")
    rnn = keras.saving.load_model(root / "rnn.keras")
    path, expected["rnn"], new_calls = translation_case(
        "rnn", rnn, (german, english), GERMAN_TEXTS,
        root / "saved_models" / "rnn", tokenizer=german, target_tokenizer=english,
    )
    exports["rnn"] = path
    calls.update(new_calls)

    # --- Both again with XLA decoding inside the SavedModel (jit_compile=True) ---
    xla_cases = (
        ("transformer", transformer, {"tokenizer": english}, TEXTS),
        ("rnn", rnn, {"tokenizer": german, "target_tokenizer": english}, GERMAN_TEXTS),
    )
    for name, model, tokenizer_options, texts in xla_cases:
        exports[f"{name}_xla"] = zoo.export(
            model, root / "saved_models" / f"{name}_xla", max_length=MAX_LENGTH,
            beam_size=BEAM_SIZE, alpha=ALPHA, jit_compile=True, **tokenizer_options,
        )
        for signature in TRANSLATION_SIGNATURES:
            key = f"{name}_xla/{signature}"
            calls[f"{key}/batch"] = (f"{name}_xla", signature, {"text": to_array(texts)})
            calls[f"{key}/empty"] = (f"{name}_xla", signature, {"text": to_array([])})
            calls[f"{key}/row0"] = (f"{name}_xla", signature, {"text": to_array(texts[:1])})
    # Called after XLA compilation is switched off as TF Serving does by default,
    # with a batch size not seen before (so nothing is compiled yet for it).
    calls_without_xla = {
        f"{name}/greedy/no_xla": (name, "greedy", {"text": to_array(TEXTS[:5])})
        for name in ("transformer", "transformer_xla")
    }

    # --- ViT, RGB, from a .keras path, with class names ---
    vit = zoo.get(
        "vit-tiny", compile=False, image_size=8, channels=3, patch_size=4, num_layers=1,
        hidden_dim=16, num_heads=2, mlp_dim=32, num_classes=5,
    )
    vit.save(root / "vit.keras")
    exports["vit"] = zoo.export(
        str(root / "vit.keras"), root / "saved_models" / "vit", top_k=3, class_names=CLASS_NAMES
    )
    images = rng.integers(0, 256, (3, 8, 8, 3)).astype(np.uint8)
    jpeg = tf.io.encode_jpeg(rng.integers(0, 256, (12, 10, 3)).astype(np.uint8)).numpy()
    gray = encode_png(rng.integers(0, 256, (5, 7, 1)).astype(np.uint8))
    rgba = encode_png(rng.integers(0, 256, (9, 9, 4)).astype(np.uint8))
    image_bytes = [encode_png(images[0]), encode_png(images[1]), jpeg, gray, rgba]
    expected["vit"] = {
        "images": vit_probabilities(vit, images),
        "bytes": np.concatenate(
            [
                vit_probabilities(vit, images[:2]),
                vit_probabilities(vit, [decode_resize(b, 3, (8, 8)) for b in image_bytes[2:]]),
            ]
        ),
    }
    calls.update(
        {
            "vit/images": ("vit", "serving_default", {"images": images}),
            "vit/bytes": ("vit", "predict_image_bytes", {"image_bytes": to_array(image_bytes)}),
            "vit/images_empty": (
                "vit", "serving_default", {"images": np.zeros((0, 8, 8, 3), np.uint8)}
            ),
            "vit/bytes_empty": ("vit", "predict_image_bytes", {"image_bytes": to_array([])}),
            "vit/not_an_image": (
                "vit", "predict_image_bytes", {"image_bytes": to_array([b"not an image"])}
            ),
            "vit/truncated_png": (
                "vit", "predict_image_bytes",
                {"image_bytes": to_array([image_bytes[0], image_bytes[0][:40]])},
            ),
            "vit/empty_bytes": ("vit", "predict_image_bytes", {"image_bytes": to_array([b""])}),
            "vit/after_errors": (
                "vit", "predict_image_bytes", {"image_bytes": to_array(image_bytes[:1])}
            ),
        }
    )

    # --- ViT, grayscale: RGB input is converted with ITU-R 601 weights ---
    vit_gray = zoo.get(
        "vit-tiny", compile=False, image_size=8, channels=1, patch_size=4, num_layers=1,
        hidden_dim=16, num_heads=2, mlp_dim=32, num_classes=5,
    )
    exports["vit_gray"] = zoo.export(vit_gray, root / "saved_models" / "vit_gray")
    rgb_image = rng.integers(0, 256, (8, 8, 3)).astype(np.uint8)
    gray_image = rng.integers(0, 256, (8, 8, 1)).astype(np.uint8)
    luma = (rgb_image.astype(np.float64) @ [0.2989, 0.5870, 0.1140])[..., None]
    expected["vit_gray"] = vit_probabilities(vit_gray, [luma, gray_image])
    calls["vit_gray/bytes"] = (
        "vit_gray", "predict_image_bytes",
        {"image_bytes": to_array([encode_png(rgb_image), encode_png(gray_image)])},
    )
    calls["vit_gray/images"] = ("vit_gray", "serving_default", {"images": gray_image[None]})

    # --- One fresh process for everything ---
    facts = {name: graph_facts(path) for name, path in exports.items()}
    request = {
        "exports": {name: str(path) for name, path in exports.items()},
        "ops": {name: ops for name, (ops, _) in facts.items()},
        "op_libraries": text_op_libraries(),
        "calls": calls,
        "calls_without_xla": calls_without_xla,
    }
    (root / "request.pkl").write_bytes(pickle.dumps(request))
    (root / "serve.py").write_text(SERVE_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(root / "serve.py"), str(root / "request.pkl"), str(root / "report.pkl")],
        capture_output=True,
        text=True,
        cwd=root,  # not the repository
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "XLA_FLAGS": FAST_XLA_FLAGS},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = pickle.loads((root / "report.pkl").read_bytes())
    return {
        "exports": exports,
        "expected": expected,
        "report": report,
        "results": report["results"],
        "xla": {name: xla for name, (_, xla) in facts.items()},
        "extra": extra,
        "vocabulary_directory": vocabulary_directory,
        "english": english,
    }


# === Translation ===


@pytest.mark.parametrize("name", ["transformer", "rnn"])
@pytest.mark.parametrize("signature", TRANSLATION_SIGNATURES)
def test_translation_signature_matches_in_process_decoding(served, name, signature):
    got = served["results"][f"{name}/{signature}/batch"]
    expected = served["expected"][name][signature]
    assert "error" not in got, got
    np.testing.assert_array_equal(got["tokens"], expected["tokens"])
    assert got["translation"].tolist() == expected["translation"].tolist()
    np.testing.assert_allclose(got["score"], expected["score"], rtol=1e-4, atol=1e-4)
    if signature == "serving_default":
        np.testing.assert_allclose(
            got["score"], expected["score_from_log_prob"], rtol=1e-4, atol=1e-4
        )
    if name == "transformer":  # trained: rows end early, at varied lengths
        lengths = decoded_lengths(got["tokens"])
        assert len(set(lengths)) >= 2 and min(lengths) < MAX_LENGTH, lengths


@pytest.mark.parametrize("name", ["transformer", "rnn"])
@pytest.mark.parametrize("signature", TRANSLATION_SIGNATURES)
def test_batch_rows_equal_rows_served_alone(served, name, signature):
    results = served["results"]
    batch = results[f"{name}/{signature}/batch"]
    count = len(batch["translation"])
    for index in range(count):
        alone = results[f"{name}/{signature}/row{index}"]
        np.testing.assert_array_equal(alone["tokens"][0], batch["tokens"][index])
        assert alone["translation"][0] == batch["translation"][index]
        np.testing.assert_allclose(alone["score"][0], batch["score"][index], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("signature", TRANSLATION_SIGNATURES)
def test_bad_text_gets_defined_results(served, signature):
    batch = served["results"][f"transformer/{signature}/batch"]
    tokens, translation = batch["tokens"], batch["translation"]
    assert tokens.shape == (len(TEXTS), MAX_LENGTH)
    assert np.all(np.isfinite(batch["score"]))
    # Longer than max_length: the same output as its first MAX_LENGTH - 1 tokens.
    long_ids, prefix_ids = served["english"].tokenize([TEXTS[3], TEXTS[4]]).to_list()
    assert len(long_ids) > MAX_LENGTH - 1 and long_ids[: MAX_LENGTH - 1] == prefix_ids[: MAX_LENGTH - 1]
    np.testing.assert_array_equal(tokens[3], tokens[4])
    # Invalid UTF-8 is translated as its repaired text.
    np.testing.assert_array_equal(tokens[6], tokens[7])
    assert translation[6] == translation[7]
    # Output text is valid UTF-8 for every input.
    for value in translation:
        value.decode("utf-8")


@pytest.mark.parametrize("name", ["transformer", "rnn"])
@pytest.mark.parametrize("signature", TRANSLATION_SIGNATURES)
def test_empty_batch_gives_empty_outputs(served, name, signature):
    got = served["results"][f"{name}/{signature}/empty"]
    assert got["translation"].shape == (0,)
    assert got["tokens"].shape == (0, MAX_LENGTH) and got["tokens"].dtype == np.int32
    assert got["score"].shape == (0,) and got["score"].dtype == np.float32


def test_translation_exports_carry_their_tokenizers(served):
    # The Transformer's tokenizer was given as a directory and that directory
    # was deleted before the fresh process loaded the export.
    assert not served["vocabulary_directory"].exists()
    assert served["report"]["signatures"]["transformer"] == ["greedy", "sample", "serving_default"]
    assert served["report"]["signatures"]["rnn"] == ["greedy", "sample", "serving_default"]
    metadata = json.loads(
        (served["exports"]["transformer"] / "assets.extra" / "zoo_export.json").read_text()
    )
    assert metadata["family"] == "transformer" and metadata["max_length"] == MAX_LENGTH
    assert metadata["beam_size"] == BEAM_SIZE


def test_untracked_tokenizer_resource_is_a_real_trap(tmp_path):
    """The control for the test above: a signature that closes over a tokenizer
    nobody tracks cannot be saved. `zoo.export` built its tokenizer inside itself
    from a directory and saved fine, so it tracks the tables."""
    vocabulary = text.WordPieceTokenizer.from_corpus(ENGLISH, 80, min_frequency=1).get_vocabulary()

    def make_signature():
        tokenizer = text.WordPieceTokenizer(vocabulary)  # referenced by the closure only

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(strings):
            return {"ids": tokenizer.tokenize(strings).to_tensor()}

        return tokenize

    module = tf.Module()
    module.tokenize = make_signature()
    with pytest.raises(AssertionError, match="untracked"):
        tf.saved_model.save(module, str(tmp_path / "naive"))


# === XLA decoding inside the SavedModel (jit_compile=True) ===


@pytest.mark.parametrize("name", ["transformer", "rnn"])
@pytest.mark.parametrize("signature", TRANSLATION_SIGNATURES)
def test_xla_export_serves_what_the_plain_export_serves(served, name, signature):
    results = served["results"]
    plain = results[f"{name}/{signature}/batch"]
    xla = results[f"{name}_xla/{signature}/batch"]
    assert "error" not in xla, xla
    np.testing.assert_array_equal(xla["tokens"], plain["tokens"])
    assert xla["translation"].tolist() == plain["translation"].tolist()
    np.testing.assert_allclose(xla["score"], plain["score"], rtol=1e-4, atol=1e-4)
    # Alone, the first row is padded to another bucket width (8, not MAX_LENGTH = 10).
    alone = results[f"{name}_xla/{signature}/row0"]
    np.testing.assert_array_equal(alone["tokens"][0], plain["tokens"][0])
    np.testing.assert_allclose(alone["score"][0], plain["score"][0], rtol=1e-4, atol=1e-4)
    empty = results[f"{name}_xla/{signature}/empty"]
    assert empty["tokens"].shape == (0, MAX_LENGTH) and empty["translation"].shape == (0,)


def test_xla_export_fails_where_xla_compilation_is_disabled(served):
    """What TF Serving does without --xla_cpu_compilation_enabled=true: the default
    export still serves, the jit_compile export fails the request."""
    results = served["results"]
    plain = results["transformer/greedy/no_xla"]
    assert "error" not in plain, plain
    np.testing.assert_array_equal(
        plain["tokens"], results["transformer/greedy/batch"]["tokens"][:5]
    )
    failed = results["transformer_xla/greedy/no_xla"]
    assert failed.get("error") == "InternalError", failed
    assert "XLA compilation disabled" in failed["message"]
    metadata = json.loads(
        (served["exports"]["transformer_xla"] / "assets.extra" / "zoo_export.json").read_text()
    )
    assert metadata["jit_compile"] is True


def test_source_buckets_are_powers_of_two_within_max_length():
    widths = [int(translation_module.bucket_width(n, 100)) for n in (1, 8, 9, 16, 17, 64, 65, 100)]
    assert widths == [8, 8, 16, 16, 32, 64, 100, 100]
    assert [int(translation_module.bucket_width(n, 4)) for n in (1, 4)] == [4, 4]  # never wider


# === ViT ===


def test_vit_images_signature_matches_the_model(served):
    got = served["results"]["vit/images"]
    probabilities = served["expected"]["vit"]["images"]
    np.testing.assert_allclose(got["probabilities"], probabilities, rtol=1e-5, atol=1e-6)
    top = np.argsort(-probabilities, axis=1)[:, :3]
    np.testing.assert_array_equal(got["classes"], top)
    assert got["classes"].dtype == np.int32
    np.testing.assert_allclose(
        got["scores"], np.take_along_axis(probabilities, top, axis=1), rtol=1e-5, atol=1e-6
    )
    assert got["class_names"].tolist() == [[CLASS_NAMES[i].encode() for i in row] for row in top]


def test_vit_image_bytes_are_decoded_converted_and_resized(served):
    results = served["results"]
    got = results["vit/bytes"]
    assert "error" not in got, got
    # PNGs of the model's size: exactly the uint8 signature's answer.
    np.testing.assert_allclose(
        got["probabilities"][:2], results["vit/images"]["probabilities"][:2], rtol=1e-6, atol=1e-7
    )
    # JPEG 12x10 RGB, PNG 5x7 grayscale, PNG 9x9 RGBA: decoded, converted, resized.
    np.testing.assert_allclose(
        got["probabilities"], served["expected"]["vit"]["bytes"], rtol=1e-4, atol=1e-5
    )
    gray = results["vit_gray/bytes"]
    np.testing.assert_allclose(
        gray["probabilities"], served["expected"]["vit_gray"], rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        results["vit_gray/images"]["probabilities"][0], gray["probabilities"][1], rtol=1e-6
    )
    assert gray["class_names"].tolist()[0] == [
        str(i).encode() for i in gray["classes"][0]
    ]  # default names: the ids


def test_vit_bad_input_fails_the_request_not_the_server(served):
    results = served["results"]
    for key in ("vit/not_an_image", "vit/truncated_png", "vit/empty_bytes"):
        assert results[key]["error"] == "InvalidArgumentError", results[key]
    assert "image" in results["vit/not_an_image"]["message"].lower()
    # The process keeps serving afterwards.
    np.testing.assert_allclose(
        results["vit/after_errors"]["probabilities"],
        results["vit/images"]["probabilities"][:1],
        rtol=1e-6,
    )
    for key in ("vit/images_empty", "vit/bytes_empty"):
        got = results[key]
        assert got["probabilities"].shape == (0, 5), key
        assert got["classes"].shape == (0, 3) and got["class_names"].shape == (0, 3), key


# === The serving environment ===


def test_fresh_process_needed_no_keras_and_none_of_our_code(served):
    assert served["report"]["imported"] == []
    assert served["report"]["signatures"]["vit"] == ["predict_image_bytes", "serving_default"]


def test_graph_ops_are_core_tensorflow_or_served_text_ops(served):
    not_core = served["report"]["not_core_ops"]
    for name, ops in not_core.items():
        assert set(ops) <= zoo.export.TF_SERVING_TEXT_OPS, (name, ops)
    # The check sees the tokenizer's ops (so it can fail).
    assert {"WordpieceTokenizeWithOffsets", "NormalizeUTF8", "RegexSplitWithOffsets"} <= set(
        not_core["transformer"]
    )
    assert not_core["vit"] == []


def test_exports_need_no_xla(served, tmp_path):
    """TF Serving disables XLA:CPU JIT by default (--xla_cpu_compilation_enabled=false),
    so no function of a default export may require it, even for a model compiled with
    jit_compile; only `jit_compile=True` exports do."""
    assert served["extra"]["transformer_jit_compile"] is True
    assert served["xla"] == {name: name.endswith("_xla") for name in served["exports"]}
    # Control: the check does see a jit_compile function.
    module = tf.Module()
    module.double = tf.function(
        lambda x: {"y": 2 * x}, input_signature=[tf.TensorSpec([None], tf.float32)],
        jit_compile=True,
    )
    tf.saved_model.save(module, str(tmp_path / "xla"), signatures={"double": module.double})
    assert graph_facts(tmp_path / "xla")[1] is True


def test_saved_model_cli_lists_the_signatures(served, capsys):
    """What `saved_model_cli show --dir DIR --all` prints: its `show --all` function, run in
    this process (a process of its own costs a TensorFlow import per export)."""
    from tensorflow.python.tools import saved_model_cli

    outputs = {}
    for name in ("transformer", "vit"):
        saved_model_cli._show_all(str(served["exports"][name]))
        outputs[name] = capsys.readouterr().out
    for fragment in (
        "signature_def['serving_default']", "signature_def['greedy']", "inputs['text']",
        "outputs['translation']", "outputs['tokens']", "outputs['score']", "DT_STRING",
    ):
        assert fragment in outputs["transformer"], fragment
    for fragment in (
        "signature_def['serving_default']", "signature_def['predict_image_bytes']",
        "inputs['images']", "DT_UINT8", "shape: (-1, 8, 8, 3)", "inputs['image_bytes']",
        "outputs['probabilities']", "outputs['classes']", "outputs['class_names']",
    ):
        assert fragment in outputs["vit"], fragment


# === Versions, atomic writes, arguments ===


@pytest.fixture(scope="module")
def small_vit():
    return zoo.get(
        "vit-tiny", compile=False, image_size=8, channels=1, patch_size=4, num_layers=1,
        hidden_dim=8, num_heads=2, mlp_dim=8, num_classes=3,
    )


@pytest.fixture
def fake_save(monkeypatch):
    """tf.saved_model.save replaced by a quick writer (versioning logic only)."""
    saved = []

    def save(module, directory, signatures=None):
        (pathlib.Path(directory) / "saved_model.pb").write_bytes(b"fake")
        saved.append(sorted(signatures))

    monkeypatch.setattr(tf.saved_model, "save", save)
    return saved


def test_versions_count_up_and_are_never_overwritten(tmp_path, small_vit, fake_save):
    base = tmp_path / "vit"
    assert zoo.export(small_vit, base) == base / "1"
    assert zoo.export(small_vit, base) == base / "2"
    for name in ("007", "latest", ".tmp-9-stale"):
        (base / name).mkdir()
    (base / "12").write_text("a file, not a version")
    assert zoo.export.existing_versions(base) == [1, 2, 7]
    assert zoo.export(small_vit, base) == base / "8"
    assert zoo.export(small_vit, base, version=5) == base / "5"
    for taken in (2, 5, 7):
        with pytest.raises(FileExistsError, match=f"version {taken} already exists"):
            zoo.export(small_vit, base, version=taken)
    assert (base / "1" / "saved_model.pb").read_bytes() == b"fake"
    assert fake_save[0] == ["predict_image_bytes", "serving_default"]
    assert sorted(p.name for p in base.iterdir()) == sorted(
        ["1", "2", "5", "8", "007", "latest", ".tmp-9-stale", "12"]
    )


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_crash_during_export_leaves_no_version_and_no_temporary(
    tmp_path, small_vit, monkeypatch, error
):
    base = tmp_path / "vit"
    base.mkdir()
    (base / "1").mkdir()

    def crash(module, directory, signatures=None):
        (pathlib.Path(directory) / "saved_model.pb").write_bytes(b"half")
        (pathlib.Path(directory) / "variables").mkdir()
        raise error

    monkeypatch.setattr(tf.saved_model, "save", crash)
    with pytest.raises(type(error)):
        zoo.export(small_vit, base)
    assert [p.name for p in base.iterdir()] == ["1"]


def test_zoo_export_is_the_module_and_the_function():
    import importlib

    from zoo.export import export

    module = importlib.import_module("zoo.export")
    assert zoo.export is module and callable(zoo.export)
    assert module.export is export


@pytest.fixture(scope="module")
def small_translation():
    tokenizer = text.WordPieceTokenizer.from_corpus(ENGLISH, 80, min_frequency=1)
    model = zoo.get(
        "transformer-tiny", compile=False, vocabulary_size=tokenizer.vocab_size,
        num_encoder_layers=1, num_decoder_layers=1, d_model=8, num_heads=2,
        intermediate_dim=8, max_length=MAX_LENGTH,
    )
    return model, tokenizer


def test_bad_arguments_are_rejected_before_writing(tmp_path, small_vit, small_translation):
    transformer, tokenizer = small_translation
    big_tokenizer = text.WordPieceTokenizer(
        tokenizer.get_vocabulary() + [f"extra{i}" for i in range(5)]
    )
    base = tmp_path / "model"
    cases = [
        (keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]), {}, "zoo Transformer"),
        ("model.h5", {}, r"\.keras file"),
        (transformer, {}, "needs `tokenizer`"),
        (transformer, {"tokenizer": 42}, "`tokenizer` must be"),
        (transformer, {"tokenizer": big_tokenizer}, "source vocabulary"),
        (transformer, {"tokenizer": tokenizer, "target_tokenizer": big_tokenizer}, "target vocab"),
        (transformer, {"tokenizer": tokenizer, "max_length": MAX_LENGTH + 1}, "max_length"),
        (transformer, {"tokenizer": tokenizer, "max_length": 1}, "max_length"),
        (transformer, {"tokenizer": tokenizer, "beam_size": 0}, "beam_size"),
        (transformer, {"tokenizer": tokenizer, "alpha": -1.0}, "alpha"),
        (transformer, {"tokenizer": tokenizer, "class_names": ["a"]}, "class_names"),
        (transformer, {"tokenizer": tokenizer, "jit_compile": "yes"}, "jit_compile"),
        (small_vit, {"tokenizer": tokenizer}, "tokenizer"),
        (small_vit, {"jit_compile": "yes"}, "jit_compile"),  # True runs the model with XLA
        (small_vit, {"top_k": 4}, "top_k"),
        (small_vit, {"top_k": 0}, "top_k"),
        (small_vit, {"class_names": ["a", "b"]}, "class_names"),
        (small_vit, {"version": 0}, "version"),
        (small_vit, {"version": "3"}, "version"),
        (small_vit, {"version": True}, "version"),
    ]
    for obj, kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            zoo.export(obj, base, **kwargs)
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="directory"):
        zoo.export(small_vit, tmp_path / "a_file")
    assert not base.exists()


def test_zoo_export_jit_flag_reaches_export_run(monkeypatch, tmp_path):
    from zoo import cli, runs

    received = []

    def export_run(run_dir, **options):
        received.append(options)
        return tmp_path / "1"

    monkeypatch.setattr(runs, "export_run", export_run)
    assert cli.main(["export", "some/run", "--jit"]) == 0
    assert cli.main(["export", "some/run"]) == 0
    assert [options["jit_compile"] for options in received] == [True, False]
