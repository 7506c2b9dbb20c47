"""Named tensors from `.safetensors`, PyTorch `.pth` and NumPy `.npz` files, as numpy arrays.

Neither PyTorch nor the `safetensors` package is needed:

- `.safetensors`: an 8-byte little-endian header size, a JSON header
  `{name: {"dtype", "shape", "data_offsets": [begin, end]}}`, then the raw
  little-endian bytes (https://github.com/huggingface/safetensors, "Format").
- `.pth` (`torch.save` since PyTorch 1.6): a zip holding `<root>/data.pkl`, a
  pickle whose tensors refer to storages `<root>/data/<key>` by key. The pickle
  is read by a restricted unpickler that rebuilds tensors as numpy arrays and
  refuses every other class, so a `.pth` file cannot run code here.

Every reader returns `dict name -> np.ndarray` (bfloat16 widened to float32).
"""

import collections
import json
import pathlib
import pickle
import struct
import zipfile

import numpy as np

from zoo.errors import ZooError

_SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": "bfloat16",
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}
# PyTorch's legacy storage classes (what `torch.save` pickles) -> numpy dtypes.
_TORCH_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


def _from_bytes(data, dtype, path, name):
    """1-D numpy array of `dtype` from raw little-endian bytes (bfloat16 -> float32)."""
    if dtype == "bfloat16":
        if len(data) % 2:
            raise ZooError(f"{path}: tensor {name!r} has a truncated bfloat16 buffer.")
        bits = np.frombuffer(data, "<u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    dtype = np.dtype(dtype).newbyteorder("<")
    if len(data) % dtype.itemsize:
        raise ZooError(f"{path}: tensor {name!r} has {len(data)} bytes, not a multiple of "
                       f"its {dtype.itemsize}-byte elements.")
    return np.frombuffer(data, dtype).astype(dtype.newbyteorder("="))


def read_safetensors(path):
    """`dict name -> np.ndarray` of a `.safetensors` file (memory-mapped, each tensor copied out)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        (size,) = struct.unpack("<Q", data[:8].tobytes())
        header = json.loads(data[8 : 8 + size].tobytes())
        if not isinstance(header, dict):
            raise ValueError
    except (struct.error, ValueError, UnicodeDecodeError):
        raise ZooError(f"{path}: not a safetensors file (no JSON header).") from None
    body = data[8 + size :]
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        if spec.get("dtype") not in _SAFETENSORS_DTYPES:
            raise ZooError(f"{path}: tensor {name!r} has unsupported dtype {spec.get('dtype')!r}.")
        begin, end = spec["data_offsets"]
        flat = _from_bytes(body[begin:end], _SAFETENSORS_DTYPES[spec["dtype"]], path, name)
        if flat.size != int(np.prod(spec["shape"], dtype=np.int64)):
            raise ZooError(f"{path}: tensor {name!r} holds {flat.size} values, not its shape "
                           f"{tuple(spec['shape'])}.")
        tensors[name] = flat.reshape(spec["shape"])
    del data
    return tensors


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """`torch._utils._rebuild_tensor_v2` for numpy: a strided view of the storage, copied."""
    if not size:
        return storage[offset : offset + 1].reshape(()).copy()
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=tuple(s * item for s in stride)
    )
    return np.array(view)


def _rebuild_parameter(data, *unused):
    return data


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles `torch.save` data into numpy arrays; every other class is refused."""

    _ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, file, archive, root, path):
        super().__init__(file)
        self.archive, self.root, self.path = archive, root, path
        self.storages = {}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        if module == "torch" and name in _TORCH_STORAGES:
            return _TORCH_STORAGES[name]
        raise ZooError(f"{self.path}: holds {module}.{name}, which is not a tensor; only "
                       "state dicts of tensors are read.")

    def persistent_load(self, pid):
        _, dtype, key, _, _ = pid  # ("storage", storage class, key, location, numel)
        if key not in self.storages:
            data = self.archive.read(f"{self.root}/data/{key}")
            self.storages[key] = _from_bytes(data, dtype, self.path, f"storage {key}")
        return self.storages[key]


def read_torch(path):
    """`dict name -> np.ndarray` of a `torch.save`d state dict (zip format)."""
    if not zipfile.is_zipfile(path):
        raise ZooError(f"{path}: not a PyTorch zip checkpoint (saved with torch.save since "
                       "PyTorch 1.6); convert it to .safetensors.")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if not pickles:
            raise ZooError(f"{path}: a zip file without data.pkl, not a PyTorch checkpoint.")
        root = pickles[0][: -len("/data.pkl")]
        with archive.open(pickles[0]) as file:
            state = _StateDictUnpickler(file, archive, root, path).load()
    for wrapper in ("state_dict", "model", "module"):  # training checkpoints wrap the weights
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise ZooError(f"{path}: not a state dict (a dict of tensors).")
    return dict(state)


def read_npz(path):
    """`dict name -> np.ndarray` of a NumPy `.npz` file (no pickled objects)."""
    try:
        with np.load(path, allow_pickle=False) as file:
            return {name: file[name] for name in file.files}
    except (ValueError, OSError, zipfile.BadZipFile):
        raise ZooError(f"{path}: not a NumPy .npz file.") from None


def read(path):
    """The named tensors of a `.safetensors`, `.pth`/`.pt`/`.bin` or `.npz` file."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No checkpoint file at {path}.")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        return read_safetensors(path)
    if suffix in (".pth", ".pt", ".bin"):
        return read_torch(path)
    if suffix == ".npz":
        return read_npz(path)
    raise ZooError(f"{path}: unknown checkpoint suffix {suffix!r}; expected .npz, "
                   ".safetensors, .pth/.pt/.bin or a Hugging Face folder.")
