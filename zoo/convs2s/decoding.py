"""ConvS2S's cached step for `zoo.decode`'s searches (the step protocol of
`zoo.decode.steps`): the encoder once, then one token at a time through the decoder's
convolutions, each keeping its last k-1 inputs.

`stepper` is what the family object gives the searches (`zoo.convs2s.FAMILY.step`).
Shapes: B rows (sentences × beams), S source length, k kernel size, D hidden size,
V target vocabulary.
"""

from keras import ops

from keras_attention.ops import repeat_rows
from zoo.convs2s.model import encode
from zoo.families import numbered_layers


def stepper(model, layers, pad_id, source_extended=None):
    """The cached step of a ConvS2S model (`layers`: its layers by name); None for a
    copying source (ConvS2S does not copy: the searches run the whole model)."""
    return IncrementalDecoder(layers) if source_extended is None else None


class IncrementalDecoder:
    """`zoo.decode`'s cached step for ConvS2S: the encoder once, then one token at a time.

    The cache of each decoder layer is its last k-1 inputs `(B, k-1, D)` (zeros
    at the start, the causal convolution's left padding), so a step costs O(k)
    convolution positions and one attention row, instead of the whole prefix.
    `zoo.decode` keeps the decoding within the learned target positions
    (`zoo.decode.steps.check_width`).

    Args:
        layers: the model's layers by name (models from `build` or `.keras` files).
    """

    CONTEXT = ("keys", "values", "mask")

    def __init__(self, layers):
        self.layers = layers
        self.blocks = numbered_layers(layers, "convolutional_decoder_block_")

    def prepare(self, source, copies, width):
        """Encode `(B, S)`, repeat per beam; return the empty windows for B·copies rows."""
        keys, values, mask = encode(self.layers, source, training=False)
        self.keys, self.values, self.mask = (
            repeat_rows(tensor, copies) for tensor in (keys, values, mask)
        )
        rows = ops.shape(self.keys)[0]
        return tuple(
            ops.zeros((rows, block.kernel_size - 1, block.hidden_dim), self.keys.dtype)
            for block in self.blocks
        )

    def step(self, tokens, t, windows):
        """tokens `(B,)` at position t -> logits `(B, V)` for position t, new windows."""
        embedded = self.layers["target_embedding"](tokens[:, None], start_index=t, training=False)
        y = self.layers["decoder_input_projection"](embedded)  # (B, 1, D)
        new_windows = []
        for block, window in zip(self.blocks, windows):
            y, window = block.call_with_cache(
                y, window, embedded, self.keys, self.values, encoder_padding_mask=self.mask
            )
            new_windows.append(window)
        logits = self.layers["output_projection"](self.layers["decoder_output_projection"](y))
        return ops.cast(logits[:, 0, :], "float32"), tuple(new_windows)
