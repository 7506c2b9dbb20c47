"""The default search space of each zoo family, registered with the registry
(`zoo.search_space(name)` returns the entry's)."""

from zoo import registry
from zoo.seq2seq import Seq2SeqConfig
from zoo.transformer import TransformerConfig
from zoo.tuning.space import Choice, Float, SearchSpace
from zoo.vit import ViTConfig


def vit_patch_sizes(image_size):
    """Divisors p of `image_size` with p >= 2 and 2 <= image_size / p <= 32 (4 to 1024 patches)."""
    return tuple(p for p in range(2, image_size + 1) if image_size % p == 0 and 2 <= image_size // p <= 32)


TRANSFORMER_SPACE = SearchSpace(
    {
        "num_layers": Choice([1, 2, 3, 4, 6], fields=("num_encoder_layers", "num_decoder_layers")),
        "d_model": Choice([64, 128, 256, 512]),
        "num_heads": Choice([1, 2, 4, 8]),
        "intermediate_dim": Choice([256, 512, 1024, 2048]),
        "dropout": Choice([0.0, 0.1, 0.2, 0.3]),
        "label_smoothing": Choice([0.0, 0.1, 0.2]),
        "warmup_steps": Choice([500, 1000, 2000, 4000]),
        "batch_size": Choice([16, 32, 64, 128], fields=()),
    },
    divides=[("num_heads", "d_model")],
    description="Transformer: layers, d_model, heads (dividing d_model), d_ff, dropout, "
    "label smoothing, warm-up steps, batch size",
)


VIT_SPACE = SearchSpace(
    {
        "patch_size": Choice(lambda config: vit_patch_sizes(config["image_size"])),
        "num_layers": Choice([2, 4, 6, 8, 12]),
        "hidden_dim": Choice([64, 128, 192, 256, 384]),
        "num_heads": Choice([1, 2, 4, 8]),
        "mlp_ratio": Choice(
            [2, 4], fields=("mlp_dim",),
            derive=lambda ratio, config: {"mlp_dim": ratio * config["hidden_dim"]},
        ),
        "dropout": Choice([0.0, 0.1, 0.2]),
        "learning_rate": Float(1e-4, 3e-3, sampling="log"),
        "weight_decay": Choice([0.0, 0.01, 0.05, 0.1]),
        "batch_size": Choice([32, 64, 128], fields=()),
    },
    divides=[("patch_size", "image_size"), ("num_heads", "hidden_dim")],
    description="ViT: patch size (dividing the image size), depth, width, heads (dividing "
    "the width), MLP ratio, dropout, learning rate, weight decay, batch size",
)


_RNN_UNITS = ("encoder_units", "decoder_units", "attention_units", "maxout_units")


SEQ2SEQ_SPACE = SearchSpace(
    {
        "units": Choice(
            [64, 128, 256, 512, 1000], fields=_RNN_UNITS,
            derive=lambda units, config: {
                "encoder_units": units, "decoder_units": units, "attention_units": units,
                "maxout_units": max(1, units // 2),
            },
        ),
        "embedding_dim": Choice([32, 64, 128, 256, 620]),
        "cell": Choice(["gru", "lstm"]),
        "dropout": Choice([0.0, 0.1, 0.2, 0.3]),
        "learning_rate": Float(1e-4, 1e-2, sampling="log"),
        "batch_size": Choice([16, 32, 64, 128], fields=()),
    },
    description="RNN + Bahdanau attention: units, embedding size, cell, dropout, learning "
    "rate, batch size",
)


registry.register_search_space(TransformerConfig, TRANSFORMER_SPACE)
registry.register_search_space(ViTConfig, VIT_SPACE)
registry.register_search_space(Seq2SeqConfig, SEQ2SEQ_SPACE)
