"""The image-classifier export: a ViT as a TF Serving SavedModel (`zoo.export`).

Signatures (K classes, top k): `serving_default` takes uint8 images
`(B, H, W, C)`, `predict_image_bytes` encoded images `(B,)`; both return
`probabilities`, `classes`, `scores` and `class_names` (see `zoo.export`).

With `jit_compile=True` the model and the softmax (float images in,
probabilities out) are an inner `tf.function(jit_compile=True)`: XLA compiles
them, once per batch size a server sees; decoding, resizing, top-k and the
class names stay outside the XLA cluster.
"""

import tensorflow as tf

from keras_attention.checks import check, check_int
from zoo.errors import ZooError

DEFAULT_TOP_K = 5


class ImageClassifierModule(tf.Module):
    """What a ViT export holds: the model, the class names and the signatures.

    Args:
        model: a zoo ViT (`images (B, H, W, C)` in [0, 255] -> logits `(B, K)`).
        top_k: how many classes each image reports.
        class_names: K names (str), id = position.
        jit_compile: run the model and the softmax in an XLA-compiled inner function.
    """

    def __init__(self, model, top_k, class_names, jit_compile=False):
        super().__init__(name="image_classifier")
        self.model = model
        self.height, self.width, self.channels = (int(d) for d in model.inputs[0].shape[1:])
        self.top_k = top_k
        self.class_names = list(class_names)
        self.jit_compile = jit_compile
        # Built here: the input signature holds the model's image size.
        self.serving_default = tf.function(
            self._predict_images,
            input_signature=[
                tf.TensorSpec(
                    [None, self.height, self.width, self.channels], tf.uint8, name="images"
                )
            ],
        )
        self.predict_image_bytes = tf.function(
            self._predict_image_bytes,
            input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")],
        )

    def _classify(self, images):  # float32 (B, H, W, C) in [0, 255]
        num_classes = len(self.class_names)

        def run(images):
            logits = self.model(images, training=False)  # (B, K)
            return tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1)

        if self.jit_compile:  # float tensors only inside: XLA compiles all of it
            run = tf.function(run, jit_compile=True, autograph=False)
        # The patch reshapes cannot infer sizes on an empty batch: it skips the model.
        probabilities = tf.cond(
            tf.shape(images)[0] > 0, lambda: run(images), lambda: tf.zeros([0, num_classes], tf.float32)
        )
        probabilities = tf.ensure_shape(probabilities, [None, num_classes])
        top = tf.math.top_k(probabilities, k=self.top_k)  # (B, k) each
        names = tf.gather(tf.constant(self.class_names, tf.string), top.indices)
        return {
            "probabilities": probabilities,
            "classes": tf.cast(top.indices, tf.int32),
            "scores": top.values,
            "class_names": names,
        }

    def decode_image(self, image_bytes):
        """One encoded image (scalar string) -> float32 (H, W, C) in [0, 255]."""
        return decode_image(image_bytes, self.height, self.width, self.channels)

    def _predict_images(self, images):  # uint8 (B, H, W, C)
        return self._classify(tf.cast(images, tf.float32))

    def _predict_image_bytes(self, image_bytes):  # string (B,)
        images = tf.map_fn(
            self.decode_image,
            image_bytes,
            fn_output_signature=tf.TensorSpec([self.height, self.width, self.channels], tf.float32),
        )  # (B, H, W, C)
        return self._classify(images)


def decode_image(image_bytes, height, width, channels):
    """One encoded PNG, JPEG, GIF (first frame) or BMP (scalar string) -> float32
    (height, width, channels) in [0, 255]: alpha dropped, RGB <-> grayscale with ITU-R 601
    weights, resized bilinear with antialiasing (`predict_image_bytes`; `zoo.export.runtimes`
    prepares images for the other formats with it)."""
    image = tf.io.decode_image(image_bytes, channels=0, expand_animations=False)  # (h, w, c)
    image = tf.ensure_shape(image, [None, None, None])
    # Drop alpha: 2 channels are gray + alpha, 4 are RGB + alpha.
    color = tf.cond(tf.shape(image)[-1] >= 3, lambda: image[..., :3], lambda: image[..., :1])
    color = tf.cast(color, tf.float32)  # (h, w, 1 or 3)
    if channels == 3:
        to_model = lambda: tf.tile(color, [1, 1, 3])  # noqa: E731
        color = tf.cond(tf.shape(color)[-1] == 1, to_model, lambda: color)
    else:
        to_model = lambda: tf.image.rgb_to_grayscale(color)  # noqa: E731
        color = tf.cond(tf.shape(color)[-1] == 3, to_model, lambda: color)
    color = tf.ensure_shape(color, [None, None, channels])
    resized = tf.image.resize(color, [height, width], method="bilinear", antialias=True)
    return tf.clip_by_value(resized, 0.0, 255.0)  # (H, W, C)


def check_image_arguments(model, top_k, class_names):
    """Check that `model` takes fixed-size 1- or 3-channel images; return `(top_k,
    class_names)` with their defaults (min(5, K); the ids as text)."""
    shape = tuple(model.inputs[0].shape)
    if len(shape) != 4 or any(d is None for d in shape[1:]):
        raise ZooError(
            f"export: the ViT must take images of a fixed size (B, H, W, C); its input "
            f"shape is {shape}."
        )
    if shape[-1] not in (1, 3):
        raise ZooError(
            f"export: image signatures are written for 1- or 3-channel models; this ViT takes "
            f"{shape[-1]} channels."
        )
    num_classes = int(model.outputs[0].shape[-1])
    if top_k is None:
        top_k = min(DEFAULT_TOP_K, num_classes)
    check_int("top_k", top_k, 1, num_classes, prefix="export: ")
    if class_names is None:
        class_names = [str(index) for index in range(num_classes)]
    else:
        class_names = list(class_names)
        if len(class_names) != num_classes or not all(isinstance(n, str) for n in class_names):
            raise ZooError(
                f"export: `class_names` must be {num_classes} str (one per class); received "
                f"{len(class_names)} names: {class_names[:10]!r}."
            )
    return top_k, class_names


def image_export(model, top_k, class_names, jit_compile=False):
    """Check the arguments; return (module, signatures, metadata) of a ViT export."""
    top_k, class_names = check_image_arguments(model, top_k, class_names)
    check("jit_compile", jit_compile, "a bool", isinstance(jit_compile, bool), "export: ")
    module = ImageClassifierModule(model, top_k, class_names, jit_compile)
    signatures = {
        "serving_default": module.serving_default,
        "predict_image_bytes": module.predict_image_bytes,
    }
    metadata = {
        "signatures": {
            "serving_default": "images uint8 (B, H, W, C) -> probabilities, classes, "
            "scores, class_names",
            "predict_image_bytes": "encoded PNG/JPEG/GIF/BMP (B,) -> the same outputs",
        },
        "image_shape": [module.height, module.width, module.channels],
        "top_k": top_k,
        "class_names": class_names,
        "jit_compile": jit_compile,
    }
    return module, signatures, metadata
