"""How sharp are the alignments of trained RNNsearch runs? (docs/experiments/location-aware-attention.md)

For each run directory: the alignments `α_t` of the best checkpoint on the run's
held-out test pairs, teacher-forced on the references (`zoo.attention_weights`),
summarised over every real target position (the reference tokens and [END]):

- entropy `H(α_t) = -Σ_s α_{t,s} log α_{t,s}` in nats, and as a share of the
  uniform alignment's `log S` (S = real source tokens of that example);
- the largest weight `max_s α_{t,s}`.

With `--plot PATH`, the alignments of the first test example in every run,
side by side (`zoo.plot.attention_heatmap`).

    python tools/alignment_stats.py runs/dates-additive runs/dates-location --plot a.png
"""

import argparse
import json

import numpy as np

import zoo
from zoo import plot
from zoo.datasets import pipeline, preparation
from zoo.runs import rundir


def alignments(run, pairs, batch_size=128):
    """Per batch: `(α (B, T, S), target mask (B, T), source mask (B, S), inputs)`."""
    dataset = pipeline.make_translation_dataset(
        pairs, run.source_tokenizer, run.target_tokenizer, batch_size,
        max_length=run.max_length, shuffle=False,
    )
    for inputs, labels in dataset:
        weights = zoo.attention_weights(run.model, inputs)["decoder/alignment"]
        yield weights.astype("float64"), labels.numpy() != 0, inputs["source"].numpy() != 0, inputs


def statistics(run, pairs):
    entropies, shares, peaks = [], [], []
    for weights, target_mask, source_mask, _ in alignments(run, pairs):
        logs = np.log(np.where(weights > 0, weights, 1.0))
        entropy = -(weights * logs).sum(-1)  # (B, T)
        uniform = np.log(np.maximum(source_mask.sum(-1), 2))[:, None]  # (B, 1)
        entropies.append(entropy[target_mask])
        shares.append((entropy / uniform)[target_mask])
        peaks.append(weights.max(-1)[target_mask])
    entropies, shares, peaks = (np.concatenate(x) for x in (entropies, shares, peaks))
    return {
        "target_positions": int(entropies.size),
        "entropy_nats": round(float(entropies.mean()), 4),
        "entropy_share_of_uniform": round(float(shares.mean()), 4),
        "max_weight": round(float(peaks.mean()), 4),
        "rows_with_max_weight_over_0.9": round(float((peaks > 0.9).mean()), 4),
    }


def first_example(run, pairs):
    """The first test pair's alignment `(T, S)` over its real tokens, and the token labels."""
    weights, target_mask, source_mask, inputs = next(alignments(run, pairs[:1], batch_size=1))
    length, source_length = int(target_mask[0].sum()), int(source_mask[0].sum())
    source = run.source_tokenizer.lookup(inputs["source"][0, :source_length][None]).numpy()[0]
    labels = run.target_tokenizer.lookup(inputs["target"][0, 1:length][None]).numpy()[0]
    targets = [t.decode() for t in labels] + ["[END]"]
    return weights[0, :length, :source_length], [s.decode() for s in source], targets


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories of RNNsearch models")
    parser.add_argument("--limit", type=int, default=None, help="only the first N test pairs")
    parser.add_argument("--plot", help="PNG of the first test example's alignments")
    args = parser.parse_args()
    results, maps = {}, []
    for run_dir in args.runs:
        run = rundir.load_run(run_dir)
        config = run.config
        _, data = preparation.load_data(
            run.name, config["data"]["spec"], dict(config["data"]["options"]),
            config["model_config"], config["training"]["seed"], quiet=True,
        )
        pairs = data.test_pairs[: args.limit] if args.limit else data.test_pairs
        results[run_dir] = statistics(run, pairs)
        maps.append(first_example(run, pairs))
    print(json.dumps(results, indent=2))
    if args.plot:
        weights, source, target = maps[0]
        if any(m[0].shape != weights.shape for m in maps):
            raise SystemExit("the runs tokenize the first example differently; cannot plot")
        names = [config_name(run_dir) for run_dir in args.runs]
        plot.attention_heatmap(np.stack([m[0] for m in maps]), source, target, head="all",
                               head_names=names, path=args.plot)


def config_name(run_dir):
    attention = rundir.read_config(run_dir)["model_config"].get("attention", "additive")
    return f"attention={attention}"


if __name__ == "__main__":
    main()
