"""Tests of zoo.plot: the numbers drawn are checked against numpy references."""

import math

import keras
import matplotlib.image
import numpy as np
import pytest
from matplotlib.figure import Figure

import zoo
from zoo import plot


def _softmax(x):
    x = np.exp(x - x.max(axis=-1, keepdims=True))
    return x / x.sum(axis=-1, keepdims=True)


def _assert_png(path):
    """The file exists, is a PNG, and is not one flat colour."""
    assert path.is_file() and path.stat().st_size > 0
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.std() > 0.02


def _panels(figure, xlabel):
    return [ax for ax in figure.axes if ax.images and ax.get_xlabel() == xlabel]


# === attention rollout ===


def _reference_rollout(layers):
    """Abnar & Zuidema 2020, written out per example: 0.5 A + 0.5 I, product last to first."""
    batch, _, length, _ = layers[0].shape
    out = np.zeros((batch, length, length))
    for b in range(batch):
        mixed = [0.5 * w[b].mean(axis=0) + 0.5 * np.eye(length) for w in layers]
        out[b] = np.linalg.multi_dot(mixed[::-1]) if len(mixed) > 1 else mixed[0]
    return out


def test_attention_rollout_matches_numpy_reference(rng):
    layers = [_softmax(rng.normal(size=(2, 3, 5, 5)) * 3) for _ in range(4)]  # (B, N, T, T)
    joint = plot.attention_rollout(layers)
    np.testing.assert_allclose(joint, _reference_rollout(layers), atol=1e-12)
    np.testing.assert_allclose(joint.sum(axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(plot.attention_rollout(np.stack(layers)), joint)


def test_attention_rollout_without_residual_is_the_product_of_head_means(rng):
    layers = [_softmax(rng.normal(size=(1, 2, 4, 4))) for _ in range(3)]
    means = [w[0].mean(axis=0) for w in layers]
    expected = means[2] @ means[1] @ means[0]
    np.testing.assert_allclose(plot.attention_rollout(layers, residual=False)[0], expected)


def test_attention_rollout_renormalises_rows_that_do_not_sum_to_one(rng):
    weights = rng.random((1, 2, 3, 3))  # rows do not sum to 1
    mixed = weights[0].mean(axis=0) + np.eye(3)
    expected = mixed / mixed.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(plot.attention_rollout([weights])[0], expected)


def test_attention_rollout_orders_dict_layers_numerically(rng):
    layers = [_softmax(rng.normal(size=(1, 2, 5, 5)) * 3) for _ in range(12)]
    as_dict = {f"encoder_block_{i}/self_attention": w for i, w in enumerate(layers)}
    shuffled = dict(sorted(as_dict.items()))  # lexicographic: 0, 1, 10, 11, 2, ...
    np.testing.assert_allclose(plot.attention_rollout(shuffled), _reference_rollout(layers))


def test_rollout_maps_put_patches_on_the_grid_row_major():
    grid, length = 3, 10  # 9 patches + the class token
    weights = np.zeros((1, 1, length, length))
    weights[0, 0, :, 0] = 1.0
    weights[0, 0, 0, :] = 0.0
    weights[0, 0, 0, 1 + 5] = 1.0  # the class token attends only to patch 5 = (row 1, col 2)
    maps = plot.rollout_maps([weights], residual=False)
    assert maps.shape == (1, grid, grid)
    expected = np.zeros((grid, grid))
    expected[1, 2] = 1.0
    np.testing.assert_array_equal(maps[0], expected)


@pytest.mark.parametrize(
    "attentions, match",
    [
        ([], "empty"),
        ([np.ones((1, 2, 3, 4))], "self-attention"),
        ([np.ones((1, 2, 3, 3)), np.ones((1, 2, 4, 4))], "one shape"),
        ([np.ones((2, 3, 3))], "rank 4"),
        ({"decoder/alignment": np.ones((1, 3, 3))}, "encoder_block_"),
        ([np.full((1, 1, 3, 3), np.nan)], "NaN"),
    ],
)
def test_attention_rollout_rejects_bad_input(attentions, match):
    with pytest.raises(ValueError, match=match):
        plot.attention_rollout(attentions)


def test_rollout_maps_without_class_token_weight_the_rows_by_the_pooling(rng):
    grid = 3
    layers = [_softmax(rng.normal(size=(2, 2, grid * grid, grid * grid)) * 3) for _ in range(2)]
    pooling = _softmax(rng.normal(size=(2, grid * grid)))
    expected = np.einsum("bt,bts->bs", pooling, _reference_rollout(layers))
    maps = plot.rollout_maps(layers, pooling=pooling)
    np.testing.assert_allclose(maps, expected.reshape(2, grid, grid))
    as_dict = {f"encoder_block_{i}/self_attention": w for i, w in enumerate(layers)}
    as_dict["pooling"] = pooling  # as zoo.attention_weights returns it
    np.testing.assert_allclose(plot.rollout_maps(as_dict), maps)
    with pytest.raises(ValueError, match=r"pooling must have shape \(B, T\)"):
        plot.rollout_maps(layers, pooling=pooling[:, :4])


def test_rollout_maps_reject_a_non_square_patch_count():
    with pytest.raises(ValueError, match="square grid"):
        plot.rollout_maps([np.full((1, 1, 4, 4), 0.25)])  # 3 patches


# === ViT pictures ===


@pytest.fixture(params=["cls", "seq", "gap"])
def vit_model(request):  # 28x28x1: 7x7 grid
    return zoo.get("vit-tiny", num_layers=2, patch_size=4, pooling=request.param, compile=False)


def test_vit_attention_map_draws_the_rollout_of_the_model(vit_model, rng, tmp_path):
    images = rng.integers(0, 256, size=(2, 28, 28, 1)).astype("uint8")
    figure = plot.vit_attention_map(vit_model, images, titles=["a", "b"],
                                    path=tmp_path / "vit.png")
    assert isinstance(figure, Figure)
    maps = plot.rollout_maps(zoo.attention_weights(vit_model, images))  # (2, 7, 7)
    overlays = [ax.images[1] for ax in figure.axes if len(ax.images) == 2]
    assert len(overlays) == 2
    for overlay, expected in zip(overlays, maps):
        expected = (expected - expected.min()) / (expected.max() - expected.min())
        np.testing.assert_allclose(np.asarray(overlay.get_array()), expected, atol=1e-6)
        assert overlay.get_extent() == [-0.5, 27.5, 27.5, -0.5]  # upsampled over the image
    _assert_png(tmp_path / "vit.png")


def test_vit_attention_map_rejects_other_models_and_bad_titles(vit_model):
    transformer = zoo.get("transformer-tiny", vocabulary_size=50, num_encoder_layers=1,
                          num_decoder_layers=1, compile=False)
    with pytest.raises(ValueError, match="not a zoo ViT"):
        plot.vit_attention_map(transformer, np.zeros((1, 28, 28, 1)))
    with pytest.raises(ValueError, match="titles"):
        plot.vit_attention_map(vit_model, np.zeros((2, 28, 28, 1)), titles=["one"])


def _mosaic_tiles(figure, grid):
    (ax,) = _panels(figure, "input patch column")
    mosaic = np.ma.filled(ax.images[0].get_array(), np.nan)
    step = grid + 1
    return np.array([[mosaic[r * step: r * step + grid, c * step: c * step + grid]
                      for c in range(grid)] for r in range(grid)])  # (g, g, g, g)


def _reference_similarity(patches):
    count = len(patches)
    grid = math.isqrt(count)
    out = np.zeros((grid, grid, grid, grid))
    for i in range(count):
        for j in range(count):
            a, b = patches[i], patches[j]
            out[i // grid, i % grid, j // grid, j % grid] = a @ b / (
                np.linalg.norm(a) * np.linalg.norm(b))
    return out


def test_position_embedding_similarity_of_a_vit_leaves_out_the_class_token(vit_model, tmp_path):
    table = keras.ops.convert_to_numpy(
        vit_model.get_layer("position_embedding").position_embeddings)  # (50 or 49, 64)
    patches = table[1:] if "class_token" in [layer.name for layer in vit_model.layers] else table
    assert patches.shape[0] == 49
    figure = plot.position_embedding_similarity(vit_model, path=tmp_path / "similarity.png")
    np.testing.assert_allclose(_mosaic_tiles(figure, 7), _reference_similarity(patches),
                               atol=1e-6)
    _assert_png(tmp_path / "similarity.png")


def test_position_embedding_similarity_of_a_matrix(rng):
    patches = rng.normal(size=(16, 8))
    with_class = np.concatenate([rng.normal(size=(1, 8)) * 100, patches])
    expected = _reference_similarity(patches)
    for matrix in (patches, with_class):  # class token detected from the shape (17 rows)
        figure = plot.position_embedding_similarity(matrix)
        np.testing.assert_allclose(_mosaic_tiles(figure, 4), expected, atol=1e-12)
    # 9 rows explicitly with a class token: 8 patches do not fill a grid.
    with pytest.raises(ValueError, match="square grid"):
        plot.position_embedding_similarity(patches[:9], class_token=True)


@pytest.mark.parametrize(
    "matrix, match",
    [
        (np.ones((7, 4)), "neither square"),
        (np.ones((4,)), "rank 2"),
        (np.zeros((4, 3)), "all zeros"),
    ],
)
def test_position_embedding_similarity_rejects_bad_input(matrix, match):
    with pytest.raises(ValueError, match=match):
        plot.position_embedding_similarity(matrix)


# === positional encoding ===


def test_positional_encoding_draws_the_sinusoids_of_the_paper(tmp_path):
    length, depth, columns = 40, 16, (4, 5, 10)
    figure = plot.positional_encoding(length, depth, columns, path=tmp_path / "pe.png")
    i = np.arange(length)[:, None]
    j = np.arange(depth)[None, :] // 2
    angle = i / 10000.0 ** (2 * j / depth)
    expected = np.where(np.arange(depth) % 2 == 0, np.sin(angle), np.cos(angle))  # (L, d)
    (heat,) = _panels(figure, "encoding dimension")
    np.testing.assert_allclose(np.asarray(heat.images[0].get_array()), expected, atol=1e-6)
    (curves,) = [ax for ax in figure.axes if ax.get_title() == "columns of P over the position"]
    lines = curves.get_lines()
    assert [line.get_label() for line in lines] == [f"column {c}" for c in columns]
    for line, column in zip(lines, columns):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(length))
        np.testing.assert_allclose(line.get_ydata(), expected[:, column], atol=1e-6)
    _assert_png(tmp_path / "pe.png")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(length=0), "length"),
        (dict(depth=2.5), "depth"),
        (dict(depth=8, columns=(8,)), "columns"),
    ],
)
def test_positional_encoding_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot.positional_encoding(**kwargs)


# === attention heat maps ===


def test_attention_heatmap_labels_tokens_and_averages_heads(rng, tmp_path):
    weights = _softmax(rng.normal(size=(3, 4, 5)))  # (N, T, S)
    source, target = ["ein", "##s", "zwei", "drei", "[END]"], ["[START]", "one", "two", "three"]
    figure = plot.attention_heatmap(weights, source, target, path=tmp_path / "heat.png")
    (ax,) = _panels(figure, "source (keys)")
    np.testing.assert_allclose(np.asarray(ax.images[0].get_array()), weights.mean(axis=0))
    assert [t.get_text() for t in ax.get_xticklabels()] == source
    assert [t.get_text() for t in ax.get_yticklabels()] == target
    _assert_png(tmp_path / "heat.png")

    (ax,) = _panels(plot.attention_heatmap(weights, source, target, head=-1), "source (keys)")
    np.testing.assert_array_equal(ax.images[0].get_array(), weights[2])
    assert ax.get_title() == "head 2"
    panels = _panels(plot.attention_heatmap(weights, head="all"), "source (keys)")
    assert len(panels) == 3
    for ax, expected in zip(panels, weights):
        np.testing.assert_array_equal(ax.images[0].get_array(), expected)
    (ax,) = _panels(plot.attention_heatmap(weights[0]), "source (keys)")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(weights=np.ones((2, 3, 4, 5))), "rank 2 or 3"),
        (dict(source_tokens=["a", "b"]), "source_tokens"),
        (dict(target_tokens="abcd"), "target_tokens"),
        (dict(head=3), "head"),
        (dict(head="max"), "head"),
        (dict(weights=np.ones((4, 5)), head=1), "head"),
    ],
)
def test_attention_heatmap_rejects_bad_input(kwargs, match):
    kwargs = {"weights": np.full((3, 4, 5), 0.2), **kwargs}
    with pytest.raises(ValueError, match=match):
        plot.attention_heatmap(**kwargs)


# === training curves ===


def _curves(figure):
    return {ax.get_title(): ax for ax in figure.axes if ax.get_lines()}


def test_training_curves_from_a_history_dict(tmp_path):
    history = {"loss": [2.0, 1.5, 1.2], "val_loss": [2.1, 1.7, 1.6],
               "accuracy": [0.2, 0.5, 0.6], "val_accuracy": [0.2, 0.4, 0.5],
               "learning_rate": [1e-3, 1e-3, 5e-4]}
    figure = plot.training_curves(history, path=tmp_path / "curves.png")
    axes = _curves(figure)
    assert list(axes) == ["loss", "accuracy", "learning_rate"]
    train, validation = axes["loss"].get_lines()
    np.testing.assert_array_equal(train.get_xdata(), [1, 2, 3])
    np.testing.assert_array_equal(train.get_ydata(), history["loss"])
    np.testing.assert_array_equal(validation.get_ydata(), history["val_loss"])
    assert list(_curves(plot.training_curves(history, metrics="accuracy"))) == ["accuracy"]
    _assert_png(tmp_path / "curves.png")


def test_training_curves_from_keras_fit_and_its_csv_log(tmp_path):
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("int32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    log = tmp_path / "history.csv"
    history = model.fit(x, y, epochs=3, batch_size=16, validation_split=0.25, verbose=0,
                        callbacks=[keras.callbacks.CSVLogger(str(log))])
    from_object = _curves(plot.training_curves(history))
    from_csv = _curves(plot.training_curves(log))
    assert "loss" in from_csv and "accuracy" in from_csv
    for name in ("loss", "accuracy"):
        for line_object, line_csv, key in zip(from_object[name].get_lines(),
                                              from_csv[name].get_lines(),
                                              (name, "val_" + name)):
            np.testing.assert_array_equal(line_csv.get_xdata(), [1, 2, 3])  # epoch + 1
            np.testing.assert_allclose(line_csv.get_ydata(), history.history[key], rtol=1e-6)
            np.testing.assert_allclose(line_object.get_ydata(), history.history[key])


def test_training_curves_reject_bad_histories(tmp_path):
    with pytest.raises(ValueError, match="same"):
        plot.training_curves({"loss": [1.0, 2.0], "val_loss": [1.0]})
    with pytest.raises(ValueError, match="not in the history"):
        plot.training_curves({"loss": [1.0]}, metrics=["accuracy"])
    with pytest.raises(ValueError, match="list of numbers"):
        plot.training_curves({"loss": ["high", "low"]})
    with pytest.raises(ValueError, match="history must be"):
        plot.training_curves([1.0, 2.0])
    with pytest.raises(FileNotFoundError):
        plot.training_curves(tmp_path / "missing.csv")
