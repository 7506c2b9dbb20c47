"""`TranslationData`, what every translation dataset returns, and the progress bars of readers."""

import dataclasses

PROGRESS_EVERY = 1000  # items between two progress bar updates


def update_progress(bar, count, total):
    """Move `bar` to `count` every `PROGRESS_EVERY` items and at `total`."""
    if bar is not None and (count % PROGRESS_EVERY == 0 or count == total):
        bar.update(count)


@dataclasses.dataclass
class TranslationData:
    """Sentence pairs with a fixed train/test split.

    Attributes:
        name: dataset name, e.g. "numbers".
        train_pairs: list of `(source, target)` str tuples.
        test_pairs: held-out pairs, never in `train_pairs`' generation set.
        source_language, target_language: language codes, "" if unknown.
        skipped: lines skipped while reading, by reason (`tsv` only).
        metadata: how the data was made (seed, ranges, files ...).
    """

    name: str
    train_pairs: list
    test_pairs: list
    source_language: str = ""
    target_language: str = ""
    skipped: dict = dataclasses.field(default_factory=dict)
    metadata: dict = dataclasses.field(default_factory=dict)

    @property
    def train_sources(self):
        return [source for source, _ in self.train_pairs]

    @property
    def train_targets(self):
        return [target for _, target in self.train_pairs]

    @property
    def test_sources(self):
        return [source for source, _ in self.test_pairs]

    @property
    def test_targets(self):
        return [target for _, target in self.test_pairs]

    def __repr__(self):
        return (
            f"TranslationData(name={self.name!r}, train={len(self.train_pairs)}, "
            f"test={len(self.test_pairs)}, {self.source_language or '?'}->"
            f"{self.target_language or '?'}, skipped={self.skipped})"
        )


