"""Pretrained Transformer weights: `zoo.get("transformer-base", weights=FOLDER)`.

`marian` imports a Hugging Face Marian / OPUS-MT folder (its safetensors weights and
SentencePiece tokenizers) into a Transformer and exports it; `marian_config` maps the
folder's `config.json` to a `TransformerConfig`. Importing the package loads neither
(`zoo.transformer.weights.marian` reads safetensors).
"""
