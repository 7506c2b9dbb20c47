"""Where does copying matter? Data and scores of docs/experiments/copy_mechanism.md.

A generated English -> pseudo-German task: eight sentence templates, each with a
person's name and a reference code (`QX-731`) that the target must repeat verbatim.

    python tools/copy_experiment.py data DIR     # DIR/{train,train_unk,test_new,test_oov}.tsv
    python tools/copy_experiment.py score RUN [RUN ...] --test DIR/test_new.tsv [--beam-size 4]
    python tools/copy_experiment.py placeholders RUN [RUN ...]   # a gettext:LANG run's test split
    python tools/copy_experiment.py cost [--vocabulary 8000]      # a training step, copy or not

- `train.tsv`: names and codes from a fixed training pool, over the letters without
  j, q, x, z (no training sentence holds those four letters, in either case);
- `train_unk.tsv`: the same pairs, but in 2.4% of them the name or the code has one
  of 40 Greek and Cyrillic letters (each in 12 pairs, anywhere in the word): too rare for
  SentencePiece's character coverage (99.95%), so they are `[UNK]` in training, as rare
  characters are in real data; a model sees `[UNK]` in its inputs and, with copy,
  learns to copy it;
- `test_new.tsv`: names and codes never in training, same letters: new spans;
- `test_oov.tsv`: names and codes never in training, each with at least one of
  j, q, x, z: characters a tokenizer learned on the training text does not know.

`score` decodes a test file with each run (`zoo.runs.translate`, greedy or beam) and
reports, over the test pairs: span exact match (the name and the code both appear
verbatim in the output), name and code exact match separately, and sentence exact
match (the output equals the target).

`placeholders` decodes the held-out pairs of a `gettext:LANG` run whose target holds
printf-style placeholders (`%s`, `%d`, `%(name)s`, `%1$s`, `{0}`, …) and reports the
share whose output holds the target's placeholders in the same order.

`cost` times one training step (`train_on_batch`, batch 64, 20 source and 20 target
tokens, random ids) of `transformer-tiny` and `seq2seq-bahdanau-small` with and
without copy, interleaved, 3 rounds of 10 steps, and prints each round's mean.
"""

import argparse
import json
import pathlib
import random
import re
import time

import zoo
from zoo import datasets, runs

TEMPLATES = (
    ("please send the parcel to {name} , reference {code} .",
     "bitte senden Sie das Paket an {name} , Nummer {code} ."),
    ("{name} will arrive on monday with order {code} .",
     "{name} kommt am Montag mit Auftrag {code} an ."),
    ("the invoice {code} was paid by {name} .",
     "die Rechnung {code} wurde von {name} beglichen ."),
    ("call {name} about ticket {code} today .",
     "rufen Sie heute {name} wegen Ticket {code} an ."),
    ("{name} has booked room {code} for three nights .",
     "{name} hat das Hotelbett {code} für drei Nächte gebucht ."),
    ("is {name} still waiting for {code} ?",
     "wartet {name} noch auf {code} ?"),
    ("the manager {name} approved the claim {code} .",
     "die Leiterin {name} hat Antrag {code} genehmigt ."),
    ("please let {name} sign form {code} .",
     "bitte lassen Sie {name} das Formular {code} unterschreiben ."),
)
CONSONANTS = "bcdfghklmnprstv"
VOWELS = "aeiou"
RESERVED = "jqxz"  # never in training
RARE = "αβγδεζηθικλμνξοπρστυφχψω" + "ΓΔΘΛΞΠΣΦΨΩ" + "бгджзл"  # 40 letters, each in 12 pairs
RARE_PAIRS = 12
PLACEHOLDER = re.compile(r"%\(\w+\)[-+ 0#]*\d*(?:\.\d+)?[sdifuxXc]|%\d+\$[sdifuxXc]"
                         r"|%[-+ 0#]*\d*(?:\.\d+)?l{0,2}[sdifuxXc]|\{\w*\}")


def _name(rng, reserved=False):
    letters = [rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.randint(2, 3))]
    name = "".join(letters)
    if reserved:  # one or two letters from the reserved ones
        for _ in range(rng.randint(1, 2)):
            index = rng.randrange(len(name))
            name = name[:index] + rng.choice(RESERVED) + name[index + 1:]
    return name.capitalize()


def _code(rng, reserved=False):
    letters = [rng.choice(CONSONANTS.upper()) for _ in range(2)]
    if reserved:
        letters[rng.randrange(2)] = rng.choice(RESERVED.upper())
    return "".join(letters) + "-" + str(rng.randint(100, 999))


def _pairs(rng, count, names, codes):
    pairs = []
    for _ in range(count):
        source, target = rng.choice(TEMPLATES)
        slots = {"name": rng.choice(names), "code": rng.choice(codes)}
        pairs.append((source.format(**slots), target.format(**slots), slots))
    return pairs


def make_data(directory, seed=0, train=20000, test=1000, pool=1500):
    """Write the three files; return their sizes."""
    rng = random.Random(seed)
    train_names = sorted({_name(rng) for _ in range(pool)})
    train_codes = sorted({_code(rng) for _ in range(pool)})
    new_names = sorted({_name(rng) for _ in range(4 * pool)} - set(train_names))
    new_codes = sorted({_code(rng) for _ in range(4 * pool)} - set(train_codes))
    oov_names = sorted({_name(rng, True) for _ in range(pool)})
    oov_codes = sorted({_code(rng, True) for _ in range(pool)})
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, count, names, codes in (("train", train, train_names, train_codes),
                                      ("test_new", test, new_names, new_codes),
                                      ("test_oov", test, oov_names, oov_codes)):
        pairs = _pairs(rng, count, names, codes)
        _write(directory / f"{name}.tsv", pairs)
        sizes[name] = len(pairs)
        if name == "train":
            _write(directory / "train_unk.tsv", _with_rare_letters(random.Random(seed + 1), pairs))
    train_text = (directory / "train.tsv").read_text(encoding="utf-8").lower()
    assert not set(RESERVED) & set(train_text), "a reserved letter in the training text"
    return sizes


def _write(path, pairs):
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(f"{source}\t{target}\n" for source, target, _ in pairs)


def _with_rare_letters(rng, pairs):
    """`pairs` where, in `RARE_PAIRS` pairs per rare letter, one letter of the name (at
    any position, upper-case at the first) or of the code (upper-case) is replaced by
    it, in source and target alike; names and codes alternate."""
    pairs = list(pairs)
    chosen = rng.sample(range(len(pairs)), len(RARE) * RARE_PAIRS)
    for count, (index, letter) in enumerate(zip(chosen, RARE * RARE_PAIRS)):
        source, target, slots = pairs[index]
        key = "name" if count % 2 == 0 else "code"
        old = slots[key]
        position = rng.randrange(len(old)) if key == "name" else rng.randrange(2)
        if position == 0 or key == "code":
            letter = letter.upper()
        new = old[:position] + letter + old[position + 1:]
        pairs[index] = (source.replace(old, new), target.replace(old, new), {**slots, key: new})
    return pairs


def _spans(target):
    """The name and the code of a target sentence (the words the templates do not hold)."""
    fixed = {word for _, template in TEMPLATES for word in template.split()}
    words = [word for word in target.split() if word not in fixed]
    code = next(word for word in words if "-" in word)
    name = next(word for word in words if word != code)
    return name, code


def score(run_dir, test_file, beam_size=1, batch_size=256):
    """Span, name, code and sentence exact match of a run on a test file."""
    pairs = [line.rstrip("\n").split("\t") for line in
             pathlib.Path(test_file).read_text(encoding="utf-8").splitlines() if line]
    outputs = runs.translate(run_dir, [source for source, _ in pairs], beam_size=beam_size,
                             batch_size=batch_size)
    counts = {"span": 0, "name": 0, "code": 0, "sentence": 0}
    for (_, target), output in zip(pairs, outputs):
        name, code = _spans(target)
        words = output.split()
        counts["name"] += name in words
        counts["code"] += code in words
        counts["span"] += name in words and code in words
        counts["sentence"] += output.strip() == target.strip()
    result = {key: round(100 * value / len(pairs), 1) for key, value in counts.items()}
    return {"run": str(run_dir), "test": str(test_file), "beam_size": beam_size,
            "pairs": len(pairs), **result, "example": outputs[0]}


def placeholders(run_dir, beam_size=1, batch_size=256):
    """Placeholder exact match of a `gettext:LANG` run on its held-out pairs."""
    run = runs.load_run(run_dir)
    spec = run.config["data"]["spec"]
    pairs = [(s, t) for s, t in datasets.load(spec).test_pairs if PLACEHOLDER.findall(t)]
    outputs = runs.translate(run, [source for source, _ in pairs], beam_size=beam_size,
                             batch_size=batch_size)
    kept = sum(PLACEHOLDER.findall(output) == PLACEHOLDER.findall(target)
               for (_, target), output in zip(pairs, outputs))
    return {"run": str(run_dir), "data": spec, "beam_size": beam_size, "pairs": len(pairs),
            "placeholders": round(100 * kept / len(pairs), 1), "example": outputs[0]}


def cost(vocabulary=8000, rounds=3, steps=10):
    """Mean milliseconds of a training step per model and round, with and without copy."""
    import numpy as np  # noqa: PLC0415 - only `cost` needs NumPy

    rng = np.random.default_rng(0)
    source = rng.integers(4, vocabulary, (64, 20)).astype("int32")
    target, labels = (rng.integers(4, vocabulary, (64, 20)).astype("int32") for _ in range(2))
    models = {}
    for name in ("transformer-tiny", "seq2seq-bahdanau-small"):
        for copy in (False, True):
            model = zoo.get(name, vocabulary_size=vocabulary, copy=copy)
            inputs = {"source": source, "target": target}
            if copy:
                inputs["source_extended"] = source
            model.train_on_batch(inputs, labels)  # trace
            models[f"{name}, copy={copy}"] = (model, inputs)
    times = {key: [] for key in models}
    for _ in range(rounds):
        for key, (model, inputs) in models.items():
            started = time.perf_counter()
            for _ in range(steps):
                model.train_on_batch(inputs, labels)
            times[key].append(round((time.perf_counter() - started) / steps * 1000))
    return {"vocabulary": vocabulary, "ms_per_step": times}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    data = commands.add_parser("data", help="write train.tsv, test_new.tsv, test_oov.tsv")
    data.add_argument("directory")
    data.add_argument("--seed", type=int, default=0)
    scores = commands.add_parser("score", help="exact match of the copied spans")
    scores.add_argument("runs", nargs="+")
    scores.add_argument("--test", required=True)
    scores.add_argument("--beam-size", type=int, default=1)
    marks = commands.add_parser("placeholders", help="placeholders kept, gettext:LANG runs")
    marks.add_argument("runs", nargs="+")
    marks.add_argument("--beam-size", type=int, default=1)
    costs = commands.add_parser("cost", help="time a training step with and without copy")
    costs.add_argument("--vocabulary", type=int, default=8000)
    args = parser.parse_args()
    if args.command == "cost":
        print(json.dumps(cost(args.vocabulary)))
        return
    if args.command == "data":
        print(json.dumps(make_data(args.directory, args.seed)))
        return
    if args.command == "placeholders":
        for run in args.runs:
            print(json.dumps(placeholders(run, args.beam_size), ensure_ascii=False))
        return
    for run in args.runs:
        print(json.dumps(score(run, args.test, args.beam_size), ensure_ascii=False))


if __name__ == "__main__":
    main()
