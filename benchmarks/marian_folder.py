"""A random OPUS-MT-shaped Hugging Face Marian folder for `bench_inference.py` (needs the `bench` extra).

    python benchmarks/marian_folder.py OUT_FOLDER SIZE SEED SOURCES.json TARGETS.json

SIZE `full` is opus-mt-en-de's configuration (d_model 512, 6+6 layers, 8 heads, FFN
2048, vocabulary 58,101, swish, shared tied embeddings, sinusoidal positions, scaled
embeddings); `tiny` is 2+2 layers of d_model 32. Two SentencePiece models (unigram, 8,000
pieces; 400 for `tiny`) are trained on the given English and target-language sentences
(real text, so real sentences get realistic piece counts); vocab.json is their union,
padded with placeholder pieces to the full vocabulary, `</s>` = 0, `<pad>` last, as
Marian's converter writes it. Weights are random (`torch.manual_seed(SEED)`, HF's
initialisation). `final_logits_bias` is random too, except -10,000 for `</s>` and
`<pad>`: no engine ever ends a sentence early or generates padding, so every engine
produces exactly the requested number of tokens.
"""

import json
import pathlib
import sys
import tempfile

FULL_VOCABULARY = 58101
SIZES = {
    "full": dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                 decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                 max_position_embeddings=512),
    "tiny": dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                 max_position_embeddings=128),
}
PIECES = {"full": 8000, "tiny": 400}


def train_spm(lines, prefix, pieces):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=pieces,
        model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
        normalization_rule_name="identity", minloglevel=2, num_threads=1, unk_id=0, bos_id=-1,
        eos_id=1, pad_id=-1, unk_piece="<unk>", eos_piece="</s>", input_sentence_size=50000,
    )
    return pathlib.Path(f"{prefix}.model")


def write_tokenizers(folder, sources, targets, size):
    """source.spm, target.spm, vocab.json; returns the vocabulary `{piece: id}`."""
    import sentencepiece as spm

    pieces = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("source", sources), ("target", targets)):
            model = train_spm(lines, pathlib.Path(tmp) / name, PIECES[size])
            (folder / f"{name}.spm").write_bytes(model.read_bytes())
            processor = spm.SentencePieceProcessor(model_file=str(model))
            pieces |= {processor.IdToPiece(i) for i in range(processor.GetPieceSize())}
    tokens = ["</s>", "<unk>", *sorted(pieces - {"<unk>", "</s>", "<s>"})]
    if size == "full":
        tokens += [f"▁extra{i}" for i in range(len(tokens), FULL_VOCABULARY - 1)]
    vocab = {token: i for i, token in enumerate([*tokens, "<pad>"])}
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"source_lang": "en", "target_lang": "de"}) + "\n")
    return vocab


def build_folder(folder, size, seed, sources, targets):
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = write_tokenizers(folder, sources, targets, size)
    pad = vocab["<pad>"]
    config = MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), activation_function="swish",
        scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0, share_encoder_decoder_embeddings=True, dropout=0.1,
        attention_dropout=0.0, activation_dropout=0.0, **SIZES[size],
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        bias = torch.randn(1, len(vocab)) * 0.02
        bias[0, 0] = bias[0, pad] = -1e4
        model.final_logits_bias.copy_(bias)
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]], decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=0, pad_token_id=pad, num_beams=4, max_length=512,
    )
    model.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    out, size, seed, source_file, target_file = sys.argv[1:6]
    texts = [json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
             for path in (source_file, target_file)]
    build_folder(out, size, int(seed), *texts)
    print(f"wrote {out}")
