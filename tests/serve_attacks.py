"""Run as a script by tests/test_export_attacks.py: attack two SavedModels the way clients can.

Loads the exports as TF Serving does (TensorFlow and the tensorflow-text op
libraries; nothing of Keras, tensorflow_text's Python package or this
repository), then sends each request of the attack list and records what came
back: the output shapes, or the error's type and first line. The process's
resident memory is read from /proc before, at the peak and after. Prints one
JSON object.

    python serve_attacks.py VIT_EXPORT TRANSLATION_EXPORT OP_LIBRARY...
"""

import ctypes
import functools
import gc
import io
import json
import sys

BLOCKED = ("keras", "tf_keras", "tensorflow_text", "zoo", "keras_attention")
for name in BLOCKED:
    sys.modules[name] = None  # `import name` now raises ImportError

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def memory_mb():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM")}


def release():
    """Python's garbage, then glibc's free lists handed back to the system (`malloc_trim`)."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def call(function, **inputs):
    try:
        outputs = function(**inputs)
    except (tf.errors.OpError, ValueError, TypeError) as error:
        message = getattr(error, "message", None) or str(error)
        return {"error": type(error).__name__, "message": message.strip().splitlines()[0][:300]}
    return {"shapes": {key: list(value.shape) for key, value in outputs.items()}}


def png(array):
    return tf.io.encode_png(tf.constant(array, tf.uint8)).numpy()


@functools.cache
def huge_png():
    """An 8000x8000 PNG, encoded once (about 2 s): every round sends the same bytes."""
    return png(np.full((8000, 8000, 3), 127, np.uint8))


def animated_gif():
    from PIL import Image

    frames = [Image.new("RGB", (12, 12), color) for color in ("red", "green", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=50)
    return buffer.getvalue()


def zero_sized_bmp():
    """A BMP whose header says 0 x 0 pixels (PNG and JPEG encoders refuse to write one)."""
    header = b"BM" + (54).to_bytes(4, "little") + b"\0\0\0\0" + (54).to_bytes(4, "little")
    info = (40).to_bytes(4, "little") + (0).to_bytes(4, "little") + (0).to_bytes(4, "little")
    info += (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + bytes(24)
    return header + info


def vit_attacks(images, image_bytes, height, width, channels):
    good = np.zeros((1, height, width, channels), np.uint8)
    wrong_channels = 3 if channels == 1 else 1
    return {
        "images/float32": lambda: call(images, images=tf.constant(good, tf.float32)),
        "images/rank3": lambda: call(images, images=tf.constant(good[0])),
        "images/channels": lambda: call(images, images=tf.constant(
            np.zeros((1, height, width, wrong_channels), np.uint8))),
        "images/size": lambda: call(images, images=tf.constant(
            np.zeros((1, height + 1, width, channels), np.uint8))),
        "bytes/zero_sized": lambda: call(image_bytes, image_bytes=tf.constant([zero_sized_bmp()])),
        "bytes/huge_8000": lambda: call(image_bytes, image_bytes=tf.constant([huge_png()])),
        "bytes/animated_gif": lambda: call(image_bytes, image_bytes=tf.constant([animated_gif()])),
        "images/after": lambda: call(images, images=tf.constant(good)),
    }


def text_attacks(signatures):
    long_text = ("una frase muy larga, " * 5000)[:100_000]
    batch = [f"frase número {i}." for i in range(1000)]
    attacks = {}
    for name in ("serving_default", "greedy"):
        function = signatures[name]
        attacks[f"{name}/100k_chars"] = lambda f=function: call(f, text=tf.constant([long_text]))
        attacks[f"{name}/1000_strings"] = lambda f=function: call(f, text=tf.constant(batch))
        attacks[f"{name}/after"] = lambda f=function: call(f, text=tf.constant(["hola"]))
    return attacks


def main(vit_path, text_path, libraries):
    for library in libraries:
        tf.load_op_library(library)
    vit, translator = tf.saved_model.load(vit_path), tf.saved_model.load(text_path)
    images, image_bytes = vit.signatures["serving_default"], vit.signatures["predict_image_bytes"]
    _, height, width, channels = images.structured_input_signature[1]["images"].shape
    warm = [call(images, images=tf.zeros((1, height, width, channels), tf.uint8)),
            call(translator.signatures["greedy"], text=tf.constant(["hola"]))]
    release()
    report = {"warm": warm, "before": memory_mb(), "results": {}, "rss_after_each": {}}
    attacks = {**vit_attacks(images, image_bytes, height, width, channels),
               **text_attacks(translator.signatures)}
    for key, attack in attacks.items():
        report["results"][key] = attack()
        report["rss_after_each"][key] = memory_mb()["VmRSS"]
    report["after_untrimmed"] = memory_mb()
    release()
    report["after"] = memory_mb()
    for _ in range(3):  # the same attacks again: memory must not keep growing
        for attack in attacks.values():
            attack()
    release()
    report["after_repeats"] = memory_mb()
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
