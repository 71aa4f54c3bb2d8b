"""Uniform view of numpy arrays and torch tensors for the C calls: pointer, shape, strides in
elements, dtype code, device. No data is ever copied or converted here."""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from . import _ffi

# dtype names (numpy .name / torch str without the "torch." prefix) -> ltk_dtype
_FLOAT_CODES = {
    "float32": _ffi.DTYPE_F32,
    "float16": _ffi.DTYPE_F16,
    "bfloat16": _ffi.DTYPE_BF16,
    "float8_e4m3fn": _ffi.DTYPE_E4M3,
}
CODE_NAMES = {_ffi.DTYPE_F32: "float32", _ffi.DTYPE_F16: "float16", _ffi.DTYPE_BF16: "bfloat16",
              _ffi.DTYPE_E4M3: "float8_e4m3fn"}
# explicit dtype= spellings accepted from the caller
DTYPE_ALIASES = {
    "f32": _ffi.DTYPE_F32, "float32": _ffi.DTYPE_F32, "fp32": _ffi.DTYPE_F32,
    "f16": _ffi.DTYPE_F16, "float16": _ffi.DTYPE_F16, "fp16": _ffi.DTYPE_F16, "half": _ffi.DTYPE_F16,
    "bf16": _ffi.DTYPE_BF16, "bfloat16": _ffi.DTYPE_BF16,
    "e4m3": _ffi.DTYPE_E4M3, "fp8": _ffi.DTYPE_E4M3, "float8_e4m3fn": _ffi.DTYPE_E4M3,
}
_RAW_SIZE = {_ffi.DTYPE_F32: 4, _ffi.DTYPE_F16: 2, _ffi.DTYPE_BF16: 2, _ffi.DTYPE_E4M3: 1}


_NP_NAMES: dict = {}  # numpy dtype -> its .name (numpy builds the name string on every access)
_TORCH_NAMES: dict = {}  # torch dtype -> its name without "torch." (a call builds the string otherwise)


def _np_name(dt) -> str:
    n = _NP_NAMES.get(dt)
    if n is None:
        n = _NP_NAMES[dt] = dt.name
    return n


def _np_data_offset():
    """Byte offset of the data pointer in a numpy array object (PyArrayObject_fields: PyObject_HEAD,
    then `char *data`), or None when this interpreter or numpy lays it out otherwise (checked against
    __array_interface__ on arrays with and without offsets)."""
    off = object.__basicsize__
    try:
        base = np.arange(64, dtype=np.float32)
        for x in (base, base[3:], base[1::2], base.reshape(8, 8)[2:, 5:], np.zeros(5, np.uint8)[1:],
                  np.empty((2, 0))):
            got = ctypes.c_void_p.from_address(id(x) + off).value or 0
            if got != x.__array_interface__["data"][0]:
                return None
    except Exception:
        return None
    return off


_NP_DATA = _np_data_offset()
_from_address = ctypes.c_void_p.from_address


def np_ptr(x) -> int:
    """Data pointer of a numpy array. Read from the array object where its layout was verified:
    __array_interface__ builds a dict and costs ~2 us an array, the read ~0.2 us (timeit, this
    checkout's 2-core machine)."""
    if _NP_DATA is not None:
        return _from_address(id(x) + _NP_DATA).value or 0
    return int(x.__array_interface__["data"][0])


def _torch():
    return sys.modules.get("torch")  # never imported by us: a tensor can only come from a loaded torch


def is_tensor(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


class Arr:
    """One array argument. `strides` are in elements; `device` is ("cpu", None) or ("cuda", index)."""

    __slots__ = ("obj", "name", "is_torch", "shape", "strides", "dname", "itemsize", "ptr", "device",
                 "writeable")

    def __init__(self, x, name: str):
        self.obj = x
        self.name = name
        if isinstance(x, np.ndarray):
            self.is_torch = False
            if not x.dtype.isnative:
                raise TypeError(f"{name}: non-native byte order {x.dtype} is not supported")
            self.shape = tuple(int(s) for s in x.shape)
            self.itemsize = x.dtype.itemsize
            if any(s % self.itemsize for s in x.strides):
                raise ValueError(f"{name}: strides {x.strides} (bytes) are not multiples of the element size")
            self.strides = tuple(int(s) // self.itemsize for s in x.strides)
            self.dname = _np_name(x.dtype)
            self.ptr = np_ptr(x)
            self.device = ("cpu", None)
            self.writeable = bool(x.flags.writeable)
            if not x.flags.aligned:
                raise ValueError(f"{name}: array data is not aligned to its element size")
        elif is_tensor(x):
            self.is_torch = True
            if x.layout is not _torch().strided or x.is_quantized or x.is_complex():
                raise TypeError(f"{name}: only dense real tensors are supported")
            self.shape = tuple(x.shape)
            self.strides = x.stride()
            dt = x.dtype
            self.dname = _TORCH_NAMES.get(dt) or _TORCH_NAMES.setdefault(dt, str(dt).replace("torch.", ""))
            self.itemsize = getattr(dt, "itemsize", None) or x.element_size()
            self.ptr = x.data_ptr()
            if x.is_cuda:
                self.device = ("cuda", x.get_device())
            elif x.device.type == "cpu":
                self.device = ("cpu", None)
            else:
                raise ValueError(f"{name}: tensors on device '{x.device}' are not supported (cpu or cuda)")
            self.writeable = True
            if self.ptr % self.itemsize:
                raise ValueError(f"{name}: tensor data is not aligned to its element size")
        else:
            raise TypeError(f"{name}: expected a numpy.ndarray or torch.Tensor, got {type(x).__name__}")
        if any(s < 0 for s in self.strides):
            raise ValueError(f"{name}: negative strides {self.strides} are not supported")

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def is_cuda(self):
        return self.device[0] == "cuda"

    def stride(self, dim: int) -> int:
        """Stride of `dim`, or 0 ("use the default") when the dim has size <= 1 and so is never
        stepped over: frameworks give such dims arbitrary strides."""
        return self.strides[dim] if self.shape[dim] > 1 else 0

    def host_numpy(self) -> np.ndarray:
        """A numpy view of host data (no copy), for range checks."""
        if self.is_torch:
            return self.obj.detach().numpy()
        return self.obj


def wrap(x, name: str, *, ndim=None, optional=False):
    if x is None:
        if optional:
            return None
        raise TypeError(f"{name} is required")
    a = Arr(x, name)
    if ndim is not None and a.ndim not in (ndim if isinstance(ndim, tuple) else (ndim,)):
        raise ValueError(f"{name}: expected {ndim}-D, got shape {a.shape}")
    return a


def wrap_index_vector(x, name: str, length: int, on_host: bool):
    """int32 [length] row bounds. Plain Python sequences are accepted for host calls."""
    if x is None:
        return None
    if not isinstance(x, np.ndarray) and not is_tensor(x):
        if not on_host:
            raise TypeError(f"{name}: expected an int32 CUDA tensor, got {type(x).__name__}")
        try:
            x = np.asarray(x, dtype=np.int32)
        except (OverflowError, ValueError, TypeError) as e:
            raise ValueError(f"{name}: cannot convert to int32: {e}") from None
    a = wrap(x, name, ndim=1)
    if a.dname != "int32":
        raise TypeError(f"{name}: expected int32, got {a.dname}")
    if a.shape[0] != length:
        raise ValueError(f"{name}: expected shape ({length},), got {a.shape}")
    if a.stride(0) not in (0, 1):
        raise ValueError(f"{name}: must be contiguous (stride {a.strides[0]})")
    return a


def float_code(a: Arr, explicit, allowed, what: str) -> int:
    """ltk_dtype of `a`; raw uint8/uint16/int16 storage needs `explicit` (e.g. "e4m3", "bf16")."""
    exp = None
    if explicit is not None:
        if isinstance(explicit, str):
            key = explicit
        elif str(explicit).startswith("torch."):
            key = str(explicit)[len("torch."):]
        else:
            try:  # numpy dtype or scalar type (ml_dtypes types included)
                key = np.dtype(explicit).name
            except TypeError:
                key = str(explicit)
        exp = DTYPE_ALIASES.get(key.lower())
        if exp is None:
            raise TypeError(f"dtype={explicit!r}: expected one of {sorted(set(DTYPE_ALIASES))}")
    code = _FLOAT_CODES.get(a.dname)
    if code is None:
        if exp is not None and a.dname in ("uint8", "int8", "uint16", "int16", "int32", "uint32") \
                and a.itemsize == _RAW_SIZE[exp]:
            code = exp  # raw bit patterns with an explicit element type
        else:
            # numpy has no float8/bfloat16: raw bit patterns need the element type spelled out, or
            # ml_dtypes arrays (pip install "litetopk[fp8]")
            hint = (" (numpy has no float8 or bfloat16: pass dtype='e4m3' (uint8 storage) or dtype='bf16'"
                    " (uint16), or use ml_dtypes.float8_e4m3fn / ml_dtypes.bfloat16 arrays:"
                    " pip install 'litetopk[fp8]')") if a.dname in ("uint8", "uint16", "int16") else ""
            raise TypeError(f"{a.name}: dtype {a.dname} is not supported for {what}{hint}")
    elif exp is not None and exp != code:
        raise TypeError(f"{a.name}: dtype {a.dname} contradicts dtype={explicit!r}")
    if code not in allowed:
        raise TypeError(f"{a.name}: {CODE_NAMES[code]} is not supported for {what}; expected one of "
                        f"{[CODE_NAMES[c] for c in allowed]}")
    return code


def require_dtype(a: Arr, dname: str):
    if a is not None and a.dname != dname:
        raise TypeError(f"{a.name}: expected {dname}, got {a.dname}")


def same_device(arrs):
    dev = None
    first = None
    for a in arrs:
        if a is None:
            continue
        if dev is None:
            dev, first = a.device, a
        elif a.device != dev:
            raise ValueError(f"{a.name} is on {_devstr(a.device)} but {first.name} is on {_devstr(dev)}")
    return dev


def _devstr(d):
    return "cpu" if d[0] == "cpu" else f"cuda:{d[1]}"


def empty(like: Arr, shape, dname: str, device):
    """An output allocated the way `like` is (numpy, or torch on `device`)."""
    if like.is_torch:
        t = _torch()
        dev = "cpu" if device[0] == "cpu" else t.device("cuda", device[1])
        return t.empty(shape, dtype=getattr(t, dname), device=dev)
    return np.empty(shape, dtype=dname)


def check_out(x, name: str, shape, dname: str, device, *, inner_contig=True):
    a = wrap(x, name, ndim=len(shape))
    if a.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {a.shape}")
    require_dtype(a, dname)
    if a.device != device:
        raise ValueError(f"{name}: is on {_devstr(a.device)}, inputs are on {_devstr(device)}")
    if not a.writeable:
        raise ValueError(f"{name}: output array is read-only")
    if inner_contig and len(shape) == 2 and a.stride(1) not in (0, 1):
        raise ValueError(f"{name}: the last dimension must be contiguous (stride {a.strides[1]})")
    if len(shape) == 2 and shape[0] > 1 and a.strides[0] < shape[1]:
        raise ValueError(f"{name}: row stride {a.strides[0]} < k={shape[1]}")
    return a
