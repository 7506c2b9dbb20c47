"""What the zoo's tokenizers answer in Python about their vocabulary: its size and its entries,
from the list they keep of it (id = position)."""


class ListedVocabulary:
    """`vocab_size` and `get_vocabulary` of `WordPieceTokenizer`, `SentencePieceTokenizer` and
    `MarianTokenizer`, read from the list of entries named by `vocabulary_attribute`."""

    vocabulary_attribute = "_vocabulary"

    @property
    def vocab_size(self):
        """Number of entries V (tokens or pieces; ids run from 0 to V - 1)."""
        return len(getattr(self, self.vocabulary_attribute))

    def get_vocabulary(self):
        """The entries as a list of `str`, id = position."""
        return list(getattr(self, self.vocabulary_attribute))
