"""Three SIGKILLs in one `zoo train`, restarted each time: the short form of
`tools/chaos_train.py`'s twenty (docs/reliability.md, "Repeated kills").

One kill a step into an epoch, one by zoo.files' test hook once last.keras is
written under its temporary name, one as soon as the backup's temporary weights
file appears. Then the run must have its summary.json, each epoch once in
history.csv, exactly --max-steps optimizer steps, no partial file left, and
every checkpoint must load. Kept cheap: a 7,000-parameter Transformer, epochs
of 2 steps, no validation split (no validation step to trace in each process).
"""

import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import chaos_train  # noqa: E402 - tools/ is not a package
import reliability_table  # noqa: E402
from chaos_train import Kill  # noqa: E402

STEPS, STEPS_PER_EPOCH = 8, 2


@pytest.mark.large
def test_three_kills_keep_every_step_once_and_leave_no_partial_file(tmp_path):
    options = chaos_train.ChaosOptions(
        steps=STEPS, steps_per_epoch=STEPS_PER_EPOCH, kills=3, baselines=0, train_size=64,
        extra=("--val-ratio", "0"), out=tmp_path,
        plan=(Kill("step", steps=1), Kill("hook", target="checkpoints/last.keras"),
              Kill("watch", target="backup weights")))
    report = chaos_train.run(options)
    attempts, checks = report["attempts"], report["checks"]
    assert [attempt["killed"] for attempt in attempts] == [True, True, True, False]
    # The step kill lands inside an epoch: the steps since its start are lost.
    assert attempts[0]["lost_steps"] >= 1
    # The hook killed the process with last.keras complete under its temporary name.
    assert any("last" in name and "tmp" in name for name in attempts[1]["partial_files_after"])
    assert checks["summary"]["ok"] and checks["summary"]["steps"] == STEPS
    assert checks["history_once"] == {"ok": True, "epochs": STEPS // STEPS_PER_EPOCH,
                                      "duplicates": []}
    steps = checks["steps_exact"]
    assert steps["ok"], steps
    assert steps["optimizer_iterations"] == steps["summary_steps"] == STEPS
    assert checks["no_partial_files"] == {"ok": True, "left": [], "backup_left": False}
    loaded = checks["checkpoints_load"]["checkpoints"]
    assert set(loaded) >= {"checkpoints/last.keras", "checkpoints/best.keras"}, loaded
    assert set(loaded.values()) == {"loads"}, loaded
    lost = checks["work_lost"]
    assert lost["ok"] and 1 <= lost["lost_steps"] <= 3 * STEPS_PER_EPOCH, lost
    assert lost["executed_steps"] == STEPS + lost["lost_steps"]


def test_the_reliability_doc_keeps_its_hand_written_sections_below_the_matrix():
    matrix = reliability_table.matrix
    table = matrix.render_table()
    hand = f"\n{matrix.HAND_WRITTEN}\n\n## Repeated kills\n\n| kills | 20 |\n"
    assert reliability_table.rendered("# an older matrix\n" + hand) == table + hand
    assert reliability_table.rendered("# an older matrix\n") == table
    assert matrix.generated_part(table + hand) == table
    written = matrix.DOC.read_text(encoding="utf-8").partition(matrix.HAND_WRITTEN)[2]
    assert "## Repeated kills" in written
