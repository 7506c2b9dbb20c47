"""The GPU benchmark's dry run (`benchmarks/bench_gpu.py --dry-run`): the code paths of the
H200 run on the CPU at tiny sizes, on Keras's JAX backend with TensorFlow kept out.

The PyTorch rows run where torch, timm and transformers are installed (the `bench` extra)
and are skipped, with the reason recorded, where they are not; the JAX side runs either way.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "bench_gpu.py"


@pytest.fixture
def bench_gpu(monkeypatch):
    """The script as a module (its top level imports nothing heavier than the standard library)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_gpu

    return bench_gpu


def test_mfu_is_given_against_the_datasheet_and_the_measured_peak(bench_gpu):
    """The datasheet's dense bf16 rate by the name nvidia-smi gives (the PCIe and NVL H100s
    are slower parts than the SXM one), and a row's two MFUs; the goal uses the datasheet's."""
    assert [bench_gpu.datasheet_peak(name)[0] for name in (
        "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200")] == \
        [989.4, 756.0, 835.0, 989.4]
    assert "datasheet" in bench_gpu.datasheet_peak("NVIDIA H200")[1]
    assert bench_gpu.datasheet_peak("NVIDIA A10G") is None and bench_gpu.datasheet_peak(None) is None
    results = {"machine": {"gpu": "NVIDIA H200"}, "peak": {"flops_per_second": 800e12},
               "vit_keras": {"images_per_second": 100.0, "parameters": 1,
                             "flops_per_second": 400e12},
               "vit_torch": {"images_per_second": 80.0, "parameters": 1,
                             "flops_per_second": 320e12}}
    row = bench_gpu.ratio_row(results, "vit")
    assert row["keras_mfu"] == pytest.approx(0.5) and row["torch_mfu"] == pytest.approx(0.4)
    assert row["keras_mfu_datasheet"] == pytest.approx(400 / 989.4)
    goal = bench_gpu.goals({"summary": {"vit": row}})
    assert goal["vit-b16 MFU >= 40% (of the datasheet)"] == {"value": pytest.approx(400 / 989.4),
                                                             "met": True}


def test_flop_formulas_give_the_known_sizes(bench_gpu):
    vit_b16 = dict(image_size=224, patch_size=16, channels=3, hidden_dim=768, mlp_dim=3072,
                   num_layers=12, num_classes=1000)
    # 17.56 G multiply-adds forward (timm's 17.6 GMACs for vit_base_patch16_224), × 6.
    assert bench_gpu.vit_flops_per_image(vit_b16) == pytest.approx(105.38e9, rel=1e-4)
    base = dict(d_model=512, intermediate_dim=2048, num_encoder_layers=6, num_decoder_layers=6,
                vocabulary_size=37000)
    # 384 pairs of 64 + 64 tokens: 9.46 TFLOP a step.
    step = 384 * bench_gpu.transformer_flops_per_pair(base, 64, 64)
    assert step == pytest.approx(9.4613e12, rel=1e-4)
    # One source token, no target: each encoder layer's projections, feed-forward and
    # attention over 1 key, and each decoder layer's cross-attention keys and values of it.
    d, f = 512, 2048
    encoder_layer = 4 * d * d + 2 * d * f + 2 * 1 * d
    assert bench_gpu.transformer_flops_per_pair(base, 1, 0) == 6 * (6 * encoder_layer
                                                                     + 6 * 2 * d * d)
    assert bench_gpu.out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while "
                                                "trying to allocate 1024 bytes."))
    assert not bench_gpu.out_of_memory(RuntimeError("INVALID_ARGUMENT: shapes"))


@pytest.mark.large
def test_bench_gpu_dry_run_writes_the_json_and_the_table(tmp_path):
    pytest.importorskip("jax", reason="the dry run runs Keras on JAX: jax[cpu] is in the dev "
                        "extra (pip install -e '.[dev]')")
    out = tmp_path / "bench_gpu.json"
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--simulate-oom-above", "4"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "KERAS_BACKEND": "jax"},
    )
    seconds = time.perf_counter() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["dry_run"] is True and results["parts"] == ["vit", "transformer"]
    assert results["jax"]["keras_backend"] == "jax"
    # TensorFlow could not be imported in the JAX process, and nothing loaded it.
    assert results["tensorflow"] == {"blocked": True, "loaded": False}
    assert results["peak"]["flops_per_second"] > 0

    vit, transformer = results["vit_keras"], results["transformer_keras"]
    # The largest batch that fits: 8 is made to run out of memory, 4 fits.
    assert vit["batch"] == 4, vit["batches_tried"]
    assert vit["batches_tried"]["8"].startswith("out of memory")
    assert vit["batches_tried"]["4"] == "fits"
    assert vit["images_per_second"] > 0 and transformer["tokens_per_second"] > 0
    assert transformer["tokens_per_step"] == 2 * transformer["batch"] * transformer["source_length"]
    for part, side in (("vit", vit), ("transformer", transformer)):
        # mixed_bfloat16 everywhere but the float32 logits.
        assert side["dtype_policies"]["float32"] == 1 and side["dtype_policies"]["mixed_bfloat16"]
        assert side["jit_compile"] is True and side["last_loss"] > 0
        # XLA's own count of a step is near the formula's (it adds the elementwise ops).
        assert 0.8 < side["xla_over_analytic"] < 1.5, side["xla_over_analytic"]
        # The same model trained again with the other attention path: on JAX's CPU the models'
        # flash_attention=None is the explicit path, so the second run is the fused one.
        paths = side["attention_paths"]
        assert paths["default"] == "explicit" and paths["explicit"]["flash_attention"] is None
        assert paths["fused"]["flash_attention"] is True and paths["fused"]["last_loss"] > 0
        # ViT: one self-attention per block; Transformer: the encoder's, and the decoder's
        # self- and cross-attention.
        assert paths["fused"]["layers"] == (2 if part == "vit" else 3)
        assert paths["fused_over_explicit"] > 0
        row = results["summary"][part]
        assert 0 < row["keras_mfu"] < 1
        torch_side = results[f"{part}_torch"]
        if "skipped" in torch_side:
            # Which package is missing (or fails to import), and how to install them.
            assert " not installed" in torch_side["skipped"] or " not importable" in \
                torch_side["skipped"], torch_side
            assert "pip install -e '.[bench]'" in torch_side["skipped"]
            assert "PyTorch rows skipped" in result.stdout
        else:
            assert torch_side["batch"] == side["batch"]
            assert torch_side["parameters"] == side["parameters"]  # the same shapes
            assert 0 < row["torch_mfu"] < 1 and row["keras_over_torch"] > 0

    # The table: printed, and written beside the JSON.
    table = out.with_suffix(".md").read_text()
    assert table in result.stdout
    assert "| workload | batch | zoo: Keras on JAX (XLA, mixed_bfloat16) |" in table
    assert "| vit-b16 training, images/s | 4 |" in table
    assert "dry run" in table and "Goal vit-b16 MFU >= 40%" in table
    assert "| workload | fused ms | explicit ms | fused / explicit |" in table
    assert "| vit-b16 training | " in table and " (default) | **" in table
    assert results["processes"]["jax"]["returncode"] == 0
    # Each part says what it took; the whole dry run stays short: about 25 s on 2 idle cores
    # without the PyTorch rows, 50 s with a load of 6 (a full-size run would take hours).
    assert "vit (Keras): part took" in result.stdout
    assert seconds < 150, seconds
