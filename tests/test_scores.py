"""Tests of `zoo.runs.scores`: corpus BLEU against a from-scratch computation, exact match."""

import collections
import math

import numpy as np
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


# === chrF, bootstrap intervals and the paired test, against re-implementations ===


def reference_chrf(hypotheses, references, order=6, beta=2.0):
    """Popović (2015), as sacrebleu computes it at corpus level: character n-grams without
    spaces (n = 1..6), matches summed over the corpus per n, precision and recall averaged
    over the orders, then F-beta."""
    totals = [[0, 0, 0] for _ in range(order)]  # hypothesis, reference, matches
    for hypothesis, reference in zip(hypotheses, references):
        h, r = hypothesis.replace(" ", ""), reference.replace(" ", "")
        for n in range(1, order + 1):
            hc = collections.Counter(h[i : i + n] for i in range(len(h) - n + 1))
            rc = collections.Counter(r[i : i + n] for i in range(len(r) - n + 1))
            totals[n - 1][0] += sum(hc.values())
            totals[n - 1][1] += sum(rc.values())
            totals[n - 1][2] += sum(min(c, rc[g]) for g, c in hc.items())
    precisions = [m / h for h, _, m in totals if h and _]
    recalls = [m / r for h, r, m in totals if h and r]
    p, r = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    return 100.0 * (1 + beta**2) * p * r / (beta**2 * p + r)


def _corpus(seed, size=40):
    """Sentence pairs whose hypotheses each share a 5-word run with their reference (so every
    resample has 4-gram matches), and a second system that is right more often."""
    rng = np.random.default_rng(seed)
    words = "alpha beta gamma delta eps zeta eta theta iota kappa lambda mu".split()
    references, worse, better = [], [], []
    for _ in range(size):
        sentence = list(rng.choice(words, 9))
        references.append(" ".join(sentence))
        wrong = sentence[:5] + list(rng.choice(words, 4))
        worse.append(" ".join(sentence if rng.random() < 0.3 else wrong))
        better.append(" ".join(sentence if rng.random() < 0.8 else wrong))
    return references, worse, better


def _resampled(samples, size):
    """The resamples sacrebleu draws (its seed, SACREBLEU_SEED, default 12345)."""
    return np.random.default_rng(12345).choice(size, size=(samples, size), replace=True)


def _percentile_interval(values):
    """sacrebleu's 95% interval: the 2.5th and 97.5th percentiles of the sorted resamples."""
    values = np.sort(values)
    low = len(values) // 40
    return float(np.mean(values)), float(values[len(values) - low - 1] - values[low]) / 2


def test_chrf_matches_the_definition():
    references, worse, _ = _corpus(0)
    assert scores.chrf(worse, references) == pytest.approx(reference_chrf(worse, references),
                                                           abs=1e-6)
    assert scores.chrf(references, references) == pytest.approx(100.0)


def test_confidence_is_the_percentile_bootstrap_of_bleu_and_chrf():
    references, worse, _ = _corpus(1)
    got = scores.confidence(worse, references, samples=200)
    index = _resampled(200, len(references))
    for key, metric in (("bleu", reference_bleu), ("chrf", reference_chrf)):
        rows = [[references[i]] for i in range(len(references))]
        values = [metric([worse[i] for i in sample],
                         [rows[i] if key == "bleu" else references[i] for i in sample])
                  for sample in index]
        mean, half = _percentile_interval(np.array(values))
        assert got[key]["mean"] == pytest.approx(mean, abs=0.01)
        assert got[key]["half_width"] == pytest.approx(half, abs=0.01)
        assert got[key]["low"] < got[key]["score"] < got[key]["high"]
    assert got["samples"] == 200


def test_paired_bootstrap_is_koehns_test():
    references, worse, better = _corpus(2)
    got = scores.paired_bootstrap(worse, better, references, samples=200)
    index = _resampled(200, len(references))
    rows = [[r] for r in references]
    a = np.array([reference_bleu([worse[i] for i in s], [rows[i] for i in s]) for s in index])
    b = np.array([reference_bleu([better[i] for i in s], [rows[i] for i in s]) for s in index])
    observed = abs(reference_bleu(better, rows) - reference_bleu(worse, rows))
    deviations = np.abs(b - a) - np.abs(b - a).mean()
    p_value = (np.sum(deviations > observed) + 1) / (len(index) + 1)
    assert got["bleu"]["p_value"] == pytest.approx(p_value, abs=2 / 201)
    assert got["bleu"]["difference"] == pytest.approx(
        reference_bleu(better, rows) - reference_bleu(worse, rows), abs=1e-3)
    assert got["bleu"]["b_is_better"] and got["chrf"]["b_is_better"]
    swapped = scores.paired_bootstrap(better, worse, references, samples=200)
    assert not swapped["bleu"]["b_is_better"] and swapped["bleu"]["difference"] < 0
    same = scores.paired_bootstrap(worse, worse, references, samples=200)
    # sacrebleu counts only resamples strictly beyond the observed difference, so a system
    # against itself gets the smallest p-value; with no difference it is not "better".
    assert same["bleu"]["difference"] == 0 and not same["bleu"]["b_is_better"]


def test_paired_bootstrap_needs_the_same_test_pairs():
    references, worse, better = _corpus(3)
    with pytest.raises(ValueError, match="same test pairs"):
        scores.paired_bootstrap(worse, better[:-1], references)
    with pytest.raises(ValueError, match="samples"):
        scores.confidence(worse, references, samples=1)
