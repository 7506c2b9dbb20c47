"""One chunk of keys at a time, in `keras.ops`: the steps that JAX and PyTorch loop over.

`keras_attention.chunked` writes out the online softmax and FlashAttention's backward
pass; this module holds their pieces, the one implementation of them: one step of the
forward pass (`initial_state`, `forward_step`, `finish`) and one of the backward pass
(`row_dot`, `backward_step`), which every backend's loop runs, and, for the backends
whose shapes are known when the loop is built (JAX, also under `jax.jit`; PyTorch), the
keys and values cut into chunks (`split`) and the mask of one chunk's scores
(`ChunkMasks`). `chunked_jax`, `chunked_torch` and `chunked_tensorflow` (whose lengths may
be known only when the graph runs: it cuts the chunks and builds their masks with
TensorFlow's own operations) run the steps in their own loops and register the backward
pass with their own autodiff. Everything is float32.

Shape legend: B batch, N heads, T queries, S keys, C chunk size, nc number of chunks,
H head size, Hv value size.
"""

from keras import ops

# The score of masked keys: far below any real score, finite so that a row whose keys
# are all masked gives e^{s - m} = e^0 instead of NaN (then zeroed by the mask).
MASKED = -1e30


def num_chunks(length, chunk_size):
    """The number of chunks of `chunk_size` keys that cover `length` keys."""
    return -(-length // chunk_size)


def split(tensor, chunk_size, axis=2, fill=0):
    """Cut `axis` (the keys, of length S) into chunks of C, first: `(nc, ...C...)`.

    `(B, N, S, H)` with `axis=2` -> `(nc, B, N, C, H)`; `(B, 1, T, S)` with `axis=3` ->
    `(nc, B, 1, T, C)`. The last chunk is padded with `fill` when C does not divide S.
    """
    shape = tuple(tensor.shape)
    count = num_chunks(shape[axis], chunk_size)
    padding = [[0, 0]] * len(shape)
    padding[axis] = [0, count * chunk_size - shape[axis]]
    tensor = ops.pad(tensor, padding, constant_values=fill)
    tensor = ops.reshape(tensor, shape[:axis] + (count, chunk_size) + shape[axis + 1:])
    order = list(range(len(shape) + 1))
    return ops.transpose(tensor, [axis] + order[:axis] + order[axis + 1:])


class ChunkMasks:
    """The mask of chunk `j`'s `(B, N, T, C)` scores: True where a query may attend a key.

    `key_masks` vary along the keys, each cut into chunks `(nc, B|1, 1, T|1, C)`: key
    padding and an explicit mask over keys. `row_masks` `(B|1, 1, T|1, 1)` do not: the
    query mask and an explicit mask that broadcasts along the keys. The causal mask and
    the filler keys of the last chunk come from the positions. `mask(j)` is None when
    nothing is masked.

    Args:
        chunk_size: C.
        key_length: S, before padding.
        causal: query `t` attends only keys `<= t`.
        key_masks, row_masks: tuples of bool tensors, as above.
    """

    def __init__(self, chunk_size, key_length, causal, key_masks=(), row_masks=()):
        self.chunk_size = chunk_size
        self.key_length = key_length
        self.causal = causal
        self.key_masks = tuple(key_masks)
        self.row_masks = tuple(row_masks)

    @classmethod
    def build(cls, key_length, chunk_size, key_mask=None, query_mask=None, attention_mask=None,
              causal=False):
        """From `chunked_dot_product_attention`'s masks: key_mask `(B, S)`, query_mask
        `(B, T)`, attention_mask `(B, T, S)` or `(T, S)`, any dimension of it may be 1."""
        key_masks, row_masks = [], []
        if key_mask is not None:
            key_masks.append(ops.cast(key_mask, "bool")[:, None, None, :])  # (B, 1, 1, S)
        if query_mask is not None:
            row_masks.append(ops.cast(query_mask, "bool")[:, None, :, None])  # (B, 1, T, 1)
        if attention_mask is not None:
            mask = ops.cast(attention_mask, "bool")
            if len(mask.shape) == 2:
                mask = mask[None]  # (1, T, S)
            mask = mask[:, None]  # (B, 1, T, S), any of B, T, S may be 1
            (row_masks if mask.shape[-1] == 1 else key_masks).append(mask)
        key_masks = [split(mask, chunk_size, axis=3, fill=False) for mask in key_masks]
        return cls(chunk_size, key_length, causal, key_masks, row_masks)

    @property
    def static(self):
        """The Python values: `(chunk_size, key_length, causal)`."""
        return self.chunk_size, self.key_length, self.causal

    @property
    def tensors(self):
        """The tensors: `(key_masks, row_masks)`."""
        return self.key_masks, self.row_masks

    def __call__(self, j, query_length):
        """The mask of chunk `j` (a Python or traced integer): `(B|1, 1, T|1, C)`, or None."""
        masks = [mask[j] for mask in self.key_masks] + list(self.row_masks)
        key_positions = j * self.chunk_size + ops.arange(self.chunk_size)  # (C,)
        if self.key_length % self.chunk_size and not self.key_masks:
            masks.append(key_positions < self.key_length)  # the last chunk's filler keys
        if self.causal:
            masks.append(ops.arange(query_length)[:, None] >= key_positions[None, :])  # (T, C)
        if not masks:
            return None
        mask = masks[0]
        for other in masks[1:]:
            mask = ops.logical_and(mask, other)
        return mask


def _transposed(tensor):
    return ops.swapaxes(tensor, -1, -2)


def initial_state(query, value_size):
    """The running maximum `m`, sum `l` `(B, N, T)` and output `acc` `(B, N, T, Hv)`
    before the first chunk."""
    rows = tuple(query.shape[:3])
    return (ops.full(rows, MASKED, "float32"), ops.zeros(rows, "float32"),
            ops.zeros(rows + (value_size,), "float32"))


def forward_step(state, query, key, value, mask):
    """The online softmax after one more chunk: `(m, l, acc)` -> `(m', l', acc')`.

    query `(B, N, T, H)` (already scaled), key `(B, N, C, H)`, value `(B, N, C, Hv)`,
    mask `(B|1, 1|N, T|1, C)` or None.
    """
    running_max, running_sum, accumulator = state
    scores = ops.matmul(query, _transposed(key))  # (B, N, T, C)
    if mask is not None:
        scores = ops.where(mask, scores, MASKED)
    new_max = ops.maximum(running_max, ops.max(scores, axis=-1))
    weights = ops.exp(scores - new_max[..., None])
    if mask is not None:
        weights = ops.where(mask, weights, 0.0)
    correction = ops.exp(running_max - new_max)
    running_sum = running_sum * correction + ops.sum(weights, axis=-1)
    accumulator = accumulator * correction[..., None] + ops.matmul(weights, value)
    return new_max, running_sum, accumulator


def finish(state):
    """The output `acc / l` `(B, N, T, Hv)` and log-sum-exp `m + log l` `(B, N, T)`; zeros
    for rows whose keys are all masked."""
    running_max, running_sum, accumulator = state
    attended = running_sum > 0.0  # False where every key of the row is masked
    safe_sum = ops.where(attended, running_sum, 1.0)
    output = ops.where(attended[..., None], accumulator / safe_sum[..., None], 0.0)
    log_sum_exp = ops.where(attended, running_max + ops.log(safe_sum), 0.0)
    return output, log_sum_exp


def row_dot(d_output, output):
    """FlashAttention's `D = rowsum(dO ∘ O)`: `(B, N, T)`."""
    return ops.sum(d_output * output, axis=-1)


def backward_step(query, key, value, mask, d_output, log_sum_exp, d_output_dot_output):
    """One chunk of the backward pass: `(dS K, dSᵀ Q, Pᵀ dO)`.

    With `P = exp(Q Kᵀ - L)` recomputed from the log-sum-exp L and
    `dS = P ∘ (dO Vᵀ - D)`: the chunk's part of the (scaled) query's gradient
    `(B, N, T, H)`, and the gradients of its keys `(B, N, C, H)` and values `(B, N, C, Hv)`.
    """
    scores = ops.matmul(query, _transposed(key))  # (B, N, T, C)
    weights = ops.exp(scores - log_sum_exp[..., None])  # P
    if mask is not None:
        weights = ops.where(mask, weights, 0.0)
    d_weights = ops.matmul(d_output, _transposed(value))  # dO Vᵀ
    d_scores = weights * (d_weights - d_output_dot_output[..., None])  # dS
    return (ops.matmul(d_scores, key), ops.matmul(_transposed(d_scores), query),
            ops.matmul(_transposed(weights), d_output))
