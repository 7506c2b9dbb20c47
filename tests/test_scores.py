"""Tests of `zoo.runs.scores`: corpus BLEU against a from-scratch computation, exact match."""

import collections
import math

import pytest

from zoo.runs import scores

HYPOTHESES = [
    "the cat sat on the mat today",
    "a dog runs in the big park",
    "one hundred and twenty one",
]
REFERENCES = [
    "the cat sat on a mat today",
    "a dog runs in the park",
    "one hundred twenty one",
]
SECOND_REFERENCES = [
    "the cat is on the mat today",
    "a big dog runs in the big park",
    "one hundred and twenty-one",
]


def reference_bleu(hypotheses, reference_sets):
    """Papineni et al. (2002): clipped n-gram precisions summed over the corpus (n = 1..4),
    geometric mean, brevity penalty with the closest reference length. Whitespace tokens."""
    matches, totals = [0] * 4, [0] * 4
    hypothesis_length = reference_length = 0
    for hypothesis, references in zip(hypotheses, reference_sets):
        words = hypothesis.split()
        reference_words = [r.split() for r in references]
        hypothesis_length += len(words)
        reference_length += min(
            (abs(len(r) - len(words)), len(r)) for r in reference_words
        )[1]
        for n in range(1, 5):
            counts = collections.Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
            max_reference = collections.Counter()
            for r in reference_words:
                for gram, c in collections.Counter(
                    tuple(r[i : i + n]) for i in range(len(r) - n + 1)
                ).items():
                    max_reference[gram] = max(max_reference[gram], c)
            matches[n - 1] += sum(min(c, max_reference[g]) for g, c in counts.items())
            totals[n - 1] += max(len(words) - n + 1, 0)
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / 4
    brevity = min(0.0, 1.0 - reference_length / hypothesis_length)
    return 100.0 * math.exp(brevity + log_precision)


def test_bleu_matches_the_definition():
    expected = reference_bleu(HYPOTHESES, [[r] for r in REFERENCES])
    assert scores.bleu(HYPOTHESES, REFERENCES) == pytest.approx(expected, abs=1e-6)
    assert 0 < expected < 100


def test_bleu_with_several_references_and_bytes():
    rows = [[a, b] for a, b in zip(REFERENCES, SECOND_REFERENCES)]
    expected = reference_bleu(HYPOTHESES, rows)
    encoded = [h.encode("utf-8") for h in HYPOTHESES]
    assert scores.bleu(encoded, rows) == pytest.approx(expected, abs=1e-6)
    assert expected > scores.bleu(HYPOTHESES, REFERENCES)  # more references, more matches


def test_bleu_bounds():
    assert scores.bleu(REFERENCES, REFERENCES) == pytest.approx(100.0)
    assert scores.bleu(["x y z w"], ["a b c d"]) == 0.0


def test_exact_match():
    assert scores.exact_match(["one", "two ", "three"], ["one", "two", "four"]) == pytest.approx(
        200 / 3
    )
    assert scores.exact_match([b"one"], [["uno", "one"]]) == 100.0
    assert scores.exact_match(["one"], ["One"]) == 0.0


@pytest.mark.parametrize("fn", [scores.bleu, scores.exact_match])
def test_bad_inputs(fn):
    with pytest.raises(ValueError, match="same length"):
        fn(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        fn([], [])
    with pytest.raises(ValueError, match="strings"):
        fn("a b", "a b")
    with pytest.raises(ValueError, match="strings"):
        fn([1], ["a"])
    with pytest.raises(ValueError, match="same number of references"):
        fn(["a", "b"], [["a"], ["b", "c"]])
