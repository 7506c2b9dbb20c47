"""What `bench_inference.py`'s translation and ViT parts share: the machine's description
and the engines' processes (`Engine`), one per engine, each serving jobs as JSON lines.

Standard library only: the engines' own scripts (`inference_engines.py`, `vit_engines.py`)
import it, and each engine's process should load only its own runtime.
"""

import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
# the zoo's exports: engine -> its directory (`zoo export`, `--jit`, `--quantize int8`, both);
# the int8 ones run only when asked for with --engines
SAVED_MODELS = {"saved-model": "export", "saved-model-jit": "export_jit",
                "saved-model-int8": "export_int8", "saved-model-jit-int8": "export_jit_int8"}
VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                "amx_tile", "amx_int8")


def cpu_description():
    """`lscpu`'s model name, its vector extensions (of VECTOR_FLAGS), and the core count."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    model = fields.get("Model name", platform.processor() or platform.machine()).strip()
    flags = set(fields.get("Flags", "").split())
    vector = [flag for flag in VECTOR_FLAGS if flag in flags] or ["none of " + "/".join(VECTOR_FLAGS)]
    return f"{model}, {os.cpu_count()} cores, {' '.join(vector)}"


def set_tf_threads(threads):
    """An engine's TensorFlow with `threads` threads in its intra- and inter-op pools (imported
    here, in the engines that use it)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    return tf


def with_defaults(args, quick, full):
    """`args` with each of `quick`'s (`--quick`) or `full`'s values where it holds None."""
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    return args


class Engine:
    """One engine's process (`script ENGINE SETTINGS`): `send` writes a job (a dict) as a JSON
    line and returns its reply; `request` sends a translation job."""

    def __init__(self, name, settings_path, script=None):
        self.name = name
        if script is None:  # the translation engines; the zoo's own imports the zoo
            script = "zoo_engine.py" if name == "zoo" else "inference_engines.py"
        paths = [str(HERE.parent)] if name == "zoo" else []  # the others never import it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / script), name, str(settings_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
            cwd=tempfile.gettempdir() if name != "zoo" else str(HERE.parent))
        for line in self.process.stdout:
            if line.strip() == "ready":
                return
        raise SystemExit(f"engine {name} did not start (exit {self.process.wait()})")

    def request(self, search, batch, count):
        return self.send(dict(search=search, batch=batch, count=count))

    def send(self, job):
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"engine {self.name} stopped (exit {self.process.wait()})")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait()
