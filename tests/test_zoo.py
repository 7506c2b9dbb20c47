"""Tests of the model zoo (`zoo/`): registry, parameter counts, training, saving, inspection.

Every registered name is checked against a golden parameter-count table (and
the papers' counts), and built at a tiny size for a forward and backward pass.
Each family (Transformer, RNNsearch, ConvS2S, ViT) is then trained at a tiny size: a few
`fit` steps from numpy and from a `tf.data.Dataset`, overfitting one batch,
`.keras` round trip, `MirroredStrategy`; attention maps are checked against the
attention layers called directly; the compiled recipes against the papers.

Sizes are kept tiny so that the whole file runs in a few minutes on 2 CPU cores.
"""

import dataclasses
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
import zoo
from zoo.runs.callbacks import build_optimizer  # as `zoo train` does: fit traces its step once
from zoo.seq2seq import Seq2SeqConfig
from zoo.transformer import TransformerConfig
from zoo.vit import ViTConfig

START, END = 2, 3

# === Golden parameter counts ===

# Computed once from the sizes and checked against built models below; every
# registered name must be here.
EXPECTED_PARAMS = {
    "convs2s-small": 9_697_088,
    "convs2s-wmt-en-ro": 137_040_960,
    "seq2seq-bahdanau": 80_451_000,
    "seq2seq-bahdanau-small": 1_989_056,
    "transformer-tiny": 1_949_696,
    "transformer-small": 7_577_600,
    "transformer-base": 63_082_496,
    "transformer-big": 214_245_376,
    "vit-tiny": 151_499,  # 151,498 weights + the augmentation step counter
    "vit-tiny-32": 142_026,
    "vit-ti16": 5_717_416,
    "vit-s16": 22_050_664,
    "vit-b16": 86_567_656,
    "vit-l16": 304_326_632,
    "vit-h14": 632_045_800,
}

# Built in well under a second each and < 100 MB.
BUILT_FAST = [
    "convs2s-small", "transformer-tiny", "transformer-small", "seq2seq-bahdanau-small",
    "vit-tiny", "vit-tiny-32", "vit-ti16", "vit-s16",
]
# Measured on the 2-core CI machine: 0.7 s / 1.6 s / 3.4 s to build and about
# 0.3 / 0.4 / 0.5 GB above the TensorFlow baseline (1.3 GB peak process RSS).
BUILT_SLOW = ["transformer-base", "vit-b16", "seq2seq-bahdanau"]
# Never built in tests (0.86 / 1.2 / 2.5 GB of float32 weights): analytic counts only.
# convs2s-wmt-en-ro (137M, 0.55 GB): its formula is checked built at the small and tiny sizes.
NOT_BUILT = ["transformer-big", "vit-l16", "vit-h14", "convs2s-wmt-en-ro"]

# The papers' rounded counts. Transformer: "Attention Is All You Need", Table 3
# (shared source/target vocabulary of ~37k BPE tokens). ViT: Dosovitskiy et al.,
# Table 1 (B, L, H); Ti and S from DeiT (Touvron et al., 2021) and "How to train
# your ViT" (Steiner et al., 2021).
PAPER_PARAMS = {
    "transformer-base": 65e6,
    "transformer-big": 213e6,
    "vit-ti16": 5.7e6,
    "vit-s16": 22e6,
    "vit-b16": 86e6,
    "vit-l16": 307e6,
    "vit-h14": 632e6,
}
# 3.5% relative. The two largest gaps are explained, not bugs:
# - transformer-base counts 63.08M, 3.0% under the paper's 65M. The paper does
#   not break its count down; the architecture as described (6+6 layers, d 512,
#   d_ff 2048, one 37,000 x 512 matrix shared by both embeddings and the
#   pre-softmax projection) gives 63.08M, and any 37k-vocabulary variant without
#   extra matrices lands there (transformer-big: 214.2M, 0.6% over its 213M).
# - vit-l16 counts 304.33M, 0.9% under the paper's 307M; timm's
#   vit_large_patch16_224 has the same 304.33M (1000 classes, 224 px), so the
#   table's 307M is the paper's own rounding/variant (e.g. another head size).
PAPER_RELATIVE_TOLERANCE = 0.035


def test_every_registered_name_has_a_golden_count():
    missing = sorted(set(zoo.list()) - set(EXPECTED_PARAMS))
    assert not missing, f"add these names to EXPECTED_PARAMS: {missing}"
    assert sorted(BUILT_FAST + BUILT_SLOW + NOT_BUILT) == sorted(EXPECTED_PARAMS)


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_analytic_count_matches_golden_table(name):
    assert zoo.describe(name).num_params == EXPECTED_PARAMS[name]


def _check_built_count(name):
    model = zoo.get(name, compile=False)
    assert model.count_params() == zoo.describe(name).num_params == EXPECTED_PARAMS[name]


@pytest.mark.parametrize("name", BUILT_FAST)
def test_built_count_matches_analytic(name):
    _check_built_count(name)


@pytest.mark.large
@pytest.mark.parametrize("name", BUILT_SLOW)
def test_built_count_matches_analytic_larger(name):
    _check_built_count(name)


@pytest.mark.parametrize("name", sorted(PAPER_PARAMS))
def test_analytic_count_matches_paper(name):
    ours, paper = zoo.describe(name).num_params, PAPER_PARAMS[name]
    assert abs(ours - paper) / paper <= PAPER_RELATIVE_TOLERANCE, (name, ours, paper)


# === Tiny sizes and synthetic data ===

TINY = {
    "transformer": dict(
        num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=4,
        intermediate_dim=64, vocabulary_size=50, max_length=32,
    ),
    "seq2seq": dict(
        vocabulary_size=50, embedding_dim=16, encoder_units=16, decoder_units=16,
        attention_units=16, maxout_units=8, max_length=32,
    ),
    "convs2s": dict(
        vocabulary_size=50, embedding_dim=16, hidden_dim=24, output_embedding_dim=12,
        num_encoder_layers=2, num_decoder_layers=2, max_length=32,
    ),
    "vit": dict(
        image_size=16, patch_size=4, hidden_dim=32, num_heads=4, mlp_dim=64, num_layers=1,
        num_classes=10,
    ),
}
# For training tests: no dropout, no label smoothing, short warm-up, larger steps.
TRAINABLE = {
    "transformer": dict(dropout=0.0, label_smoothing=0.0, warmup_steps=20),
    "seq2seq": dict(dropout=0.0, label_smoothing=0.0, learning_rate=1e-2),
    # ConvS2S at Adam 1e-2 overfits chaotically: the order in which a busy CPU's threads add up
    # sums changed the loss ratio after 100 steps from 7e-6 to 1e-2 over 8 identical runs (once
    # past 0.1 in `make test`); at 3e-3 the same 8 runs gave 5e-4 to 2e-3.
    "convs2s": dict(dropout=0.0, optimizer="adam", learning_rate=3e-3, global_clipnorm=1.0),
    "vit": dict(dropout=0.0, warmup_steps=10, learning_rate=3e-3, decay_steps=1000,
                label_smoothing=0.0, random_flip=False, random_translation=0.0,
                random_erasing=0.0),
}
# One registered name per family for the training tests.
FAMILIES = {"transformer": "transformer-tiny", "seq2seq": "seq2seq-bahdanau-small",
            "convs2s": "convs2s-small", "vit": "vit-tiny"}


def family(name):
    return zoo.entry(name).family


def tiny(name, **extra):
    return {**TINY[family(name)], **extra}


def trainable(name):
    return tiny(name, **TRAINABLE[family(name)])


def reverse_task(batch=8, length=6, vocabulary_size=50, seed=0):
    """Reverse the source: `({"source", "target"}, labels)` with padding and [START]/[END].

    Row i has `length - i % 3` real tokens; the target is `[START] reversed` and
    the labels are the target shifted left, ending with `[END]`.
    """
    rng = np.random.default_rng(seed)
    source = np.zeros((batch, length), "int32")
    target = np.zeros((batch, length + 1), "int32")
    labels = np.zeros((batch, length + 1), "int32")
    for i in range(batch):
        n = length - i % 3
        tokens = rng.integers(END + 1, vocabulary_size, n)
        source[i, :n] = tokens
        target[i, 0] = START
        target[i, 1 : n + 1] = tokens[::-1]
        labels[i, :n] = tokens[::-1]
        labels[i, n] = END
    return {"source": source, "target": target}, labels


def random_images(cfg, batch=16, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, cfg.image_size, cfg.image_size, cfg.channels)
    images = rng.integers(0, 256, shape).astype("uint8")
    labels = rng.integers(0, cfg.num_classes, batch).astype("int32")
    return images, labels


def synthetic_batch(name, batch=8, **overrides):
    cfg = zoo.config(name, **overrides)
    if family(name) == "vit":
        return random_images(cfg, batch=batch)
    return reverse_task(batch=batch, vocabulary_size=min(cfg.source_vocab, cfg.target_vocab))


def output_shape(name, inputs, **overrides):
    cfg = zoo.config(name, **overrides)
    if family(name) == "vit":
        return (len(inputs), cfg.num_classes)
    batch, length = inputs["target"].shape
    return (batch, length, cfg.target_vocab)


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


# === Every registered name at a tiny size: build, forward, backward ===


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMS))
def test_every_entry_builds_runs_forward_and_backward(name):
    overrides = tiny(name)
    model = zoo.get(name, compile=False, **overrides)
    assert model.count_params() == zoo.describe(name, **overrides).num_params
    inputs, labels = synthetic_batch(name, batch=4, **overrides)
    with tf.GradientTape() as tape:
        logits = model(inputs, training=True)
        loss = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        loss = keras.ops.mean(loss)
    assert tuple(logits.shape) == output_shape(name, inputs, **overrides)
    assert np.isfinite(numpy(logits)).all()
    gradients = tape.gradient(loss, model.trainable_weights)
    for weight, gradient in zip(model.trainable_weights, gradients):
        assert gradient is not None, f"{name}: no gradient for {weight.path}"
        assert np.isfinite(numpy(gradient)).all(), f"{name}: non-finite gradient for {weight.path}"


# === Training per family ===


def _dataset(inputs, labels, batch_size):
    return tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(batch_size)


@pytest.mark.parametrize("name", sorted(FAMILIES.values()))
def test_fit_from_numpy_and_from_dataset_then_keras_round_trip(name, tmp_path):
    """`fit` from a `tf.data.Dataset` and from numpy; the trained model (optimizer state
    included) saved as `.keras`, loaded, compared and trained on."""
    overrides = tiny(name)
    model = build_optimizer(zoo.get(name, **overrides))  # the family's recipe
    inputs, labels = synthetic_batch(name, batch=8, **overrides)
    dataset = _dataset(inputs, labels, batch_size=4)
    if family(name) != "vit":
        features, batch_labels = next(iter(dataset))
        assert set(features) == {"source", "target"} and batch_labels.shape == (4, 7)
    # The dataset first: its step, traced for batches of unknown size, also serves numpy's.
    history = model.fit(dataset, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    history = model.fit(inputs, labels, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert int(model.optimizer.iterations) == 4
    accuracy = "accuracy" if family(name) == "vit" else "masked_accuracy"
    assert 0.0 <= history.history[accuracy][-1] <= 1.0

    path = tmp_path / f"{name}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(
        numpy(loaded(inputs, training=False)), numpy(model(inputs, training=False))
    )
    # Attention inspection works on the loaded model and gives the same maps.
    expected = zoo.attention_weights(model, inputs)
    actual = zoo.attention_weights(loaded, inputs)
    assert expected.keys() == actual.keys()
    for key in expected:
        np.testing.assert_array_equal(actual[key], expected[key], err_msg=key)
    # Still compiled with the same recipe, optimizer state included, and trainable.
    assert type(loaded.optimizer) is type(model.optimizer)
    assert type(loaded.loss) is type(model.loss)
    assert int(loaded.optimizer.iterations) == int(model.optimizer.iterations) == 4
    for saved, restored in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(numpy(restored), numpy(saved), err_msg=saved.path)
    history = loaded.fit(dataset, epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("name", sorted(FAMILIES.values()))
def test_overfits_one_batch(name):
    """100 steps on one batch cut the loss by at least 90% (a copy-reverse task for seq2seq)."""
    overrides = trainable(name)
    model = build_optimizer(zoo.get(name, **overrides))
    inputs, labels = synthetic_batch(name, batch=16 if family(name) == "vit" else 8, **overrides)
    batch_size = len(labels)
    before = model.evaluate(inputs, labels, batch_size=batch_size, verbose=0, return_dict=True)
    before = before["loss"]
    model.fit(
        tf.data.Dataset.from_tensors((inputs, labels)).repeat(),
        steps_per_epoch=100,
        epochs=1,
        shuffle=False,
        verbose=0,
    )
    after = model.evaluate(inputs, labels, batch_size=batch_size, verbose=0, return_dict=True)
    assert after["loss"] <= 0.1 * before, (before, after)


@pytest.mark.large
@pytest.mark.parametrize("name", sorted(FAMILIES.values()))
def test_builds_and_trains_under_mirrored_strategy(name):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    overrides = tiny(name)
    model = zoo.get(name, strategy=strategy, **overrides)
    assert all(strategy.extended.variable_created_in_scope(w.value) for w in model.weights)
    inputs, labels = synthetic_batch(name, batch=4, **overrides)
    with strategy.scope():
        history = model.fit(_dataset(inputs, labels, 4), epochs=1, shuffle=False, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert int(model.optimizer.iterations.numpy()) == 1


# === Transformer variants ===

TRANSFORMER_VARIANTS = {
    "shared": {},
    "separate-vocabularies": dict(source_vocabulary_size=40, target_vocabulary_size=60),
    "separate-untied": dict(
        source_vocabulary_size=40, target_vocabulary_size=60, tie_embeddings=False
    ),
    "untied": dict(tie_embeddings=False),
    "pre-norm": dict(norm_first=True),
    "learned-positions": dict(positional="learned"),
    "all": dict(
        source_vocabulary_size=40, target_vocabulary_size=60, tie_embeddings=False,
        norm_first=True, positional="learned",
    ),
}


@pytest.mark.parametrize("variant", sorted(TRANSFORMER_VARIANTS))
def test_transformer_variants_match_analytic_count(variant):
    overrides = tiny("transformer-big", **TRANSFORMER_VARIANTS[variant])
    cfg = zoo.config("transformer-big", **overrides)
    model = zoo.get("transformer-big", compile=False, **overrides)
    assert model.count_params() == zoo.describe("transformer-big", **overrides).num_params
    names = {layer.name for layer in model.layers}
    assert ("shared_embedding" in names) == cfg.shared_vocabulary
    assert ("output_projection" in names) == (not cfg.tie_embeddings)
    final_norms = {"encoder_norm", "decoder_norm"} & names
    assert final_norms == ({"encoder_norm", "decoder_norm"} if cfg.norm_first else set())
    inputs, _ = reverse_task(batch=2, vocabulary_size=40)
    logits = model(inputs)
    assert tuple(logits.shape) == (2, 7, cfg.target_vocab)
    assert np.isfinite(numpy(logits)).all()


def _decoder_output(model, inputs):
    """The features fed to the output projection `(B, T, D)`."""
    last = "decoder_norm" if "decoder_norm" in {layer.name for layer in model.layers} else None
    if last is None:
        blocks = [layer.name for layer in model.layers if layer.name.startswith("decoder_block_")]
        last = sorted(blocks)[-1]
    return keras.Model(model.inputs, model.get_layer(last).output)(inputs)


def test_shared_vocabulary_ties_one_matrix_for_source_target_and_logits():
    overrides = tiny("transformer-tiny")
    model = zoo.get("transformer-tiny", compile=False, **overrides)
    cfg = zoo.config("transformer-tiny", **overrides)
    embedding = model.get_layer("shared_embedding")
    names = {layer.name for layer in model.layers}
    assert "source_embedding" not in names and "target_embedding" not in names
    # One (V, D) matrix in the whole model...
    matrices = [w for w in model.weights if tuple(w.shape) == (cfg.vocabulary_size, cfg.d_model)]
    assert len(matrices) == 1 and matrices[0] is embedding.embeddings
    # ...used for the source, the target and (reversed) the logits.
    assert len(embedding._inbound_nodes) == 3
    inputs, _ = reverse_task(batch=2, vocabulary_size=cfg.vocabulary_size)
    features = numpy(_decoder_output(model, inputs))
    expected = features @ numpy(embedding.embeddings).T
    np.testing.assert_allclose(numpy(model(inputs)), expected, rtol=1e-5, atol=1e-5)


def test_separate_vocabularies_tie_target_embedding_with_logits():
    overrides = tiny(
        "transformer-tiny", source_vocabulary_size=40, target_vocabulary_size=60
    )
    model = zoo.get("transformer-tiny", compile=False, **overrides)
    source = model.get_layer("source_embedding")
    target = model.get_layer("target_embedding")
    assert source.embeddings.shape == (40, 32) and target.embeddings.shape == (60, 32)
    inputs, _ = reverse_task(batch=2, vocabulary_size=40)
    features = numpy(_decoder_output(model, inputs))
    np.testing.assert_allclose(
        numpy(model(inputs)), features @ numpy(target.embeddings).T, rtol=1e-5, atol=1e-5
    )


SEQ2SEQ_VARIANTS = {
    "gru": {},
    "lstm": dict(cell="lstm"),
    "separate-vocabularies": dict(source_vocabulary_size=40, target_vocabulary_size=60),
}


@pytest.mark.parametrize("variant", sorted(SEQ2SEQ_VARIANTS))
def test_seq2seq_variants_match_analytic_count(variant):
    overrides = tiny("seq2seq-bahdanau", **SEQ2SEQ_VARIANTS[variant])
    model = zoo.get("seq2seq-bahdanau", compile=False, **overrides)
    assert model.count_params() == zoo.describe("seq2seq-bahdanau", **overrides).num_params
    inputs, _ = reverse_task(batch=2, vocabulary_size=40)
    logits = model(inputs)
    assert tuple(logits.shape) == (2, 7, zoo.config("seq2seq-bahdanau", **overrides).target_vocab)
    alignment = zoo.attention_weights(model, inputs)["decoder/alignment"]
    _check_rows(alignment, np.ones((2, 7), bool), (inputs["source"] != 0)[:, None, :])


# === Regressions of bugs found while writing these tests ===


def test_vit_augmentation_is_inactive_when_called_without_training():
    model = zoo.get("vit-tiny-32", compile=False, **tiny("vit-tiny-32"))
    assert zoo.config("vit-tiny-32").random_flip  # the entry does augment in training
    images, _ = random_images(zoo.config("vit-tiny-32", **tiny("vit-tiny-32")), batch=4)
    np.testing.assert_array_equal(
        numpy(model(images)), numpy(model(images, training=False))
    )
    flipped = numpy(model(images[:, :, ::-1], training=False))
    assert not np.allclose(flipped, numpy(model(images, training=False)))


def _fit_and_reload(model, images, labels, tmp_path):
    """Two epochs of `fit` (finite loss), then a `.keras` round trip that predicts the same."""
    history = model.fit(images, labels, epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    path = tmp_path / "vit.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(numpy(loaded(images)), numpy(model(images)), atol=1e-6)
    return loaded


@pytest.mark.large
def test_vit_shifted_patches_and_erasing_count_train_and_round_trip(tmp_path):
    overrides = trainable("vit-tiny") | dict(shifted_patches=True, random_erasing=0.5,
                                               random_translation=0.1, random_flip=True,
                                               jit_compile=True)
    model = build_optimizer(zoo.get("vit-tiny", **overrides))
    assert model.count_params() == zoo.describe("vit-tiny", **overrides).num_params
    assert model.get_layer("patch_embedding").weights[0].shape[2] == 5  # 5 x 1 channel
    images, labels = random_images(zoo.config("vit-tiny", **overrides), batch=8)
    # Augmentation (erasing too) only in training.
    np.testing.assert_array_equal(numpy(model(images)), numpy(model(images, training=False)))
    augmented = numpy(model.get_layer("augmentation")(images.astype("float32"), training=True))
    assert (augmented == 0).sum() > (images == 0).sum()  # something was erased
    loaded = _fit_and_reload(model, images, labels, tmp_path)  # under XLA
    weights = zoo.attention_weights(loaded, images[:2])
    blocks = [key for key in weights if key.startswith("encoder_block_")]
    assert len(blocks) == overrides["num_layers"]


@pytest.mark.large
@pytest.mark.parametrize("pooling", ["gap", "seq"])
def test_vit_pooling_without_class_token_counts_trains_and_round_trips(pooling, tmp_path):
    overrides = trainable("vit-tiny") | dict(pooling=pooling)
    cfg = zoo.config("vit-tiny", **overrides)
    model = build_optimizer(zoo.get("vit-tiny", **overrides))
    assert model.count_params() == zoo.describe("vit-tiny", **overrides).num_params
    layer_names = [layer.name for layer in model.layers]
    assert "class_token" not in layer_names and "pooling" in layer_names
    images, labels = random_images(cfg, batch=8)
    loaded = _fit_and_reload(model, images, labels, tmp_path)
    weights = zoo.attention_weights(loaded, images[:2])
    assert weights["encoder_block_0/self_attention"].shape[-1] == cfg.num_patches  # no class token
    assert weights["pooling"].shape == (2, cfg.num_patches)
    if pooling == "seq":  # the head sees Σ_t α_t x_t of the normalised patch outputs
        features = keras.Model(model.input, model.get_layer("encoder_norm").output)(images)
        pooled, alpha = model.get_layer("pooling")(features, return_attention_scores=True)
        np.testing.assert_allclose(numpy(alpha).sum(-1), 1.0, atol=1e-6)
        np.testing.assert_allclose(weights["pooling"], numpy(alpha)[:2], atol=1e-6)
        head = model.get_layer("head")
        np.testing.assert_allclose(numpy(head(pooled)), numpy(model(images)), atol=1e-5)
    else:
        np.testing.assert_allclose(weights["pooling"], 1.0 / cfg.num_patches)


@pytest.mark.large
def test_vit_augmentation_until_counts_fit_steps_and_round_trips(tmp_path):
    overrides = trainable("vit-tiny") | dict(random_erasing=1.0, augmentation_until=0.5,
                                               decay_steps=6)
    cfg = zoo.config("vit-tiny", **overrides)
    assert cfg.augmentation_steps == 3
    model = build_optimizer(zoo.get("vit-tiny", **overrides))
    assert model.count_params() == zoo.describe("vit-tiny", **overrides).num_params
    augmentation = model.get_layer("augmentation")
    assert augmentation.stop_step == 3
    images, labels = random_images(cfg, batch=10)
    model.fit(images, labels, batch_size=2, epochs=1, verbose=0)  # 5 steps
    model.evaluate(images, labels, verbose=0)  # not counted
    assert int(augmentation.step.numpy()) == 5
    ones = np.ones((2, 16, 16, 1), "float32")
    np.testing.assert_array_equal(numpy(augmentation(ones, training=True)), ones)
    path = tmp_path / "vit.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("augmentation").stop_step == 3
    assert int(loaded.get_layer("augmentation").step.numpy()) == 6  # 5 + the call above
    np.testing.assert_allclose(numpy(loaded(images)), numpy(model(images)), atol=1e-6)
    # Without augmentation there is no step to stop at, and nothing is counted.
    plain = zoo.config("vit-tiny", **(overrides | dict(random_erasing=0.0)))
    assert plain.augmentation_steps is None
    assert zoo.config("vit-tiny").augmentation_until == 0.9  # the recipe's last 10% plain
    for bad in (0, 0.0, 1.5, -0.1, True, "0.9"):
        with pytest.raises(ValueError, match="augmentation_until"):
            zoo.config("vit-tiny", augmentation_until=bad)


def test_seq2seq_rejects_jit_compile_with_a_clear_error():
    # The decoder's keras.ops.scan is a tf.while_loop of unknown length, which XLA cannot
    # differentiate: the config says so instead of a cryptic error inside fit().
    with pytest.raises(ValueError, match="jit_compile=True.*not supported"):
        zoo.config("seq2seq-bahdanau-small", jit_compile=True)


# === Attention inspection ===


def _transformer_inputs():
    inputs, _ = reverse_task(batch=3, length=6, vocabulary_size=50)
    return inputs


def _check_rows(weights, query_mask, key_mask):
    """Rows of real queries sum to 1 over real keys, and give masked keys 0 weight."""
    weights = np.asarray(weights, "float64")
    real = weights * key_mask
    sums = real.sum(-1)
    np.testing.assert_allclose(sums[query_mask], 1.0, atol=1e-5)
    np.testing.assert_allclose(weights * ~key_mask, 0.0, atol=1e-7)
    assert (weights >= 0).all()


def test_transformer_attention_weights_shapes_and_masks():
    overrides = tiny("transformer-tiny", num_encoder_layers=2, num_decoder_layers=2)
    model = zoo.get("transformer-tiny", compile=False, **overrides)
    inputs = _transformer_inputs()
    weights = zoo.attention_weights(model, inputs)
    batch, source_length = inputs["source"].shape
    target_length = inputs["target"].shape[1]
    heads = 4
    assert sorted(weights) == sorted(
        [f"encoder_block_{i}/self_attention" for i in range(2)]
        + [f"decoder_block_{i}/{k}" for i in range(2) for k in ("self_attention", "cross_attention")]
    )
    source_real = inputs["source"] != 0  # (B, S)
    target_real = inputs["target"] != 0  # (B, T)
    causal = np.tril(np.ones((target_length, target_length), bool))
    for i in range(2):
        w = weights[f"encoder_block_{i}/self_attention"]
        assert w.shape == (batch, heads, source_length, source_length)
        _check_rows(w, np.broadcast_to(source_real[:, None, :], w.shape[:-1]),
                    source_real[:, None, None, :])
        w = weights[f"decoder_block_{i}/self_attention"]
        assert w.shape == (batch, heads, target_length, target_length)
        _check_rows(w, np.broadcast_to(target_real[:, None, :], w.shape[:-1]),
                    target_real[:, None, None, :] & causal[None, None])
        w = weights[f"decoder_block_{i}/cross_attention"]
        assert w.shape == (batch, heads, target_length, source_length)
        _check_rows(w, np.broadcast_to(target_real[:, None, :], w.shape[:-1]),
                    source_real[:, None, None, :])


def _keras_mha_copy(ours):
    """`keras.layers.MultiHeadAttention` with the weights of our layer."""
    reference = keras.layers.MultiHeadAttention(ours.num_heads, ours.key_dim)
    d_model = ours.query_kernel.shape[0]
    probe = np.zeros((1, 1, d_model), "float32")
    reference(probe, probe)
    reference.set_weights(
        [numpy(w) for w in (
            ours.query_kernel, ours.query_bias, ours.key_kernel, ours.key_bias,
            ours.value_kernel, ours.value_bias, ours.output_kernel, ours.output_bias,
        )]
    )
    return reference


def test_transformer_attention_weights_equal_multi_head_attention_called_directly():
    overrides = tiny("transformer-tiny")
    model = zoo.get("transformer-tiny", compile=False, **overrides)
    inputs = _transformer_inputs()
    weights = zoo.attention_weights(model, inputs)
    embedding = model.get_layer("shared_embedding")
    source_real = inputs["source"] != 0
    target_real = inputs["target"] != 0

    # Encoder layer 0 (post-norm: attention sees the embedding output directly).
    x = embedding(inputs["source"])  # (B, S, D)
    attention = model.get_layer("encoder_block_0").self_attention
    _, ours = attention(
        x, x, query_mask=source_real, value_mask=source_real, return_attention_scores=True
    )
    np.testing.assert_allclose(weights["encoder_block_0/self_attention"], numpy(ours), atol=1e-6)
    # Keras's own layer with the same weights agrees on every real query.
    _, reference = _keras_mha_copy(attention)(
        x, x, query_mask=source_real, value_mask=source_real, return_attention_scores=True
    )
    rows = np.broadcast_to(source_real[:, None, :], numpy(ours).shape[:-1])
    np.testing.assert_allclose(
        weights["encoder_block_0/self_attention"][rows], numpy(reference)[rows], atol=1e-5
    )

    # Decoder layer 0 self-attention, causal, from the target embedding.
    y = embedding(inputs["target"])
    attention = model.get_layer("decoder_block_0").self_attention
    _, ours = attention(
        y, y, query_mask=target_real, value_mask=target_real, use_causal_mask=True,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(weights["decoder_block_0/self_attention"], numpy(ours), atol=1e-6)
    _, reference = _keras_mha_copy(attention)(
        y, y, query_mask=target_real, value_mask=target_real, use_causal_mask=True,
        return_attention_scores=True,
    )
    rows = np.broadcast_to(target_real[:, None, :], numpy(ours).shape[:-1])
    np.testing.assert_allclose(
        weights["decoder_block_0/self_attention"][rows], numpy(reference)[rows], atol=1e-5
    )


def test_seq2seq_attention_weights_shapes_and_masks():
    overrides = tiny("seq2seq-bahdanau-small")
    model = zoo.get("seq2seq-bahdanau-small", compile=False, **overrides)
    inputs, _ = reverse_task(batch=3, length=6, vocabulary_size=50)
    weights = zoo.attention_weights(model, inputs)
    assert list(weights) == ["decoder/alignment"]
    alignment = weights["decoder/alignment"]
    assert alignment.shape == (3, 7, 6)  # (B, T, S)
    source_real = inputs["source"] != 0
    _check_rows(alignment, np.ones(alignment.shape[:-1], bool), source_real[:, None, :])


def test_vit_attention_weights_shapes_and_rows():
    overrides = tiny("vit-tiny", num_layers=2, pooling="cls", num_heads=4)
    model = zoo.get("vit-tiny", compile=False, **overrides)
    images, _ = random_images(zoo.config("vit-tiny", **overrides), batch=2)
    weights = zoo.attention_weights(model, images)
    patches = (16 // 4) ** 2
    assert sorted(weights) == [f"encoder_block_{i}/self_attention" for i in range(2)]
    for w in weights.values():
        assert w.shape == (2, 4, patches + 1, patches + 1)  # index 0: the class token
        _check_rows(w, np.ones(w.shape[:-1], bool), np.ones(w.shape[-1:], bool))


def test_attention_weights_rejects_other_models():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match="not a zoo model"):
        zoo.attention_weights(model, np.zeros((1, 4), "float32"))


# === Training recipes ===


def test_transformer_recipe_is_the_papers():
    model = zoo.get("transformer-tiny", **tiny("transformer-tiny"))
    optimizer = model.optimizer
    assert isinstance(optimizer, keras.optimizers.Adam)
    assert optimizer.beta_1 == 0.9 and optimizer.beta_2 == 0.98 and optimizer.epsilon == 1e-9
    schedule = optimizer._learning_rate
    assert isinstance(schedule, ka.TransformerSchedule)
    assert schedule.d_model == 32 and schedule.warmup_steps == 1000
    # Peak at the end of warm-up: d^-0.5 · warmup^-0.5 (step counted from 1).
    np.testing.assert_allclose(float(schedule(999)), 32**-0.5 * 1000**-0.5, rtol=1e-6)
    assert isinstance(model.loss, ka.MaskedSparseCategoricalCrossentropy)
    assert model.loss.label_smoothing == 0.1
    assert not model.jit_compile  # XLA is slower with dropout on CPU (BENCHMARKS.md)


def test_seq2seq_recipe_is_adam_with_the_global_norm_clipped():
    model = zoo.get("seq2seq-bahdanau-small", **tiny("seq2seq-bahdanau-small"))
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    assert model.optimizer.global_clipnorm == 1.0 and model.optimizer.clipnorm is None
    np.testing.assert_allclose(float(model.optimizer.learning_rate), 1e-3)
    assert isinstance(model.loss, ka.MaskedSparseCategoricalCrossentropy)


def test_convs2s_recipe_is_the_papers_nesterov_sgd_with_the_global_norm_clipped():
    optimizer = zoo.get("convs2s-wmt-en-ro", **tiny("convs2s-wmt-en-ro")).optimizer
    assert isinstance(optimizer, keras.optimizers.SGD) and optimizer.nesterov
    assert optimizer.momentum == 0.99 and float(optimizer.learning_rate) == 0.25
    assert optimizer.global_clipnorm == 0.1 and optimizer.clipnorm is None
    small = zoo.get("convs2s-small", **tiny("convs2s-small")).optimizer
    assert isinstance(small, keras.optimizers.Adam)
    assert small.global_clipnorm == 1.0 and small.clipnorm is None


# === Gradient clipping: the global norm, as the papers (docs/math.md#gradient-clipping) ===

# Entry -> (overrides beyond the tiny sizes, the recipe's threshold c). The ViT starts at its
# peak rate (no warm-up: a first rate of 0 would move nothing).
CLIPPED_RECIPES = {
    "seq2seq-bahdanau-small": ({}, 1.0),  # Adam
    "convs2s-wmt-en-ro": ({}, 0.1),  # the paper's Nesterov SGD
    "convs2s-small": ({}, 1.0),  # Adam
    "vit-tiny": (dict(warmup_steps=0, learning_rate=1e-2, decay_steps=10), 1.0),  # AdamW
}
# Two steps of gradients for two variables, in units of c: the first's global norm is 5.1 c
# (the first variable's 5.1 c, the second's 0.37 c: clipping each variable on its own would
# leave the second whole), the second's 0.41 c (below c: left whole however one clips).
CLIP_STEPS = [
    [np.array([3.0, -4.0, 1.0]), np.array([[0.2, -0.1], [0.05, 0.3]])],
    [np.array([0.1, 0.2, -0.3]), np.array([[0.1, 0.1], [-0.2, 0.0]])],
]
CLIP_INITIAL = [np.array([0.5, -0.25, 0.125]), np.array([[0.5, 0.25], [-0.5, 0.75]])]


def _clip_global(gradients, clipnorm):
    """`g · c / max(‖g‖, c)`, one norm over every variable's gradient (the papers')."""
    norm = np.sqrt(sum(np.sum(np.square(g)) for g in gradients))
    return [g * clipnorm / max(norm, clipnorm) for g in gradients]


def _clip_each(gradients, clipnorm):
    """Keras' `clipnorm`: each variable's gradient to norm at most c on its own."""
    return [_clip_global([g], clipnorm)[0] for g in gradients]


def _reference_step(optimizer, weight, gradient, state, rate, step):
    """One update of Keras' SGD (Nesterov momentum) or Adam / AdamW in NumPy: `(weight, state)`."""
    if isinstance(optimizer, keras.optimizers.SGD):
        velocity = optimizer.momentum * state - rate * gradient
        return weight + optimizer.momentum * velocity - rate * gradient, velocity
    m, v = state
    weight = weight - weight * (optimizer.weight_decay or 0.0) * rate  # AdamW's decay first
    m = m + (gradient - m) * (1 - optimizer.beta_1)
    v = v + (gradient**2 - v) * (1 - optimizer.beta_2)
    alpha = rate * np.sqrt(1 - optimizer.beta_2**step) / (1 - optimizer.beta_1**step)
    return weight - alpha * m / (np.sqrt(v) + optimizer.epsilon), (m, v)


def _reference(optimizer, steps, rates, clip):
    """The weights after `steps` (clipped by `clip`) from `CLIP_INITIAL`, in NumPy."""
    weights = [w.copy() for w in CLIP_INITIAL]
    zero = [np.zeros_like(w) for w in weights]
    states = zero if isinstance(optimizer, keras.optimizers.SGD) else list(zip(zero, zero))
    for step, (gradients, rate) in enumerate(zip(steps, rates), start=1):
        for i, gradient in enumerate(clip(gradients)):
            weights[i], states[i] = _reference_step(optimizer, weights[i], gradient, states[i],
                                                    rate, step)
    return weights


@pytest.mark.parametrize("name", sorted(CLIPPED_RECIPES))
def test_recipe_clips_the_global_norm_of_the_gradient(name):
    overrides, clipnorm = CLIPPED_RECIPES[name]
    optimizer = zoo.get(name, **tiny(name, **overrides)).optimizer  # as the recipe builds it
    assert optimizer.global_clipnorm == clipnorm and optimizer.clipnorm is None
    steps = [[clipnorm * g for g in gradients] for gradients in CLIP_STEPS]
    # The gradients the optimizer updates with (`zoo.get`'s `_clip_gradients`, on one device).
    for gradients in steps:
        clipped = optimizer._clip_gradients([keras.ops.convert_to_tensor(g, "float32")
                                             for g in gradients])
        for got, expected in zip(clipped, _clip_global(gradients, clipnorm)):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(got), expected, rtol=1e-6)
    # Two real updates of two variables, against NumPy's update of the globally clipped ones.
    variables = [keras.Variable(w.astype("float32"), name=f"kernel_{i}")
                 for i, w in enumerate(CLIP_INITIAL)]
    rates = []
    for gradients in steps:
        rates.append(float(keras.ops.convert_to_numpy(optimizer.learning_rate)))
        optimizer.apply([keras.ops.convert_to_tensor(g, "float32") for g in gradients], variables)
    expected = _reference(optimizer, steps, rates, lambda g: _clip_global(g, clipnorm))
    per_variable = _reference(optimizer, steps, rates, lambda g: _clip_each(g, clipnorm))
    for variable, initial, want in zip(variables, CLIP_INITIAL, expected):
        moved = keras.ops.convert_to_numpy(variable) - initial
        np.testing.assert_allclose(moved, want - initial, rtol=1e-4, atol=1e-7)
    # Clipping each variable on its own would move the second one otherwise, by far more than
    # the tolerance above: the comparison tells the two apart.
    tolerance = 1e-4 * np.abs(expected[1] - CLIP_INITIAL[1]).max() + 1e-7
    assert np.abs(per_variable[1] - expected[1]).max() > 100 * tolerance


def test_clipnorm_alone_clips_per_variable_as_the_runs_saved_before_global_clipnorm():
    """An earlier run's config holds `clipnorm` (per variable, as it trained): given alone it
    sets `global_clipnorm` to None, and the optimizer clips per variable; both set is refused."""
    for name in ("seq2seq-bahdanau-small", "convs2s-small", "convs2s-wmt-en-ro"):
        config = zoo.config(name, clipnorm=0.5)
        assert config.clipnorm == 0.5 and config.global_clipnorm is None
        assert zoo.config(name, clipnorm=None).global_clipnorm is not None  # the recipe's
        optimizer = zoo.get(name, **tiny(name, clipnorm=0.5)).optimizer
        assert optimizer.clipnorm == 0.5 and optimizer.global_clipnorm is None
        neither = zoo.config(name, clipnorm=None, global_clipnorm=None)
        assert neither.clipnorm is None and neither.global_clipnorm is None  # no clipping
        with pytest.raises(ValueError, match=r"`clipnorm` must be None when global_clipnorm="):
            zoo.config(name, clipnorm=0.5, global_clipnorm=1.0)


def test_vit_recipe_is_adamw_with_warmup_and_cosine_decay():
    overrides = tiny("vit-tiny", warmup_steps=100, decay_steps=1000, learning_rate=2e-3,
                     pooling="cls")
    model = zoo.get("vit-tiny", **overrides)
    optimizer = model.optimizer
    assert isinstance(optimizer, keras.optimizers.AdamW)
    assert optimizer.weight_decay == 0.05
    schedule = optimizer._learning_rate
    assert float(schedule(0)) == 0.0
    np.testing.assert_allclose(float(schedule(50)), 1e-3, rtol=1e-6)  # linear warm-up
    np.testing.assert_allclose(float(schedule(100)), 2e-3, rtol=1e-6)  # the peak
    np.testing.assert_allclose(float(schedule(100 + 500)), 1e-3, rtol=1e-5)  # half-way cosine
    np.testing.assert_allclose(float(schedule(100 + 1000)), 0.0, atol=1e-9)  # the end
    # Weight decay on the kernels only.
    weights = {w.path: w for w in model.trainable_weights}
    kernel = next(w for p, w in weights.items() if p.endswith("head/kernel"))
    bias = next(w for p, w in weights.items() if p.endswith("head/bias"))
    token = next(w for p, w in weights.items() if p.endswith("class_token/token"))
    assert optimizer._use_weight_decay(kernel)
    assert not optimizer._use_weight_decay(bias)
    assert not optimizer._use_weight_decay(token)
    seq = zoo.get("vit-tiny", **(overrides | dict(pooling="seq")))
    scoring = next(w for w in seq.trainable_weights if w.path.endswith("pooling/kernel"))
    assert seq.optimizer._use_weight_decay(scoring)  # SequencePooling's w is a kernel


# === Registry behaviour ===


def test_unknown_name_suggests_the_closest():
    for call in (zoo.get, zoo.config, zoo.describe, zoo.entry, zoo.unregister):
        with pytest.raises(zoo.UnknownModelError) as info:
            call("transformer-bse")
        assert isinstance(info.value, ValueError)
        assert "did you mean 'transformer-base'" in str(info.value).lower()


def test_unknown_override_lists_valid_fields():
    with pytest.raises(ValueError, match="d_modle") as info:
        zoo.get("transformer-tiny", d_modle=64)
    assert "Valid fields" in str(info.value) and "d_model" in str(info.value)
    with pytest.raises(ValueError, match="hidden_size"):
        zoo.describe("vit-tiny", hidden_size=64)


BAD_OVERRIDES = [
    ("transformer-tiny", dict(num_heads=3), "num_heads"),  # 128 % 3
    ("transformer-tiny", dict(d_model=0), "d_model"),
    ("transformer-tiny", dict(num_encoder_layers=-1), "num_encoder_layers"),
    ("transformer-tiny", dict(vocabulary_size=2.5), "vocabulary_size"),
    ("transformer-tiny", dict(source_vocabulary_size=0), "source_vocabulary_size"),
    ("transformer-tiny", dict(intermediate_dim=True), "intermediate_dim"),
    ("transformer-tiny", dict(dropout=1.0), "dropout"),
    ("transformer-tiny", dict(dropout=-0.1), "dropout"),
    ("transformer-tiny", dict(attention_dropout=1.0), "attention_dropout"),
    ("transformer-tiny", dict(label_smoothing=1.0), "label_smoothing"),
    ("transformer-tiny", dict(positional="rotary"), "positional"),
    ("transformer-tiny", dict(learning_rate_scale=0.0), "learning_rate_scale"),
    ("transformer-tiny", dict(warmup_steps=0), "warmup_steps"),
    ("vit-tiny", dict(patch_size=5), "patch_size"),  # 28 % 5
    ("vit-tiny", dict(num_heads=3), "num_heads"),  # 64 % 3
    ("vit-tiny", dict(image_size=0), "image_size"),
    ("vit-tiny", dict(hidden_dim=-64), "hidden_dim"),
    ("vit-tiny", dict(num_layers=0), "num_layers"),
    ("vit-tiny", dict(dropout=1.0), "dropout"),
    ("vit-tiny", dict(dropout=-0.1), "dropout"),
    ("vit-tiny", dict(warmup_steps=-1), "warmup_steps"),
    ("vit-tiny", dict(learning_rate=0.0), "learning_rate"),
    ("vit-tiny", dict(weight_decay=-0.1), "weight_decay"),
    ("vit-tiny", dict(random_erasing=1.5), "random_erasing"),
    ("vit-tiny", dict(random_erasing=-0.1), "random_erasing"),
    ("vit-tiny", dict(random_zoom=0.1, jit_compile=True), "random_zoom"),
    ("seq2seq-bahdanau-small", dict(encoder_units=0), "encoder_units"),
    ("seq2seq-bahdanau-small", dict(dropout=1.0), "dropout"),
    ("seq2seq-bahdanau-small", dict(dropout=-0.1), "dropout"),
    ("seq2seq-bahdanau-small", dict(cell="rnn"), "cell"),
    ("seq2seq-bahdanau-small", dict(clipnorm=0.0), "clipnorm"),
    ("seq2seq-bahdanau-small", dict(global_clipnorm=0.0), "global_clipnorm"),
    ("convs2s-small", dict(global_clipnorm=-1.0), "global_clipnorm"),
    ("convs2s-small", dict(global_clipnorm=1.0, clipnorm=1.0), "clipnorm"),
    ("convs2s-small", dict(kernel_size=0), "kernel_size"),
    ("convs2s-small", dict(hidden_dim=-1), "hidden_dim"),
    ("convs2s-small", dict(dropout=1.0), "dropout"),
    ("convs2s-small", dict(optimizer="sgd"), "optimizer"),
    ("convs2s-small", dict(momentum=1.0), "momentum"),
    ("convs2s-small", dict(learning_rate=0.0), "learning_rate"),
]


@pytest.mark.parametrize(
    "name, overrides, field", BAD_OVERRIDES, ids=[f"{n}-{f}" for n, o, f in BAD_OVERRIDES]
)
def test_bad_values_name_the_field_before_anything_is_built(name, overrides, field):
    pattern = rf"\b{field}\b"
    # `zoo.config` alone (nothing built) raises...
    with pytest.raises(ValueError, match=pattern) as info:
        zoo.config(name, **overrides)
    assert "received" in str(info.value)
    with pytest.raises(ValueError, match=pattern):
        zoo.describe(name, **overrides)
    # ...and `zoo.get` raises before calling the builder.
    calls = []

    def spy(cfg):
        calls.append(cfg)
        return zoo.entry(name).builder(cfg)

    spy_name = f"{name}-spy"
    zoo.register(spy_name, spy, zoo.config(name), overwrite=True)
    try:
        with pytest.raises(ValueError, match=pattern):
            zoo.get(spy_name, **overrides)
    finally:
        zoo.unregister(spy_name)
    assert not calls


def test_configs_are_frozen():
    cfg = zoo.config("transformer-tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 64
    assert zoo.config("transformer-tiny", d_model=64).d_model == 64
    assert zoo.config("transformer-tiny").d_model == 128  # the entry is unchanged


def test_list_globs_and_sorts():
    everything = zoo.list()
    assert everything == sorted(everything) == sorted(EXPECTED_PARAMS)
    assert zoo.list("vit-*") == [
        "vit-b16", "vit-h14", "vit-l16", "vit-s16", "vit-ti16", "vit-tiny", "vit-tiny-32"
    ]
    assert zoo.list("transformer-*") == [
        "transformer-base", "transformer-big", "transformer-small", "transformer-tiny"
    ]
    assert zoo.list("*-small") == ["convs2s-small", "seq2seq-bahdanau-small", "transformer-small"]
    assert zoo.list("vit-?16") == ["vit-b16", "vit-l16", "vit-s16"]
    assert zoo.list("nothing-*") == []


@pytest.fixture
def user_entry():
    """A small user Transformer registered for one test and removed afterwards."""
    name = "my-test-transformer"
    cfg = TransformerConfig(
        vocabulary_size=60, num_encoder_layers=1, num_decoder_layers=1, d_model=16,
        num_heads=2, intermediate_dim=32, max_length=16, warmup_steps=50,
    )
    zoo.register(name, zoo.transformer.build, cfg, reference="a test entry")
    yield name, cfg
    if name in zoo.list():
        zoo.unregister(name)


@pytest.mark.large
def test_register_a_user_entry(user_entry):
    name, cfg = user_entry
    assert name in zoo.list() and name in zoo.list("my-*")
    assert zoo.entry(name).family == "transformer"
    model = zoo.get(name)
    description = zoo.describe(name)
    assert model.count_params() == description.num_params == cfg.num_params()
    assert description.family == "transformer"
    # The family's recipe is applied to the user's entry.
    assert isinstance(model.optimizer._learning_rate, ka.TransformerSchedule)
    assert model.optimizer._learning_rate.d_model == 16
    assert model.optimizer.beta_2 == 0.98 and model.loss.label_smoothing == 0.1
    inputs, labels = reverse_task(batch=4, vocabulary_size=60)
    build_optimizer(model).fit(inputs, labels, epochs=1, verbose=0)
    # Overrides work on user entries too.
    assert zoo.get(name, compile=False, d_model=32).count_params() == dataclasses.replace(
        cfg, d_model=32
    ).num_params()
    zoo.unregister(name)
    assert name not in zoo.list()
    with pytest.raises(zoo.UnknownModelError):
        zoo.get(name)


def test_register_with_own_compile_fn(user_entry):
    name, cfg = user_entry
    compiled = []

    def compile_fn(model, config):
        compiled.append(config)
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")

    zoo.register(name, zoo.transformer.build, cfg, compile_fn=compile_fn, overwrite=True)
    model = zoo.get(name, d_model=32)
    assert compiled == [dataclasses.replace(cfg, d_model=32)]
    assert isinstance(model.optimizer, keras.optimizers.SGD)


def test_register_without_a_recipe_needs_compile_false():
    @dataclasses.dataclass(frozen=True)
    class DenseConfig:
        units: int = 3

    def build(cfg):
        inputs = keras.Input((4,))
        return keras.Model(inputs, keras.layers.Dense(cfg.units)(inputs))

    zoo.register("my-dense", build, DenseConfig())
    try:
        assert zoo.entry("my-dense").family == "custom"
        with pytest.raises(ValueError, match="no training recipe"):
            zoo.get("my-dense")
        assert zoo.get("my-dense", compile=False, units=5).output.shape == (None, 5)
        assert zoo.describe("my-dense").num_params is None  # no analytic count
        assert "unknown until built" in str(zoo.describe("my-dense"))
    finally:
        zoo.unregister("my-dense")


def test_duplicate_registration_warns(user_entry):
    name, cfg = user_entry
    with pytest.warns(UserWarning, match=re.escape(repr(name))):
        zoo.register(name, zoo.transformer.build, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.register(name, zoo.transformer.build, cfg, overwrite=True)


@pytest.mark.parametrize(
    "args, message",
    [
        (("", zoo.transformer.build, TransformerConfig()), "non-empty string"),
        (("x", "not callable", TransformerConfig()), "callable"),
        (("x", zoo.transformer.build, {"d_model": 8}), "dataclass"),
        (("x", zoo.transformer.build, TransformerConfig), "dataclass"),
    ],
)
def test_register_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        zoo.register(*args)
    assert "x" not in zoo.list()


@pytest.mark.parametrize("name", ["transformer-base", "seq2seq-bahdanau", "vit-b16"])
def test_describe_prints_name_count_and_reference(name):
    description = zoo.describe(name)
    text = str(description)
    assert name in text
    assert f"{EXPECTED_PARAMS[name]:,}" in text
    assert description.reference and description.reference in text
    assert "inputs:" in text and "outputs:" in text
    as_dict = description.to_dict()
    assert as_dict["num_params"] == EXPECTED_PARAMS[name]
    assert as_dict["config"] == dataclasses.asdict(zoo.config(name))


def test_describe_reflects_overrides():
    description = zoo.describe("vit-b16", num_classes=10, image_size=32, patch_size=4)
    assert isinstance(description.config, ViTConfig)
    assert "10" in description.outputs["logits"]
    assert description.num_params == dataclasses.replace(
        zoo.config("vit-b16"), num_classes=10, image_size=32, patch_size=4
    ).num_params()
    seq = zoo.describe("seq2seq-bahdanau", target_vocabulary_size=123)
    assert isinstance(seq.config, Seq2SeqConfig) and "123" in seq.outputs["logits"]


@pytest.mark.parametrize("name", ["transformer-base", "seq2seq-bahdanau", "convs2s-small"])
def test_translation_configs_default_each_vocabulary_to_vocabulary_size(name):
    shared = zoo.config(name, vocabulary_size=100)
    assert (shared.source_vocab, shared.target_vocab) == (100, 100)
    separate = zoo.config(name, vocabulary_size=100, source_vocabulary_size=30,
                          target_vocabulary_size=40)
    assert (separate.source_vocab, separate.target_vocab) == (30, 40)
    description = zoo.describe(name, target_vocabulary_size=40)
    assert sorted(description.inputs) == ["source", "target"]
    assert description.outputs == {"logits": "float32 (batch, target_length, 40)"}
