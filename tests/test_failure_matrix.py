"""The failure matrix: every user-facing command meets each fault that applies to it.

Each `Cell` of `MATRIX` states the expected outcome and the test checks all
three parts: the exit code; one line on stderr (matching `message`), no
traceback; what is on disk afterwards (`disk`, checked by `check`): no
half-written file under its final name, the previous version intact. The
in-process cells call `zoo.cli.main` (`run_main`, tests/zoo_cli.py); the kills
run as `python -m zoo` runs them, in subprocesses (`PROCESS_PLANS`), and the same
command then takes the killed writer's lock over in this process (`STALE_CELLS`).
A second writer meets a live one: a process holding the directory's lock
(`holder`, through `zoo.locks`). One tiny run and one export are made per session
(`numbers_run` and `numbers_export`, tests/conftest.py) and copied for each cell.

`render_table()` is `docs/reliability.md` (written by `tools/reliability_table.py`);
`test_reliability_doc_is_the_rendered_matrix` keeps the two equal.
"""

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import keras
import pytest
import tensorflow as tf

from zoo import files, locks, runs

from zoo_cli import run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",  # this checkout's zoo
           PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
ENV.pop("ZOO_DEBUG", None)
TINY = ["--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=16",
        "--set", "num_heads=2", "--set", "intermediate_dim=32", "--set", "vocabulary_size=100",
        "--set", "max_length=16"]
DATA = ["--data", "numbers", "--train-size", "64", "--test-size", "8", "--batch-size", "32"]
TRAIN = ["train", "transformer-tiny", *DATA, "--epochs", "1", *TINY]
TUNE = ["tune", "transformer-tiny", *DATA, "--epochs", "1", "--max-trials", "1", "--quiet", *TINY]
TUNE_2 = [*TUNE[:TUNE.index("--max-trials") + 1], "2", *TUNE[TUNE.index("--max-trials") + 2:]]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
TEMPORARY = re.compile(r"^\.(.+\.tmp(\..+)?|tmp-.+)$")  # zoo.files' temporary names
TF_LOG = re.compile(r"^(WARNING: All log messages|[IWEF]\d{4} |To enable the following)")

FAULTS = {
    "missing": "missing path",
    "wrong_kind": "wrong kind (file/folder)",
    "empty": "empty file",
    "truncated": "truncated file",
    "other_format": "file of another format",
    "no_space": "no space left (simulated)",
    "no_space_tmpfs": "no space left (6 MB tmpfs)",
    "sigkill": "SIGKILL (while writing; tune: mid-trial)",
    "live_writer": "second writer while the first is live",
    "stale_lock": "stale lock from a killed writer",
}
COMMANDS = ("train", "evaluate", "export", "predict", "tune", "describe")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One command meeting one fault: `args(ws)` prepares the workspace `ws` (a copy of the
    session's run in `ws/run` and export in `ws/models`) and returns the command line."""

    command: str
    fault: str
    what: str  # the fault, concretely
    args: object
    code: int
    message: str  # regex of the one stderr line
    disk: str  # what is on disk afterwards, in words
    check: object = None  # check(ws, before): the disk (default: nothing changed)
    full_disk_at: str = None  # simulated ENOSPC: the file name whose write fails

    @property
    def id(self):
        return f"{self.command}-{self.fault}-{re.sub(r'[^a-z0-9]+', '_', self.what.lower())}"


# === Workspace helpers ===


def digest(root):
    """`{relative path: sha256}` of every file under `root`."""
    root = pathlib.Path(root)
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def temporaries(root):
    return [str(p) for p in pathlib.Path(root).rglob("*") if TEMPORARY.match(p.name)]


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def truncate(path):
    data = path.read_bytes()
    return write(path, data[: len(data) // 2])


def unfinished(ws):
    """The session's run as a killed run would leave it: no summary.json (resumable)."""
    (ws / "run/summary.json").unlink()
    return ws / "run"


def unchanged(*parts):
    """A check: the files under `ws/<part>` are byte for byte what they were."""

    def check(ws, before):
        for part in parts:
            now = digest(ws)
            kept = {k: v for k, v in before.items() if k.startswith(part)}
            assert {k: now.get(k) for k in kept} == kept, f"{part} changed"
            new = [k for k in now if k.startswith(part) and k not in before]
            assert not [k for k in new if not TEMPORARY.match(pathlib.Path(k).name)], new

    return check


def versions(ws):
    return sorted(int(p.name) for p in (ws / "models").iterdir() if p.name.isdigit())


def only_version_1(ws, before):
    assert versions(ws) == [1]
    unchanged("models/1")(ws, before)


def tune_state(ws, state):
    """`ws/tuning` holding a search whose files (in its project folder) are `state`."""
    for name, content in state.items():
        write(ws / "tuning/transformer-tiny" / name, content)
    return ws / "tuning"


def trials(ws):
    """`{trial id: (status, hyperparameter values)}` of the search in `ws/tuning`."""
    found = {}
    for path in (ws / "tuning/transformer-tiny").glob("trial_*/trial.json"):
        trial = files.read_json(path, dict)
        found[trial["trial_id"]] = (trial["status"], trial["hyperparameters"]["values"])
    return found


def ongoing_trials(ws):
    path = ws / "tuning/transformer-tiny/oracle.json"
    return sorted(files.read_json(path, dict)["ongoing_trials"].values())


# === A live writer: a process holding directories' locks (`holder`) ===

HOLDER = """\
import contextlib, sys
from zoo import locks
with contextlib.ExitStack() as held:
    for line in sys.stdin:
        held.enter_context(locks.hold(line.strip(), "zoo train"))
        print("held", flush=True)
"""
_HOLDER = []  # the `holder` fixture's process


def held(path):
    """`path`, its lock now held by the live `holder` process."""
    process = _HOLDER[0]
    process.stdin.write(f"{path}\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "held"
    return path


@pytest.fixture(scope="session")
def holder():
    process = subprocess.Popen([sys.executable, "-c", HOLDER], env=ENV, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    _HOLDER[:] = [process]
    yield process
    process.kill()
    process.wait()


# === The matrix ===

NOT_A_RUN = "is not a run directory"
CORRUPT = "is corrupt"
NO_SPACE = r"no space left on device while writing .*{} \(\d+\.\d MB free on .*\)"
SAME = "nothing written or changed"
IN_USE = r"is in use by process \d+ \(zoo train, since .*\); one writer per directory"


def trial_left_running(ws, before):
    """A full disk in trial 0: it stays running (to be run again), every file whole."""
    assert ongoing_trials(ws) == ["0"]
    assert [status for status, _ in trials(ws).values()] == ["RUNNING"]
    assert not (ws / "tuning/best_config.json").exists()

MATRIX = [
    # train
    Cell("train", "missing", "--config names no file", lambda ws: [*TRAIN, "--config",
         ws / "none.json", "--out", ws / "new"], 2, "config file not found", SAME,
         lambda ws, before: not (ws / "new").exists() or pytest.fail("--out made")),
    Cell("train", "wrong_kind", "--config is a folder", lambda ws: [*TRAIN, "--config", ws,
         "--out", ws / "new"], 2, "is a folder", SAME),
    Cell("train", "wrong_kind", "--out is a file", lambda ws: [*TRAIN, "--out", write(
         ws / "file", "x")], 2, "Not a directory: .*file", SAME, unchanged("file")),
    Cell("train", "empty", "--config is empty", lambda ws: [*TRAIN, "--config", write(
         ws / "c.json", ""), "--out", ws / "new"], 2, "not valid JSON", SAME),
    Cell("train", "truncated", "resumed run's config.json", lambda ws: [
         "train", "transformer-tiny", "--out", truncate(unfinished(ws) / "config.json").parent],
         2, f"config.json {CORRUPT}", "the run as it was", unchanged("run")),
    Cell("train", "other_format", "--config is a PNG", lambda ws: [*TRAIN, "--config", write(
         ws / "c.json", PNG), "--out", ws / "new"], 2, "not valid JSON", SAME),
    Cell("train", "no_space", "while writing last.keras", lambda ws: [
         "train", "transformer-tiny", "--out", unfinished(ws)], 1, NO_SPACE.format("last.keras"),
         "checkpoints/ as before (last.keras the previous one); once space is freed the "
         "same command finishes the run, each epoch once in history.csv",
         unchanged("run/checkpoints"), full_disk_at="last.keras"),
    Cell("train", "live_writer", "--out held by a live process", lambda ws: [
         "train", "transformer-tiny", "--out", held(unfinished(ws))], 2, IN_USE,
         "the run as it was", unchanged("run")),
    # evaluate
    Cell("evaluate", "missing", "no run directory", lambda ws: ["evaluate", ws / "none"], 2,
         NOT_A_RUN, SAME),
    Cell("evaluate", "wrong_kind", "a file given", lambda ws: [
         "evaluate", ws / "run/history.csv"], 2, NOT_A_RUN, SAME, unchanged("run")),
    Cell("evaluate", "empty", "config.json", lambda ws: ["evaluate", write(
         ws / "run/config.json", "").parent], 2, f"config.json {CORRUPT}: empty", SAME),
    Cell("evaluate", "truncated", "best.keras", lambda ws: ["evaluate", truncate(
         ws / "run/checkpoints/best.keras").parent.parent], 2,
         f"best.keras {CORRUPT}: .*truncated.*; try --checkpoint last", SAME, unchanged("run")),
    Cell("evaluate", "truncated", "sentencepiece.model", lambda ws: ["evaluate", truncate(
         ws / "run/tokenizer/sentencepiece.model").parents[1]], 2,
         f"sentencepiece.model {CORRUPT}: the tokenizer does not load", SAME),
    Cell("evaluate", "other_format", "best.keras is a PNG", lambda ws: ["evaluate", write(
         ws / "run/checkpoints/best.keras", PNG).parents[1]], 2,
         f"best.keras {CORRUPT}.*try --checkpoint last", SAME, unchanged("run")),
    Cell("evaluate", "no_space", "while writing metrics.json", lambda ws: [
         "evaluate", ws / "run", "--limit", "2"], 1, NO_SPACE.format("metrics.json"),
         "no metrics.json, no temporary file", unchanged("run"), full_disk_at="metrics.json"),
    # export
    Cell("export", "missing", "no run directory", lambda ws: ["export", ws / "none", "--to",
         ws / "models"], 2, NOT_A_RUN, SAME, only_version_1),
    Cell("export", "wrong_kind", "--to is a file", lambda ws: ["export", ws / "run", "--to",
         write(ws / "file", "x")], 2, "must be a directory; .*file is a file", SAME),
    Cell("export", "empty", "last.keras", lambda ws: ["export", write(
         ws / "run/checkpoints/last.keras", "").parents[1], "--checkpoint", "last", "--to",
         ws / "models"], 2, f"last.keras {CORRUPT}: empty; try --checkpoint best",
         "version 1 as it was, no version 2", only_version_1),
    Cell("export", "truncated", "best.keras", lambda ws: ["export", truncate(
         ws / "run/checkpoints/best.keras").parents[1], "--to", ws / "models"], 2,
         f"best.keras {CORRUPT}.*try --checkpoint last", "version 1 as it was, no version 2",
         only_version_1),
    Cell("export", "other_format", "tokenizer.json is a PNG", lambda ws: ["export", write(
         ws / "run/tokenizer/tokenizer.json", PNG).parents[1], "--to", ws / "models"], 2,
         f"tokenizer.json {CORRUPT}", "version 1 as it was, no version 2", only_version_1),
    Cell("export", "no_space", "while writing the SavedModel", lambda ws: [
         "export", ws / "run", "--to", ws / "models"], 1, NO_SPACE.format("models/2"),
         "version 1 as it was, no version 2, no temporary folder", only_version_1,
         full_disk_at="saved_model"),
    Cell("export", "live_writer", "--to held by a live process", lambda ws: [
         "export", ws / "run", "--to", held(ws / "models")], 2, IN_USE,
         "version 1 as it was, no version 2", only_version_1),
    # predict
    Cell("predict", "missing", "no model", lambda ws: ["predict", ws / "none", "zwei"], 2,
         "neither a run directory", SAME),
    Cell("predict", "wrong_kind", "a .keras file given", lambda ws: [
         "predict", ws / "run/checkpoints/best.keras", "zwei"], 2, "neither a run directory",
         SAME, unchanged("run")),
    Cell("predict", "empty", "saved_model.pb", lambda ws: ["predict", write(
         ws / "models/1/saved_model.pb", "").parent, "zwei"], 2,
         f"{CORRUPT}: the SavedModel does not load", SAME),
    Cell("predict", "truncated", "saved_model.pb", lambda ws: ["predict", truncate(
         ws / "models/1/saved_model.pb").parent, "zwei"], 2,
         f"{CORRUPT}: the SavedModel does not load", SAME),
    Cell("predict", "truncated", "run's best.keras", lambda ws: ["predict", truncate(
         ws / "run/checkpoints/best.keras").parents[1], "zwei"], 2,
         f"best.keras {CORRUPT}.*try --checkpoint last", SAME),
    Cell("predict", "other_format", "saved_model.pb is a PNG", lambda ws: ["predict", write(
         ws / "models/1/saved_model.pb", PNG).parent, "zwei"], 2,
         f"{CORRUPT}: the SavedModel does not load", SAME),
    # tune
    Cell("tune", "missing", "--data tsv: names no file", lambda ws: [
         *TUNE[:2], "--data", f"tsv:{ws / 'none.tsv'}", *TUNE[4:], "--directory", ws / "tuning"],
         2, "not found", SAME, lambda ws, before: not (ws / "tuning").exists() or pytest.fail()),
    Cell("tune", "wrong_kind", "--directory is a file", lambda ws: [
         *TUNE, "--directory", write(ws / "file", "x")], 2, "is a file, not a folder", SAME,
         unchanged("file")),
    Cell("tune", "empty", "zoo_search.json", lambda ws: [*TUNE, "--directory", tune_state(
         ws, {"zoo_search.json": ""})], 2, f"zoo_search.json {CORRUPT}: empty", SAME,
         unchanged("tuning")),
    Cell("tune", "truncated", "keras-tuner's oracle.json", lambda ws: [
         *TUNE, "--directory", tune_state(
         ws, {"tuner0.json": "{}", "oracle.json": '{"ongoing_trials": {}, "tr'})], 2,
         f"transformer-tiny {CORRUPT}: keras-tuner's saved state does not load", SAME,
         unchanged("tuning")),
    Cell("tune", "other_format", "zoo_search.json is a PNG", lambda ws: [
         *TUNE, "--directory", tune_state(ws, {"zoo_search.json": PNG})], 2,
         f"zoo_search.json {CORRUPT}", SAME, unchanged("tuning")),
    Cell("tune", "no_space", "while writing zoo_search.json", lambda ws: [
         *TUNE, "--directory", ws / "tuning"], 1, NO_SPACE.format("zoo_search.json"),
         "no zoo_search.json, no temporary file",
         lambda ws, before: not (ws / "tuning/transformer-tiny/zoo_search.json").exists()
         or pytest.fail("zoo_search.json written"), full_disk_at="zoo_search.json"),
    Cell("tune", "no_space", "during a trial (its checkpoint)", lambda ws: [
         *TUNE, "--directory", ws / "tuning"], 1, NO_SPACE.format("checkpoint.weights.h5"),
         "the trial left running in oracle.json, every file whole; once space is freed the "
         "same command runs it again and finishes the search", trial_left_running,
         full_disk_at="checkpoint.weights.h5"),
    Cell("tune", "live_writer", "--directory held by a live process", lambda ws: [
         *TUNE, "--directory", held(ws / "tuning")], 2, IN_USE, SAME, unchanged("tuning")),
    # describe
    Cell("describe", "missing", "an unknown model", lambda ws: ["describe", "transformr-tiny"],
         2, "(?i)did you mean", SAME),
]


def resumed_history(ws, before):
    """The same command finishes the run: each epoch once in history.csv."""
    assert (ws / "run/summary.json").is_file()
    epochs = files.read_json(ws / "run/config.json")["training"]["epochs"]
    rows = (ws / "run/history.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == [str(epoch) for epoch in range(epochs)]


def killed_export(ws, before):
    only_version_1(ws, before)
    assert sorted(p.name[:6] for p in (ws / "models").iterdir() if not p.name.isdigit()) == [
        ".tmp-2", locks.LOCK_NAME[:6]]


def trial_killed(ws, before):
    """Killed in trial 2 of 2: trial 1 complete, trial 2 running, each file whole."""
    assert ongoing_trials(ws) == ["1"]
    assert sorted(status for status, _ in trials(ws).values()) == ["COMPLETED", "RUNNING"]


def one_new_version(ws, before):
    assert versions(ws) == [1, 2]
    unchanged("models/1")(ws, before)
    assert files.read_json(ws / "models/2/assets.extra/zoo_export.json")["version"] == 2


def resumed_search(ws, before):
    """Trial 1 not run again (its files as they were), trial 2 run again with the same
    hyperparameters, two trials in all."""
    assert {k: v for k, v in digest(ws).items() if "trial_0/" in k} == {
        k: v for k, v in before.items() if "trial_0/" in k}
    assert trials(ws) == {id_: ("COMPLETED", values) for id_, (_, values) in before.trials.items()}
    assert ongoing_trials(ws) == []
    assert (ws / "tuning/best_config.json").is_file()


KILL = files.KILL_HOOK
SUBPROCESS_CELLS = [  # (cell, environment), each in its own workspace
    (Cell("train", "sigkill", "before last.keras is renamed", lambda ws: [
          "train", "transformer-tiny", "--out", unfinished(ws)], -9, "",
          "checkpoints/ as before (a hidden temporary and the lock file are left, which "
          "the next writer removes: below)", unchanged("run/checkpoints")),
     {KILL: "checkpoints/last.keras"}),
    (Cell("export", "sigkill", "before the version folder is renamed", lambda ws: [
          "export", ws / "run", "--to", ws / "models"], -9, "",
          "version 1 as it was, no version 2 (a hidden .tmp-2.pid* folder and the lock file "
          "are left: below)", killed_export),
     {KILL: "models/2"}),
    (Cell("tune", "sigkill", "mid-trial (the second of two)", lambda ws: [
          *TUNE_2, "--directory", ws / "tuning"], -9, "",
          "trial 1 complete, trial 2 running in oracle.json, every file whole", trial_killed),
     {}),  # killed from outside (`kill_mid_trial`)
]
# The same command again, after each kill: it takes the dead writer's lock over.
STALE_CELLS = [  # (index into SUBPROCESS_CELLS, cell)
    (0, Cell("train", "stale_lock", "the run killed before last.keras is renamed", lambda ws: [
         "train", "transformer-tiny", "--out", ws / "run"], 0, "",
         "taken over: the run finishes, each epoch once in history.csv; the killed writer's "
         "temporary removed, no lock file left", resumed_history)),
    (1, Cell("export", "stale_lock", "the export killed before the rename", lambda ws: [
         "export", ws / "run", "--to", ws / "models"], 0, "",
         "taken over: version 2 complete; the killed writer's .tmp-2.pid* folder removed, no "
         "lock file left", one_new_version)),
    (2, Cell("tune", "stale_lock", "the search killed mid-trial", lambda ws: [
         *TUNE_2, "--directory", ws / "tuning"], 0, "",
         "taken over: trial 1 not run again (its files as they were), trial 2 run again with "
         "the same hyperparameters, 2 trials in all, best_config.json written",
         resumed_search)),
]
TMPFS_CELL = Cell(
    "train", "no_space_tmpfs", "resumed run, 100 kB left", lambda ws: [
        "train", "transformer-tiny", "--out", ws / "run"], 1, NO_SPACE.format(""),
    "checkpoints/ as before, no temporary file", unchanged("run/checkpoints"))


# === Running the cells ===


def check_outcome(cell, code, err, ws, before):
    """The three parts of a cell's outcome: exit code, one stderr line, the disk."""
    assert code == cell.code, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip() and not TF_LOG.match(line)]
    if cell.message:
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"zoo {cell.command}: error: "), lines[0]
        assert re.search(cell.message, lines[0]), (cell.message, lines[0])
    assert not temporaries(ws) or cell.fault == "sigkill", temporaries(ws)
    (cell.check or unchanged(""))(ws, before)  # by default: nothing changed at all


def full_disk_at(monkeypatch, name):
    """Writes of the file `name` (or the SavedModel, `"saved_model"`; a trial's Keras
    checkpoint, `"checkpoint.weights.h5"`) fill the disk halfway."""
    if name == "checkpoint.weights.h5":  # keras-tuner's checkpoint of a trial
        real_save_weights = keras.Model.save_weights

        def save_weights(model, filepath, *args, **kwargs):
            real_save_weights(model, filepath, *args, **kwargs)
            if pathlib.Path(filepath).name == name:
                truncate(pathlib.Path(filepath))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filepath))

        monkeypatch.setattr(keras.Model, "save_weights", save_weights)
        return
    if name == "saved_model":
        real_save = tf.saved_model.save

        def save(obj, directory, **kwargs):
            real_save(obj, directory, **kwargs)
            truncate(pathlib.Path(directory) / "saved_model.pb")
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

        monkeypatch.setattr(tf.saved_model, "save", save)
        return
    real_replace = files.replace

    def replace(path, write_file):
        if pathlib.Path(path).name != name:
            return real_replace(path, write_file)

        def half(temporary):
            write_file(temporary)
            truncate(temporary)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary))

        return real_replace(path, half)

    monkeypatch.setattr(files, "replace", replace)


def workspace(numbers_run, numbers_export, path):
    """`path` with a copy of the session's finished run (`path/run`) and of its export
    (`path/models`, version 1): `numbers_run` and `numbers_export`, tests/conftest.py."""
    shutil.copytree(numbers_run.run_dir, path / "run")
    shutil.copytree(numbers_export.saved_models, path / "models")
    return path


@pytest.fixture
def ws(numbers_run, numbers_export, started, holder, tmp_path):
    return workspace(numbers_run, numbers_export, tmp_path)


@pytest.mark.large
@pytest.mark.parametrize("cell", MATRIX, ids=lambda cell: cell.id)
def test_cell(cell, ws, monkeypatch):
    argv = cell.args(ws)
    before = digest(ws)
    if cell.full_disk_at:
        full_disk_at(monkeypatch, cell.full_disk_at)
    code, _, err = run_main(*argv)
    monkeypatch.undo()
    check_outcome(cell, code, err, ws, before)
    if cell.fault == "live_writer":  # the pid named is the live holder's
        assert f"in use by process {_HOLDER[0].pid} " in err, err
    if cell.full_disk_at in ("last.keras", "checkpoint.weights.h5"):  # once space is freed
        running = trials(ws)
        assert run_main(*argv).code == 0
        if cell.command == "train":
            resumed_history(ws, before)
        else:  # the trial left running is run again, with its hyperparameters
            assert trials(ws) == {id_: ("COMPLETED", values)
                                  for id_, (_, values) in running.items()}


# Each killed command runs in a process of its own, as `python -m zoo` runs it (zoo/__main__.py
# through `runpy`); the kill hook ends the first two with SIGKILL, `kill_mid_trial` the third.
# Indices into SUBPROCESS_CELLS.
PROCESS_PLANS = ([0], [1], [2])
RUNNER = """\
import json, os, runpy, sys

def save_coverage():
    # Under a coverage run: keep what the commands before the killed one measured (the
    # data is saved at exit, which SIGKILL skips).
    try:
        import coverage
    except ImportError:
        return
    current = coverage.Coverage.current()
    if current is not None:
        current.save()

for argv, env in json.loads(sys.argv[1]):
    if env:
        save_coverage()
    os.environ.update(env)
    sys.stderr.write("=== zoo " + argv[0] + "\\n")
    sys.argv = ["zoo", *argv]
    try:
        runpy.run_module("zoo", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        sys.stderr.write(f"=== exit code {exit_.code}\\n")
"""


@pytest.fixture(scope="session")
def started(numbers_run, numbers_export, tmp_path_factory):
    """The two processes of PROCESS_PLANS, started at once as soon as the session's run
    exists (they run beside the in-process cells): `(prepared, processes)`, `prepared`
    holding `(cell, ws, before, argv, env)` per cell of SUBPROCESS_CELLS."""
    prepared = []
    for index, (cell, env) in enumerate(SUBPROCESS_CELLS):
        ws = workspace(numbers_run, numbers_export, tmp_path_factory.mktemp(f"sub{index}"))
        argv = [str(a) for a in cell.args(ws)]
        prepared.append((cell, ws, digest(ws), argv, env))
    processes = [
        subprocess.Popen([sys.executable, "-c", RUNNER,
                          json.dumps([prepared[index][3:] for index in plan])],
                         env=ENV, cwd=prepared[plan[-1]][1], text=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for plan in PROCESS_PLANS]
    threading.Thread(target=kill_mid_trial, args=(processes[2], prepared[2][1]),
                     daemon=True).start()
    yield prepared, processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def kill_mid_trial(process, ws, timeout=300):
    """SIGKILL `process` once its search is in its second trial (`oracle.json` names trial 1
    as running: trial 0 has ended and trial 1 has been written, and the next write is
    trial 1's end, after its fit)."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError, files.CorruptFileError, KeyError):
            if ongoing_trials(ws) == ["1"]:
                process.send_signal(signal.SIGKILL)
                return
        time.sleep(0.02)


def command_outcomes(plan, process):
    """`[(cell index, exit code, stderr)]` of the commands a process ran: a command's code
    is the one it exited with, or the process's (-9 when killed) for the one it ended in."""
    _, err = process.communicate(timeout=300)
    outcomes = []
    for index, section in zip(plan, re.split(r"^=== zoo \S+\n", err, flags=re.M)[1:]):
        exited = re.search(r"^=== exit code (-?\d+)\n\Z", section, flags=re.M)
        outcomes.append((index, int(exited[1]) if exited else process.returncode,
                         section[: exited.start()] if exited else section))
    return outcomes


@pytest.fixture(scope="session")
def subprocess_outcomes(started):
    """`[(cell, ws, before, [(exit code, stderr) per process that ran it])]`."""
    prepared, processes = started
    results = {index: [] for index in range(len(prepared))}
    for plan, process in zip(PROCESS_PLANS, processes):
        for index, code, err in command_outcomes(plan, process):
            results[index].append((code, err))
    return [(cell, ws, before, results[index])
            for index, (cell, ws, before, *_) in enumerate(prepared)]


@pytest.mark.large
@pytest.mark.parametrize("index", range(len(SUBPROCESS_CELLS)),
                         ids=[cell.id for cell, _ in SUBPROCESS_CELLS])
def test_subprocess_cell(index, subprocess_outcomes):
    cell, ws, before, results = subprocess_outcomes[index]
    assert len(results) == sum(plan.count(index) for plan in PROCESS_PLANS), results
    for code, err in results:
        check_outcome(cell, code, err, ws, before)


@contextlib.contextmanager
def small_tmpfs(path, size="6m"):
    if os.geteuid() != 0:
        pytest.skip("the real full-disk run mounts a 6 MB tmpfs, which needs root: run the suite as "
                    "root (CI does); the simulated full-disk cells above run for everyone")
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed ({mounted.stderr.strip()}), e.g. inside a container "
                    "without CAP_SYS_ADMIN; the simulated full-disk cells still ran")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.large
def test_a_real_full_disk(numbers_run, tmp_path):
    cell = TMPFS_CELL
    with small_tmpfs(tmp_path / "tmpfs") as disk:
        shutil.copytree(numbers_run.run_dir, disk / "run")
        unfinished(disk)
        filler = disk / "filler"
        write(filler, bytes(max(0, shutil.disk_usage(disk).free - 100_000)))
        argv, before = cell.args(disk), digest(disk)
        code, _, err = run_main(*argv)
        check_outcome(cell, code, err, disk, before)


@pytest.mark.large
@pytest.mark.parametrize("index", range(len(STALE_CELLS)),
                         ids=[cell.id for _, cell in STALE_CELLS])
def test_stale_lock_cell(index, subprocess_outcomes):
    """The killed writer's command again: it takes the lock over (its pid names no live
    process), removes the killed writer's temporaries and finishes."""
    killed, cell = STALE_CELLS[index]
    _, ws, _, results = subprocess_outcomes[killed]
    assert [code for code, _ in results] == [-9], results
    argv = cell.args(ws)
    written = pathlib.Path(argv[argv.index(next(a for a in argv if a in (
        "--out", "--to", "--directory"))) + 1])
    stale = files.read_json(written / locks.LOCK_NAME, dict)
    assert not locks.is_running(stale["pid"], stale["start"])
    assert temporaries(ws) or cell.command == "tune"  # the killed writer's
    before = Snapshot(digest(ws), trials=trials(ws) if cell.command == "tune" else None)
    code, _, err = run_main(*argv)
    check_outcome(cell, code, err, ws, before)
    assert not (written / locks.LOCK_NAME).exists()


class Snapshot(dict):
    """`digest(ws)`, and the search's `trials(ws)`."""

    def __init__(self, digests, trials):
        super().__init__(digests)
        self.trials = trials


# === docs/reliability.md ===


def all_cells():
    return [*MATRIX, *(cell for cell, _ in SUBPROCESS_CELLS),
            *(cell for _, cell in STALE_CELLS), TMPFS_CELL]


def render_table():
    """docs/reliability.md: the matrix, fault x command, then every cell's outcome."""
    cells = all_cells()
    lines = [
        "# Reliability: what each command does when things go wrong",
        "",
        "Generated from `tests/test_failure_matrix.py` by `tools/reliability_table.py`; a test",
        "fails when this file and the test table differ. Every cell is checked: the exit code,",
        "one line on stderr and no traceback, and the files on disk afterwards (no",
        "half-written file under its final name; the previous version intact). Exit codes:",
        "2 a bad or corrupt input, or a directory that another live process is writing; 1 the",
        "disk is full; -9 killed (SIGKILL); 0 success.",
        "",
        "One writer per directory: `train`, `export` and `tune` hold a lock on the run",
        "directory, the export root (`--to`) or the search directory (`--directory`) while they",
        "write (`zoo.locks`: `flock` on `.zoo.lock`, which names the holder). A second one is",
        "refused with the first one's pid; the lock of a killed writer is free (the kernel",
        "releases a `flock` when its process dies), and the next writer takes it over and",
        "removes the killed writer's temporaries, whose names carry its pid",
        "(`.last.pid1234-x8d2k.tmp.keras`, `.tmp-2.pid1234-x8d2k`); a live process's are left.",
        "A killed `tune` resumes with the same command: keras-tuner's state files are written",
        "whole or not at all, finished trials are kept and the trial that was running is run",
        "again; a full disk in a trial ends the search in one line, the trial left to run again.",
        "",
        "| fault | " + " | ".join(f"`{command}`" for command in COMMANDS) + " |",
        "|---|" + "---|" * len(COMMANDS),
    ]
    for fault, title in FAULTS.items():
        row = []
        for command in COMMANDS:
            codes = [str(c.code) for c in cells if c.fault == fault and c.command == command]
            row.append(", ".join(codes) if codes else "—")
        lines.append(f"| {title} | " + " | ".join(row) + " |")
    lines += ["", "— : the fault does not apply (the command reads or writes no such file).",
              "", "| command | fault | case | exit | stderr (regex) | on disk afterwards |",
              "|---|---|---|---|---|---|"]
    for cell in cells:
        message = f"`{cell.message}`".replace("|", "\\|") if cell.message else "(killed)"
        if cell.code == 0:
            message = "(none)"
        lines.append(f"| {cell.command} | {FAULTS[cell.fault]} | {cell.what} | {cell.code} "
                     f"| {message} | {cell.disk} |")
    return "\n".join(lines) + "\n"


# What follows this line in docs/reliability.md is written by hand (the repeated kills of
# tools/chaos_train.py): tools/reliability_table.py keeps it, the test compares what precedes it.
HAND_WRITTEN = "<!-- Written by hand below; tools/reliability_table.py keeps it. -->"


def generated_part(text):
    """The part of docs/reliability.md that `render_table()` writes: all before HAND_WRITTEN."""
    head, marker, _ = text.partition("\n" + HAND_WRITTEN)
    return head if marker else text


def test_reliability_doc_is_the_rendered_matrix():
    assert generated_part(DOC.read_text(encoding="utf-8")) == render_table(), (
        "docs/reliability.md is out of date: run `python tools/reliability_table.py`")


def test_a_history_that_is_not_csv_is_reported_as_corrupt(tmp_path):
    path = write(tmp_path / "history.csv", PNG)
    with pytest.raises(files.CorruptFileError, match=f"{path} is corrupt"):
        runs.read_history(path)
    write(path, "epoch,loss\n0,0.5\nx,0.4\n")
    with pytest.raises(files.CorruptFileError, match="not a history of epochs"):
        runs.read_history(path)


def test_every_command_meets_the_faults():
    met = {(cell.command, cell.fault) for cell in all_cells()}
    for command in COMMANDS:
        assert (command, "missing") in met
    for command in ("train", "evaluate", "export", "predict", "tune"):
        for fault in ("wrong_kind", "empty", "truncated", "other_format"):
            assert (command, fault) in met, (command, fault)
