"""The ctypes structures match include/litetopk.h (compiled offsets), and the library exports
every symbol the binding declares."""
import ctypes
import os
import shutil
import subprocess

import pytest

from litetopk import _ffi

HEADER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
STRUCTS = {
    "ltk_stats": _ffi.ltk_stats,
    "ltk_exec": _ffi.ltk_exec,
    "ltk_indexer_args": _ffi.ltk_indexer_args,
    "ltk_knn_args": _ffi.ltk_knn_args,
    "ltk_select_args": _ffi.ltk_select_args,
    "ltk_prefill_args": _ffi.ltk_prefill_args,
}


def test_struct_layout_matches_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None or not os.path.isfile(os.path.join(HEADER_DIR, "litetopk.h")):
        pytest.skip("no C compiler or header (installed without the checkout)")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "litetopk.h"', "int main(void) {"]
    for name, cls in STRUCTS.items():
        lines.append(f'printf("{name} sizeof %zu\\n", sizeof({name}));')
        for f, _ in cls._fields_:
            lines.append(f'printf("{name} {f} %zu\\n", offsetof({name}, {f}));')
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", HEADER_DIR, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    for line in filter(None, out):
        name, field, value = line.split()
        cls = STRUCTS[name]
        got = ctypes.sizeof(cls) if field == "sizeof" else getattr(cls, field).offset
        assert got == int(value), f"{name}.{field}: ctypes {got}, C {value}"


def test_status_strings_and_enums():
    lib = _ffi.lib()
    assert lib.ltk_status_str(_ffi.LTK_EINVAL) == b"invalid argument"
    assert lib.ltk_status_str(_ffi.LTK_ENOBACKEND).startswith(b"backend not available")
    for name, code in _ffi.BACKENDS.items():
        assert lib.ltk_backend_name(code).decode() == name
    assert lib.ltk_dtype_size(_ffi.DTYPE_E4M3) == 1 and lib.ltk_dtype_size(_ffi.DTYPE_BF16) == 2


def test_info_and_library_discovery(monkeypatch):
    import litetopk
    text = litetopk.info()
    assert "backend cpu" in text and "library:" in text
    assert litetopk.backends()["cpu"] is True
    assert os.path.isfile(litetopk.library_path())
    monkeypatch.setenv("LTK_LIBRARY", "/nonexistent/liblitetopk.so")
    assert [str(p) for p in _ffi.candidate_paths()] == ["/nonexistent/liblitetopk.so"]
    monkeypatch.delenv("LTK_LIBRARY")
    assert any(str(p).endswith("liblitetopk.so") for p in _ffi.candidate_paths())


def test_missing_library_gives_clear_error(monkeypatch):
    monkeypatch.setattr(_ffi, "_lib", None)
    monkeypatch.setenv("LTK_LIBRARY", "/nonexistent/liblitetopk.so")
    with pytest.raises(ImportError, match="LTK_LIBRARY"):
        _ffi.lib()
