"""Make the Marian (OPUS-MT) parity fixtures with Hugging Face's own code.

Writes `tests/fixtures/marian_tiny/`: a tiny random-initialised
`MarianMTModel` (2+2 layers, d_model 32, swish, sinusoidal [sin | cos]
positions, scaled embeddings, a non-zero `final_logits_bias`) and two tiny
SentencePiece models trained on a little cased text, in the Hugging Face
folder layout of an OPUS-MT checkpoint (`config.json`, `model.safetensors`,
`source.spm`, `target.spm`, `vocab.json`, `tokenizer_config.json`,
`generation_config.json`), and the references in `references.npz` /
`references.json`, produced by `MarianTokenizer.from_pretrained(folder)` and
`MarianMTModel.from_pretrained(folder)`:

    input_ids, attention_mask   the tokenized batch (B, S)
    encoder_output              (B, S, D)
    decoder_input_ids, logits   teacher forcing on the greedy output: (B, T), (B, T, V)
    greedy_ids                  generate(num_beams=1, do_sample=False), (B, 1 + L)
    beam_ids                    generate(num_beams=4, length_penalty=LENGTH_PENALTY), (B, 1 + L)
    greedy_text, beam_text      batch_decode(skip_special_tokens=True)

and, for fine-tuning (`fine_tuning.npz` / `fine_tuning.json`), a batch of
FINE_TUNING_PAIRS as Hugging Face trains on it: `tokenizer(sources,
text_target=targets, padding=True)`, the decoder input
`shift_tokens_right(labels)`, the teacher-forced logits and the
cross-entropy losses over the non-padding labels (per pair and for the
batch: a token-level mean). `--fine-tuning-only` writes these two files
alone, for an existing folder.

With `--full-size` it also builds a random MarianMTModel of transformer-base
sizes (OPUS-MT's: 6+6 layers, d_model 512, 8 heads, d_ff 2048, vocabulary
58101), saves it, imports it with `zoo.transformer.weights.marian.import_folder` (through the
project's Python, `--project-python`) and compares the parameter counts
and the logits. Its output (torch 2.14.1, transformers 5.24.0, 2026-11-25):

    full size: Hugging Face parameters without the fixed sinusoidal tables
    + final_logits_bias = 73,944,309; zoo import = 73,944,309; equal; logits
    max |difference| 1.91e-06 (2 x 7 targets, 2 x 12 sources)

Needs torch, transformers and sentencepiece (the `fixtures` extra); no network.

    python tools/make_marian_fixtures.py [--out tests/fixtures/marian_tiny] [--full-size]
                                         [--fine-tuning-only]
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

SENTENCES = [
    "The cat sees the old house.",
    "Where is the station?",
    "Mary likes green apples, but not red flowers!",
    "Tom's friends buy a small garden today.",
    "Hello, World.",
    "",
]
_SUBJECTS = [("The cat", "Die Katze"), ("The dog", "Der Hund"), ("Tom", "Tom"), ("Mary", "Maria"),
             ("My brother", "Mein Bruder"), ("The teacher", "Der Lehrer"), ("Our neighbour", "Unser Nachbar")]
_VERBS = [("sees", "sieht"), ("likes", "mag"), ("finds", "findet"), ("buys", "kauft"), ("paints", "malt")]
_OBJECTS = [("the old house", "das alte Haus"), ("green apples", "gruene Aepfel"),
            ("a small garden", "einen kleinen Garten"), ("the station", "den Bahnhof"),
            ("red flowers", "rote Blumen"), ("the big window", "das grosse Fenster")]
_ENDINGS = [(".", "."), ("!", "!"), (" today.", " heute."), (", but not yesterday.", ", aber nicht gestern.")]
SOURCE_TEXT, TARGET_TEXT = zip(*[
    (f"{s} {v} {o}{e}", f"{ts} {tv} {to}{te}")
    for s, ts in _SUBJECTS for v, tv in _VERBS for o, to in _OBJECTS for e, te in _ENDINGS
] + [("Where is the station? Hello, World. Hello, friends.", "Wo ist der Bahnhof? Hallo, Welt. Hallo, Freunde.")])
DROPPED_PIECE = "▁friends"  # in source.spm, left out of vocab.json: Marian maps it to <unk>
FINE_TUNING_PAIRS = [
    ("The cat sees the old house.", "Die Katze sieht das alte Haus."),
    ("Hello, World.", "Hallo, Welt."),
    ("Mary likes green apples, but not red flowers!", "Maria mag gruene Aepfel, aber nicht rote Blumen!"),
    ("Where is the station?", "Wo ist der Bahnhof?"),
]
LENGTH_PENALTY = 1.0
MAX_NEW_TOKENS = 30  # more than the longest source (the export cuts sources at max_length - 1)
INIT_STD = 0.1


def train_spm(lines, prefix, vocab_size):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(lines) * 5),
        model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, normalization_rule_name="identity", minloglevel=2, num_threads=1,
        unk_id=0, bos_id=-1, eos_id=1, pad_id=-1, unk_piece="<unk>", eos_piece="</s>",
    )
    return pathlib.Path(f"{prefix}.model")


def marian_vocabulary(source_model, target_model):
    """vocab.json as Marian's converter writes it: `</s>`=0, `<unk>`=1, pieces, `<pad>` last.
    The pieces are sorted, so Marian ids differ from either SentencePiece model's ids."""
    import sentencepiece as spm

    pieces = set()
    for path in (source_model, target_model):
        processor = spm.SentencePieceProcessor(model_file=str(path))
        pieces |= {processor.IdToPiece(i) for i in range(processor.GetPieceSize())}
    pieces -= {"<unk>", "</s>", "<s>", DROPPED_PIECE}
    tokens = ["</s>", "<unk>", *sorted(pieces), "<pad>"]
    return {token: i for i, token in enumerate(tokens)}


def build_folder(folder, size, seed=0, end_bias=0.0):
    """Tokenizer files, config and random weights of a MarianMTModel in `folder`."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        source_model = train_spm(SOURCE_TEXT, pathlib.Path(tmp) / "source", 400)
        target_model = train_spm(TARGET_TEXT, pathlib.Path(tmp) / "target", 400)
        (folder / "source.spm").write_bytes(source_model.read_bytes())
        (folder / "target.spm").write_bytes(target_model.read_bytes())
        vocab = marian_vocabulary(source_model, target_model)
    if size == "full":  # OPUS-MT's sizes: transformer-base with a 58101-token vocabulary
        vocab.pop("<pad>")
        while len(vocab) < 58100:
            vocab[f"▁extra{len(vocab)}"] = len(vocab)
        vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, indent=2, ensure_ascii=False) + "\n")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"source_lang": "en", "target_lang": "de"}) + "\n")
    pad = vocab["<pad>"]
    sizes = (
        dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
             max_position_embeddings=64, init_std=INIT_STD)
        if size == "tiny" else
        dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
             decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
             max_position_embeddings=512)
    )
    config = MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), activation_function="swish",
        scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0, share_encoder_decoder_embeddings=True, dropout=0.1,
        attention_dropout=0.0, activation_dropout=0.0, **sizes,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():  # a bias that makes </s> likely after a few tokens
        bias = torch.randn(1, len(vocab)) * (0.1 if size == "tiny" else 0.02)
        bias[0, 0] += end_bias
        model.final_logits_bias.copy_(bias)
    model.generation_config = GenerationConfig(
        bad_words_ids=[[pad]], decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=0, pad_token_id=pad, num_beams=4, max_length=64,
    )
    model.save_pretrained(folder)
    return model


def torch_fixtures(model, out):
    """`pytorch_model.bin` of the tiny model (the older OPUS-MT format) in `<out>_bin/`, and
    `torch_state_dict.bin` + `.npz`: views, a parameter, half and int64 tensors, for the reader."""
    import collections

    import torch

    (out.parent / f"{out.name}_bin").mkdir(exist_ok=True)
    torch.save(model.state_dict(), out.parent / f"{out.name}_bin" / "pytorch_model.bin")
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=generator)
    state = collections.OrderedDict(
        matrix=base, view=base[1:, 2:5], transposed=base.t(), scalar=base[0, 0].clone(),
        ids=torch.arange(5), parameter=torch.nn.Parameter(torch.randn(3, generator=generator)),
        half=torch.randn(2, 2, generator=generator).half(),
    )
    torch.save(state, out.parent / "torch_state_dict.bin")
    np.savez(out.parent / "torch_state_dict.npz",
             **{name: tensor.detach().numpy() for name, tensor in state.items()})


def references(folder):
    """Run Hugging Face's tokenizer and model on SENTENCES (see the module docstring)."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder).eval()
    batch = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    generate = dict(max_new_tokens=MAX_NEW_TOKENS, bad_words_ids=[[model.config.pad_token_id]])
    with torch.no_grad():
        encoder_output = model.get_encoder()(**batch).last_hidden_state
        greedy = model.generate(**batch, num_beams=1, do_sample=False, **generate)
        beam = model.generate(
            **batch, num_beams=4, length_penalty=LENGTH_PENALTY, do_sample=False, **generate)
        decoder_input_ids = greedy[:, :-1]
        logits = model(**batch, decoder_input_ids=decoder_input_ids).logits
        probs = torch.log_softmax(logits, -1).sort(-1, descending=True).values
    margin = float((probs[..., 0] - probs[..., 1]).min())
    arrays = dict(
        input_ids=batch["input_ids"].numpy(), attention_mask=batch["attention_mask"].numpy(),
        encoder_output=encoder_output.numpy(), decoder_input_ids=decoder_input_ids.numpy(),
        logits=logits.numpy(), greedy_ids=greedy.numpy(), beam_ids=beam.numpy(),
    )
    texts = dict(
        sentences=SENTENCES,
        greedy_text=tokenizer.batch_decode(greedy, skip_special_tokens=True),
        beam_text=tokenizer.batch_decode(beam, skip_special_tokens=True),
        pieces=[tokenizer.convert_ids_to_tokens(row) for row in batch["input_ids"].tolist()],
        length_penalty=LENGTH_PENALTY, num_beams=4, max_new_tokens=MAX_NEW_TOKENS,
        clean_up_tokenization_spaces=tokenizer.clean_up_tokenization_spaces,
    )
    return arrays, texts, margin


def fine_tuning_references(folder):
    """Hugging Face's batch, logits and losses for FINE_TUNING_PAIRS (see the module docstring)."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    from transformers.models.marian.modeling_marian import shift_tokens_right

    tokenizer = MarianTokenizer.from_pretrained(folder)
    model = MarianMTModel.from_pretrained(folder).eval()
    sources, targets = (list(side) for side in zip(*FINE_TUNING_PAIRS))
    batch = tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    pad = model.config.pad_token_id
    labels = batch["labels"]
    decoder_input_ids = shift_tokens_right(labels, pad, model.config.decoder_start_token_id)
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=decoder_input_ids).logits
        ignored = labels.masked_fill(labels == pad, -100)
        batch_loss = float(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                 labels=ignored).loss)
        per_pair = [float(torch.nn.functional.cross_entropy(row_logits, row_labels, ignore_index=-100))
                    for row_logits, row_labels in zip(logits, ignored)]
    arrays = dict(input_ids=batch["input_ids"].numpy(), labels=labels.numpy(),
                  decoder_input_ids=decoder_input_ids.numpy(), logits=logits.numpy())
    texts = dict(pairs=FINE_TUNING_PAIRS, loss=batch_loss, pair_losses=per_pair,
                 target_pieces=[tokenizer.convert_ids_to_tokens(row) for row in labels.tolist()])
    np.savez_compressed(pathlib.Path(folder) / "fine_tuning.npz", **arrays)
    (pathlib.Path(folder) / "fine_tuning.json").write_text(
        json.dumps(texts, indent=2, ensure_ascii=False) + "\n")
    print(f"fine-tuning batch {tuple(labels.shape)}: loss {batch_loss:.6f}, per pair {per_pair}")


def full_size_check(project_python):
    """Import a full-size random Marian folder; compare parameter counts and logits."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "opus-mt-random"
        model = build_folder(folder, "full")
        parameters = sum(p.numel() for n, p in model.named_parameters()
                         if "embed_positions" not in n)
        hf_count = parameters + model.final_logits_bias.numel()
        generator = torch.Generator().manual_seed(0)
        source = torch.randint(0, 58100, (2, 12), generator=generator)
        target = torch.randint(0, 58100, (2, 7), generator=generator)
        target[:, 0] = model.config.decoder_start_token_id
        with torch.no_grad():
            logits = model(input_ids=source, decoder_input_ids=target).logits.numpy()
        np.savez(pathlib.Path(tmp) / "batch.npz", source=source.numpy(), target=target.numpy(),
                 logits=logits)
        script = (
            "import sys, numpy as np, zoo.transformer.weights.marian; m, s, t = zoo.transformer.weights.marian.import_folder(sys.argv[1]); "
            "b = np.load(sys.argv[2]); "
            "d = np.abs(m({'source': b['source'], 'target': b['target']}).numpy() - b['logits']).max(); "
            "print(m.count_params(), d)"
        )
        out = subprocess.run([project_python, "-c", script, str(folder), str(pathlib.Path(tmp) / "batch.npz")],
                             check=True, capture_output=True, text=True,
                             cwd=pathlib.Path(__file__).resolve().parent.parent).stdout.split()
        count, difference = int(out[-2]), float(out[-1])
        print(f"full size: Hugging Face parameters without the fixed sinusoidal tables "
              f"+ final_logits_bias = {hf_count:,}; zoo import = {count:,}; "
              f"{'equal' if count == hf_count else 'DIFFERENT'}; logits max |difference| "
              f"{difference:.2e} (2 x 7 targets, 2 x 12 sources)")
        return count == hf_count and difference < 1e-4


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = pathlib.Path(__file__).resolve().parent.parent
    parser.add_argument("--out", type=pathlib.Path, default=root / "tests/fixtures/marian_tiny")
    parser.add_argument("--full-size", action="store_true")
    parser.add_argument("--project-python", default=str(root / ".venv/bin/python"))
    parser.add_argument("--fine-tuning-only", action="store_true",
                        help="write fine_tuning.npz/.json alone, for the folder in --out")
    args = parser.parse_args(argv)
    if args.fine_tuning_only:
        fine_tuning_references(args.out)
        return
    for seed in range(20):  # the first model whose greedy choices are clear-cut
        build_folder(args.out, "tiny", seed, end_bias=2.0)
        arrays, texts, margin = references(args.out)
        if margin > 1e-3:
            break
    else:
        raise SystemExit("no seed gave a top-1/top-2 log-probability gap above 1e-3")
    texts["seed"] = seed
    from transformers import MarianMTModel

    torch_fixtures(MarianMTModel.from_pretrained(args.out), args.out)
    np.savez_compressed(args.out / "references.npz", **arrays)
    (args.out / "references.json").write_text(
        json.dumps(texts, indent=2, ensure_ascii=False) + "\n")
    ended = {name: int(sum(0 in row[1:MAX_NEW_TOKENS].tolist() for row in arrays[name]))
             for name in ("greedy_ids", "beam_ids")}
    print(f"rows ending before the limit (others get the forced </s>): {ended}")
    print(f"wrote {args.out}: vocabulary {arrays['logits'].shape[-1]}, "
          f"batch {arrays['input_ids'].shape}, smallest top-1/top-2 log-prob gap {margin:.4f}")
    for name in ("greedy_text", "beam_text"):
        print(f"{name}: {texts[name]}")
    fine_tuning_references(args.out)
    if args.full_size and not full_size_check(args.project_python):
        sys.exit(1)


if __name__ == "__main__":
    main()
