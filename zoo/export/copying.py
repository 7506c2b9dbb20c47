"""The translation export of a copying model (pointer-generator, `copy=True`).

`CopyTranslationModule` is `zoo.export.translation_module.TranslationModule` with the
copy mechanism's two ends in the graph (`zoo.text.copying`): the text becomes the
source ids, their ids in the extended target vocabulary and the texts of the
source's out-of-vocabulary tokens; the decoding (the same `zoo.decode` searches)
may generate an extended id `V + k`; and the translation reads each such id as the
k-th out-of-vocabulary token's own source text. The signatures and their outputs are
`TranslationModule`'s; `tokens` may hold extended ids.
"""

import tensorflow as tf

from zoo.errors import ZooError
from zoo.export.translation_module import TranslationModule, bucket_width
from zoo.text import copying


class CopyTranslationModule(TranslationModule):
    """A `TranslationModule` for a copying model (same arguments).

    Raises:
        ZooError: a target tokenizer whose size is not the model's target vocabulary
            (the extended ids start at the model's V), or a tokenizer other than
            the zoo's SentencePiece and WordPiece.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, *args, **kwargs):
        super().__init__(model, source_tokenizer, target_tokenizer, *args, **kwargs)
        size = int(model.get_layer("logits").output.shape[-1])
        if target_tokenizer.vocab_size != size:
            raise ZooError(
                f"export: the copying model's target vocabulary has {size} tokens, the target "
                f"tokenizer {target_tokenizer.vocab_size}: pass the tokenizer it was trained with."
            )
        self._copy_table = copying.copy_table(source_tokenizer, target_tokenizer)

    def _copy_sources(self, text):
        """Strings (B,) -> source ids, extended ids and slot texts, each (B, S) (or (B, W),
        padded to a bucket width, under `jit_compile`)."""
        source, extended, slots = copying.encode_copy_sources(
            self.source_tokenizer, self._copy_table, self.target_tokenizer.vocab_size, text,
            self.max_length, end_id=self.ids["end"])
        if not self.jit_compile:
            return source, extended, slots
        extra = bucket_width(tf.shape(source)[1], self.max_length) - tf.shape(source)[1]
        pad = [[0, 0], [0, extra]]
        return (tf.pad(source, pad, constant_values=self.ids["pad"]),
                tf.pad(extended, pad, constant_values=self.ids["pad"]),
                tf.pad(slots, pad, constant_values=""))

    def _outputs(self, text, run, search):
        source, extended, slots = self._copy_sources(text)
        run = self._compiled(run, search)

        def empty():
            return tf.zeros([0, self.max_new_tokens], tf.int32), tf.zeros([0], tf.float32)

        tokens, score = tf.cond(
            tf.shape(source)[0] > 0,
            lambda: run({"source": source, "source_extended": extended}), empty)
        tokens = tf.ensure_shape(tf.cast(tokens, tf.int32), [None, None])
        return {
            "translation": copying.detokenize_extended(self.target_tokenizer, tokens, slots),
            "tokens": tokens,  # (B, L), V + k: a copy of the k-th OOV source token
            "score": tf.ensure_shape(tf.cast(score, tf.float32), [None]),  # (B,)
        }
