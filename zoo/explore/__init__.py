"""`zoo explore`: a local web page for a run or an export (the `web` extra: Gradio).

* `zoo.explore.targets`: PATH opened once (`open_target`): a run directory or a SavedModel.
* `zoo.explore.translation`: a sentence's translation, as `zoo predict` gives it, and its
  attention maps (cross-attention, the Transformer's self-attention, RNNsearch's and
  ConvS2S's alignments), and a copying model's `1 − p_gen` per target token.
* `zoo.explore.images`: a ViT's top classes, as `zoo predict` gives them, its attention
  rollout and each head's attention from the class token.
* `zoo.explore.drawing`: the pictures (heat maps as inline SVG, training curves) and the
  run's files.
* `zoo.explore.page`: the Gradio page on top of them (imported by the command only: it
  needs the `web` extra).

Everything but `page` runs without Gradio, and is what the tests check against
`zoo predict`; `page` only lays it out and turns a bad input into a message on the page.
"""
