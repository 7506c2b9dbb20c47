"""Read a PyTorch `state_dict` file (`pytorch_model.bin`) into numpy arrays, without torch.

`torch.save` (PyTorch >= 1.6) writes a zip archive: `<name>/data.pkl`, a
pickle of the state dict whose tensors refer to raw little-endian storages
`<name>/data/<key>`. The pickle is read with a restricted unpickler that
knows only the names a state dict needs (`collections.OrderedDict`,
`torch._utils._rebuild_tensor_v2` / `_rebuild_parameter` and the typed
storages); any other name is refused, so a hostile file cannot run code.
Older (non-zip) files are refused with one line.
"""

import collections
import pickle
import zipfile

import numpy as np

from zoo.errors import ZooError

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16",  # read as uint16, widened to float32
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _Storage:
    """A typed storage class named in the pickle (`torch.FloatStorage`...)."""

    def __init__(self, name):
        self.name = name


def _rebuild_tensor(storage, offset, size, stride, *_):
    """`torch._utils._rebuild_tensor_v2`: a strided view of a storage, copied."""
    if not size:
        return np.array(storage[offset])
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=tuple(size), strides=[s * storage.itemsize for s in stride]
    )
    return np.array(view)


def _rebuild_parameter(data, *_):
    return data


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix, path):
        super().__init__(file)
        self.archive, self.prefix, self.path = archive, prefix, path
        self.storages = {}

    def find_class(self, module, name):
        allowed = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
        }
        if (module, name) in allowed:
            return allowed[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _Storage(name)
        raise pickle.UnpicklingError(f"{self.path}: {module}.{name} is not part of a state dict")

    def persistent_load(self, pid):
        kind, storage, key, _location, _numel = pid
        if kind != "storage" or not isinstance(storage, _Storage):
            raise pickle.UnpicklingError(f"{self.path}: unknown persistent id {pid!r}")
        if key not in self.storages:
            raw = self.archive.read(f"{self.prefix}data/{key}")
            dtype = _STORAGE_DTYPES[storage.name]
            if dtype == "bfloat16":
                array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                array = np.frombuffer(raw, np.dtype(dtype).newbyteorder("<"))
            self.storages[key] = array
        return self.storages[key]


def read_state_dict(path):
    """`{name: numpy array}` of a `torch.save`d state dict (zip format).

    Raises:
        ValueError: not a zip-format torch file, or a pickle naming anything
            but tensors and ordered dicts (one line naming the file).
    """
    path = str(path)
    if not zipfile.is_zipfile(path):
        raise ZooError(f"{path}: not a zip-format torch file (saved by torch < 1.6?); "
                       "convert it to model.safetensors")
    with zipfile.ZipFile(path) as archive:
        pickles = [name for name in archive.namelist() if name.endswith("data.pkl")]
        if len(pickles) != 1:
            raise ZooError(f"{path}: expected one data.pkl in the archive; found {len(pickles)}")
        prefix = pickles[0][: -len("data.pkl")]
        with archive.open(pickles[0]) as file:
            try:
                state = _Unpickler(file, archive, prefix, path).load()
            except (pickle.UnpicklingError, KeyError, ValueError, TypeError) as error:
                raise ZooError(f"{path}: cannot read the state dict ({error})") from None
    if not isinstance(state, dict):
        raise ZooError(f"{path}: holds a {type(state).__name__}, not a state dict")
    if (byteorder := _byteorder(path, prefix)) not in ("little", None):
        raise ZooError(f"{path}: byteorder {byteorder!r} is not supported")
    return dict(state)


def _byteorder(path, prefix):
    with zipfile.ZipFile(path) as archive:
        name = f"{prefix}byteorder"
        return archive.read(name).decode().strip() if name in archive.namelist() else None
