"""Parity of the zoo's CTranslate2 export (issue #51): CTranslate2's token ids against the zoo's.

    python benchmarks/ctranslate2_parity.py run RUN_DIR [--sentences 200] [--batch-size 32]
    python benchmarks/ctranslate2_parity.py folder MARIAN_FOLDER [--sentences 200]

`run`: a trained Transformer run (e.g. `zoo train transformer-small --data gettext:es`). The
first `--sentences` sources of its held-out test split, decoded greedily and with beam 4 by the
zoo's own decoding (`zoo.decode`, with the run's settings: what `zoo predict RUN` and the
SavedModel do) and by CTranslate2 from `zoo export RUN --format ctranslate2` (the export's
`translate_options`).

`folder`: a Hugging Face Marian / OPUS-MT folder (tests/fixtures/marian_tiny, or one from
benchmarks/marian_folder.py). English msgids of the machine's gettext catalogs, translated by
`zoo import FOLDER --jit` (the SavedModel's `greedy` and `serving_default` signatures) and by
`zoo import FOLDER --format ctranslate2`.

Then, row by row: the rows whose ids differ, and why. For each pair of differing hypotheses
(the zoo's A, CTranslate2's B) both engines score both, teacher-forced (the zoo's model, and
CTranslate2's `score_batch`), and the row is put in one class:

- `model`: the engines give A or B log-probabilities more than 1e-3 apart: the converted model
  computes something else (a conversion bug); `int8` for an int8 model (its rounding);
- `tie`: A and B score within 1e-4 of each other under the zoo's criterion (float arithmetic
  decides between them);
- `padding`: the zoo's criterion ranks A first with its log-probabilities, B first without the
  padding id's probability: the zoo masks the padding id after the softmax (its probability
  stays in the normalizer, as in Hugging Face's `bad_words_ids`), the export lowers its logit
  (CTranslate2 cannot mask after the softmax), so CTranslate2's log-probabilities are the
  zoo's renormalized without it;
- `search`: both engines give both hypotheses the same log-probability (the padding id left
  out), so the searches differ: the zoo's beam search (GNMT's penalty ((5 + |y|) / 6)^α, its
  beam shrinking as hypotheses end; or Hugging Face's, which goes on while a live hypothesis
  may still win) against CTranslate2's (`|y|^α`, the beam kept full, ending once beam_size
  hypotheses have ended), or a forced end token at the length limit (imported Marian models),
  which CTranslate2 lacks.

It also prints the largest difference between the engines' per-token log-probabilities of the
zoo's greedy outputs, and (run) how many sources Python's `sentencepiece` splits into the zoo
tokenizer's pieces (the manual's route); with `--int8`, the rows of CTranslate2's int8 export
(weights saved int8) and of the float32 export loaded with `compute_type="int8"` equal to the
zoo's. `--json PATH` writes the counts. Needs the `deploy` extra (ctranslate2).
"""

import argparse
import json
import pathlib
import sys
import tempfile
import time
import warnings

import numpy as np
import tensorflow as tf

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from zoo import decode  # noqa: E402 - after the path
from zoo.datasets import catalogs  # noqa: E402
from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.decode.loops import length_penalty as gnmt_penalty  # noqa: E402
from zoo.export import ctranslate2_runtime  # noqa: E402
from zoo.runs import export_run  # noqa: E402
from zoo.runs.imported import decoding_options  # noqa: E402
from zoo.runs.inference import batch_order, padded_sources  # noqa: E402
from zoo.runs.rundir import load_run  # noqa: E402
from zoo.text import tokenizers  # noqa: E402
from zoo.transformer.weights import marian  # noqa: E402

MODEL_TOLERANCE = 1e-3  # log-probability of a whole hypothesis
TIE_TOLERANCE = 1e-4


class Zoo:
    """The zoo's side: a Keras model, its tokenizers and search settings."""

    def __init__(self, model, source_tokenizer, target_tokenizer, max_length, max_new_tokens,
                 options):
        self.model, self.source, self.target = model, source_tokenizer, target_tokenizer
        self.max_length, self.max_new_tokens, self.options = max_length, max_new_tokens, options
        self.ids = {key: options[key] for key in ("start_id", "end_id", "pad_id", "force_end")}

    def decode(self, texts, beam_size, batch_size):
        rows = [None] * len(texts)
        order = batch_order(texts)
        for start in range(0, len(texts), batch_size):
            chunk = order[start:start + batch_size]
            source = padded_sources(self.source, [texts[i] for i in chunk], self.max_length)
            if beam_size == 1:
                tokens = decode.greedy_decode(self.model, source, self.max_new_tokens, **self.ids)
            else:
                tokens, _ = decode.beam_search(
                    self.model, source, beam_size, self.options["alpha"], self.max_new_tokens,
                    length_penalty=self.options["length_penalty"], **self.ids)
            for i, row in zip(chunk, decode.strip_special(tokens, self.ids["end_id"],
                                                          self.ids["pad_id"])):
                rows[i] = row
        return rows

    def log_probs(self, texts, targets):
        """Per-token log-probabilities of each target and then the end token, teacher-forced
        (cut to the position table: at most `max_length` of them), two ways: as the zoo's
        searches take them (the padding id's probability in the normalizer, the id masked
        after the softmax) and without the padding id, as CTranslate2 computes them (its logit
        lowered by `PAD_LOGIT_BIAS`). Returns `(zoo's, without padding)`."""
        kept, without = [], []
        for text, target in zip(texts, targets):
            labels = (list(target) + [self.ids["end_id"]])[:self.max_length]
            decoder_input = [self.ids["start_id"]] + labels[:-1]
            source = padded_sources(self.source, [text], self.max_length)
            logits = tf.cast(self.model({"source": source, "target": tf.constant([decoder_input])},
                                        training=False)[0], tf.float32)
            pad = tf.one_hot(self.ids["pad_id"], tf.shape(logits)[-1], on_value=-np.inf)
            for out, values in ((kept, logits), (without, logits + pad)):
                log_probs = tf.nn.log_softmax(values).numpy()
                out.append(np.array([log_probs[t, label] for t, label in enumerate(labels)]))
        return kept, without

    def score(self, log_probs, length):
        """The zoo's beam criterion of a finished hypothesis of `length` tokens: log p, the end
        token's included when it ended before the limit (forced at the limit with
        `force_end`: log-probability 0), over the length penalty of its length."""
        limit = self.max_new_tokens - (1 if self.ids["force_end"] else 0)
        total = float(np.sum(log_probs[:length]))
        if length < limit and len(log_probs) > length:
            total, length = total + float(log_probs[length]), length + 1
        elif self.ids["force_end"]:
            length += 1
        alpha = self.options["alpha"]
        if self.options["length_penalty"] == "gnmt":
            return total / float(gnmt_penalty(length, alpha))
        return total / max(length, 1) ** alpha


def ct2_score(log_probs, length, limit, alpha):
    """CTranslate2's criterion (`return_end_token=True`): log p, the end token's included when
    it ended before `max_decoding_length`, over `|y| ** alpha` (|y| counting it)."""
    total = float(np.sum(log_probs[:length]))
    if length < limit and len(log_probs) > length:
        total, length = total + float(log_probs[length]), length + 1
    return total / max(length, 1) ** alpha


def ct2_log_probs(exported, texts, targets):
    """CTranslate2's `score_batch` of each target: per-token log-probabilities, then the end
    token's (targets cut to the position table)."""
    limit = exported.metadata["translate_options"]["max_input_length"]  # max_length
    tokens = [[exported.target_tokens[i] for i in target[:limit - 1]] for target in targets]
    results = exported.translator.score_batch(exported.source_pieces(texts), tokens,
                                              max_input_length=limit)
    return [np.array(result.log_probs) for result in results]


def model_gap(zoo_lp, ct2_lp, upto=None):
    """The largest difference between the engines' summed log-probabilities of a prefix."""
    n = min(len(zoo_lp), len(ct2_lp) - 1 if upto is None else upto)  # CTranslate2's last: its end
    return abs(float(np.sum(zoo_lp[:n]) - np.sum(ct2_lp[:n])))


def explain(zoo, exported, texts, zoo_rows, ct2_rows, beam_size, quantized=False):
    """{row index: (class, detail)} for the rows whose ids differ (see the module docstring);
    `quantized`: an int8 model, whose log-probabilities differ by its rounding (`int8`)."""
    mismatch = "int8" if quantized else "model"
    differ = [i for i, (a, b) in enumerate(zip(zoo_rows, ct2_rows)) if a != b]
    if not differ:
        return {}
    sub = [texts[i] for i in differ]
    a_rows, b_rows = [zoo_rows[i] for i in differ], [ct2_rows[i] for i in differ]
    (zoo_a, nopad_a), (zoo_b, nopad_b) = zoo.log_probs(sub, a_rows), zoo.log_probs(sub, b_rows)
    ct2_a, ct2_b = ct2_log_probs(exported, sub, a_rows), ct2_log_probs(exported, sub, b_rows)
    options = exported.metadata["translate_options"]
    reasons = {}
    for k, i in enumerate(differ):
        a, b = a_rows[k], b_rows[k]
        if beam_size == 1:  # the first step where they part, and the two tokens there
            t = next(t for t, (x, y) in enumerate(zip(a + [-1], b + [-1])) if x != y)
            gap = max(model_gap(nopad_a[k], ct2_a[k], t), model_gap(nopad_b[k], ct2_b[k], t))
            margin = (float(zoo_a[k][t] - zoo_b[k][t])
                      if t < min(len(zoo_a[k]), len(zoo_b[k])) else float("nan"))
            ct2_margin = (float(ct2_a[k][t] - ct2_b[k][t])
                          if t < min(len(ct2_a[k]), len(ct2_b[k])) else float("nan"))
            detail = (f"step {t}: log p(zoo's token) - log p(CTranslate2's) = {margin:.2e} in "
                      f"the zoo, {ct2_margin:.2e} in CTranslate2")
            kind = (mismatch if gap > MODEL_TOLERANCE or not abs(margin) < TIE_TOLERANCE
                    else "tie")
            reasons[i] = (kind, detail)
            continue
        gap = max(model_gap(nopad_a[k], ct2_a[k]), model_gap(nopad_b[k], ct2_b[k]))
        zoo_score = (zoo.score(zoo_a[k], len(a)), zoo.score(zoo_b[k], len(b)))
        renormalized = (zoo.score(nopad_a[k], len(a)), zoo.score(nopad_b[k], len(b)))
        limit, alpha = options["max_decoding_length"], options["length_penalty"]
        ct2 = (ct2_score(nopad_a[k], len(a), limit, alpha),
               ct2_score(nopad_b[k], len(b), limit, alpha))
        detail = (f"zoo's criterion A {zoo_score[0]:.4f} B {zoo_score[1]:.4f}, CTranslate2's "
                  f"A {ct2[0]:.4f} B {ct2[1]:.4f}; lengths {len(a)}, {len(b)}")
        if gap > MODEL_TOLERANCE:
            reasons[i] = (mismatch, f"log-probabilities {gap:.2e} apart; {detail}")
        elif abs(zoo_score[0] - zoo_score[1]) < TIE_TOLERANCE:
            reasons[i] = ("tie", detail)
        elif (zoo_score[0] > zoo_score[1]) != (renormalized[0] > renormalized[1]):
            reasons[i] = ("padding", detail + "; without the padding id's probability the "
                          "zoo's criterion prefers B")
        else:
            reasons[i] = ("search", detail)
    return reasons


def report(name, texts, zoo_rows, ct2_rows, reasons, results, examples=3):
    classes = {}
    for kind, _ in reasons.values():
        classes[kind] = classes.get(kind, 0) + 1
    equal = sum(a == b for a, b in zip(zoo_rows, ct2_rows))
    print(f"  {name:34s} {equal:4d}/{len(texts)} rows equal; differ: {len(texts) - equal}"
          + (f" ({', '.join(f'{k} {v}' for k, v in sorted(classes.items()))})" if classes else ""))
    for i, (kind, detail) in list(reasons.items())[:examples]:
        print(f"    row {i} [{kind}] {texts[i][:60]!r}: {detail}")
    results[name] = {"rows": len(texts), "equal": equal, "differ": classes}


def log_prob_check(zoo, exported, texts, rows, results):
    """The largest per-token log-probability difference on the zoo's greedy outputs."""
    (kept, without), ct2_lp = zoo.log_probs(texts, rows), ct2_log_probs(exported, texts, rows)
    limit = exported.metadata["translate_options"]["max_input_length"] - 1  # CTranslate2 scores
    worst = padding = 0.0
    for a, b, c, row in zip(without, ct2_lp, kept, rows):  # tokens, and the end where both have it
        n = min(len(row), limit) + (1 if len(row) < limit else 0)
        worst = max(worst, float(np.abs(a[:n] - b[:n]).max(initial=0)))
        padding = max(padding, float(np.abs(a - c).max(initial=0)))
    tokens = sum(len(a) for a in kept)
    print(f"  per-token log-probabilities of the zoo's greedy outputs ({tokens} tokens), the "
          f"zoo's without the padding id vs CTranslate2's score_batch: largest difference "
          f"{worst:.2e} (the padding id's probability moves the zoo's by at most {padding:.2e})")
    results["log_prob_max_difference"] = worst
    results["padding_mass_max"] = padding


def compare(zoo, exported, texts, references, args, results, label="CTranslate2 float32",
            quantized=False):
    """Greedy and beam 4: the zoo's rows (`references[search]`) against `exported`'s."""
    for search, width in (("greedy", 1), ("beam", args.beam_size)):
        started = time.perf_counter()
        rows = exported.translate_ids(texts, beam_size=width, max_batch_size=args.batch_size)
        seconds = time.perf_counter() - started
        reasons = explain(zoo, exported, texts, references[search], rows, width, quantized)
        report(f"{search} ({label}, {seconds:.1f} s)", texts, references[search], rows,
               reasons, results)
        results[f"{search} ({label}, {seconds:.1f} s)"]["search"] = search


def run_mode(args, work):
    run = load_run(args.path, "best")
    _, data = load_run_data(run.config, quiet=True)
    texts = [source for source, _ in data.test_pairs[:args.sentences]]
    options = decoding_options(run.target_tokenizer)
    zoo = Zoo(run.model, run.source_tokenizer, run.target_tokenizer, run.max_length,
              run.max_length, options)
    print(f"{run.name} ({run.config['data']['spec']}), {len(texts)} held-out sources; zoo "
          f"search: {options['length_penalty']} alpha {options['alpha']}, max {run.max_length} "
          "tokens")
    exports = {"float32": export_run(args.path, to=work / "ct2", format="ctranslate2", quiet=True)}
    if args.int8:
        exports["int8"] = export_run(args.path, to=work / "ct2-int8", format="ctranslate2",
                                     quantize="int8", quiet=True)
    return zoo, texts, exports


def folder_mode(args, work):
    model, source, target = marian.import_folder(args.path)
    limit = marian.generate_limit(args.path)
    train, _, _ = catalogs.gettext_pairs("de", min_words=3, max_words=20, test_ratio=0.0)
    texts = sorted({s for s, _ in train})[:args.sentences]
    zoo = Zoo(model, source, target, model.get_layer("shared_embedding").sequence_length
              if "shared_embedding" in [layer.name for layer in model.layers]
              else model.get_layer("source_embedding").sequence_length, limit,
              decoding_options(target))
    print(f"{args.path}: {len(texts)} English gettext msgids; the --jit SavedModel's search: "
          f"hf alpha 1.0, forced </s>, at most {limit} tokens")
    exports = {"float32": marian.export_folder(args.path, work / "ct2", 1, format="ctranslate2")}
    if args.int8:
        exports["int8"] = marian.export_folder(args.path, work / "ct2-int8", 1,
                                               format="ctranslate2", quantize="int8")
    saved = marian.export_folder(args.path, work / "jit", 1, jit_compile=True)
    return zoo, texts, exports, saved


def saved_model_rows(path, texts, zoo, batch_size):
    import tensorflow_text  # noqa: F401 - the tokenizer ops

    loaded = tf.saved_model.load(str(path))
    rows = {}
    for search, signature in (("greedy", "greedy"), ("beam", "serving_default")):
        out = []
        for start in range(0, len(texts), batch_size):
            tokens = loaded.signatures[signature](text=tf.constant(texts[start:start + batch_size]))
            out += decode.strip_special(tokens["tokens"], zoo.ids["end_id"], zoo.ids["pad_id"])
        rows[search] = out
    return rows


def sentencepiece_check(exported, texts, results):
    """Rows whose pieces from Python's sentencepiece equal the zoo tokenizer's."""
    import sentencepiece

    models = exported.metadata["tokenizer"]["sentencepiece_models"]
    if models is None or exported.metadata["tokenizer"]["kind"] != "sentencepiece":
        return
    processor = sentencepiece.SentencePieceProcessor(model_file=str(exported.path / models["source"]))
    same = sum(processor.encode(text.strip(), out_type=str) == pieces
               for text, pieces in zip(texts, exported.source_pieces(texts)))
    print(f"  Python sentencepiece pieces equal to the zoo tokenizer's: {same}/{len(texts)}")
    results["sentencepiece_equal"] = same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["run", "folder"])
    parser.add_argument("path", help="a run directory, or a Hugging Face Marian folder")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--int8", action="store_true", help="also CTranslate2's int8 (rows equal)")
    parser.add_argument("--workdir", help="where the exports go (default: a temporary directory)")
    parser.add_argument("--json", help="write the counts here")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", "You are using a softmax over axis", UserWarning)
    results = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = pathlib.Path(tmp)
        if args.mode == "run":
            zoo, texts, exports = run_mode(args, work)
            started = time.perf_counter()
            references = {search: zoo.decode(texts, width, args.batch_size)
                          for search, width in (("greedy", 1), ("beam", args.beam_size))}
            print(f"  zoo.decode, greedy and beam {args.beam_size}: "
                  f"{time.perf_counter() - started:.1f} s")
            hf = None
            if zoo.options["length_penalty"] == "gnmt":  # the zoo's beam with CTranslate2's penalty
                hf = Zoo(zoo.model, zoo.source, zoo.target, zoo.max_length, zoo.max_new_tokens,
                         {**zoo.options, "length_penalty": "hf"})
                hf_rows = hf.decode(texts, args.beam_size, args.batch_size)
        else:
            zoo, texts, exports, saved = folder_mode(args, work)
            references = saved_model_rows(saved, texts, zoo, args.batch_size)
        exported = ctranslate2_runtime.load(exports["float32"])
        kind = tokenizers.kind(zoo.source)
        print(f"CTranslate2 export {exports['float32']} ({kind} tokenizer); rows of token ids "
              f"equal to the {'zoo' if args.mode == 'run' else '--jit SavedModel'}'s:")
        compare(zoo, exported, texts, references, args, results)
        if args.mode == "run" and hf is not None:
            rows = exported.translate_ids(texts, max_batch_size=args.batch_size)
            name = (f"beam, the zoo's with Hugging Face's penalty |y|^{zoo.options['alpha']:g} "
                    "(CTranslate2's)")
            report(name, texts, hf_rows, rows,
                   explain(hf, exported, texts, hf_rows, rows, args.beam_size), results)
            results[name]["search"] = "beam-hf"
        log_prob_check(zoo, exported, texts, references["greedy"], results)
        sentencepiece_check(exported, texts, results)
        if args.int8:
            compare(zoo, ctranslate2_runtime.load(exports["int8"]), texts, references, args,
                    results, "CTranslate2 int8 saved", quantized=True)
            compare(zoo, ctranslate2_runtime.load(exports["float32"], compute_type="int8"),
                    texts, references, args, results, "float32 export, compute_type int8",
                    quantized=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
