"""The defaults of a short training budget: token batches, no dropout, a long warm-up.

A budget of a few minutes on a CPU is one or two thousand steps, and the
paper's Transformer recipe (batches of 64 sentences, dropout 0.1) was made
for 100,000. With a short budget (`time_limit` of at most `SHORT_MINUTES`
or `max_steps` of at most `SHORT_STEPS`), a new Transformer run trained
from scratch takes, where the user chose nothing else:

* batches of `BATCH_TOKENS` tokens per replica (fairseq's `--max-tokens`)
  instead of 64 sentences. On a CPU a step of a model this size costs about
  in proportion to its tokens, so batches of 1,024 tokens take twice the
  steps of 2,048 in the same time, and the extra updates win where the
  budget affords few (docs/experiments/long_sentences.md, part 6);
* no dropout: in so few steps a large set is seen a handful of times, and
  dropout only slows learning (on `gettext-long:es`, a small set seen a
  dozen times, dropout 0.1 gained nothing and 0.3 lost: the same report,
  parts 3 and 4);
* with the budget schedule (`zoo.runs.budget`), a warm-up over 30% of the
  budget instead of 5%, to the peak of the family's own schedule: a rate
  that is high from the first hundred steps lets the decoder of a model that
  sees a small set many times learn the targets as a language model and
  ignore the source (docs/experiments/long_sentences.md).

docs/experiments/short_budget.md and docs/experiments/long_sentences.md
measure them. `config.json` records what was chosen and why under
"short_budget".

    chosen = choose("transformer", training, overrides, fine_tuning=False)
    chosen.batch_tokens, chosen.warmup_ratio   # 1024, 0.3
    chosen.overrides                           # {"dropout": 0.0}
"""

import dataclasses

BATCH_TOKENS = 1024
WARMUP_RATIO = 0.3
SHORT_MINUTES = 60.0
SHORT_STEPS = 5000
FAMILIES = ("transformer",)


@dataclasses.dataclass(frozen=True)
class ShortBudgetDefaults:
    """What a short budget chose for a run (config.json's "short_budget").

    Attributes:
        batch_tokens: the tokens per replica of a batch, or None when the user chose the batch.
        warmup_ratio: the budget schedule's share of warm-up steps, or None (the user's, or
            the family's own schedule).
        overrides: model config fields chosen (`{"dropout": 0.0}`), the user's own left out.
        reason: the budget, in words.
    """

    batch_tokens: int | None
    warmup_ratio: float | None
    overrides: dict
    reason: str

    def as_config(self):
        return dataclasses.asdict(self)

    def describe(self):
        """One line for the run's first lines."""
        chosen = []
        if self.batch_tokens is not None:
            chosen.append(f"batches of {self.batch_tokens} tokens")
        if self.warmup_ratio is not None:
            chosen.append(f"warm-up {self.warmup_ratio:.0%} of the budget")
        chosen += [f"{name} {value:g}" for name, value in self.overrides.items()]
        return f"Short budget ({self.reason}): {', '.join(chosen)}"


def _short_words(training):
    """The budget options that are short, in words ("" when none is)."""
    minutes, steps = training.get("time_limit"), training.get("max_steps")
    words = []
    if minutes and minutes <= SHORT_MINUTES:
        words.append(f"time_limit {minutes:g} min <= {SHORT_MINUTES:g}")
    if steps and steps <= SHORT_STEPS:
        words.append(f"max_steps {steps} <= {SHORT_STEPS}")
    return ", ".join(words)


def choose(family, training, overrides, fine_tuning):
    """The `ShortBudgetDefaults` of a new run, or None when none apply.

    Args:
        family: the registry family of the model ("transformer", ...).
        training: the given options (`TrainingOptions.training_section()`: `time_limit`,
            `max_steps`, `batch_size`, `batch_tokens`, `schedule`, `warmup_ratio`).
        overrides: the user's config overrides; a field given there is kept.
        fine_tuning: a model imported from a folder (it keeps its own recipe).
    """
    reason = _short_words(training)
    if family not in FAMILIES or fine_tuning or not reason:
        return None
    batch_given = training.get("batch_size") is not None or training.get("batch_tokens") is not None
    batch_tokens = None if batch_given else BATCH_TOKENS
    chosen = {} if "dropout" in overrides else {"dropout": 0.0}
    warmup_ratio = None
    if training.get("schedule") != "paper" and training.get("warmup_ratio") is None:
        warmup_ratio = WARMUP_RATIO  # the budget schedule's
    if batch_tokens is None and warmup_ratio is None and not chosen:
        return None
    return ShortBudgetDefaults(batch_tokens, warmup_ratio, chosen, reason)
