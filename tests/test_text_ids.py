"""Tests for zoo/text/ids.py: `clean_ids` and `lookup_ids` against a plain-Python reference."""

import numpy as np
import tensorflow as tf

from zoo.text import ids
from zoo.text.special import END_ID, PAD_ID, START_ID, UNK_ID


def reference_clean(row, vocab_size):
    kept = []
    for token in row:
        if token == END_ID:
            break
        if token in (PAD_ID, START_ID):
            continue
        kept.append(token if 0 <= token < vocab_size else UNK_ID)
    return kept


def test_clean_ids_matches_the_reference_dense_and_ragged():
    rows = [[2, 5, 6, 3, 7, 0], [5, 0, 99, -1, 3, 3], [2, 0, 0, 0, 0, 0], [9, 8, 7, 6, 5, 4]]
    expected = [reference_clean(row, 10) for row in rows]
    for dtype in (np.int32, np.int64):
        dense = ids.clean_ids(tf.constant(rows, dtype), 10)
        assert dense.to_list() == expected and dense.dtype == tf.int32
    ragged = tf.ragged.constant([row[:4] for row in rows], tf.int64)
    assert ids.clean_ids(ragged, 10).to_list() == [reference_clean(r[:4], 10) for r in rows]


def test_lookup_ids_reads_out_of_range_ids_as_unk():
    vocab = tf.constant(["[PAD]", "[UNK]", "[START]", "[END]", "a", "b"])
    looked = ids.lookup_ids(vocab, tf.constant([[4, 5, 6], [-1, 0, 3]], tf.int32))
    assert looked.numpy().tolist() == [[b"a", b"b", b"[UNK]"], [b"[UNK]", b"[PAD]", b"[END]"]]
    ragged = ids.lookup_ids(vocab, tf.ragged.constant([[5], [4, 7]], tf.int64))
    assert ragged.to_list() == [[b"b"], [b"a", b"[UNK]"]]
