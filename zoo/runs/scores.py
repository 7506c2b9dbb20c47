"""Evaluation of translations: corpus BLEU and chrF (sacrebleu), exact match, and how far
they can be trusted (bootstrap confidence intervals, paired bootstrap tests).

    bleu(["the cat sat"], ["the cat sat"])        # 100.0
    exact_match(["one", "two"], ["one", "three"])  # 50.0

Hypotheses and references are strings (or UTF-8 bytes, as `tokenizer.detokenize`
returns them). `references` holds one reference per hypothesis, or a list of
several references per hypothesis (the same number for every hypothesis).
"""

import sacrebleu


def _text(value, name):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    raise ValueError(f"`{name}` must hold strings (or UTF-8 bytes); received {value!r}.")


def _check(hypotheses, references):
    """-> (hypotheses: list[str], references: list[list[str]], one list per hypothesis)."""
    if isinstance(hypotheses, (str, bytes)) or isinstance(references, (str, bytes)):
        raise ValueError("`hypotheses` and `references` must be lists of sentences, not strings.")
    hypotheses = [_text(h, "hypotheses") for h in hypotheses]
    references = list(references)
    if not hypotheses:
        raise ValueError("`hypotheses` is empty.")
    if len(references) != len(hypotheses):
        raise ValueError(
            "`hypotheses` and `references` must have the same length; received "
            f"{len(hypotheses)} hypotheses and {len(references)} references."
        )
    rows = []
    for refs in references:
        refs = [refs] if isinstance(refs, (str, bytes)) else list(refs)
        if not refs:
            raise ValueError("Every hypothesis needs at least one reference.")
        rows.append([_text(r, "references") for r in refs])
    if len({len(r) for r in rows}) != 1:
        raise ValueError("Every hypothesis must have the same number of references.")
    return hypotheses, rows


def bleu(hypotheses, references, tokenize="13a", lowercase=False):
    """Corpus BLEU in [0, 100] (sacrebleu's `corpus_bleu`, default settings).

    Args:
        hypotheses: list of B system outputs.
        references: list of B references, or of B lists of R references each.
        tokenize: sacrebleu's tokenizer (`"13a"`, the WMT default; `"none"`, ...).
        lowercase: case-insensitive BLEU.

    Returns:
        float: the corpus BLEU score (not an average of sentence scores).
    """
    hypotheses, rows = _check(hypotheses, references)
    streams = [list(stream) for stream in zip(*rows)]  # R streams of B references
    return float(
        sacrebleu.corpus_bleu(hypotheses, streams, tokenize=tokenize, lowercase=lowercase).score
    )


def exact_match(hypotheses, references):
    """Percentage of hypotheses equal to (one of) their references, in [0, 100].

    Strings are compared after stripping leading and trailing whitespace.
    """
    hypotheses, rows = _check(hypotheses, references)
    hits = sum(h.strip() in {r.strip() for r in refs} for h, refs in zip(hypotheses, rows))
    return 100.0 * hits / len(hypotheses)


def chrf(hypotheses, references):
    """Corpus chrF in [0, 100] (sacrebleu's `corpus_chrf`: character 6-grams, beta 2)."""
    hypotheses, rows = _check(hypotheses, references)
    streams = [list(stream) for stream in zip(*rows)]
    return float(sacrebleu.corpus_chrf(hypotheses, streams).score)


def _paired_test(systems, references, samples):
    """sacrebleu's paired bootstrap (`PairedTest`, test type `bs`) over BLEU and chrF."""
    # sacrebleu's significance module loads its metrics' tokenizers; only these two need it.
    from sacrebleu.metrics import BLEU, CHRF  # noqa: PLC0415
    from sacrebleu.significance import PairedTest  # noqa: PLC0415

    if not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples must be an int >= 2; received {samples!r}")
    named = [(name, _check(hypotheses, references)[0]) for name, hypotheses in systems]
    _, rows = _check(systems[0][1], references)
    streams = [list(stream) for stream in zip(*rows)]  # R streams of B references
    test = PairedTest(named, {"bleu": BLEU(), "chrf": CHRF()}, streams, test_type="bs",
                      n_samples=samples)
    _, table = test()
    return {("bleu" if key.startswith("BLEU") else "chrf"): results
            for key, results in table.items() if key != "System"}


def _interval(result):
    return {"score": round(result.score, 4), "mean": round(float(result.mean), 4),
            "half_width": round(float(result.ci), 4),
            "low": round(float(result.mean - result.ci), 4),
            "high": round(float(result.mean + result.ci), 4)}


def confidence(hypotheses, references, samples=1000):
    """BLEU and chrF with 95% bootstrap confidence intervals (Koehn, 2004; sacrebleu's own).

    The test set is resampled with replacement `samples` times (sacrebleu's
    seed, `SACREBLEU_SEED`, default 12345, so the interval is reproducible);
    the interval is the bootstrap mean ± half the spread between the 2.5th and
    97.5th percentiles.

    Returns:
        `{"bleu": {"score", "mean", "half_width", "low", "high"}, "chrf": {...},
        "samples": samples}`.
    """
    table = _paired_test([("system", hypotheses)], references, samples)
    return {**{metric: _interval(results[0]) for metric, results in table.items()},
            "samples": samples}


def paired_bootstrap(hypotheses_a, hypotheses_b, references, samples=1000):
    """Is system B better than system A on the same test pairs? (Koehn, 2004.)

    sacrebleu's paired bootstrap resampling: both systems are scored on the
    same `samples` resampled test sets; the p-value is the share of resamples
    whose difference is at least as far from its mean as the observed one
    (two-sided). B is better when its score is higher and p < 0.05. (Two equal
    systems get sacrebleu's smallest p-value, 1 / (samples + 1), since no resample
    is strictly beyond a zero difference; their difference is 0, so neither is better.)

    Returns:
        `{"bleu": {"a": {...}, "b": {...}, "difference", "p_value", "b_is_better"},
        "chrf": {...}, "samples": samples}`, each side as in `confidence`.
    """
    if len(hypotheses_a) != len(hypotheses_b):
        raise ValueError(f"the systems have {len(hypotheses_a)} and {len(hypotheses_b)} "
                         "hypotheses; a paired test needs the same test pairs")
    table = _paired_test([("a", hypotheses_a), ("b", hypotheses_b)], references, samples)
    result = {"samples": samples}
    for metric, (a, b) in table.items():
        difference = b.score - a.score
        result[metric] = {"a": _interval(a), "b": _interval(b),
                          "difference": round(difference, 4), "p_value": float(b.p_value),
                          "b_is_better": bool(difference > 0 and b.p_value < 0.05)}
    return result
