"""Named tensors from `.safetensors`, PyTorch `.pth`/`.bin` and NumPy `.npz` files, as numpy arrays.

PyTorch is not needed:

- `.safetensors` is read by the `safetensors` package (a dependency), with
  numpy as its framework; bfloat16 tensors come out as `ml_dtypes.bfloat16`
  (Keras's own dependency) and are widened to float32.
- `.pth`/`.bin` (`torch.save` since PyTorch 1.6): a zip holding
  `<root>/data.pkl`, a pickle whose tensors refer to storages
  `<root>/data/<key>` by a persistent id `("storage", storage class, key,
  location, numel)`, and `<root>/byteorder` (PyTorch >= 2.1; only `little` is
  read). The pickle goes through one restricted unpickler that knows the names
  a state dict needs (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`
  and `_rebuild_parameter`, the typed storage classes), rebuilds the tensors as
  numpy arrays and refuses every other name, so a checkpoint cannot run code
  here. Training checkpoints that wrap the weights (`{"state_dict": ...}`,
  `{"model": ...}`, `{"module": ...}`) are unwrapped.

Every reader returns `dict name -> np.ndarray` (bfloat16 widened to float32)
and raises a one-line `ZooError` (a `ValueError`) naming the file for anything else.
`read_state_dict` is `read_torch` under the name `zoo.torch_checkpoint` gave it
(that module path now loads this one, see `zoo.moved`).
"""

import collections
import pathlib
import pickle
import zipfile

import ml_dtypes  # registers numpy's bfloat16, which safetensors' numpy reader needs
import numpy as np

from zoo.errors import ZooError

# The safetensors dtypes numpy holds (with ml_dtypes for BF16).
_SAFETENSORS_DTYPES = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"}
# PyTorch's typed storage classes (what `torch.save` pickles) -> numpy dtypes.
_TORCH_STORAGES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": np.int64, "IntStorage": np.int32,
    "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}
# Keys of training checkpoints that hold the state dict, looked into in this order.
_WRAPPERS = ("state_dict", "model", "module")


def _widened(array):
    """bfloat16 -> float32 (exact); other dtypes unchanged."""
    return array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array


def read_safetensors(path):
    """`dict name -> np.ndarray` of a `.safetensors` file (memory-mapped by the package)."""
    # Imported here, not at the top: `import zoo` imports this module (the Marian and ViT
    # importers) and stays light; only reading such a file needs the package.
    import safetensors  # noqa: PLC0415
    try:
        with safetensors.safe_open(str(path), framework="numpy") as file:
            for name in file.keys():
                dtype = file.get_slice(name).get_dtype()
                if dtype not in _SAFETENSORS_DTYPES:
                    raise ZooError(f"{path}: tensor {name!r} has unsupported dtype {dtype!r}.")
            return {name: _widened(file.get_tensor(name)) for name in file.keys()}
    except safetensors.SafetensorError as error:
        reason = " ".join(str(error).split())
        raise ZooError(f"{path}: not a safetensors file ({reason}).") from None


class _Refused(pickle.UnpicklingError):
    """What the restricted unpickler will not read (the message, without the file)."""


class _StorageClass:
    """A typed storage class named in the pickle (`torch.FloatStorage`, ...)."""

    def __init__(self, name):
        self.name, self.dtype = name, np.dtype(_TORCH_STORAGES[name]).newbyteorder("<")


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """`torch._utils._rebuild_tensor_v2` for numpy: a strided view of the storage, copied.

    The view is checked to lie inside the storage first (`as_strided` does not).
    """
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride) or offset < 0 or min(stride, default=0) < 0:
        raise _Refused(f"a tensor of size {size}, stride {stride} at offset {offset} is not a "
                       "view of its storage")
    if 0 in size:
        return np.zeros(size, storage.dtype.newbyteorder("="))
    last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if last >= storage.size:
        raise _Refused(f"a tensor of size {size} reaches element {last} of a storage of "
                       f"{storage.size} elements")
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=tuple(s * storage.itemsize for s in stride)
    )
    return np.array(view, dtype=storage.dtype.newbyteorder("="))


def _rebuild_parameter(data, *unused):
    return data


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles `torch.save` data into numpy arrays; every other name is refused."""

    _ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, file, archive, root):
        super().__init__(file)
        self.archive, self.root = archive, root
        self.storages = {}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[module, name]
        if module == "torch" and name in _TORCH_STORAGES:
            return _StorageClass(name)
        raise _Refused(f"holds {module}.{name}, which is not a tensor; only state dicts of "
                       "tensors are read")

    def persistent_load(self, pid):
        # ("storage", storage class, key, location, numel)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageClass)):
            raise _Refused(f"unknown persistent id {pid!r} (a torch storage is expected)")
        _, storage, key, _, _ = pid
        if key not in self.storages:
            data = self.archive.read(f"{self.root}/data/{key}")
            if len(data) % storage.dtype.itemsize:
                raise _Refused(f"storage {key} has {len(data)} bytes, not a multiple of "
                               f"{storage.name}'s {storage.dtype.itemsize}")
            self.storages[key] = np.frombuffer(data, storage.dtype)
        return self.storages[key]


def _pickle_root(path, archive):
    """The archive's `<root>` (of `<root>/data.pkl`), after checking its byte order."""
    names = archive.namelist()
    pickles = [n for n in names if n.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise ZooError(f"{path}: a zip file with {len(pickles)} data.pkl, not a PyTorch "
                         "checkpoint (one expected).")
    root = pickles[0][: -len("/data.pkl")]
    if f"{root}/byteorder" in names:
        byteorder = archive.read(f"{root}/byteorder").decode("ascii", "replace").strip()
        if byteorder != "little":
            raise ZooError(f"{path}: byteorder {byteorder!r}; only little-endian PyTorch "
                             "checkpoints are read.")
    return root


def _unwrapped(state):
    for wrapper in _WRAPPERS:  # training checkpoints wrap the weights
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    return state


def read_torch(path):
    """`dict name -> np.ndarray` of a `torch.save`d state dict (zip format), unwrapped."""
    if not zipfile.is_zipfile(path):
        raise ZooError(f"{path}: not a PyTorch zip checkpoint (saved with torch.save since "
                         "PyTorch 1.6); convert it to .safetensors.")
    with zipfile.ZipFile(path) as archive:
        root = _pickle_root(path, archive)
        with archive.open(f"{root}/data.pkl") as file:
            try:
                state = _StateDictUnpickler(file, archive, root).load()
            except _Refused as error:
                raise ZooError(f"{path}: {error}.") from None
            except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError,
                    AttributeError, IndexError) as error:
                reason = " ".join(str(error).split())
                raise ZooError(f"{path}: a broken state dict pickle ({type(error).__name__}: "
                                 f"{reason}).") from None
    state = _unwrapped(state)
    if not isinstance(state, dict) or not all(isinstance(v, np.ndarray) for v in state.values()):
        raise ZooError(f"{path}: holds a {type(state).__name__}, not a state dict (a dict of "
                         "tensors).")
    return {name: _widened(value) for name, value in state.items()}


# The public name of `zoo.torch_checkpoint` (now this module), kept for code that uses it.
read_state_dict = read_torch


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
