"""Which zoo family a built model belongs to, and its numbered blocks, read from layer names.

A model records its family (`zoo.registry.model.FamilyModel`, kept in `.keras` files), and
`zoo.registry.family_of_model` reads that; `model_family` is the fallback for the files
saved before models recorded it (the names are part of each family's `build`).
`numbered_layers` serves the families' attention inspection and cached decoding steps.
"""


def model_family(model):
    """`"transformer"`, `"seq2seq"` (RNNsearch), `"convs2s"`, `"vit"`, or None for anything else."""
    names = {layer.name for layer in getattr(model, "layers", ())}
    if "convolutional_encoder_block_0" in names and "convolutional_decoder_block_0" in names:
        return "convs2s"
    if "patch_embedding" in names:
        return "vit"
    if "decoder" in names and "encoder" in names:
        return "seq2seq"
    if "encoder_block_0" in names and "decoder_block_0" in names:
        return "transformer"
    return None


def numbered_layers(layers, prefix):
    """`[layers[prefix + "0"], layers[prefix + "1"], …]`, up to the first missing number.

    `layers`: a dict of a model's layers by name; `prefix` e.g. `"encoder_block_"`.
    """
    blocks = []
    while f"{prefix}{len(blocks)}" in layers:
        blocks.append(layers[f"{prefix}{len(blocks)}"])
    return blocks
