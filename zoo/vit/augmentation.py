"""The ViT's image augmentation and shifted-patch layers.

`Augmentation` (random flip, shift, zoom and erasing, in training only, for
the first `stop_step` steps), `RandomShift` (its whole-pixel shift) and
`ShiftedImages` (the input of Shifted Patch Tokenization). Registered under
the package `zoo` with their class names (`zoo>Augmentation`, ...), the names
saved `.keras` files refer to, so files written when they lived in
`zoo/vit.py` still load.
"""

import keras


@keras.saving.register_keras_serializable(package="zoo")
class ShiftedImages(keras.layers.Layer):
    """The image and four diagonal shifts of it, stacked on the channels.

    The input of Shifted Patch Tokenization (Lee et al., 2021, "Vision
    Transformer for Small-Size Datasets"): with `shift = P // 2`, each P×P
    patch of the output sees a (2P)×(2P) window of the image, so neighbouring
    tokens overlap. Shifted-in pixels are 0.

    Args:
        shift: the shift in pixels, along both axes.

    Call arguments:
        inputs: images `(B, H, W, C)`.

    Returns:
        `(B, H, W, 5C)`: the image, then its shifts by (-s, -s), (-s, +s),
        (+s, -s), (+s, +s) (rows, columns; +s moves the content down / right).
    """

    def __init__(self, shift, **kwargs):
        super().__init__(**kwargs)
        if isinstance(shift, bool) or not isinstance(shift, int) or shift < 0:
            raise ValueError(f"`shift` must be an integer >= 0; received shift={shift!r}.")
        self.shift = shift

    def call(self, inputs):
        s = self.shift
        height, width = inputs.shape[1], inputs.shape[2]
        padded = keras.ops.pad(inputs, ((0, 0), (s, s), (s, s), (0, 0)))
        outputs = [inputs]
        for dy in (-s, s):
            for dx in (-s, s):
                # out[i, j] = in[i - dy, j - dx] = padded[i - dy + s, j - dx + s]
                outputs.append(padded[:, s - dy : s - dy + height, s - dx : s - dx + width, :])
        return keras.ops.concatenate(outputs, axis=-1)

    def compute_output_shape(self, input_shape):
        channels = None if input_shape[-1] is None else 5 * input_shape[-1]
        return (*input_shape[:-1], channels)

    def get_config(self):
        config = super().get_config()
        config.update({"shift": self.shift})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class RandomShift(keras.layers.Layer):
    """Translate each image by a random whole number of pixels, filling with 0.

    Each image gets its own shifts `dy, dx`, drawn uniformly from
    `-max_shift … max_shift` (a random crop of the zero-padded image). Built
    from one-hot shift matrices and two batched matrix products, so it is
    exact and runs under XLA (Keras's `RandomTranslation` does not: its image
    transform op has no XLA kernel).

    Args:
        max_shift: the largest shift in pixels, along each axis.
        seed: the seed of the shifts.

    Call arguments:
        inputs: images `(B, H, W, C)`.
        training: shift only if True.

    Returns:
        `(B, H, W, C)`.
    """

    def __init__(self, max_shift, seed=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(max_shift, bool) or not isinstance(max_shift, int) or max_shift < 0:
            raise ValueError(f"`max_shift` must be an integer >= 0; received max_shift={max_shift!r}.")
        self.max_shift = max_shift
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, inputs, training=None):
        if not training or not self.max_shift:
            return inputs
        batch = keras.ops.shape(inputs)[0]
        height, width = inputs.shape[1], inputs.shape[2]

        def shift_matrices(size):
            # (B, size, size): row i is one-hot at i - shift (all zero off the image).
            shift = keras.random.randint(
                (batch, 1, 1), -self.max_shift, self.max_shift + 1, seed=self.seed_generator
            )
            positions = keras.ops.arange(size, dtype="int32")
            source = positions[None, :, None] - keras.ops.cast(shift, "int32")
            return keras.ops.cast(keras.ops.equal(source, positions[None, None, :]), inputs.dtype)

        rows, columns = shift_matrices(height), shift_matrices(width)
        shifted = keras.ops.einsum("bij,bjwc->biwc", rows, inputs)  # out[i] = in[i - dy]
        return keras.ops.einsum("bkw,biwc->bikc", columns, shifted)  # out[k] = in[k - dx]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_shift": self.max_shift, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class Augmentation(keras.layers.Layer):
    """Random flip / translation / zoom / erasing, applied only when `training=True` is explicit.

    Keras's random preprocessing layers augment whenever `training` is not
    given (their default is True), so `model(images)` would augment at
    inference; this wrapper makes inference the default.

    Args:
        random_flip: flip left-right with probability 1/2.
        random_translation: shift by up to `round(random_translation × size)`
            whole pixels along each axis (`RandomShift`, zero fill).
        random_zoom: Keras `RandomZoom` by up to this fraction (zero fill).
        random_erasing: probability of setting a random rectangle of 2-33% of
            the image to 0 (Zhong et al., 2020, "Random Erasing Data
            Augmentation"; Keras `RandomErasing`).
        seed: the seed of every augmentation.
        stop_step: augment in the first `stop_step` training calls only, then
            pass the images through; None: always. The calls are counted in
            the non-trainable weight `step` (one count per training step, also
            under a `tf.distribute` strategy), which `model.save` and Keras's
            `BackupAndRestore` keep, so a resumed run stops where it should.

    Call arguments:
        inputs: images `(B, H, W, C)`, pixel values in [0, 1].
        training: augment only if True.
    """

    def __init__(self, random_flip=False, random_translation=0.0, random_zoom=0.0,
                 random_erasing=0.0, seed=None, stop_step=None, **kwargs):
        super().__init__(**kwargs)
        if stop_step is not None and (isinstance(stop_step, bool) or not isinstance(stop_step, int)
                                      or stop_step < 0):
            raise ValueError(
                f"`stop_step` must be None or an integer >= 0; received stop_step={stop_step!r}."
            )
        self.random_flip = random_flip
        self.random_translation = random_translation
        self.random_zoom = random_zoom
        self.random_erasing = random_erasing
        self.seed = seed
        self.stop_step = stop_step
        self.augmenters = []  # made in `build`: the shift needs the image size

    def build(self, input_shape):
        seed = self.seed
        augmenters = []
        if self.random_flip:
            augmenters.append(keras.layers.RandomFlip("horizontal", seed=seed))
        if self.random_translation:
            size = min(input_shape[1], input_shape[2])
            max_shift = max(1, round(self.random_translation * size))
            augmenters.append(RandomShift(max_shift, seed=seed, name="random_shift"))
        if self.random_zoom:
            augmenters.append(keras.layers.RandomZoom(self.random_zoom, fill_mode="constant",
                                                      seed=seed))
        if self.random_erasing:
            augmenters.append(keras.layers.RandomErasing(
                factor=(self.random_erasing, self.random_erasing), fill_value=0.0,
                value_range=(0, 1), seed=seed))
        for augmenter in augmenters:
            augmenter.build(input_shape)
        self.augmenters = augmenters
        if self.stop_step is not None:
            # "only_first_replica": under a strategy every replica adds 1 per
            # step, and the first replica's count is kept.
            self.step = self.add_weight(
                shape=(), dtype="int64", initializer="zeros", trainable=False,
                aggregation="only_first_replica", name="step",
            )
        self.built = True

    def call(self, inputs, training=None):
        if not training:
            return inputs
        outputs = inputs
        for augmenter in self.augmenters:
            outputs = augmenter(outputs, training=True)
        if self.stop_step is None:
            return outputs
        augment = keras.ops.less(self.step, self.stop_step)
        self.step.assign_add(1)
        return keras.ops.where(augment, outputs, inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "random_flip": self.random_flip,
            "random_translation": self.random_translation,
            "random_zoom": self.random_zoom,
            "random_erasing": self.random_erasing,
            "seed": self.seed,
            "stop_step": self.stop_step,
        })
        return config
