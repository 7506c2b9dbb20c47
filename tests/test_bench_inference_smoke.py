"""The engine comparison (benchmarks/bench_inference.py) runs end to end at tiny sizes.

It needs the `bench` extra (torch, transformers, ctranslate2, sentencepiece); without it
the test skips. No network: the Marian folder is random and the sources come from the
machine's gettext catalogs.
"""

import importlib.util
import re

import pytest

from zoo.datasets import catalogs

MISSING = [name for name in ("torch", "transformers", "ctranslate2", "sentencepiece")
           if importlib.util.find_spec(name) is None]
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=(
        f"compares the zoo with PyTorch and CTranslate2, which only the optional bench extra "
        f"installs ({', '.join(MISSING)} missing): pip install torch==2.14.* --index-url "
        "https://download.pytorch.org/whl/cpu, then pip install -e '.[bench]'")),
    pytest.mark.skipif("de" not in catalogs.languages(), reason=(
        "takes its English sources and SentencePiece training text from German gettext catalogs "
        "(/usr/share/locale/de/LC_MESSAGES/*.mo), and this machine has none: packages bring "
        "them with their translations, unless a minimal image drops them (a path-exclude of "
        "/usr/share/locale in /etc/dpkg/dpkg.cfg.d/; remove it, then apt-get install --reinstall "
        "coreutils)")),
    pytest.mark.large,
]
ENGINES = ("zoo", "transformers", "ct2-float32")


@pytest.mark.parametrize("sentences", [4])
def test_bench_inference_quick_engines_agree_and_report(run_benchmark, sentences):
    out = run_benchmark("bench_inference.py", "translation", "--quick", "--engines", ",".join(ENGINES),
                        "--sentences", sentences, "--check", sentences, "--batches", "1,2")
    assert re.search(r"^CPU: .+, \d+ cores, ", out, re.M), out
    # The float32 engines decode the same tokens, all 8 of them (</s> is never likely).
    for engine in ENGINES:
        line = re.search(rf"^  {re.escape(engine)} +(\d+)/(\d+) equal +mean length ([\d.]+)$", out, re.M)
        assert line, out
        assert line.groups() == (str(sentences), str(sentences), "8.0"), line.group(0)
    rows = re.findall(r"^(greedy|beam) +(\d+)  (\S+) +([\d.]+) +([\d.]+) +([\d.]+) +(\d+)/(\d+)$", out, re.M)
    assert len(rows) == 2 * 2 * len(ENGINES), out
    seen = {(search, int(batch), engine) for search, batch, engine, *_ in rows}
    assert seen == {(s, b, e) for s in ("greedy", "beam") for b in (1, 2) for e in ENGINES}
    for *_, rate, milliseconds, _ratio, equal, count in rows:
        assert int(equal) == int(count) == sentences  # beam 4 agrees too, in the warm-up pass
        # sentences/s and ms per sentence are one median time seen two ways (rounded).
        assert float(rate) * float(milliseconds) == pytest.approx(1000, rel=0.02)
    assert all(float(row[5]) == 1.0 for row in rows if row[2] == "ct2-float32")
