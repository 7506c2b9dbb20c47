"""The `zoo` engine of `bench_inference.py` (in-process `zoo.decode`, XLA-compiled, sources
padded to the export's bucket widths), served as `inference_engines.py` serves the others, in
the one engine process that imports the zoo:

    python benchmarks/zoo_engine.py zoo SETTINGS.json
"""

import json
import sys

from engine_processes import set_tf_threads
from inference_engines import END_ID, serve

from zoo import decode
from zoo.export.translation_module import bucket_widths
from zoo.text.ids import encode_sources
from zoo.transformer.weights import marian


def zoo_engine(settings):
    tf = set_tf_threads(settings["threads"])
    model, source_tokenizer, target_tokenizer = marian.import_folder(settings["folder"])
    pad = source_tokenizer.pad_id
    widths = bucket_widths(settings["max_source"])
    length = settings["length"]
    ids = dict(start_id=pad, end_id=END_ID, pad_id=pad, force_end=False, jit_compile=True)

    def translate(texts, search):
        source = encode_sources(source_tokenizer, tf.constant(texts), settings["max_source"], END_ID)
        width = next(w for w in widths if w >= int(source.bounding_shape()[1]))
        source = source.to_tensor(default_value=pad, shape=[len(texts), width])
        if search == "greedy":
            tokens = decode.greedy_decode(model, source, length, **ids)
        else:
            tokens, _ = decode.beam_search(model, source, 4, 1.0, length, length_penalty="hf", **ids)
        target_tokenizer.detokenize(tokens)
        return tokens.numpy().tolist()

    return translate, pad


if __name__ == "__main__":
    with open(sys.argv[2], encoding="utf-8") as settings_file:
        serve(sys.argv[1], json.load(settings_file), load=lambda engine, settings: zoo_engine(settings))
