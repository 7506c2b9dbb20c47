"""Pictures of attention: alignment heat maps, positional encodings, ViT maps, training curves.

Every function returns a `matplotlib.figure.Figure` drawn on the Agg canvas
(no pyplot, no display, no global figure list: safe in scripts, tests and
servers) and, given `path=`, also writes it as a PNG (parent folders are
created); `fig.savefig("x.png")` saves it later. In Jupyter with the inline
backend (`%matplotlib inline`), a figure left at the end of a cell is shown.

* `attention_heatmap`: attention weights, target (query) tokens × source
  (key) tokens, one head, the mean over heads, or every head.
* `positional_encoding`: the sinusoidal table `P` (positions × dimensions)
  and some of its columns as curves over the position.
* `position_embedding_similarity`: cosine similarity of each learned ViT
  position embedding to all the others, drawn on the patch grid (ViT paper,
  Fig. 7, centre).
* `attention_rollout` / `vit_attention_map`: attention rollout (Abnar &
  Zuidema 2020) of a ViT, over the input images.
* `training_curves`: metrics per epoch from a Keras `History`, its `history`
  dict, or a `keras.callbacks.CSVLogger` file.

The functions live in `zoo.plot.attention` (heat maps, positional encodings),
`zoo.plot.vit` (ViT pictures) and `zoo.plot.training` (training curves), on the
shared figure helpers of `zoo.plot.figures`; this module is their public face.

Shape legend: B batch, N heads, T target (query) length, S source (key)
length, P patches, D embedding size, L layers.
"""

from zoo.plot.attention import attention_heatmap, positional_encoding
from zoo.plot.figures import DPI  # noqa: F401 - the resolution of every saved picture
from zoo.plot.training import read_history, training_curves
from zoo.plot.vit import (
    attention_rollout,
    position_embedding_similarity,
    rollout_maps,
    vit_attention_map,
)

__all__ = [
    "attention_heatmap",
    "attention_rollout",
    "position_embedding_similarity",
    "positional_encoding",
    "read_history",
    "rollout_maps",
    "training_curves",
    "vit_attention_map",
]
