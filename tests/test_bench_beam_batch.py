"""benchmarks/bench_beam_batch.py's table, the engines' turns and the CTranslate2 backend it
names (its measurements need a trained run and CTranslate2: benchmarks/README.md has them)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_beam_batch  # noqa: E402


def test_the_table_gives_each_engine_its_times_and_ratio_to_ctranslate2_float32():
    rows = {}
    for name, ms in (("saved-model-jit", 12.0), ("ct2-float32", 4.0), ("old-jit", 36.0)):
        for search, factor in (("greedy", 0.25), ("beam", 1.0)):
            for batch, scale in ((32, 1.0), (1, 3.0)):
                rows[f"{name}|{search}|{batch}"] = {"ms": ms * factor * scale, "bleu": 40.0,
                                                    "same_ids_as_default": 128}
    lines = bench_beam_batch.table({"rows": rows}).splitlines()
    assert lines[0] == ("| engine | beam 1 | greedy 1 | beam 32 | greedy 32 | BLEU (beam 4) |")
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| saved-model-jit", "| ct2-float32", "| old-jit"]
    assert "| 12.0 (3.00×) | 3.0 (3.00×) | 40.00 |" in lines[2]
    assert lines[3].startswith("| ct2-float32 | 12.0 (1.00×) | 3.0 (1.00×) | 4.0 (1.00×)")


def test_the_engines_take_turns_in_each_round_and_keep_their_best_pass():
    calls = []

    def engine(name):
        def translate(texts, search):
            calls.append((name, len(texts)))
            return [[len(text)] for text in texts], [text.upper() for text in texts]
        return translate

    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    measured = bench_beam_batch.measure({"x": engine("x"), "y": engine("y")}, texts, 2, "beam",
                                        rounds=2, pause=0)
    warm_up, passes = calls[:2], calls[2:]
    assert warm_up == [("x", 2), ("y", 2)]
    assert passes == [("x", 2), ("x", 2), ("x", 1), ("y", 2), ("y", 2), ("y", 1)] * 2
    for name in ("x", "y"):
        ms, ids, outputs = measured[name]
        assert ms > 0 and ids == [[1], [2], [3], [4], [5]]
        assert outputs == ["A", "BB", "CCC", "DDDD", "EEEEE"]


# CTranslate2 4.8.5's log at `CT2_VERBOSE=1` on the AMD EPYC VM, its default and with
# `CT2_USE_MKL=1` (int8 weights), as its worker catches it on fd 2 during the load.
DEFAULT_LOG = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info] CPU: AuthenticAMD (SSE4.1=true, AVX=true, AVX2=true, AVX512=true)
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info]  - Selected ISA: AVX2
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info]  - Use Intel MKL: false
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info]  - SGEMM backend: DNNL (packed: false)
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info]  - GEMM_S16 backend: none (packed: false)
[2026-12-07 18:58:46.908] [ctranslate2] [thread 2636] [info]  - GEMM_S8 backend: DNNL (packed: false, u8s8 preferred: true)
[2026-12-07 18:58:46.942] [ctranslate2] [thread 2636] [info] Loaded model /tmp/w/exp/ct2/1 on device cpu:0
[2026-12-07 18:58:46.942] [ctranslate2] [thread 2636] [info]  - Binary version: 6
[2026-12-07 18:58:46.942] [ctranslate2] [thread 2636] [info]  - Model specification revision: 7
[2026-12-07 18:58:46.942] [ctranslate2] [thread 2636] [info]  - Selected compute type: float32
"""
MKL_INT8_LOG = """\
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info] CPU: AuthenticAMD (SSE4.1=true, AVX=true, AVX2=true, AVX512=true)
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info]  - Selected ISA: AVX2
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info]  - Use Intel MKL: true
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info]  - SGEMM backend: MKL (packed: true)
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info]  - GEMM_S16 backend: MKL (packed: true)
[2026-12-07 18:58:49.091] [ctranslate2] [thread 2648] [info]  - GEMM_S8 backend: MKL (packed: true, u8s8 preferred: true)
[2026-12-07 18:58:49.150] [ctranslate2] [thread 2648] [info] Loaded model /tmp/w/exp/ct2/1 on device cpu:0
[2026-12-07 18:58:49.150] [ctranslate2] [thread 2648] [info]  - Selected compute type: int8_float32
"""


def test_the_backend_is_read_from_ctranslate2s_log():
    backend = bench_beam_batch.parse_backend(DEFAULT_LOG)
    assert backend == {"cpu": "AuthenticAMD", "isa": "AVX2", "mkl": False, "sgemm": "DNNL",
                       "gemm_s16": "none", "gemm_s8": "DNNL", "compute_type": "float32"}
    assert bench_beam_batch.describe_backend(backend) == "SGEMM DNNL, ISA AVX2 (float32)"
    mkl = bench_beam_batch.parse_backend(MKL_INT8_LOG)
    assert mkl["mkl"] is True and mkl["sgemm"] == "MKL" and mkl["gemm_s8"] == "MKL"
    # int8 weights go through the GEMM_S8 backend, float32 ones through SGEMM
    assert bench_beam_batch.describe_backend(mkl) == "GEMM_S8 MKL, ISA AVX2 (int8_float32)"


def test_a_log_without_ctranslate2s_lines_names_no_backend():
    log = "WARNING: All log messages before absl::InitializeLog() is called\n" \
          "[2026-12-07 18:58:46.942] [ctranslate2] [thread 1] [warning] CPU: nothing\n"
    assert bench_beam_batch.parse_backend(log) == {}
    assert bench_beam_batch.parse_backend("") == {}
    assert bench_beam_batch.describe_backend({}) == "not named (no CTranslate2 log)"


def test_the_backend_line_names_each_ctranslate2_engine_and_the_env():
    results = {"ctranslate2_backend": {
        "ct2-float32": bench_beam_batch.parse_backend(DEFAULT_LOG),
        "ct2-int8": dict(bench_beam_batch.parse_backend(DEFAULT_LOG),
                         compute_type="int8_float32")}, "ctranslate2_env": {}}
    assert bench_beam_batch.backend_line(results) == (
        "CTranslate2 backend: SGEMM DNNL, ISA AVX2 (float32); "
        "GEMM_S8 DNNL, ISA AVX2 (int8_float32)")
    results["ctranslate2_env"] = {"CT2_USE_MKL": "1", "CT2_FORCE_CPU_ISA": "AVX512"}
    assert bench_beam_batch.backend_line(results).endswith(
        "(int8_float32) (env CT2_USE_MKL=1 CT2_FORCE_CPU_ISA=AVX512)")


def test_ctranslate2_env_takes_key_value_pairs(capsys):
    args = bench_beam_batch.parse_args(["RUN", "--ctranslate2-env", "CT2_USE_MKL=1",
                                        "--ctranslate2-env", "CT2_FORCE_CPU_ISA=AVX512",
                                        "--ctranslate2-env", "EMPTY=", "--ctranslate2-env",
                                        "OMP_PROC_BIND=a=b"])
    assert dict(args.ctranslate2_env) == {"CT2_USE_MKL": "1", "CT2_FORCE_CPU_ISA": "AVX512",
                                          "EMPTY": "", "OMP_PROC_BIND": "a=b"}
    assert bench_beam_batch.parse_args(["RUN"]).ctranslate2_env == []
    for wrong in ("CT2_USE_MKL", "=1", "CT2 USE_MKL=1"):
        with pytest.raises(SystemExit):
            bench_beam_batch.parse_args(["RUN", "--ctranslate2-env", wrong])
        assert "is not KEY=VALUE" in capsys.readouterr().err
