"""A copying RNNsearch through the SavedModel export: strings in, strings out, a copied
out-of-vocabulary piece written as the source's own text (`zoo.export.copying`).

The model is made to copy deterministically: its alignment model's `v_a = 0` gives a
uniform alignment and the switch's bias of -40 leaves the copy distribution alone, so
the most frequent source piece, an `[UNK]` run of letters the tokenizer never saw,
wins every step.
"""

import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import decode
from zoo.export import export
from zoo.text import copying
from zoo.text.sentencepiece import SentencePieceTokenizer

CORPUS = ["the code is abc%d now." % i for i in range(200)] + ["hello world, ab cd!"] * 20
SENTENCE = "QZX9QZX"  # pieces: ▁, [UNK] "QZX", 9, [UNK], [END]: the [UNK] holds 2/5


@pytest.fixture(scope="module")
def copying_export(tmp_path_factory):
    tokenizer = SentencePieceTokenizer.from_corpus(CORPUS, 60)
    model = zoo.get("seq2seq-bahdanau-small", vocabulary_size=tokenizer.vocab_size, copy=True,
                    embedding_dim=8, encoder_units=8, decoder_units=8, attention_units=8,
                    maxout_units=4)
    attention = model.get_layer("decoder").attention
    attention.score_kernel.assign(np.zeros(attention.score_kernel.shape, "float32"))
    model.get_layer("pointer_generator").switch_bias.assign([-40.0])
    path = export(model, tmp_path_factory.mktemp("export") / "copy", tokenizer=tokenizer,
                  beam_size=2, max_length=8)
    return model, tokenizer, path


@pytest.mark.large
def test_the_savedmodel_writes_the_copied_text(copying_export):
    model, tokenizer, path = copying_export
    loaded = tf.saved_model.load(str(path))
    size = tokenizer.vocab_size
    out = loaded.signatures["greedy"](text=tf.constant([SENTENCE, "hello world"]))
    tokens = out["tokens"].numpy()
    assert tokens[0].tolist() == [size] * 8  # the first OOV slot, every step
    assert out["translation"].numpy()[0].decode() == "QZX" * 8
    # Nothing to copy but known pieces: the ids are the target vocabulary's own.
    assert (tokens[1] < size).all()


@pytest.mark.large
@pytest.mark.parametrize("signature", ["greedy", "serving_default"])
def test_the_savedmodel_decodes_as_in_process(copying_export, signature):
    model, tokenizer, path = copying_export
    loaded = tf.saved_model.load(str(path))
    sentences = [SENTENCE, "the code is Zabc now.", "hello"]
    table = copying.copy_table(tokenizer, tokenizer)
    source, extended, slots = copying.encode_copy_sources(
        tokenizer, table, tokenizer.vocab_size, tf.constant(sentences), 8)
    source = {"source": source, "source_extended": extended}
    if signature == "greedy":
        tokens = decode.greedy_decode(model, source, max_length=8)
    else:
        tokens, _ = decode.beam_search(model, source, beam_size=2, max_length=8)
    out = loaded.signatures[signature](text=tf.constant(sentences))
    np.testing.assert_array_equal(out["tokens"].numpy(), tokens.numpy())
    expected = copying.detokenize_extended(tokenizer, tokens, slots).numpy()
    assert out["translation"].numpy().tolist() == expected.tolist()


@pytest.mark.large
def test_the_savedmodel_samples_copies_too(copying_export):
    model, tokenizer, path = copying_export
    loaded = tf.saved_model.load(str(path))
    knobs = dict(seed=tf.constant(5, tf.int64), temperature=tf.constant(1.0),
                 top_k=tf.constant(0), top_p=tf.constant(1.0))
    out = loaded.signatures["sample"](text=tf.constant([SENTENCE]), **knobs)
    # The switch leaves only the copy distribution, uniform over the source's positions:
    # every token is one of the source's extended ids, the [UNK] slot among them.
    table = copying.copy_table(tokenizer, tokenizer)
    _, extended, _ = copying.encode_copy_sources(
        tokenizer, table, tokenizer.vocab_size, tf.constant([SENTENCE]), 8)
    tokens = out["tokens"].numpy()[0]
    assert set(tokens.tolist()) <= set(extended.numpy()[0].tolist())
    assert tokenizer.vocab_size in tokens.tolist()
    again = loaded.signatures["sample"](text=tf.constant([SENTENCE]), **knobs)
    np.testing.assert_array_equal(again["tokens"].numpy(), out["tokens"].numpy())
    assert "QZX" in out["translation"].numpy()[0].decode()


@pytest.mark.large
def test_zoo_train_evaluate_predict_and_export_a_copying_model(tmp_path, capsys):
    """`--set copy=true` end to end through the CLI: the run trains on the copy pipeline,
    evaluates, samples, and its SavedModel translates as `zoo predict` does."""
    from zoo import cli

    def main(*args):
        code = cli.main([str(a) for a in args])
        captured = capsys.readouterr()
        assert code == 0, captured.err[-3000:]
        return captured.out

    run = tmp_path / "run"
    sizes = ["--set", "copy=true", "--set", "embedding_dim=8", "--set", "encoder_units=8",
             "--set", "decoder_units=8", "--set", "attention_units=8", "--set", "maxout_units=4",
             "--set", "vocabulary_size=60", "--set", "max_length=12"]
    main("train", "seq2seq-bahdanau-small", "--data", "numbers", "--out", run, "--epochs", 1,
         "--train-size", 64, "--test-size", 4, "--seed", 1, *sizes)
    assert '"copy": true' in (run / "config.json").read_text()
    assert "BLEU" in main("evaluate", run)
    first = main("predict", run, "four hundred", "--sample", "--seed", 3)
    assert first == main("predict", run, "four hundred", "--sample", "--seed", 3)

    def translation(*options):  # "SOURCE\n  -> TRANSLATION"
        return main("predict", run, "four hundred", *options).split("->", 1)[1].strip()

    main("export", run, "--to", tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved" / "1"))
    # Like with like: `zoo predict RUN` searches with 4 beams, as `serving_default` does; with
    # `--beam-size 1` it is greedy, as the `greedy` signature.
    for signature, options in (("greedy", ["--beam-size", 1]), ("serving_default", [])):
        out = loaded.signatures[signature](text=tf.constant(["four hundred"]))
        assert out["translation"].numpy()[0].decode() == translation(*options), signature
