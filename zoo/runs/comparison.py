"""`compare`: is run B better than run A? Paired bootstrap resampling on the same test pairs."""

from zoo.datasets.preparation import data_seed, load_run_data
from zoo.errors import ZooError
from zoo.progress import say
from zoo.runs.evaluation import decode_test_sources, interval_line, test_sources_and_references
from zoo.runs.imported import decoding_options
from zoo.runs.inference import require_decoding
from zoo.runs.rundir import load_run
from zoo.runs.scores import paired_bootstrap
from zoo.text import tokenizers


def _data(run, quiet):
    return load_run_data(run.config, quiet)[1]


def _split(run):
    """What decides a run's test pairs: its data spec, its dataset options and its data seed."""
    config = run.config
    options = {key: value for key, value in config["data"]["options"].items()
               if key != "data_seed"}
    return config["data"]["spec"], options, data_seed(config["data"]["options"],
                                                       config["training"]["seed"])


def held_out_from_both(a, b, quiet=True):
    """A's test data, less the test pairs that B saw in training (another data seed's split).

    Returns `(data, dropped)`: A's dataset with `test_pairs` narrowed, and how many
    pairs were dropped.
    """
    data = _data(a, quiet)
    if _split(a) == _split(b):
        return data, 0
    seen = set(_data(b, True).train_pairs)
    kept = [pair for pair in data.test_pairs if pair not in seen]
    dropped = len(data.test_pairs) - len(kept)
    data.test_pairs = kept
    return data, dropped


def compare(run_a, run_b, checkpoint="best", beam_size=4, alpha=None, limit=None,
            batch_size=128, samples=1000, quiet=False):
    """Score two translation runs on the same held-out pairs and test whether B beats A.

    Both runs decode the test pairs of A that neither run trained on (A's test
    split, less any pair in B's training split when B was trained on another
    split), with the same decoding; BLEU and chrF are compared by paired
    bootstrap resampling (`zoo.runs.scores.paired_bootstrap`, `samples` resamples).

    Returns:
        dict: `{"a": run dir, "b": run dir, "num_examples", "dropped", "decoding",
        "bleu": {"a", "b", "difference", "p_value", "b_is_better"}, "chrf": {...},
        "samples"}`.
    """
    for run_dir in (run_a, run_b):
        require_decoding("zoo compare", run_dir)
    a, b = load_run(run_a, checkpoint), load_run(run_b, checkpoint)
    for run in (a, b):
        if run.kind != "translation":
            raise ZooError(f"{run.run_dir}: compare is for translation runs (BLEU and chrF)")
    kinds = tokenizers.kind(a.target_tokenizer), tokenizers.kind(b.target_tokenizer)
    if kinds[0] != kinds[1]:
        raise ZooError(f"the runs write targets differently (A: {kinds[0]}, B: {kinds[1]}); "
                       "compare runs whose target tokenizers are of one kind")
    data, dropped = held_out_from_both(a, b, quiet)
    sources, references = test_sources_and_references(a, data, limit)
    width = beam_size
    options = decoding_options(a.target_tokenizer, alpha)
    hypotheses = [decode_test_sources(run, sources, width, options["alpha"], batch_size, quiet)[0]
                  for run in (a, b)]
    say(f"Paired bootstrap resampling ({samples:,} resamples)...", quiet)
    result = {"a": str(a.run_dir), "b": str(b.run_dir), "num_examples": len(sources),
              "dropped": dropped,
              "decoding": "greedy" if width == 1 else f"beam {width}, alpha {options['alpha']:g}",
              **paired_bootstrap(*hypotheses, references, samples)}
    if not quiet:
        print_comparison(result)
    return result


def print_comparison(result):
    print(f"\nA = {result['a']}\nB = {result['b']}\n{result['num_examples']:,} test pairs "
          f"held out from both ({result['decoding']})"
          + (f"; {result['dropped']:,} of A's test pairs dropped: B trained on them"
             if result["dropped"] else ""))
    for key, name in (("bleu", "BLEU"), ("chrf", "chrF")):
        row = result[key]
        verdict = ("B is better" if row["b_is_better"] else
                   "A is better" if row["difference"] < 0 and row["p_value"] < 0.05 else
                   "no significant difference")
        print(f"  {name:<5} A {row['a']['score']:.2f}  B {row['b']['score']:.2f}  "
              f"B - A {row['difference']:+.2f}  p = {row['p_value']:.4f}: {verdict} (at 0.05)")
    for side in ("a", "b"):
        intervals = {"samples": result["samples"],
                     **{key: result[key][side] for key in ("bleu", "chrf")}}
        print(f"  {side.upper()}: {interval_line(intervals)}")
