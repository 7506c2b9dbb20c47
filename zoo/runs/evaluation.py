"""`evaluate`: a run's scores on its held-out test split (`metrics.json`)."""

import datetime
import pathlib
import sys
import time

import numpy as np

from zoo import files
from zoo.datasets.preparation import load_run_data
from zoo.decode import copy_steps
from zoo.errors import ZooError
from zoo.progress import say
from zoo.runs.imported import decoding_options
from zoo.runs.inference import canonical, require_decoding, translate
from zoo.runs.rundir import load_run
from zoo.runs.scores import bleu as corpus_bleu
from zoo.runs.scores import chrf, confidence, exact_match
from zoo.text import tokenizers


def scores(hypotheses, references):
    """`(exact match %, BLEU)`, both on a 0-100 scale (`zoo.runs.scores`)."""
    return (float(exact_match(hypotheses, references)),
            float(corpus_bleu(hypotheses, references)))


def evaluate(run_dir, checkpoint="best", beam_size=4, alpha=None, limit=None, batch_size=128,
             examples=3, quiet=False, write=True, data=None, bootstrap=None):
    """Scores of a run on its held-out test split; also written to `metrics.json`.

    Translation: exact match (% of sentences equal to the reference) and
    corpus BLEU (sacrebleu), for greedy decoding and, with `beam_size > 1`,
    beam search. References are compared in the target tokenizer's canonical
    form (`canonical`: as the tokenizer writes them back; WordPiece
    normalises and lower-cases, SentencePiece and an imported model's Marian
    tokenizer keep case). Images: top-1 accuracy.

    Args:
        run_dir: a run directory.
        checkpoint: `"best"` or `"last"`.
        beam_size: beam width for the beam-search scores; 1 skips them.
        alpha: the beam search's length penalty; default 0.6 (GNMT's), 1.0
            (Hugging Face's) for a model imported from a Marian folder.
        limit: score only the first `limit` test examples.
        batch_size: examples per decoding or prediction batch.
        examples: how many test examples to print (and keep in the result).
        quiet: print nothing.
        write: write `metrics.json` into the run directory.
        data: the run's dataset if already loaded (`RunResult.data`); by
            default it is loaded again from the spec and options in
            `config.json` (the same split: it is fixed by its data seed).
        bootstrap: translation: with a number of resamples (e.g. 1000), BLEU
            and chrF get 95% bootstrap confidence intervals
            (`zoo.runs.scores.confidence`) under `"confidence"`.

    Returns:
        dict, e.g. `{"greedy": {"exact_match": 97.1, "bleu": 98.8}, "beam": {...},
        "num_examples": 1000, ...}` or `{"accuracy": 0.91, ...}`.
    """
    require_decoding("zoo evaluate", run_dir)
    run = load_run(run_dir, checkpoint)
    config = run.config
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ZooError(f"limit must be a positive int; received limit={limit!r}")
    if data is None:
        _, data = load_run_data(config, quiet)
    result = {
        "model": run.name,
        "data": config["data"]["spec"],
        "split": "test",
        "checkpoint": str(run.checkpoint.relative_to(run.run_dir)),
        "evaluated": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    score = _score_translation if run.kind == "translation" else _score_images
    if bootstrap is not None and run.kind != "translation":
        raise ZooError("confidence intervals are for translation runs (BLEU and chrF)")
    result.update(score(run, data, beam_size=beam_size, alpha=alpha, limit=limit,
                        batch_size=batch_size, examples=examples, quiet=quiet,
                        bootstrap=bootstrap))
    if write:
        files.write_json(run.run_dir / "metrics.json", result)
    if not quiet:
        _print_evaluation(result, run.run_dir if write else None)
    return result


def test_sources_and_references(run, data, limit=None):
    """`(sources, references)` of a run's test split: references in the canonical form of
    the run's target tokenizer (`zoo.runs.inference.canonical`)."""
    pairs = data.test_pairs[:limit] if limit else data.test_pairs
    if not pairs:
        raise ZooError(f"the dataset {run.config['data']['spec']!r} has no test pairs to score")
    sources = [source for source, _ in pairs]
    return sources, canonical(run.target_tokenizer, [target for _, target in pairs],
                              keep_unknown=copy_steps.is_copying(run.model))


def decode_test_sources(run, sources, width, alpha, batch_size, quiet):
    """The run's translations of `sources` (greedy for width 1, else beam search), timed."""
    how = "greedy" if width == 1 else f"beam search, width {width}, alpha {alpha:g}"
    say(f"Decoding {len(sources):,} held-out sentences with {run.name} ({how})...", quiet)
    started = time.monotonic()
    hypotheses = translate(run, sources, beam_size=width, alpha=alpha, batch_size=batch_size,
                           progress=not quiet and sys.stdout.isatty())
    return hypotheses, round(time.monotonic() - started, 2)


def _score_translation(run, data, *, beam_size, alpha, limit, batch_size, examples, quiet,
                       bootstrap=None):
    """Exact match, BLEU and chrF of greedy decoding and, with `beam_size > 1`, beam search."""
    sources, references = test_sources_and_references(run, data, limit)
    kind = tokenizers.kind(run.target_tokenizer)
    result = {
        "num_examples": len(sources),
        "references": "canonical form of the target tokenizer ("
        + ("normalised, lower-cased)" if kind == "wordpiece" else "cased)"),
    }
    options = decoding_options(run.target_tokenizer, alpha)
    modes = [("greedy", 1)] + ([("beam", beam_size)] if beam_size > 1 else [])
    shown = None
    for mode, width in modes:
        hypotheses, seconds = decode_test_sources(run, sources, width, options["alpha"],
                                                  batch_size, quiet)
        exact, bleu = scores(hypotheses, references)
        result[mode] = {"exact_match": exact, "bleu": bleu,
                        "chrf": chrf(hypotheses, references), "seconds": seconds}
        if bootstrap is not None:
            result[mode]["confidence"] = confidence(hypotheses, references, bootstrap)
        if width > 1:
            result[mode].update(beam_size=width, alpha=options["alpha"],
                                length_penalty=options["length_penalty"])
        shown = hypotheses
    result["examples"] = [
        {"source": s, "reference": r, "translation": h}
        for s, r, h in list(zip(sources, references, shown))[:examples]
    ]
    return result


def _score_images(run, data, *, limit, batch_size, examples, quiet, **_):
    """Top-1 accuracy, overall and per class."""
    x, y = data.x_test, data.y_test
    if limit:
        x, y = x[:limit], y[:limit]
    if not len(x):
        raise ZooError(f"the dataset {run.config['data']['spec']!r} has no test images")
    # A progress bar on a terminal only, as for decoding (logs stay clean).
    logits = run.model.predict(x, batch_size=batch_size,
                               verbose=int(not quiet and sys.stdout.isatty()))
    predicted = np.argmax(logits, axis=-1)
    return {
        "num_examples": int(len(x)),
        "accuracy": float(np.mean(predicted == y)),
        "per_class_accuracy": {
            name: float(np.mean(predicted[y == index] == index)) if np.any(y == index) else None
            for index, name in enumerate(run.class_names)
        },
        "examples": [
            {"label": run.class_names[int(t)], "prediction": run.class_names[int(p)]}
            for t, p in list(zip(y, predicted))[:examples]
        ],
    }


def clip(text, width=100):
    """`text` cut to `width` characters with an ellipsis (for printing decoded output)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_evaluation(result, written_to):
    print(f"\n{result['model']} on the {result['num_examples']:,} test examples of "
          f"{result['data']!r} ({result['checkpoint']}):")
    if "accuracy" in result:
        print(f"  accuracy {100 * result['accuracy']:.2f}%")
    for mode in ("greedy", "beam"):
        if mode in result:
            scores = result[mode]
            label = mode if mode == "greedy" else f"beam {scores['beam_size']}"
            print(f"  {label:<8} exact match {scores['exact_match']:.1f}%, BLEU {scores['bleu']:.1f}, "
                  f"chrF {scores['chrf']:.1f}  ({scores['seconds']:.1f} s)")
            if "confidence" in scores:
                print("           " + interval_line(scores["confidence"]))
    for example in result.get("examples", []):
        if "source" in example:
            mark = "ok " if example["translation"] == example["reference"] else "ERR"
            print(f"  {mark} {example['source']}\n      -> {clip(example['translation'])}\n"
                  f"      (reference: {example['reference']})")
    if written_to is not None:
        print(f"  written to {pathlib.Path(written_to) / 'metrics.json'}")


def interval_line(confidence):
    """`95% bootstrap intervals (N resamples): BLEU 33.1-37.4, chrF 51.0-55.2`."""
    spans = ", ".join(f"{name} {confidence[key]['low']:.1f}-{confidence[key]['high']:.1f}"
                      for key, name in (("bleu", "BLEU"), ("chrf", "chrF")))
    return f"95% bootstrap intervals ({confidence['samples']:,} resamples): {spans}"
