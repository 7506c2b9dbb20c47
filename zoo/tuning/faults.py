"""keras-tuner under faults: its state written whole or not at all, a full disk ending the search.

keras-tuner writes its state (`oracle.json`, `tuner0.json`, each `trial_*/trial.json`)
in place, so a kill during a write leaves half a file, which the next run cannot
reload. During a zoo search (`guarded`) those writes go through `zoo.files`
(a temporary beside the file, then a rename): a kill leaves the previous version,
and the same command resumes. keras-tuner puts the trials that were running back
in its queue when it reloads (`Oracle.reload`), so a trial killed midway is run
again, with the same id and hyperparameters, and finished trials are not repeated.

keras-tuner records an exception inside a trial as a failed or invalid trial and
goes on with the next one: on a full disk, every trial left would fail in turn and
be lost. `guarded` raises a full disk as `NoSpaceInSearch`, a keras-tuner
`FatalError`, which ends the search; the trial stays "running" in `oracle.json`,
and is run again once space is freed.
"""

import contextlib
import functools
import json
import os

import keras_tuner
from keras_tuner.src import utils as tuner_utils

from zoo import files


class NoSpaceInSearch(files.NoSpaceError, keras_tuner.errors.FatalError):
    """The disk filled during a search: `files.NoSpaceError`, and fatal to keras-tuner."""


def _no_space(error, fallback):
    full = files.no_space_error(error, fallback)
    return None if full is None else NoSpaceInSearch(full.filename)


def _save_json(path, obj):
    """keras-tuner's `utils.save_json`, atomic on a local disk (`zoo.files.write_text`)."""
    text = json.dumps(obj)
    if "://" in os.fspath(path):  # gs:// and the like: keras-tuner's own writer
        return _ORIGINAL_SAVE_JSON(path, obj)
    try:
        files.write_text(path, text)
    except OSError as error:
        full = _no_space(error, path)
        if full is None:
            raise
        raise full from error
    return text


_ORIGINAL_SAVE_JSON = tuner_utils.save_json


@contextlib.contextmanager
def guarded(search, directory):
    """Run `search` (a keras-tuner tuner) with its state written atomically and a full disk
    in a trial (`run_trial`: the build, the fit, the checkpoints) fatal to the search."""
    run_trial = search.run_trial

    @functools.wraps(run_trial)
    def guarded_run_trial(trial, *args, **kwargs):
        try:
            return run_trial(trial, *args, **kwargs)
        except Exception as error:
            full = _no_space(error, directory)
            if full is None:
                raise
            raise full from error

    search.run_trial = guarded_run_trial
    tuner_utils.save_json = _save_json
    try:
        # keras-tuner writes tuner0.json, which a resumed search needs to reload its state,
        # first at the end of the first trial: written now, a search stopped in its first
        # trial resumes too.
        search.save()
        yield search
    finally:
        tuner_utils.save_json = _ORIGINAL_SAVE_JSON
        del search.run_trial
