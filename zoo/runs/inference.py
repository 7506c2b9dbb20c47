"""Translating sentences with a run's model (greedy, beam search or sampling, as the export does)."""

import keras
import tensorflow as tf

from keras_attention import backends
from keras_attention.checks import check_int
from zoo import decode
from zoo.decode import copy_steps
from zoo.decode.defaults import RNN_MAX_LENGTH
from zoo.errors import ZooError
from zoo.runs.imported import decoding_options
from zoo.runs.rundir import as_run, read_config
from zoo.text import copying
from zoo.text.ids import encode_sources
from zoo.text.special import special_ids


def require_decoding(command, run_dir, alternative=None):
    """Refuse `command` (e.g. `"zoo evaluate"`) on a translation run before any work when
    Keras' backend is not TensorFlow, in one line (`BackendError`): zoo's decoding loops are
    TensorFlow's (`zoo.decode`). A run trained on JAX decodes under TensorFlow as it is."""
    if not backends.is_tensorflow() and read_config(run_dir)["kind"] == "translation":
        backends.require_tensorflow(
            f"{command} of a translation run (decoding)",
            alternative or "there it reads a run trained on JAX as it is")


def padded_sources(tokenizer, sentences, max_length):
    """Sentences -> int32 `(B, S)` encoder input as in training: ids, `[END]`, padding.

    The dense, padded form of `zoo.text.ids.encode_sources` (ragged `(B, (S))`),
    with the tokenizer's own end and padding ids when it has them (Marian's `</s>`,
    `<pad>`).
    """
    ids = special_ids(tokenizer)
    return encode_sources(tokenizer, tf.constant(list(sentences), tf.string), max_length,
                          end_id=ids["end"]).to_tensor(default_value=ids["pad"])  # (B, S)


def translate(run, sentences, beam_size=1, alpha=None, batch_size=128, max_length=None,
              progress=False, sampling=None):
    """Translations of `sentences` with a run's model, in order.

    Args:
        run: a `Run` (or a run directory).
        sentences: list of str.
        beam_size: 1 for greedy decoding, more for beam search
            (`zoo.decode.beam_search`, length penalty `alpha`).
        alpha: default 0.6 (GNMT's penalty); 1.0 for a model imported from
            a Marian folder, decoded as Hugging Face does
            (`zoo.runs.imported.decoding_options`).
        batch_size: sentences decoded at once.
        max_length: sources are cut to `max_length - 1` tokens plus `[END]` and
            at most `max_length` tokens are generated; default the model's
            `max_length` (as the SavedModel export does), or `RNN_MAX_LENGTH`
            (`zoo.decode.defaults`) for a run whose config has none.
        progress: show a Keras progress bar.
        sampling: a `zoo.decode.sampling.Sampling` (with a seed: the same seed gives
            the same output, as the export's `sample` signature): sample instead
            of searching (`beam_size` is then not used). Each batch of `batch_size`
            sentences, in the given order, is drawn with that seed (the noise
            depends on a row's place in its batch). Greedy and beam search decode
            the longest sentences first (`batch_order`) and return them in order.

    Returns:
        list of str.
    """
    run = as_run(run)
    if run.kind != "translation":
        raise ZooError(f"{run.name} is an image model; translate needs a translation run")
    if isinstance(sentences, str):
        raise ZooError("sentences must be a list of str, not a single str")
    check_int("beam_size", beam_size, 1)
    max_length, options, table = decoding_setup(run, alpha, max_length)
    bar = keras.utils.Progbar(len(sentences), unit_name="sentence") if progress else None
    order = batch_order(sentences, keep=sampling is not None)
    outputs = [None] * len(sentences)
    for start in range(0, len(sentences), batch_size):
        rows = order[start : start + batch_size]
        chunk = [sentences[i] for i in rows]
        texts, _, _ = decode_batch(run, table, chunk, beam_size, max_length, options, sampling)
        for i, text in zip(rows, texts.numpy()):
            outputs[i] = text.decode("utf-8")
        if bar is not None:
            bar.add(len(chunk))
    return outputs


def decoding_setup(run, alpha=None, max_length=None):
    """`(max_length, options, table)` as `translate` decodes with them: the length (default
    the model's), `zoo.runs.imported.decoding_options` and a copying model's map of source
    pieces to target ids (`zoo.text.copying.copy_table`; None for other models)."""
    if max_length is None:
        max_length = RNN_MAX_LENGTH if run.max_length is None else run.max_length
    check_int("max_length", max_length, 1)
    table = None
    if copy_steps.is_copying(run.model):
        table = copying.copy_table(run.source_tokenizer, run.target_tokenizer)
    return max_length, decoding_options(run.target_tokenizer, alpha), table


def batch_order(sentences, keep=False):
    """The order `translate` decodes `sentences` in: longest first (by characters, a stable
    sort), so that a batch holds sentences of similar length.

    A batch decodes until its longest row ends and pads every row to its longest
    source, so a short sentence batched with a long one waits for it; the results
    are the same in any order (each row decodes as it would alone). With `keep`
    (sampling, whose noise depends on a row's place in its batch) the given order.
    """
    if keep:
        return list(range(len(sentences)))
    return sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))


def decode_batch(run, table, sentences, beam_size, max_length, options, sampling):
    """One batch of `translate`: `(texts (B,), source, generated ids (B, L))`.

    `source` is what the model took: the ids `(B, S)`, or for a copying model (`table`, its
    `zoo.text.copying.copy_table`) `{"source", "source_extended"}`; `generated` is in
    `zoo.decode.greedy_decode`'s layout (no `[START]`, `[END]` kept, then padding).
    `zoo explore` decodes one sentence through here, so that it shows what `zoo predict` gives.
    """
    if table is None:
        source = padded_sources(run.source_tokenizer, sentences, max_length)
        generated = _generate(run.model, source, beam_size, max_length, options, sampling)
        return run.target_tokenizer.detokenize(generated), source, generated
    end = special_ids(run.source_tokenizer)["end"]
    ids, extended, slots = copying.encode_copy_sources(
        run.source_tokenizer, table, run.target_tokenizer.vocab_size,
        tf.constant(sentences, tf.string), max_length, end_id=end)
    source = {"source": ids, "source_extended": extended}
    generated = _generate(run.model, source, beam_size, max_length, options, sampling)
    return copying.detokenize_extended(run.target_tokenizer, generated, slots), source, generated


def _generate(model, source, beam_size, max_length, options, sampling):
    """Token ids `(B, L)`: sampled with `sampling`, else greedy or beam search."""
    if sampling is None:
        return _decode(model, source, beam_size, max_length, options)
    return _sample(model, source, max_length, options, sampling)


def _decode(model, source, beam_size, max_length, options):
    ids = {key: options[key] for key in ("start_id", "end_id", "pad_id", "force_end")}
    if beam_size == 1:
        return decode.greedy_decode(model, source, max_length=max_length, **ids)
    tokens, _ = decode.beam_search(
        model, source, beam_size=beam_size, alpha=options["alpha"], max_length=max_length,
        length_penalty=options["length_penalty"], **ids,
    )
    tokens = tf.convert_to_tensor(tokens)
    if tokens.shape.rank == 3:  # (B, K, L): beams sorted best first
        tokens = tokens[:, 0]
    return tokens


def _sample(model, source, max_length, options, sampling):
    ids = {key: options[key] for key in ("start_id", "end_id", "pad_id", "force_end")}
    return decode.sample(model, source, temperature=sampling.temperature, top_k=sampling.top_k,
                         top_p=sampling.top_p, seed=sampling.seed, max_length=max_length, **ids)


def canonical(tokenizer, sentences, keep_unknown=False):
    """`sentences` as the tokenizer writes them back (WordPiece: normalised, lower-cased,
    re-spaced; SentencePiece and Marian: cased): the form references are compared in.

    With `keep_unknown` (references for a copying model, which can write them), each
    `[UNK]` piece keeps its own text (`zoo.text.copying.canonical_texts`).
    """
    if not sentences:
        return []
    strings = tf.constant(list(sentences), tf.string)
    if keep_unknown:
        return [s.decode("utf-8") for s in copying.canonical_texts(tokenizer, strings).numpy()]
    ids = tokenizer.tokenize(strings)
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
