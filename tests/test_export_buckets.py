"""Source buckets and warm-up of the translation export (zoo/export/translation.py, warmup.py).

- Padding a source to a bucket width changes no output: `zoo.decode` on padded
  rows against each row decoded alone at its own width.
- An XLA export compiles one program per bucket: in a fresh process with XLA's
  `--xla_dump_to`, where each compiled HLO module leaves one
  `*.before_optimizations.txt` file, replaying the warm-up records as TF Serving
  does compiles one per bucket, and 50 sentences of 50 lengths compile nothing more
  and give the tokens of unpadded decoding.
- The warm-up records parse with `tensorflow_serving.apis`, one per (signature,
  bucket), each text landing in its bucket; `warmup()` answers what the signatures do.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

import zoo
from zoo import decode, text
from zoo.export import translation_module
from zoo.export import warmup as export_warmup
from zoo.runs.rundir import load_tokenizers
from zoo.text.ids import encode_sources

# `make test-large` (XLA exports compiled per bucket, and a serving process).
pytestmark = pytest.mark.large

MAX_LENGTH = 64  # buckets 8, 16, 32, 64
WORDS = [f"w{index}" for index in range(40)]
# 50 sentences of 50 lengths: 1..50 words, one token each, + [END] = 2..51 source tokens.
SENTENCES = [" ".join(WORDS[i % len(WORDS)] for i in range(n)) for n in range(1, 51)]

COUNT_SCRIPT = textwrap.dedent(
    """
    import glob, json, os, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - the tokenizer's ops
    from tensorflow_serving.apis import prediction_log_pb2

    export, dump, sentences = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

    def compiled():  # one file per HLO module XLA compiled
        return len(glob.glob(os.path.join(dump, "*before_optimizations.txt")))

    loaded = tf.saved_model.load(export)
    report = {"before": compiled()}
    # What TF Serving does with assets.extra/tf_serving_warmup_requests (greedy ones: a
    # beam search takes seconds to compile, and the count is the same per signature).
    records = tf.data.TFRecordDataset(os.path.join(export, "assets.extra", "tf_serving_warmup_requests"))
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        if request.model_spec.signature_name == "greedy":
            inputs = {key: tf.make_ndarray(value) for key, value in request.inputs.items()}
            loaded.signatures["greedy"](**inputs)
    report["after_warmup"] = compiled()
    report["tokens"] = [
        loaded.signatures["greedy"](text=tf.constant([s]))["tokens"].numpy()[0].tolist()
        for s in sentences
    ]
    report["after_sentences"] = compiled()
    print("REPORT" + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def tiny():
    """(untrained transformer-tiny, its WordPiece tokenizer), positions for MAX_LENGTH."""
    keras.utils.set_random_seed(7)
    tokenizer = text.WordPieceTokenizer.from_corpus([" ".join(WORDS)], 80, min_frequency=1)
    model = zoo.get(
        "transformer-tiny", vocabulary_size=tokenizer.vocab_size, num_encoder_layers=1,
        num_decoder_layers=1, d_model=16, num_heads=2, intermediate_dim=32,
        max_length=MAX_LENGTH, dropout=0.0,
    )
    return model, tokenizer


def _rows(tokenizer, texts):
    """Each text's source ids (tokens + [END]) alone: a list of (1, S_i) arrays."""
    sources = encode_sources(tokenizer, tf.constant(texts), MAX_LENGTH, end_id=3)
    return [np.array([row], np.int32) for row in sources.to_list()]


def _pad(row, width):
    return np.pad(row, [[0, 0], [0, width - row.shape[1]]])


@pytest.mark.parametrize("max_length", [MAX_LENGTH, None])
def test_bucket_padding_changes_no_decoded_token(tiny, max_length):
    """Greedy and beam decoding of rows padded to their bucket (and in one padded batch)
    equal each row decoded alone; without `max_length` each row keeps its own limit
    (its length + EXTRA_LENGTH), so only trailing padding differs."""
    model, tokenizer = tiny
    rows = _rows(tokenizer, [SENTENCES[i] for i in (0, 6, 7, 20, 40)])  # 2, 8, 9, 22, 42 ids
    widths = [int(translation_module.bucket_width(row.shape[1], MAX_LENGTH)) for row in rows]
    assert widths == [8, 8, 16, 32, 64]
    batch = np.concatenate([_pad(row, MAX_LENGTH) for row in rows])
    for search in (
        lambda s: decode.greedy_decode(model, s, max_length=max_length),
        lambda s: decode.beam_search(model, s, beam_size=2, max_length=max_length)[0],
    ):
        batched = search(batch).numpy()
        for index, (row, width) in enumerate(zip(rows, widths)):
            alone = search(row).numpy()[0]
            padded = search(_pad(row, width)).numpy()[0]
            tail = np.zeros(batched.shape[1] - len(alone), np.int32)  # padding, if any
            np.testing.assert_array_equal(padded[: len(alone)], alone)
            np.testing.assert_array_equal(padded[len(alone):], tail[: len(padded) - len(alone)])
            np.testing.assert_array_equal(batched[index], np.concatenate([alone, tail]))


def test_xla_export_compiles_once_per_bucket(tiny, tmp_path):
    model, tokenizer = tiny
    path = zoo.export(model, tmp_path / "xla", tokenizer=tokenizer, jit_compile=True)
    metadata = json.loads((path / "assets.extra" / "zoo_export.json").read_text())
    assert metadata["source_buckets"] == [8, 16, 32, 64]
    environment = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={tmp_path / 'dump'}",
                   "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-c", COUNT_SCRIPT, str(path), str(tmp_path / "dump"), json.dumps(SENTENCES)],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.split("REPORT")[-1])
    # One program per bucket at warm-up; none for 50 sentences of 50 lengths after it.
    assert (report["before"], report["after_warmup"], report["after_sentences"]) == (0, 4, 4)
    for row, tokens in zip(_rows(tokenizer, SENTENCES), report["tokens"]):  # as unpadded
        np.testing.assert_array_equal(tokens, decode.greedy_decode(model, row, MAX_LENGTH)[0])


def _records(export_dir, tokenizer):
    """The warm-up records, parsed with tensorflow_serving.apis: a list of
    (signature name, bucket width, source length, batch-1 text array, other inputs)."""
    export_dir = pathlib.Path(export_dir)
    metadata = json.loads((export_dir / "assets.extra" / "zoo_export.json").read_text())
    max_length = metadata["max_length"]
    records = tf.data.TFRecordDataset(str(export_dir / "assets.extra" / export_warmup.FILENAME))
    parsed = []
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        tensor = request.inputs["text"]
        assert [d.size for d in tensor.tensor_shape.dim] == [1]
        texts = tf.make_ndarray(tensor)
        others = {key: tf.make_ndarray(value) for key, value in request.inputs.items()
                  if key != "text"}
        source = encode_sources(tokenizer, texts, max_length, end_id=metadata["special_ids"]["end"])
        length = int(source.row_lengths()[0])
        width = int(translation_module.bucket_width(length, max_length))
        parsed.append((request.model_spec.signature_name, width, length, texts, others))
    return parsed


def test_warmup_records_hold_one_request_per_signature_and_bucket(numbers_export, numbers_run):
    export_dir = numbers_export.saved_models / "1"
    metadata = json.loads((export_dir / "assets.extra" / "zoo_export.json").read_text())
    records = _records(export_dir, load_tokenizers(numbers_run.run_dir)[0])
    widths = translation_module.bucket_widths(metadata["max_length"])
    assert widths == [8, 16]
    assert sorted((name, width) for name, width, *_ in records) == [
        (name, width) for name in ("greedy", "sample", "serving_default") for width in widths
    ]
    # The sample signature's scalars, in its dtypes: seed 0, temperature 1, no top-k/top-p.
    for name, *_, others in records:
        expected = ({"seed": (0, "int64"), "temperature": (1.0, "float32"), "top_k": (0, "int32"),
                     "top_p": (1.0, "float32")} if name == "sample" else {})
        assert {key: (value.item(), value.dtype.name) for key, value in others.items()} == expected
    # Each text lands in its bucket (the program depends on the width only), the last
    # one cut to max_length.
    assert [length > width // 2 for _, width, length, *_ in records] == [True] * 6
    assert max(length for _, _, length, *_ in records) == metadata["max_length"]
    assert metadata["warmup_requests"] == len(records)


def test_warmup_function_answers_what_the_signatures_answer(numbers_export, numbers_run):
    export_dir = numbers_export.saved_models / "1"
    loaded = tf.saved_model.load(str(export_dir))
    answered = {key: value.numpy().tolist() for key, value in loaded.warmup().items()}
    records = _records(export_dir, load_tokenizers(numbers_run.run_dir)[0])
    expected = {
        f"{name}_{width}": loaded.signatures[name](text=tf.constant(texts), **{
            key: tf.constant(value) for key, value in others.items()})["translation"]
        .numpy().tolist()
        for name, width, _, texts, others in records
    }
    assert answered == expected


def test_warmup_asks_for_values_of_unknown_signature_inputs():
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text"),
                                  tf.TensorSpec([None], tf.float64, name="penalty")])
    def rescore(text, penalty):
        return {"translation": text}

    with pytest.raises(zoo.errors.ZooError, match="penalty"):
        export_warmup.requests({"rescore": rescore}, {8: "a"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(export_warmup.EXTRA_INPUTS, "penalty", [0.5])
        planned = export_warmup.requests({"rescore": rescore}, {8: "a", 16: "a a"})
    assert [(name, width, inputs["text"]) for name, width, inputs in planned] == [
        ("rescore", 8, ["a"]), ("rescore", 16, ["a a"])]
    for _, _, inputs in planned:  # in the signature's dtype
        assert inputs["penalty"].dtype == np.float64 and inputs["penalty"].tolist() == [0.5]
