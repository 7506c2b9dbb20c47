"""The main job (`make demo`): translate German number words into English with transformer-tiny.

Four steps, each through the same API as the command line (`zoo.runs`):

1. train: generate the offline `numbers` task (held-out numbers never seen in
   training), learn one shared SentencePiece (unigram) vocabulary, the
   default of `zoo train`'s `--tokenizer`, train `transformer-tiny`
   for a time budget into a run directory (`runs/demo`, replaced each time);
2. evaluate: exact match and BLEU (sacrebleu) of greedy decoding and of beam
   search on the held-out numbers;
3. export: a versioned SavedModel under `saved_models/transformer-tiny/`;
4. serve: load that SavedModel with `tf.saved_model.load` (no Keras model
   involved) and translate held-out numbers through its `serving_default`
   signature.
"""

import pathlib
import shutil
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401 - the tokenizer's ops, needed to load the SavedModel

from keras_attention import backends
from zoo import runs
from zoo.runs.evaluation import clip

MODEL = "transformer-tiny"
# 48 positions hold the longest number (about 30 tokens) with room to spare.
# dropout 0.1, the family's own: the recipe the README figure was measured with (a time
# limit would otherwise choose none, zoo.runs.short_budget).
OVERRIDES = {"vocabulary_size": 1000, "max_length": 48, "dropout": 0.1}


def run(minutes=4.0, train_size=20000, test_size=1000, seed=0, out="runs/demo",
        export_root="saved_models/transformer-tiny", batch_size=64, examples=5):
    """Train, evaluate, export and serve; returns a dict of the measured numbers.

    Args:
        minutes: training time budget.
        train_size, test_size: pairs generated for training (5% of them used
            for validation) and held out for testing.
        seed: the seed of the data and of runs.
        out: the run directory; an existing one is removed first.
        export_root: where the SavedModel versions go.
        batch_size: training batch size.
        examples: held-out numbers translated by the SavedModel.
    """
    backends.require_tensorflow("zoo demo (it decodes and exports)")
    started = time.monotonic()
    out = pathlib.Path(out)
    if (out / "config.json").is_file():
        shutil.rmtree(out)  # the demo's own scratch run, made by an earlier demo

    print(f"== [1/4] Train {MODEL} on the numbers task for at most {minutes:g} minutes")
    result = runs.train(
        MODEL, "numbers", out, epochs=1000, time_limit=minutes, batch_size=batch_size,
        train_size=train_size, test_size=test_size, seed=seed, data_seed=seed,
        overrides=OVERRIDES,
        schedule="paper",  # the recipe its README figure was measured with
    )

    print("\n== [2/4] Evaluate on the held-out numbers (never seen in training)")
    metrics = runs.evaluate(out, checkpoint="last", beam_size=4, examples=3, data=result.data)

    print("\n== [3/4] Export a SavedModel")
    version_dir = runs.export_run(out, to=export_root, checkpoint="last")

    print("\n== [4/4] Translate held-out numbers with the SavedModel (tf.saved_model.load)")
    held_out = result.data.test_pairs[-examples:]  # from the end: not the ones evaluate printed
    served = tf.saved_model.load(str(version_dir)).signatures["serving_default"]
    outputs = served(text=tf.constant([source for source, _ in held_out]))
    loaded = runs.load_run(out, "last")
    references = runs.canonical(loaded.target_tokenizer, [target for _, target in held_out])
    correct = 0
    for (source, _), reference, translation in zip(
        held_out, references, outputs["translation"].numpy().tolist()
    ):
        translation = translation.decode("utf-8")
        correct += translation == reference
        mark = "ok " if translation == reference else "ERR"
        print(f"  {mark} {source}\n      -> {clip(translation)}")
    total_minutes = (time.monotonic() - started) / 60

    greedy, beam = metrics["greedy"], metrics.get("beam")
    print("\nSummary")
    print(f"  model:      {MODEL}, {result.model.count_params():,} parameters, "
          f"trained {result.epochs} epochs ({result.summary['steps']} steps) in "
          f"{result.train_seconds / 60:.1f} min")
    print(f"  held-out:   {metrics['num_examples']} numbers never seen in training")
    print(f"  greedy:     exact match {greedy['exact_match']:.1f}%, BLEU {greedy['bleu']:.1f}")
    if beam:
        print(f"  beam 4:     exact match {beam['exact_match']:.1f}%, BLEU {beam['bleu']:.1f}")
    print(f"  SavedModel: {version_dir} ({correct}/{len(held_out)} served translations correct)")
    print(f"  run:        {out} (config.json, checkpoints/, history.csv, curves.png, logs/)")
    print(f"  total time: {total_minutes:.1f} min")
    return {
        "exact_match": greedy["exact_match"],
        "bleu": greedy["bleu"],
        "beam": beam,
        "epochs": result.epochs,
        "saved_model": str(version_dir),
        "minutes": total_minutes,
    }
