"""The ViT engine comparison (`benchmarks/bench_inference.py vit`) runs end to end at tiny sizes.

It needs the `bench` extra (torch, torchvision, timm, onnx, onnxruntime); without it the test
skips. No network: the tiny timm ViT and the images are random.
"""

import importlib.util
import re

import pytest

MISSING = [name for name in ("torch", "torchvision", "timm", "onnx", "onnxruntime")
           if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=(
        f"compares the zoo's ViT exports with timm on PyTorch and ONNX Runtime, which only the "
        f"optional bench extra installs ({', '.join(MISSING)} missing): pip install -e '.[bench]' "
        "(torch 2.14 and torchvision 0.29; PyTorch's CPU build: pip install torch==2.14.* "
        "torchvision==0.29.* --index-url https://download.pytorch.org/whl/cpu first)")),
    pytest.mark.large,
]
ENGINES = ("saved-model", "saved-model-jit", "timm", "onnxruntime")


def test_bench_inference_vit_quick_engines_agree_and_report(run_benchmark):
    out = run_benchmark("bench_inference.py", "vit", "--quick")
    assert re.search(r"^CPU: .+, \d+ cores, ", out, re.M), out
    # Every engine's log-probabilities within 1e-4 of timm's, timm's own exactly.
    differences = dict(re.findall(r"^  (\S+) +max \|diff\| ([\d.e+-]+)$", out, re.M))
    assert set(differences) == set(ENGINES), out
    assert all(float(d) <= 1e-4 for d in differences.values()), differences
    assert float(differences["timm"]) == 0.0
    rows = re.findall(r"^ +(\d+)  (\S+) +([\d.]+) +([\d.]+) +([\d.]+)$", out, re.M)
    assert {(int(batch), engine) for batch, engine, *_ in rows} == {
        (b, e) for b in (1, 2) for e in ENGINES}, out
    assert len(rows) == 2 * len(ENGINES)
    for _, engine, rate, milliseconds, ratio in rows:
        # images/s and ms per image are one median time seen two ways (rounded).
        assert float(rate) * float(milliseconds) == pytest.approx(1000, rel=0.05)
        if engine == "timm":
            assert float(ratio) == 1.0  # the ratios are to timm's own time
