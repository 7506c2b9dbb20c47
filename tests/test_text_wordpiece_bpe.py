"""Tests for zoo/text/wordpiece_bpe.py: the pair-merge learner against a plain re-implementation."""

import collections

import pytest

from zoo import datasets, text
from zoo.text.wordpiece_bpe import SUFFIX_INDICATOR, learn_wordpiece_bpe


def reference_bpe(word_counts, vocab_size, reserved, min_frequency, max_unique_chars):
    """The merge procedure written the slow, obvious way: recount every pair each round."""
    chars = collections.Counter()
    for word, count in word_counts.items():
        for char in word:
            chars[char] += count
    max_chars = min(max_unique_chars, (vocab_size - len(reserved)) // 2)
    alphabet = sorted(chars, key=lambda c: (-chars[c], c))[:max_chars]
    inside = {char for word in word_counts if len(word) > 1 for char in word}
    vocabulary = list(reserved)
    for char in sorted(alphabet):
        for token in (char, "##" + char) if char in inside else (char,):
            if token not in vocabulary:
                vocabulary.append(token)
    words = {word: [word[0]] + ["##" + c for c in word[1:]] for word in sorted(word_counts)
             if len(word) > 1 and set(word) <= set(alphabet)}
    while len(vocabulary) < vocab_size:
        pairs = collections.Counter()
        for word, symbols in words.items():
            for pair in zip(symbols, symbols[1:]):
                pairs[pair] += word_counts[word]
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        if pairs[best] < min_frequency:
            break
        merged = best[0] + best[1][2:]
        if merged not in vocabulary:
            vocabulary.append(merged)
        for symbols in words.values():
            i = 0
            while i < len(symbols) - 1:
                if (symbols[i], symbols[i + 1]) == best:
                    symbols[i : i + 2] = [merged]
                i += 1
    return vocabulary


@pytest.fixture(scope="module")
def word_counts():
    data = datasets.numbers(num_train=120, num_test=1, seed=11)
    return text.count_words(data.train_sources + data.train_targets + ["a,b", "!"])


@pytest.mark.parametrize("vocab_size, min_frequency, max_unique_chars",
                         [(60, 1, 1000), (300, 2, 1000), (100, 2, 12)])
def test_matches_the_plain_merge_procedure(word_counts, vocab_size, min_frequency,
                                           max_unique_chars):
    reserved = list(text.RESERVED_TOKENS)
    expected = reference_bpe(word_counts, vocab_size, reserved, min_frequency, max_unique_chars)
    learned = learn_wordpiece_bpe(word_counts, vocab_size, reserved, min_frequency,
                                  max_unique_chars)
    assert learned == expected
    assert len(learned) <= vocab_size


def test_sennrich_example_merges_in_order():
    # Sennrich et al. 2016, figure 1's corpus: "es" (9), then "est" (9); then "ow" and "lo"
    # tie at 7, and the text "##o" sorts before "l"; then "low" (7).
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    alphabet = sorted(set("".join(counts)))
    first = 4 + 2 * len(alphabet)
    vocabulary = learn_wordpiece_bpe(counts, first + 4, list(text.RESERVED_TOKENS), 2, 1000)
    assert vocabulary[first:] == ["##es", "##est", "##ow", "low"]
    assert all(SUFFIX_INDICATOR + char in vocabulary for char in alphabet)
