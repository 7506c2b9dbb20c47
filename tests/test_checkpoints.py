"""The tensor readers of `zoo.checkpoints`: safetensors (through the package) and torch pickles.

No torch here. The recorded fixtures (`tests/fixtures/torch_state_dict.bin`
and its `.npz`, written by torch) check the reader against torch's own
files; the variations (wrappers, a big-endian record, hostile pickles) are
written by `write_torch`, which pickles as `torch.save` does (protocol 2,
tensors as `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
...)`, storages as persistent ids `("storage", torch.FloatStorage, key,
location, numel)`) with stand-ins for the torch names.
"""

import collections
import io
import json
import os
import pathlib
import pickle
import re
import struct
import sys
import types
import zipfile

import ml_dtypes
import numpy as np
import pytest

from zoo import checkpoints

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


# === Writing torch-like files without torch ===


class Storage:
    """A storage of the file: `array` (1-D) written to `<root>/data/<key>`."""

    def __init__(self, key, array, kind="FloatStorage"):
        self.key, self.array, self.kind = key, array, kind


class Tensor:
    """A tensor pickled as `_rebuild_tensor_v2(storage, offset, size, stride, ...)`."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


@pytest.fixture
def torch_names(monkeypatch):
    """Stand-ins for `torch` and `torch._utils`, so that pickle can name their globals."""
    torch, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called: the file is only written")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    for name in ("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage"):
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    torch._utils = utils
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    return torch


class _TorchPickler(pickle.Pickler):
    def __init__(self, file, torch, persistent_id=None):
        super().__init__(file, protocol=2)
        self.torch, self.custom_id = torch, persistent_id

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            if self.custom_id is not None:
                return self.custom_id
            return ("storage", getattr(self.torch, obj.kind), obj.key, "cpu", obj.array.size)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return (self.torch._utils._rebuild_tensor_v2,
                    (obj.storage, obj.offset, obj.size, obj.stride, False,
                     collections.OrderedDict()))
        return NotImplemented


def write_torch(path, torch, state, storages, byteorder="little", persistent_id=None):
    """A `torch.save`-like zip of `state`, its storages little-endian; `byteorder=None`: no record."""
    buffer = io.BytesIO()
    _TorchPickler(buffer, torch, persistent_id).dump(state)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        if byteorder is not None:
            archive.writestr("archive/byteorder", byteorder)
        for storage in storages:
            archive.writestr(f"archive/data/{storage.key}", storage.array.astype(
                storage.array.dtype.newbyteorder("<")).tobytes())
    return path


def small_state():
    """`(state, storages, expected)`: a weight, its transposed view, ids and a scalar."""
    weights = Storage("0", np.arange(12, dtype=np.float32) * 0.5)
    ids = Storage("1", np.array([3, -1, 7], np.int64), "LongStorage")
    state = collections.OrderedDict(
        weight=Tensor(weights, 0, (3, 4), (4, 1)),
        transposed=Tensor(weights, 0, (4, 3), (1, 4)),
        ids=Tensor(ids, 0, (3,), (1,)),
        scalar=Tensor(weights, 5, (), ()),
    )
    full = weights.array.reshape(3, 4)
    expected = {"weight": full, "transposed": full.T, "ids": ids.array, "scalar": np.float32(2.5)}
    return state, [weights, ids], expected


def assert_same(tensors, expected):
    assert sorted(tensors) == sorted(expected)
    for name, array in expected.items():
        assert tensors[name].dtype == np.asarray(array).dtype, name
        np.testing.assert_array_equal(tensors[name], array, err_msg=name)


def one_line(path):
    with pytest.raises(ValueError) as info:
        checkpoints.read(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


# === torch files ===


def test_torch_state_dict_reader_equals_torch():
    state = checkpoints.read_torch(FIXTURES / "torch_state_dict.bin")
    expected = np.load(FIXTURES / "torch_state_dict.npz")
    assert_same(state, {name: expected[name] for name in expected.files})


def test_the_old_module_name_still_reads():
    import zoo.torch_checkpoint

    assert zoo.torch_checkpoint is checkpoints
    state = zoo.torch_checkpoint.read_state_dict(FIXTURES / "torch_state_dict.bin")
    assert sorted(state) == sorted(np.load(FIXTURES / "torch_state_dict.npz").files)


def test_written_state_dict_is_read(tmp_path, torch_names):
    state, storages, expected = small_state()
    assert_same(checkpoints.read(write_torch(tmp_path / "w.pth", torch_names, state, storages)),
                expected)
    without_record = write_torch(tmp_path / "old.pth", torch_names, state, storages, byteorder=None)
    assert_same(checkpoints.read(without_record), expected)  # PyTorch < 2.1 wrote none


@pytest.mark.parametrize("wrapper", [
    lambda sd: {"state_dict": sd, "epoch": 3, "optimizer": {"lr": 0.1}},
    lambda sd: {"model": sd, "args": ["--lr", "0.1"]},
    lambda sd: {"module": sd},
    lambda sd: {"model": {"module": sd}},
])
def test_training_checkpoints_are_unwrapped(tmp_path, torch_names, wrapper):
    state, storages, expected = small_state()
    path = write_torch(tmp_path / "checkpoint.pth", torch_names, wrapper(state), storages)
    assert_same(checkpoints.read(path), expected)


def test_a_big_endian_byteorder_record_is_refused(tmp_path, torch_names):
    state, storages, _ = small_state()
    path = write_torch(tmp_path / "big.pth", torch_names, state, storages, byteorder="big")
    assert one_line(path).endswith("big.pth: byteorder 'big'; only little-endian PyTorch "
                                   "checkpoints are read.")


def test_bfloat16_and_half_storages(tmp_path, torch_names):
    reference = np.array([1.0, -2.5, 0.15625, 2.0**100], np.float32)  # exact in bfloat16
    storages = [Storage("0", reference.astype(ml_dtypes.bfloat16), "BFloat16Storage"),
                Storage("1", reference[:3].astype(np.float16), "HalfStorage")]
    state = {"bf16": Tensor(storages[0], 0, (4,), (1,)), "half": Tensor(storages[1], 1, (2,), (1,))}
    tensors = checkpoints.read(write_torch(tmp_path / "half.pth", torch_names, state, storages))
    assert_same(tensors, {"bf16": reference, "half": reference[1:3].astype(np.float16)})


class _MakesAFolder:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (str(self.path),))


@pytest.mark.parametrize("payload, refused", [
    (lambda tmp: {"w": _MakesAFolder(tmp / "ran")}, "posix.mkdir"),
    (lambda tmp: {"w": np.ones(2)}, r"numpy\.(_)?core\.multiarray\._reconstruct"),
    (lambda tmp: {"w": collections.Counter("ab")}, "collections.Counter"),
    (lambda tmp: print, r"__builtin__\.print"),  # protocol 2 names builtins so
])
def test_other_classes_are_refused_and_never_called(tmp_path, payload, refused):
    path = tmp_path / "evil.pth"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps(payload(tmp_path), protocol=2))
    message = one_line(path)
    assert re.search(
        rf"evil\.pth: holds {refused}, which is not a tensor; only state dicts of tensors are "
        r"read\.$", message), message
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("pid", [
    lambda torch: ("module", torch.FloatStorage, "0", "cpu", 12),  # not a storage
    lambda torch: ("storage", "FloatStorage", "0", "cpu", 12),  # a string, not the class
    lambda torch: ("storage", torch.FloatStorage),  # too short
    lambda torch: "storage",
])
def test_a_bad_persistent_id_is_refused(tmp_path, torch_names, pid):
    state, storages, _ = small_state()
    path = write_torch(tmp_path / "pid.pth", torch_names, state, storages,
                       persistent_id=pid(torch_names))
    assert "pid.pth: unknown persistent id" in one_line(path)


def test_a_tensor_outside_its_storage_is_refused(tmp_path, torch_names):
    storage = Storage("0", np.arange(4, dtype=np.float32))
    for name, tensor in (("long", Tensor(storage, 0, (10,), (1,))),
                         ("offset", Tensor(storage, 3, (2,), (1,))),
                         ("negative", Tensor(storage, 3, (2,), (-1,)))):
        path = write_torch(tmp_path / f"{name}.pth", torch_names, {"w": tensor}, [storage])
        assert "a tensor of size" in one_line(path)


def test_broken_torch_files(tmp_path, torch_names):
    state, storages, _ = small_state()
    path = write_torch(tmp_path / "missing.pth", torch_names, state, storages[:1])
    assert "missing.pth: a broken state dict pickle (KeyError" in one_line(path)
    path = write_torch(tmp_path / "list.pth", torch_names, [state["weight"]], storages)
    assert one_line(path).endswith("list.pth: holds a list, not a state dict (a dict of tensors).")
    (tmp_path / "legacy.bin").write_bytes(b"\x80\x02not a zip")
    assert "not a PyTorch zip checkpoint" in one_line(tmp_path / "legacy.bin")


# === safetensors, read by the package ===


def write_safetensors(path, tensors):
    """`{name: (dtype, shape, raw bytes)}` as a safetensors file (the format's spec)."""
    header, offset = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    encoded = json.dumps(header).encode()
    body = b"".join(data for _, _, data in tensors.values())
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + body)
    return path


def test_bfloat16_safetensors_equal_the_float32_reference(tmp_path):
    reference = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    reference = (reference.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bfloat16-exact
    bf16 = (reference.view("<u4") >> 16).astype("<u2").tobytes()  # the top 16 bits
    path = write_safetensors(tmp_path / "bf16.safetensors", {
        "bf16": ("BF16", (3, 5), bf16), "f32": ("F32", (3, 5), reference.astype("<f4").tobytes()),
        "ids": ("I64", (2,), np.array([4, -9], "<i8").tobytes())})
    tensors = checkpoints.read(path)
    assert_same(tensors, {"bf16": reference, "f32": reference, "ids": np.array([4, -9])})


def test_broken_safetensors_files_are_one_line(tmp_path):
    data = np.zeros(4, "<f4").tobytes()
    path = write_safetensors(tmp_path / "cut.safetensors", {"w": ("F32", (4,), data)})
    path.write_bytes(path.read_bytes()[:-3])
    assert "cut.safetensors: not a safetensors file (" in one_line(path)
    (tmp_path / "text.safetensors").write_bytes(b"just some text")
    assert "text.safetensors: not a safetensors file (" in one_line(tmp_path / "text.safetensors")
    path = write_safetensors(tmp_path / "f8.safetensors", {"w": ("F8_E4M3", (4,), bytes(4))})
    assert one_line(path).endswith("f8.safetensors: tensor 'w' has unsupported dtype 'F8_E4M3'.")
