"""The RNNsearch decoder: the recurrence with the alignment model inside each step.

`BahdanauDecoder` runs `s_t = RNN([E y_{t-1}; c_t], s_{t-1})` over the target
with `c_t = Σ_j α_tj h_j` from additive attention (Bahdanau et al., 2015),
location-aware attention (Chorowski et al., 2015), or monotonic attention
(Raffel et al., 2017; MoChA, Chiu & Raffel, 2018); with `coverage=True` the
alignment model also sees See et al.'s (2017) coverage vector, and
`coverage_loss` is the penalty it adds (docs/math.md#the-pointer-generator).
`zoo.seq2seq.model` builds the model around it; `zoo.seq2seq` re-exports both names.
"""

import keras
from keras import ops

import keras_attention as ka
from zoo.seq2seq.config import ATTENTIONS, MONOTONIC


@keras.saving.register_keras_serializable(package="zoo")
class BahdanauDecoder(keras.layers.Layer):
    """The RNNsearch decoder recurrence, with the alignment model inside each step.

    With `attention="location"` the alignment model is location-aware
    (`ka.LocationAwareAttention`, Chorowski et al., 2015): it also convolves
    the previous step's alignment `α_{t-1}`, so the recurrent state carries
    `α_{t-1}` `(B, S)` after the cell's states (`get_initial_state` starts it
    uniform over the real source positions). With `attention="monotonic"` or
    `"mocha"` it is `ka.MonotonicAttention` (Raffel et al., 2017; Chiu & Raffel,
    2018), and the state carries its monotonic alignment `α_{t-1}` (one-hot at the
    first position to start): expected alignments when training, hard ones (the head
    never moves back) at inference.

    With `coverage=True` (See et al. 2017, §2.3) the energy also sees the
    coverage vector `cov_t = Σ_{t'<t} α_{t'}`: `w_c cov_{t,j}` joins `U_a h_j`
    inside the tanh, and the state carries `cov_t` `(B, S)` last (zeros at the
    start). `call` then adds the coverage loss
    `coverage_weight · Σ_j min(α_{t,j}, cov_{t,j})`, averaged over the target
    tokens of `target_mask`, to the layer's losses.

    Args:
        units: decoder state size.
        attention_units: the alignment model's hidden size.
        cell: `"gru"` or `"lstm"`.
        attention: `"additive"` (Bahdanau), `"location"` (location-aware),
            `"monotonic"` or `"mocha"`.
        location_filters: F, location filters (`attention="location"` only).
        location_kernel_size: k, their width over the source axis.
        mocha_chunk_size: w, MoChA's chunk width (`attention="mocha"` only).
        sigmoid_noise: the pre-sigmoid noise of monotonic attention in training.
        score_bias_init: the initial scalar bias r of monotonic attention.
        coverage: add the coverage vector to the energy, and the coverage loss.
        coverage_weight: λ, the coverage loss's weight.

    Call arguments:
        target_embeddings: `E y_{t-1}` for every step, `(B, T, E)`.
        annotations: encoder outputs `(B, S, A)`.
        initial_state: list of the cell's states, each `(B, units)` (or
            them stacked, `(n, B, units)`).
        annotations_mask: `(B, S)`, True for real source positions.
        target_mask: `(B, T)`, True for real target positions (the coverage
            loss's average).
        training: whether the cell's dropout is active.

    Returns:
        `(previous_states, contexts, alignments)`: `s_{t-1}` `(B, T, units)`,
        `c_t` `(B, T, A)` and `α_t` `(B, T, S)` (MoChA: the chunk weights `β_t`).
    """

    def __init__(self, units, attention_units, cell="gru", attention="additive",
                 location_filters=10, location_kernel_size=15, mocha_chunk_size=3,
                 sigmoid_noise=1.0, score_bias_init=-1.0, coverage=False, coverage_weight=1.0,
                 **kwargs):
        super().__init__(**kwargs)
        if attention not in ATTENTIONS:
            raise ValueError(f"`attention` must be one of {ATTENTIONS}; received {attention!r}.")
        self.units = units
        self.attention_units = attention_units
        self.cell_type = cell
        self.attention_type = attention
        self.location_filters = location_filters
        self.location_kernel_size = location_kernel_size
        self.mocha_chunk_size = mocha_chunk_size
        self.sigmoid_noise = sigmoid_noise
        self.score_bias_init = score_bias_init
        self.coverage = coverage
        self.coverage_weight = coverage_weight
        self.attention = self._make_attention()
        cell_class = keras.layers.GRUCell if cell == "gru" else keras.layers.LSTMCell
        self.cell = cell_class(units, dtype=self.dtype_policy, name=f"{cell}_cell")

    def _make_attention(self):
        options = dict(dtype=self.dtype_policy, name="attention")
        if self.attention_type == "location":
            return ka.LocationAwareAttention(
                self.attention_units, self.location_filters, self.location_kernel_size,
                **options)
        if self.attention_type in MONOTONIC:
            chunk_size = self.mocha_chunk_size if self.attention_type == "mocha" else None
            return ka.MonotonicAttention(
                self.attention_units, chunk_size=chunk_size, sigmoid_noise=self.sigmoid_noise,
                score_bias_init=self.score_bias_init, **options)
        return ka.BahdanauAttention(self.attention_units, **options)

    @property
    def carries_alignment(self):
        """Whether the recurrent state ends with the previous alignment `α_{t-1}`."""
        return self.attention_type in ("location",) + MONOTONIC

    def _split_states(self, states):
        """The recurrent state -> (the cell's states, α_{t-1} or None, cov_t or None)."""
        states = list(states)
        coverage = states.pop() if self.coverage else None
        alignment = states.pop() if self.carries_alignment else None
        return states, alignment, coverage

    def build(self, target_embeddings_shape, annotations_shape, initial_state_shape=None):
        if self.carries_alignment:
            self.attention.build((None, self.units), annotations_shape, annotations_shape[:2])
        else:
            self.attention.build((None, self.units), annotations_shape)
        self.cell.build((None, target_embeddings_shape[-1] + annotations_shape[-1]))
        if self.coverage:
            self.coverage_kernel = self.add_weight(
                name="coverage_kernel", shape=(self.attention_units,),
                initializer="glorot_uniform",
            )  # w_c
        self.built = True

    def get_initial_state(self, cell_states, annotations, annotations_mask=None):
        """The recurrent state of step 1: the cell's states, then `α_0` with location
        attention, then `cov_1 = 0` with coverage."""
        states = list(cell_states)
        if self.carries_alignment:
            states.append(self.attention.initial_alignment(annotations, annotations_mask))
        if self.coverage:
            states.append(ops.zeros_like(annotations[:, :, 0]))
        return states

    def step(self, embedded, states, annotations, projected_key, annotations_mask, training=None,
             noise=None):
        """One step: `(B, E)`, states (from `get_initial_state`) -> new states, `s_{t-1}`,
        `c_t`, `α_t`. `noise`: monotonic attention's `(B, S)` pre-sigmoid noise, or None."""
        previous = states[0]
        cell_states, last_alignment, coverage = self._split_states(states)
        location = (last_alignment,) if self.carries_alignment else ()  # α_{t-1}
        if self.coverage:  # U_a h_j + w_c cov_{t,j}
            projected_key = projected_key + coverage[:, :, None] * self.coverage_kernel
        monotonic = self.attention_type in MONOTONIC
        # Monotonic attention: expected alignments in training, hard ones otherwise; the
        # state carries α_t, the weights (MoChA's β_t) go out.
        options = dict(return_alignment=True, training=training, noise=noise) if monotonic else {}
        context, alignment, *carried = self.attention(
            previous,
            annotations,
            *location,
            value_mask=annotations_mask,
            projected_key=projected_key,
            return_attention_scores=True,
            **options,
        )
        _, new_states = self.cell(
            ops.concatenate([embedded, context], axis=-1), cell_states, training=training
        )
        carried = carried or [alignment]
        new_states = list(new_states) + (carried if self.carries_alignment else [])
        if self.coverage:
            new_states.append(coverage + alignment)
        return new_states, previous, context, alignment

    def call(
        self, target_embeddings, annotations, initial_state, annotations_mask=None,
        target_mask=None, training=None,
    ):
        projected_key = self.attention.project_key(annotations)  # U_a h, once per sequence
        steps = ops.transpose(target_embeddings, (1, 0, 2))  # (T, B, E)
        if isinstance(initial_state, (list, tuple)):
            states = list(initial_state)
        else:  # stacked (n, B, units)
            states = ops.unstack(initial_state, axis=0)
        states = self.get_initial_state(states, annotations, annotations_mask)
        # Keras's scan stacks outputs shaped like the carry, so the carry holds the
        # recurrent state followed by this step's s_{t-1}, c_t and α_t.
        outputs = [
            ops.zeros_like(states[0]),  # s_{t-1} (B, units)
            ops.zeros_like(annotations[:, 0, :]),  # c_t (B, A)
            ops.zeros_like(annotations[:, :, 0]),  # α_t (B, S)
        ]

        # Monotonic attention's noise, (T, B, S), drawn for every step before the loop and
        # scanned along (see ka.MonotonicAttention's `noise`).
        noisy = training and self.attention_type in MONOTONIC and self.attention.sigmoid_noise > 0
        if noisy:
            steps = (steps, self.attention.draw_noise(
                (ops.shape(steps)[0], ops.shape(annotations)[0], ops.shape(annotations)[1])))

        def scan_step(carry, inputs):
            embedded, noise = inputs if noisy else (inputs, None)
            new_states, previous, context, alignment = self.step(
                embedded, carry[: len(states)], annotations, projected_key, annotations_mask,
                training, noise,
            )
            carry = new_states + [previous, context, alignment]
            return carry, carry

        _, stacked = ops.scan(scan_step, states + outputs, steps)
        previous, contexts, alignments = stacked[len(states):]  # each (T, B, …)
        alignments = ops.transpose(alignments, (1, 0, 2))  # (B, T, S)
        if self.coverage and self.coverage_weight:
            self.add_loss(self.coverage_weight * coverage_loss(alignments, target_mask))
        return (
            ops.transpose(previous, (1, 0, 2)),
            ops.transpose(contexts, (1, 0, 2)),
            alignments,
        )

    def compute_output_spec(self, target_embeddings, annotations, initial_state, **kwargs):
        batch, length = target_embeddings.shape[0], target_embeddings.shape[1]
        return (
            keras.KerasTensor((batch, length, self.units), dtype=self.compute_dtype),
            keras.KerasTensor((batch, length, annotations.shape[-1]), dtype=self.compute_dtype),
            keras.KerasTensor((batch, length, annotations.shape[1]), dtype=self.compute_dtype),
        )

    def compute_mask(self, *args, **kwargs):
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units, attention_units=self.attention_units, cell=self.cell_type,
            attention=self.attention_type, location_filters=self.location_filters,
            location_kernel_size=self.location_kernel_size,
            mocha_chunk_size=self.mocha_chunk_size, sigmoid_noise=self.sigmoid_noise,
            score_bias_init=self.score_bias_init, coverage=self.coverage,
            coverage_weight=self.coverage_weight,
        )
        return config


def coverage_loss(alignments, target_mask=None):
    """See et al.'s coverage loss: the mean over the real target tokens of
    `Σ_j min(α_{t,j}, cov_{t,j})`, `cov_t = Σ_{t'<t} α_{t'}` (a scalar).

    Args:
        alignments: `α`, `(B, T, S)`.
        target_mask: `(B, T)`, True for real target tokens; None: all.
    """
    alignments = ops.cast(alignments, "float32")
    coverage = ops.cumsum(alignments, axis=1) - alignments  # Σ_{t'<t} α_{t'}
    per_token = ops.sum(ops.minimum(alignments, coverage), axis=-1)  # (B, T)
    if target_mask is None:
        return ops.mean(per_token)
    mask = ops.cast(target_mask, "float32")
    return ops.divide_no_nan(ops.sum(per_token * mask), ops.sum(mask))
