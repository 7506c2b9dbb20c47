"""The Transformer decoder block, with its cached incremental decoding
(docs/math.md#the-transformer-blocks; Vaswani et al. 2017, section 3.1)."""

import keras

from keras_attention.layers.transformer_block import TransformerBlockBase, keras_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoderBlock(TransformerBlockBase):
    """One decoder layer: causal self-attention, cross-attention, FFN, each with add & norm.

    Cross (encoder-decoder) attention is built when the block is first called
    with an `encoder_sequence`; without one the block is a decoder-only layer.
    Same arguments as `TransformerEncoderBlock`.

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or None.
        decoder_padding_mask: `(B, T)`; defaults to the Keras mask of `decoder_sequence`.
        encoder_padding_mask: `(B, S)`; defaults to the Keras mask of `encoder_sequence`.
        decoder_attention_mask: `(B, T, T)`, combined with the causal mask.
        use_causal_mask: the auto-regressive mask (query `t` sees keys `<= t`).
        training: whether dropout is active.
        return_attention_scores: also return self-attention weights `(B, N, T, T)`
            and cross-attention weights `(B, N, T, S)` (None without an encoder).

    Returns:
        `(B, T, D)`, or `(outputs, self_weights, cross_weights)`.
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        d_model = decoder_sequence_shape[-1]
        self.self_attention = self._attention("self_attention", d_model)
        self.self_attention.build(decoder_sequence_shape, decoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm", decoder_sequence_shape)
        self.cross_attention = None
        if encoder_sequence_shape is not None:
            self.cross_attention = self._attention("cross_attention", d_model)
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm = self._norm("cross_attention_norm", decoder_sequence_shape)
        self.feed_forward = self._feed_forward(decoder_sequence_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm", decoder_sequence_shape)
        self._residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        decoder_attention_mask=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
    ):
        self._check_cross_attention(encoder_sequence is not None, "an `encoder_sequence`")
        if decoder_padding_mask is None:
            decoder_padding_mask = keras_mask(decoder_sequence)
        if encoder_sequence is not None and encoder_padding_mask is None:
            encoder_padding_mask = keras_mask(encoder_sequence)

        def self_attend(x):
            return self.self_attention(
                x,
                x,
                query_mask=decoder_padding_mask,
                value_mask=decoder_padding_mask,
                attention_mask=decoder_attention_mask,
                use_causal_mask=use_causal_mask,
                training=training,
                **self._scores_argument(return_attention_scores),
            )

        x, *self_weights = self._sublayer(
            self.self_attention_norm, self_attend, decoder_sequence, training
        )
        cross_weights = [None]
        if self.cross_attention is not None:

            def cross_attend(h):
                return self.cross_attention(
                    h,
                    encoder_sequence,
                    query_mask=decoder_padding_mask,
                    value_mask=encoder_padding_mask,
                    training=training,
                    **self._scores_argument(return_attention_scores),
                )

            x, *cross_weights = self._sublayer(
                self.cross_attention_norm, cross_attend, x, training
            )
        x = self._feed_forward_sublayer(x, training)
        if return_attention_scores:
            return x, self_weights[0], cross_weights[0]
        return x

    def _check_cross_attention(self, given, argument):
        """Refuse a call that gives `argument` (or not) to a block built without (or with)
        cross-attention."""
        if given != (self.cross_attention is not None):
            built = "with" if self.cross_attention is not None else "without"
            raise ValueError(
                f"TransformerDecoderBlock was built {built} cross-attention; call it "
                f"{built} {argument}."
            )

    def _feed_forward_sublayer(self, x, training):
        """The position-wise feed-forward network with its add & norm, `(B, T, D)`."""
        (x,) = self._sublayer(
            self.feed_forward_norm, lambda h: self.feed_forward(h, training=training), x, training
        )
        return x

    # === Incremental decoding (key/value cache) ===

    def empty_self_attention_cache(self, batch_size, length, dtype=None):
        """Zero self-attention key/value buffers for `length` target positions.

        Returns:
            `(keys, values)`, see `MultiHeadAttention.empty_cache`; with
            `attention="linear"` the constant-size state `(S, z)` of
            `LinearAttention.initial_state` (`length` and `dtype` unused).
        """
        if self.attention == "linear":
            return self.self_attention.initial_state(batch_size)
        return self.self_attention.empty_cache(batch_size, length, dtype)

    def grow_self_attention_cache(self, cache, length):
        """`empty_self_attention_cache`'s buffers padded with zeros to `length` positions
        (`MultiHeadAttention.grow_cache`); linear attention's state is kept as it is."""
        if self.attention == "linear":
            return cache
        return self.self_attention.grow_cache(*cache, length)

    def compute_cross_attention_cache(self, encoder_sequence):
        """The cross-attention keys and values of the encoder output, computed once.

        Args:
            encoder_sequence: `(B, S, De)`.

        Returns:
            `(keys, values)`, see `MultiHeadAttention.compute_key_value`.
        """
        if self.cross_attention is None:
            raise ValueError(
                "This TransformerDecoderBlock was built without cross-attention; it has no "
                "cross-attention cache."
            )
        return self.cross_attention.compute_key_value(encoder_sequence)

    def call_with_cache(
        self,
        decoder_sequence,
        self_attention_cache,
        cache_index,
        cross_attention_cache=None,
        encoder_padding_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        """The block for new target positions only, reusing cached keys and values.

        Gives the same outputs as `call` (with the causal mask) at positions
        `cache_index … cache_index + T - 1`, given that the buffers hold the
        earlier positions. The target must have no padding before those positions.

        Args:
            decoder_sequence: `(B, T, D)`, usually T = 1.
            self_attention_cache: `(keys, values)` from `empty_self_attention_cache`
                or a previous call.
            cache_index: int or scalar int tensor, the position of `decoder_sequence[:, 0]`.
            cross_attention_cache: `(keys, values)` from `compute_cross_attention_cache`
                (required when the block has cross-attention).
            encoder_padding_mask: `(B, S)`, True for real source tokens.
            training: whether dropout is active.
            return_attention_scores: also return the cross-attention weights
                `(B, N, T, S)` (what a pointer-generator copies with).

        Returns:
            `(outputs (B, T, D), self_attention_cache)` with the new positions written
            (and with `return_attention_scores`, the cross-attention weights last).
        """
        self._check_cross_attention(cross_attention_cache is not None, "a `cross_attention_cache`")
        if self.attention == "linear":  # the cache is the recurrent state (S, z)

            def self_attend(x):
                return self.self_attention.call_with_state(x, self_attention_cache)

        else:

            def self_attend(x):
                output, key_cache, value_cache = self.self_attention.call_with_cache(
                    x, *self_attention_cache, cache_index=cache_index, training=training
                )
                return output, (key_cache, value_cache)

        x, self_attention_cache = self._sublayer(
            self.self_attention_norm, self_attend, decoder_sequence, training
        )
        cross_weights = [None]
        if self.cross_attention is not None:

            def cross_attend(h):
                scores = {"return_attention_scores": True} if return_attention_scores else {}
                output, _, _, *weights = self.cross_attention.call_with_cache(
                    h, *cross_attention_cache, value_mask=encoder_padding_mask,
                    training=training, **scores,
                )
                return (output, *weights)

            x, *cross_weights = self._sublayer(self.cross_attention_norm, cross_attend, x,
                                               training)
        x = self._feed_forward_sublayer(x, training)
        if return_attention_scores:
            return x, self_attention_cache, cross_weights[0]
        return x, self_attention_cache

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape

    def compute_output_spec(self, decoder_sequence, encoder_sequence=None, *args,
                            return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
        self_weights = keras.KerasTensor(
            (batch, self.num_heads, length, length), dtype=self.compute_dtype
        )
        cross_weights = None
        if encoder_sequence is not None:
            cross_weights = keras.KerasTensor(
                (batch, self.num_heads, length, encoder_sequence.shape[1]),
                dtype=self.compute_dtype,
            )
        return output, self_weights, cross_weights


