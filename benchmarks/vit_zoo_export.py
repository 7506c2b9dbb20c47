"""The zoo's exports of the timm file for `bench_inference.py vit`, in a process of their own
(the one of its processes that imports the zoo; `vit_engines.py` serves the engines):

    python benchmarks/vit_zoo_export.py SETTINGS.json
"""

import json
import os
import sys

from vit_engines import FORMAT_ENGINES, TINY_ZOO

import zoo


def export_zoo(settings):
    """The zoo's default and `jit_compile=True` exports of the timm file, version 1 each, and the
    format exports that `settings["formats"]` asks for (`{engine: version directory}`)."""
    name, sizes = ("vit-ti16", TINY_ZOO) if settings["size"] == "tiny" else ("vit-b16", {})
    model = zoo.get(name, weights=settings["timm"], compile=False, **sizes)
    for key, jit in (("export", False), ("export_jit", True)):
        zoo.export(model, os.path.dirname(settings[key]), version=1, jit_compile=jit)
    written = {}
    for engine, path in settings.get("formats", {}).items():
        format_, quantize = FORMAT_ENGINES[engine]
        if (format_, quantize) not in written:
            written[format_, quantize] = path
            zoo.export(model, os.path.dirname(path), version=1, format=format_, quantize=quantize)
        elif written[format_, quantize] != path:
            raise SystemExit(f"{engine}: one export, two paths")


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as settings_file:
        export_zoo(json.load(settings_file))
