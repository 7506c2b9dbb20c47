"""Evaluation of translations: corpus BLEU (sacrebleu) and exact match.

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
