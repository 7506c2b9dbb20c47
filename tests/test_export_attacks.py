"""The SavedModels under attack: bad or extreme requests fail alone, and memory comes back.

A tiny grayscale ViT and a tiny Transformer with a SentencePiece tokenizer are
exported with `zoo.export`; `tests/serve_attacks.py` loads both in a fresh
process the way TF Serving does and sends them the requests a client can
send: images of the wrong dtype, rank, channel count or size; zero-sized,
8000x8000 and animated images as bytes; a 100,000-character string and a
batch of 1,000 strings. Each request either answers or fails with an error of
its own, and the process keeps serving. Resident memory: the 8000x8000 image
costs about 1 GB at its peak, which TensorFlow keeps for later requests (it
does not come back, even after `malloc_trim`); three more rounds of the same
attacks add nothing, so it is a high-water mark, not a leak.
"""

import json
import pathlib
import subprocess
import sys

import pytest
import tensorflow_text

import zoo
from zoo.text.sentencepiece import SentencePieceTokenizer

# `make test-large` (the exports attacked here and their serving processes).
pytestmark = pytest.mark.large

MAX_LENGTH = 12
SCRIPT = pathlib.Path(__file__).resolve().parent / "serve_attacks.py"
SPANISH = ["hola mundo", "una frase corta.", "frase número 7.", "el gato y el perro"] * 10


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("attacks")
    vit = zoo.get("vit-tiny", compile=False, image_size=8, channels=1, patch_size=4,
                  num_layers=1, hidden_dim=8, num_heads=2, mlp_dim=8, num_classes=3)
    vit_path = zoo.export(vit, base / "vit")
    tokenizer = SentencePieceTokenizer.from_corpus(SPANISH, 60)
    transformer = zoo.get(
        "transformer-tiny", compile=False, vocabulary_size=tokenizer.vocab_size,
        num_encoder_layers=1, num_decoder_layers=1, d_model=8, num_heads=2,
        intermediate_dim=8, max_length=MAX_LENGTH,
    )
    text_path = zoo.export(transformer, base / "translator", tokenizer=tokenizer)
    ops = pathlib.Path(tensorflow_text.__file__).parent / "python" / "ops"
    libraries = [str(ops / name) for name in zoo.export.TF_SERVING_TEXT_OP_LIBRARIES]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(vit_path), str(text_path), *libraries],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_wrong_images_fail_their_request(report):
    results = report["results"]
    for key in ("images/float32", "images/rank3", "images/channels", "images/size"):
        assert results[key]["error"] in ("InvalidArgumentError", "ValueError", "TypeError"), (
            key, results[key])
    assert results["bytes/zero_sized"]["error"] == "InvalidArgumentError"
    assert results["images/after"] == {"shapes": {
        "probabilities": [1, 3], "classes": [1, 3], "scores": [1, 3], "class_names": [1, 3]}}


def test_huge_and_animated_images_are_answered(report):
    results = report["results"]
    for key in ("bytes/huge_8000", "bytes/animated_gif"):  # resized; the first frame
        assert results[key]["shapes"]["probabilities"] == [1, 3], (key, results[key])


@pytest.mark.parametrize("signature", ["serving_default", "greedy"])
def test_huge_text_requests_are_answered(report, signature):
    results = report["results"]
    assert results[f"{signature}/100k_chars"]["shapes"]["translation"] == [1]
    assert results[f"{signature}/1000_strings"]["shapes"]["translation"] == [1000]
    assert results[f"{signature}/1000_strings"]["shapes"]["tokens"] == [1000, MAX_LENGTH]
    assert results[f"{signature}/after"]["shapes"]["translation"] == [1]


def test_memory_comes_back(report):
    before, after, repeats = (report[k]["VmRSS"] for k in ("before", "after", "after_repeats"))
    peak = report["after_repeats"]["VmHWM"]
    print(f"RSS MB: before {before:.0f}, peak {peak:.0f}, after {after:.0f}, "
          f"after 3 more rounds {repeats:.0f}; untrimmed {report['after_untrimmed']['VmRSS']:.0f};"
          f" after each: {report['rss_after_each']}")
    assert peak > before + 150  # the 8000x8000 image really was decoded
    # What stays is what the 8000x8000 image took (TensorFlow keeps its buffers for the
    # next requests, even after malloc_trim): about 1 GB here, never more than the peak ...
    each = report["rss_after_each"]
    assert each["images/size"] < before + 50  # rejected requests cost nothing
    assert after <= peak and after - before < 1.5 * (each["bytes/huge_8000"] - before) + 100
    # ... and nothing grows when the same attacks come again, three more times.
    assert repeats < after + 50, (after, repeats)
