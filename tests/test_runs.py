"""`zoo.runs` (the API behind `zoo train/evaluate/export/predict`), `zoo.datasets.preparation` and `zoo.datasets.load`."""

import csv
import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import datasets, runs, text
from zoo.datasets import preparation
from zoo.runs import callbacks, evaluation, inference, options
from zoo.text import tokenizers

from interrupts import Interrupt  # pytest puts tests/ (no __init__.py) on sys.path


def write(path, data):
    path.write_bytes(data)
    return path


# === zoo.datasets.load ===


def test_load_resolves_every_translation_spec(tmp_path):
    data = datasets.load("numbers", train_size=30, test_size=5, seed=3)
    assert (len(data.train_pairs), len(data.test_pairs)) == (30, 5)
    assert data.train_pairs == datasets.numbers(num_train=30, num_test=5, seed=3).train_pairs
    assert data.metadata["spec"] == "numbers"
    assert len(datasets.load("dates", train_size=10, test_size=2).train_pairs) == 10
    # BOM, CRLF, a blank line and malformed lines: skipped and counted, never silently.
    path = write(
        tmp_path / "pairs.tsv",
        b"\xef\xbb\xbfeins\tone\r\n\r\nzwei\ttwo\nno tab\ndrei\tthree\textra\nvier\tfour\n"
        b"f\xfcnf\tfive\n",
    )
    data = datasets.load(f"tsv:{path}", test_ratio=0.34)
    assert sorted(data.train_pairs + data.test_pairs) == [
        ("eins", "one"), ("vier", "four"), ("zwei", "two")
    ]
    assert len(data.test_pairs) == 1
    assert data.skipped == {"blank": 1, "no_tab": 1, "extra_tab": 1, "empty_side": 0,
                            "invalid_utf8": 1}
    test_file = write(tmp_path / "test.tsv", b"acht\teight\n")
    data = datasets.load(f"tsv:{path}", test_path=test_file, train_size=2)
    assert data.test_pairs == [("acht", "eight")] and len(data.train_pairs) == 2
    assert set(data.train_pairs) <= {("eins", "one"), ("zwei", "two"), ("vier", "four")}


def test_load_resolves_image_specs_with_subsets(tmp_path):
    data = datasets.load("digits", train_size=50, test_size=20, seed=1)
    assert data.x_train.shape == (50, 8, 8, 1) and data.x_test.shape == (20, 8, 8, 1)
    full = datasets.digits(seed=1)
    # The subset is a subset: every kept image is one of the full split's, label included.
    index = {image.tobytes(): label for image, label in zip(full.x_train, full.y_train)}
    assert all(index[image.tobytes()] == label for image, label in zip(data.x_train, data.y_train))
    for name in ("a", "b"):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for i in range(5):
            keras.utils.save_img(tmp_path / "imgs" / name / f"{i}.png",
                                 np.full((9, 7, 3), 40 * i, np.uint8))
    data = datasets.load(f"images:{tmp_path / 'imgs'}", image_size=6, test_ratio=0.2,
                         color_mode="grayscale")
    assert data.class_names == ["a", "b"]
    assert data.x_train.shape[1:] == (6, 6, 1) and len(data.x_train) + len(data.x_test) == 10


@pytest.mark.parametrize(
    "spec, kwargs, error, message",
    [
        ("wmt14", {}, ValueError, "unknown dataset 'wmt14'; available: numbers"),
        ("tsv:", {}, ValueError, "needs a path"),
        ("tsv:/no/such/file.tsv", {}, FileNotFoundError, "/no/such/file.tsv"),
        ("images:", {}, ValueError, "needs a folder"),
        ("images:/tmp", {}, ValueError, "image_size"),
        ("numbers", {"train_size": 0}, ValueError, "`train_size` must be an int >= 1"),
        ("fashion-mnist", {"data_dir": "/no/such/dir"}, FileNotFoundError, "not found"),
    ],
)
def test_load_rejects_bad_specs(spec, kwargs, error, message):
    with pytest.raises(error, match=message):
        datasets.load(spec, **kwargs)


def test_dataset_kind_and_family_check():
    assert datasets.dataset_kind("tsv:x.tsv") == "translation"
    assert datasets.dataset_kind("fashion-mnist") == "image"
    assert preparation.check_data_fits("transformer-tiny", "numbers") == "translation"
    assert preparation.check_data_fits("seq2seq-bahdanau-small", "tsv:x") == "translation"
    assert preparation.check_data_fits("vit-tiny", "images:x") == "image"
    with pytest.raises(ValueError, match="'numbers' holds translation data but 'vit-tiny'"):
        preparation.check_data_fits("vit-tiny", "numbers")
    with pytest.raises(ValueError, match="use a translation dataset"):
        preparation.check_data_fits("transformer-tiny", "digits")


# === Callbacks: history, checkpoints and backup across an interruption ===


def _dense_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), "mse")
    return model


def _fit(model, run_dir, epochs, extra=()):
    x = np.linspace(-1, 1, 48, dtype="float32").reshape(16, 3)
    y = np.sin(x.sum(axis=1, keepdims=True))
    backup = callbacks.Backup(run_dir / "backup")
    callback_list = [
        callbacks.HistoryCSV(run_dir / "history.csv"),
        callbacks.Checkpoints(run_dir / "checkpoints", "val_loss", run_dir / "history.csv"),
        backup,
        *extra,
    ]
    model.fit(x, y, batch_size=4, epochs=epochs, shuffle=False, validation_data=(x, y),
              callbacks=callback_list, verbose=0)
    return backup


@pytest.mark.large
def test_interrupted_and_resumed_training_equals_an_uninterrupted_one(tmp_path):
    straight = _dense_model()
    _fit(straight, tmp_path / "straight", epochs=6)

    model = _dense_model()
    with pytest.raises(KeyboardInterrupt):
        _fit(model, tmp_path / "resumed", epochs=6, extra=[Interrupt(4)])
    metadata = json.loads((tmp_path / "resumed/backup/training_metadata.json").read_text())
    assert metadata["epoch"] == 4 and metadata["steps"] == 16
    assert [p.name for p in (tmp_path / "resumed/backup").glob("*.h5")] == ["epoch-4.weights.h5"]

    restarted = _dense_model()  # a fresh process: new weights, restored from the backup
    backup = _fit(restarted, tmp_path / "resumed", epochs=6)
    assert backup.restored_epoch == 4 and backup.steps == 24
    assert not (tmp_path / "resumed/backup").exists()  # removed once training ended
    # Weights and optimizer state (Adam's moments) came back: the same end point.
    for a, b in zip(straight.get_weights(), restarted.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    rows = runs.read_history(tmp_path / "resumed/history.csv")
    reference = runs.read_history(tmp_path / "straight/history.csv")
    assert [row["epoch"] for row in rows] == [0, 1, 2, 3, 4, 5]
    np.testing.assert_allclose([r["loss"] for r in rows], [r["loss"] for r in reference],
                               rtol=1e-5)
    last = keras.saving.load_model(tmp_path / "resumed/checkpoints/last.keras")
    for a, b in zip(last.get_weights(), restarted.get_weights()):
        np.testing.assert_array_equal(a, b)
    # With this seed the best validation loss comes before the interruption and the
    # epochs after it are worse: the restarted run must keep that best.keras.
    val_losses = [r["val_loss"] for r in rows]
    assert int(np.argmin(val_losses)) == 3 and min(val_losses[4:]) > val_losses[3]
    best = keras.saving.load_model(tmp_path / "resumed/checkpoints/best.keras")
    best_straight = keras.saving.load_model(tmp_path / "straight/checkpoints/best.keras")
    for a, b in zip(best.get_weights(), best_straight.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_history_drops_rows_of_epochs_trained_again(tmp_path):
    path = tmp_path / "history.csv"
    with path.open("w", newline="") as file:  # epochs 0-2 logged, but the backup says 2
        writer = csv.writer(file)
        writer.writerow(["epoch", "loss"])
        writer.writerows([[0, 3.0], [1, 2.0], [2, 1.5]])
    callback = callbacks.HistoryCSV(path)
    callback.on_train_begin()
    callback.on_epoch_begin(2)
    assert [row["epoch"] for row in runs.read_history(path)] == [0, 1]
    callback.on_epoch_end(2, {"loss": 1.25, "accuracy": 0.5})
    rows = runs.read_history(path)
    assert [(row["epoch"], row["loss"]) for row in rows] == [(0, 3.0), (1, 2.0), (2, 1.25)]
    assert np.isnan(rows[0]["accuracy"]) and rows[2]["accuracy"] == 0.5
    assert not list(tmp_path.glob(".history*"))  # no temporary file left behind


def test_a_half_written_backup_weights_file_is_ignored(tmp_path):
    model = _dense_model()
    with pytest.raises(KeyboardInterrupt):
        _fit(model, tmp_path, epochs=3, extra=[Interrupt(2)])
    saved = [w.copy() for w in model.get_weights()]
    # A kill while writing epoch 3's weights leaves a partial new file; the metadata
    # still names epoch 2's complete file, which is what a restart restores.
    write(tmp_path / "backup/epoch-3.weights.h5", b"\x89HDF\r\n partial")
    fresh = _dense_model()
    backup = callbacks.Backup(tmp_path / "backup")
    backup.set_model(fresh)
    backup.on_train_begin()
    assert backup.restored_epoch == 2
    for a, b in zip(saved, fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


# === train(), load_run(), evaluate() in-process ===
# `numbers_run` (tests/conftest.py): transformer-tiny trained on `numbers` once per session
# through `zoo train`, which calls `runs.train`; its `result` is what that call returned.


def test_train_writes_a_complete_run_directory(numbers_run):
    out, result = numbers_run.run_dir, numbers_run.result
    assert numbers_run.options == dict(epochs=2, train_size=200, test_size=8, seed=3)
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "transformer-tiny" and config["kind"] == "translation"
    assert config["data"] == {
        "spec": "numbers",
        "options": {"data_dir": None, "train_size": 200, "test_size": 8, "test_ratio": None,
                    "test_path": None, "data_seed": 0},
        "num_train": 190, "num_validation": 10, "num_test": 8,
        "skipped": {}, "class_names": None,
    }
    # Seed 3 trains; the test pairs are those of the data seed, 0, as for any --seed.
    assert result.data.test_pairs == datasets.load(
        "numbers", seed=0, train_size=200, test_size=8).test_pairs
    tokenizer = tokenizers.load(out / "tokenizer")
    assert tokenizers.kind(tokenizer) == "sentencepiece"  # the default for new runs
    assert config["training"]["tokenizer"] == "sentencepiece"
    # The model's vocabulary is the tokenizer's, capped by the config's vocabulary_size.
    assert config["model_config"]["vocabulary_size"] == tokenizer.vocab_size <= 100
    assert config["model_config"]["d_model"] == numbers_run.overrides["d_model"] == 16
    assert config["training"]["epochs"] == 2 and config["training"]["seed"] == 3
    assert config["training"]["batch_size"] == 64  # the default for translation
    assert config["training"]["global_batch_size"] == 64
    assert config["versions"]["tensorflow"] == tf.__version__
    assert config["num_params"] == zoo.describe(
        "transformer-tiny", **config["model_config"]).num_params
    rows = runs.read_history(out / "history.csv")
    assert [row["epoch"] for row in rows] == [0, 1]
    assert {"loss", "val_loss", "masked_accuracy", "val_masked_accuracy"} <= set(rows[0])
    np.testing.assert_allclose(result.history["loss"], [row["loss"] for row in rows])
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((out / "logs").rglob("events.out.tfevents.*"))
    assert not (out / "backup").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epochs"] == 2 and summary["completed"] and summary["stopped_by"] is None
    # 190 pairs in bucketed batches of 64: at least 3 steps per epoch.
    assert summary["steps"] >= 6
    # The last checkpoint is the returned model.
    last = keras.saving.load_model(out / "checkpoints/last.keras", compile=False)
    batch = {"source": np.array([[5, 6, 3]]), "target": np.array([[2, 7]])}
    np.testing.assert_allclose(last(batch), result.model(batch), atol=1e-6)


class DieAtTrainEnd(keras.callbacks.Callback):
    """Raises once fit() is over, as a kill would before `summary.json` is written."""

    def on_train_end(self, logs=None):
        raise KeyboardInterrupt


@pytest.mark.large
def test_train_is_deterministic_and_a_kill_after_the_last_epoch_loses_nothing(
    numbers_run, tmp_path
):
    first = numbers_run.result
    out = tmp_path / "again"
    with pytest.raises(KeyboardInterrupt):
        runs.train(
            "transformer-tiny", "numbers", out, overrides=numbers_run.overrides, verbose=0,
            quiet=True, callbacks=[DieAtTrainEnd()], **numbers_run.options,
        )
    # Same arguments and seed: the same losses, epoch by epoch.
    rows = runs.read_history(out / "history.csv")
    np.testing.assert_allclose([r["loss"] for r in rows], first.history["loss"], rtol=1e-5)
    assert not (out / "summary.json").exists()
    weights = keras.saving.load_model(out / "checkpoints/last.keras").get_weights()
    for a, b in zip(weights, first.model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # Started again, the run finds both epochs done: nothing is trained or lost.
    resumed = runs.train("transformer-tiny", None, out, verbose=0, quiet=True)
    assert resumed.initial_epoch == 2 and resumed.epochs == 2
    assert resumed.summary["steps"] == first.summary["steps"]
    assert runs.read_history(out / "history.csv") == rows
    for a, b in zip(resumed.model.get_weights(), weights):
        np.testing.assert_array_equal(a, b)
    assert not (out / "backup").exists() and (out / "summary.json").exists()


def test_resume_refuses_conflicts_and_finished_runs(numbers_run, tmp_path):
    out = numbers_run.run_dir
    with pytest.raises(runs.RunFinishedError, match="finished run"):
        runs.train("transformer-tiny", "numbers", out)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    config = json.loads((out / "config.json").read_text())
    (unfinished / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"epochs=3 \(saved: 2\)"):
        runs.train("transformer-tiny", "numbers", unfinished, epochs=3)
    with pytest.raises(ValueError, match=r"data 'dates' \(saved: 'numbers'\)"):
        runs.train("transformer-tiny", "dates", unfinished)
    with pytest.raises(ValueError, match="model 'transformer-small'"):
        runs.train("transformer-small", None, unfinished)
    with pytest.raises(ValueError, match="overrides"):
        runs.train("transformer-tiny", None, unfinished, overrides={"d_model": 64})
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no zoo run"):
        runs.train("transformer-tiny", "numbers", stray)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(name="transformr-tiny", data="numbers"), "Did you mean 'transformer-tiny'"),
        (dict(name="vit-tiny", data="numbers"), "holds translation data"),
        (dict(name="transformer-tiny", data=None), "data is required"),
        (dict(name="transformer-tiny", data="numbers", epochs=0), "`epochs` must be a positive"),
        (dict(name="transformer-tiny", data="numbers", overrides={"d_modl": 3}), "d_modl"),
        (dict(name="transformer-tiny", data="numbers", mixed_precision="fp8"), "mixed_precision"),
        (dict(name="transformer-tiny", data="numbers", strategy="gpu-cluster"), "Unknown strategy"),
    ],
)
def test_train_rejects_bad_arguments_before_any_work(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        runs.train(out=tmp_path / "run", **kwargs)
    assert not (tmp_path / "run").exists()


@pytest.mark.large
def test_load_run_translate_and_evaluate_agree_with_the_decoder(numbers_run, tmp_path):
    out = tmp_path / "run"  # evaluate writes metrics.json into it
    shutil.copytree(numbers_run.run_dir, out)
    run = runs.load_run(out)
    assert run.kind == "translation" and run.source_tokenizer is run.target_tokenizer
    data = datasets.numbers(num_train=200, num_test=8, seed=3)
    sources = [source for source, _ in data.test_pairs]
    # Reference: the decoder called directly on the pipeline's encoding (x + [END]).
    max_length = numbers_run.overrides["max_length"]
    assert run.max_length == max_length
    ids = run.source_tokenizer.tokenize(tf.constant(sources))
    rows = [row[: max_length - 1] + [text.END_ID] for row in ids.to_list()]
    source = tf.constant([row + [0] * (max(map(len, rows)) - len(row)) for row in rows])
    expected = run.target_tokenizer.detokenize(
        zoo.decode.greedy_decode(run.model, source, max_length=max_length)
    ).numpy()
    assert runs.translate(run, sources, beam_size=1) == [e.decode() for e in expected]
    # Decoded longest first, in batches of similar length, and returned in order.
    assert inference.batch_order(["ab", "a", "abc", "xy"]) == [2, 0, 3, 1]
    assert inference.batch_order(["ab", "a", "abc"], keep=True) == [0, 1, 2]
    assert runs.translate(run, sources, beam_size=1, batch_size=3) == [
        e.decode() for e in expected]
    assert runs.translate(run, sources, beam_size=2, batch_size=3) == runs.translate(
        run, sources, beam_size=2, batch_size=len(sources))
    # 0 tokens is an error, not the default length.
    with pytest.raises(ValueError, match="`max_length` must be an int >= 1; received max_length=0"):
        runs.translate(run, sources, max_length=0)

    metrics = runs.evaluate(out, beam_size=2, quiet=True)
    references = runs.canonical(run.target_tokenizer, [t for _, t in data.test_pairs])
    hypotheses = runs.translate(run, sources, beam_size=1)
    exact = 100 * np.mean([h == r for h, r in zip(hypotheses, references)])
    assert metrics["greedy"]["exact_match"] == pytest.approx(exact)
    assert metrics["num_examples"] == 8 and metrics["beam"]["beam_size"] == 2
    assert json.loads((out / "metrics.json").read_text())["greedy"] == metrics["greedy"]


class _NumberTokenizer:
    """Space-separated integers are the ids; Marian-like own end and padding ids."""

    special_ids = {"pad": 9, "end": 7}

    def tokenize(self, text):
        return tf.strings.to_number(tf.strings.split(text), tf.int32)  # (B, (S))


def test_padded_sources_are_the_ragged_encoding_padded_with_the_tokenizers_ids():
    tokenizer = _NumberTokenizer()
    ragged = text.ids.encode_sources(tokenizer, tf.constant(["4 5 6 8", "8"]), 3, end_id=7)
    assert ragged.to_list() == [[4, 5, 7], [8, 7]]  # cut to max_length - 1, then [END]
    padded = runs.padded_sources(tokenizer, ["4 5 6 8", "8"], max_length=3)
    np.testing.assert_array_equal(padded.numpy(), [[4, 5, 7], [8, 7, 9]])
    assert padded.dtype == tf.int32


def test_canonical_references_and_scores():
    tokenizer = text.WordPieceTokenizer.from_corpus(["Three hundred and twenty-four"] * 3, 60)
    assert runs.canonical(tokenizer, ["Three hundred and twenty-four"]) == [
        "three hundred and twenty-four"
    ]
    import sacrebleu

    hypotheses, references = ["a b c d", "x y"], ["a b c d", "x z"]
    exact, bleu = evaluation.scores(hypotheses, references)
    assert exact == 50.0
    assert bleu == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)


@pytest.mark.parametrize("hits, total, expected", [(1, 200, 0.5), (1, 100, 1.0), (0, 50, 0.0)])
def test_exact_match_stays_a_percentage_at_or_below_one_percent(hits, total, expected):
    """Real-language runs land at 1% or below: 1 of 200 is 0.5%, never 50%."""
    references = [f"sentence {i}" for i in range(total)]
    hypotheses = references[:hits] + ["wrong"] * (total - hits)
    exact, _ = evaluation.scores(hypotheses, references)
    assert exact == pytest.approx(expected)


# === Images ===


def test_vit_on_fashion_mnist_files_takes_its_sizes_from_the_data(fashion_run, tmp_path):
    """`fashion_run` (tests/conftest.py): vit-tiny trained by `zoo train` on Fashion-MNIST
    IDX files (96 training images), batches of 32, no validation, epochs=2, max_steps=4."""
    arrays, result = fashion_run.arrays, fashion_run.result
    assert fashion_run.options["val_ratio"] == 0.0 and fashion_run.options["batch_size"] == 32
    shutil.copytree(fashion_run.run_dir, tmp_path / "run")  # evaluate writes metrics.json
    config = runs.read_config(tmp_path / "run")
    assert config["model_config"]["image_size"] == 28 and config["model_config"]["channels"] == 1
    assert config["data"]["class_names"] == datasets.FASHION_MNIST_CLASSES
    # decay_steps follows the training length: min(epochs x steps per epoch, max_steps).
    assert config["model_config"]["decay_steps"] == 4
    assert result.stopped_by == "max_steps" and result.summary["steps"] == 4
    assert result.epochs == 2  # 3 steps per epoch: stopped during the second
    metrics = runs.evaluate(tmp_path / "run", checkpoint="last", quiet=True)
    logits = result.model.predict(arrays["t10k-images-idx3-ubyte"][..., None], verbose=0)
    accuracy = np.mean(np.argmax(logits, -1) == arrays["t10k-labels-idx1-ubyte"])
    assert metrics["accuracy"] == pytest.approx(accuracy)
    assert metrics["num_examples"] == 16
    # predict: image files through the run directory and through its SavedModel
    # (the image-bytes signature) give the same classes and probabilities.
    from PIL import Image

    paths = []
    for i, image in enumerate(arrays["t10k-images-idx3-ubyte"][:3]):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    version_dir = runs.export_run(tmp_path / "run", to=tmp_path / "saved", quiet=True)
    assert version_dir == tmp_path / "saved" / "1"
    from_run = runs.predict(tmp_path / "run", paths, top_k=3)
    served = runs.predict(tmp_path / "saved", paths, top_k=3)
    assert [[name for name, _ in r["classes"]] for r in served] == [
        [name for name, _ in r["classes"]] for r in from_run
    ]
    for a, b in zip(served, from_run):
        np.testing.assert_allclose([p for _, p in a["classes"]], [p for _, p in b["classes"]],
                                   atol=1e-5)
    assert all(name in datasets.FASHION_MNIST_CLASSES for r in served for name, _ in r["classes"])


def test_image_datasets_shuffle_each_epoch_like_a_per_example_shuffle():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (50, 4, 4, 1)).astype("uint8")
    y = np.arange(50) % 10
    train_data, val_data, num_train, num_val = preparation.image_datasets(x, y, 8, 0.2, seed=3)
    assert (num_train, num_val) == (40, 10)
    train_index, val_index = preparation.split_validation(50, 0.2, 3)
    # The reference: shuffle the examples one by one, with the same seed.
    reference = tf.data.Dataset.from_tensor_slices((x[train_index], y[train_index].astype("int32")))
    reference = reference.shuffle(40, seed=3, reshuffle_each_iteration=True).batch(8)
    epochs = []
    for _ in range(2):  # two passes: a new order each epoch, the reference's
        batches = list(train_data.as_numpy_iterator())
        expected = list(reference.as_numpy_iterator())
        assert [len(b[0]) for b in batches] == [8] * 5
        for (images, labels), (ref_images, ref_labels) in zip(batches, expected, strict=True):
            assert images.dtype == np.uint8 and labels.dtype == np.int32
            np.testing.assert_array_equal(images, ref_images)
            np.testing.assert_array_equal(labels, ref_labels)
        epochs.append(np.concatenate([labels for _, labels in batches]))
        images = np.concatenate([images for images, _ in batches])
        assert sorted(map(bytes, images)) == sorted(map(bytes, x[train_index]))  # each once
    assert not np.array_equal(epochs[0], epochs[1])
    val_images = np.concatenate([images for images, _ in val_data.as_numpy_iterator()])
    np.testing.assert_array_equal(val_images, x[val_index])  # in order, not shuffled


def test_image_size_override_that_contradicts_the_data_is_refused(tmp_path):
    with pytest.raises(ValueError, match="image_size=32 does not fit the data, which has image_size=8"):
        runs.train("vit-tiny", "digits", tmp_path / "run", epochs=1,
                       overrides={"image_size": 32, "patch_size": 4}, quiet=True)


def test_mixed_precision_policy_names(tmp_path, monkeypatch):
    strategy = tf.distribute.get_strategy()
    assert options.resolve_mixed_precision(None, strategy) is None
    assert options.resolve_mixed_precision("bfloat16", strategy) == "mixed_bfloat16"
    assert options.resolve_mixed_precision("float16", strategy) == "mixed_float16"
    expected = "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"
    assert options.resolve_mixed_precision("auto", strategy) == expected
    # "auto" asks the backend in use (keras_attention.backends.has_gpu), not TensorFlow.
    from keras_attention import backends

    for gpu, policy in ((True, "mixed_float16"), (False, "mixed_bfloat16")):
        monkeypatch.setattr(backends, "has_gpu", lambda gpu=gpu: gpu)
        assert options.resolve_mixed_precision("auto", strategy) == policy


def test_config_files_flat_run_config_and_best_config(tmp_path, numbers_run):
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"d_model": 64, "num_heads": 4}))
    assert runs.read_config_file(flat) == ({"d_model": 64, "num_heads": 4}, {})
    out = numbers_run.run_dir
    overrides, fit = runs.read_config_file(out / "config.json")
    assert overrides == json.loads((out / "config.json").read_text())["model_config"]
    assert fit == {"batch_size": 64}
    zoo.config("transformer-tiny", **overrides)  # a run's config is a valid override set
    best = tmp_path / "best_config.json"
    best.write_text(json.dumps({"model": "vit-tiny", "config": {"hidden_dim": 32},
                                "fit": {"batch_size": 32}, "trial_id": "03"}))
    assert runs.read_config_file(best) == ({"hidden_dim": 32}, {"batch_size": 32})
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        runs.read_config_file(tmp_path / "list.json")
