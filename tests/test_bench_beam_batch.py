"""benchmarks/bench_beam_batch.py's table (its measurements need a trained run and CTranslate2:
benchmarks/README.md has them)."""

import sys
from pathlib import Path

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
