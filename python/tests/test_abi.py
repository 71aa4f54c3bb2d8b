"""The ctypes mirror (litetopk._ffi) matches include/litetopk.h: every status code, enumerator and
flag by name and value (parsed from the header, and as a C compiler sees them when one is present),
the structures' compiled offsets, and the library's status texts; the library exports every symbol
the binding declares."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

from litetopk import _ffi

HEADER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
HEADER = os.path.join(HEADER_DIR, "litetopk.h")
STRUCTS = {
    "ltk_stats": _ffi.ltk_stats,
    "ltk_exec": _ffi.ltk_exec,
    "ltk_indexer_args": _ffi.ltk_indexer_args,
    "ltk_knn_args": _ffi.ltk_knn_args,
    "ltk_select_args": _ffi.ltk_select_args,
    "ltk_prefill_args": _ffi.ltk_prefill_args,
    "ltk_decode_args": _ffi.ltk_decode_args,
    "ltk_blocks_args": _ffi.ltk_blocks_args,
    "ltk_candidates_args": _ffi.ltk_candidates_args,
    "ltk_merge_args": _ffi.ltk_merge_args,
}
# header enum -> the prefix of its mirror in _ffi (the header's name without "LTK_")
ENUMS = {"ltk_dtype": "DTYPE_", "ltk_metric": "METRIC_", "ltk_backend": "BACKEND_", "ltk_algo": "ALGO_"}


def _header_text():
    if not os.path.isfile(HEADER):
        pytest.skip("no header (installed without the checkout)")
    with open(HEADER) as f:
        return f.read()


def _compiler():
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def _compile_and_run(tmp_path, body_lines):
    """Output lines of a C program (body_lines inside main) built against the header."""
    src = tmp_path / "abi.c"
    src.write_text("\n".join(['#include <stdio.h>', '#include <stddef.h>', '#include "litetopk.h"',
                              "int main(void) {"] + body_lines + ["return 0; }"]))
    exe = tmp_path / "abi"
    subprocess.run([_compiler(), "-std=c11", "-I", HEADER_DIR, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return [line for line in out.split("\n") if line]


def header_statuses(text):
    """(name, value, text) of every entry of the header's LTK_STATUS_LIST X-macro, in order."""
    m = re.search(r"#define LTK_STATUS_LIST\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
    assert m, "LTK_STATUS_LIST not found in litetopk.h"
    body = m.group(1)
    entries = re.findall(r'X\(\s*(LTK_\w+)\s*,\s*(-?\d+)\s*,\s*"([^"]*)"\s*\)', body)
    # an entry this pattern does not read must fail here, not drop out of the comparison
    assert len(entries) == body.count("X("), f"unparsed LTK_STATUS_LIST entries in: {body}"
    return [(n, int(v), t) for n, v, t in entries]


def header_enum(text, name):
    """{enumerator: value} of `typedef enum name { ... } name;` (implicit values counted on)."""
    m = re.search(r"typedef enum %s \{(.*?)\} %s;" % (name, name), text, re.S)
    assert m, f"enum {name} not found in litetopk.h"
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    out, nxt = {}, 0
    for item in filter(None, (e.strip() for e in body.split(","))):
        n, _, v = (s.strip() for s in item.partition("="))
        assert re.fullmatch(r"LTK_\w+", n), f"enum {name}: cannot read {item!r}"
        nxt = int(v, 0) if v else nxt
        out[n] = nxt
        nxt += 1
    assert out, f"enum {name} has no enumerators"
    return out


def header_flags(text):
    """{LTK_FLAG_*: value} of the header's flag macros."""
    flags = {n: int(v, 0) for n, v in re.findall(r"#define (LTK_FLAG_\w+)\s+(0[xX][0-9a-fA-F]+|\d+)[uU]?\b", text)}
    assert flags, "no LTK_FLAG_* macros found in litetopk.h"
    return flags


def ffi_names(pattern):
    """{name: value} of _ffi's integer constants whose name matches pattern."""
    return {n: v for n, v in vars(_ffi).items() if re.fullmatch(pattern, n) and type(v) is int}


def _compare(what, header, mirror):
    missing = sorted(set(header) - set(mirror))
    extra = sorted(set(mirror) - set(header))
    wrong = sorted(f"{n}: header {header[n]}, _ffi {mirror[n]}" for n in set(header) & set(mirror)
                   if header[n] != mirror[n])
    assert not (missing or extra or wrong), (f"{what}: missing in _ffi {missing}; in _ffi but not in the header "
                                             f"{extra}; different values {wrong}")


def header_constants(text):
    """Every name the mirror must carry, as the header spells it, with its value."""
    out = {n: v for n, v, _ in header_statuses(text)}
    for enum in ENUMS:
        out.update(header_enum(text, enum))
    out.update(header_flags(text))
    out.update(header_limits(text))
    return out


def test_status_codes_match_header():
    statuses = header_statuses(_header_text())
    header = {n: v for n, v, _ in statuses}
    assert len(header) == len(statuses), "a status name appears twice in LTK_STATUS_LIST"
    assert len(set(header.values())) == len(header), "two statuses share a value"
    _compare("status codes", header, ffi_names(r"LTK_(OK|E[A-Z0-9_]+)"))
    # every error maps to its own exception class (check() would fall back to InternalError)
    assert set(_ffi._EXC) == {v for v in header.values() if v != _ffi.LTK_OK}


@pytest.mark.parametrize("enum", sorted(ENUMS))
def test_enum_values_match_header(enum):
    header = {n[len("LTK_"):]: v for n, v in header_enum(_header_text(), enum).items()}
    _compare(enum, header, ffi_names(ENUMS[enum] + r"[A-Z0-9_]+"))


def test_flag_values_match_header():
    header = {n[len("LTK_"):]: v for n, v in header_flags(_header_text()).items()}
    _compare("flags", header, ffi_names(r"FLAG_[A-Z0-9_]+"))


def header_limits(text):
    """{LTK_*_MAX_* and LTK_MAX_ROWS: value} of the header's limit macros."""
    raw = re.findall(r"#define (LTK_(?:\w+_MAX_\w+|MAX_ROWS))\s+(\(1 << \d+\)|\d+)(?:LL)?(?=\s|$)", text, re.M)
    out = {}
    for n, v in raw:
        m = re.fullmatch(r"\(1 << (\d+)\)", v)
        out[n] = 1 << int(m.group(1)) if m else int(v)
    assert len(out) >= 9, f"found only {sorted(out)} in litetopk.h"
    return out


def test_limits_match_header():
    header = {n[len("LTK_"):]: v for n, v in header_limits(_header_text()).items()}
    _compare("limits", header, ffi_names(r"(\w+_MAX_\w+|MAX_ROWS)"))


def test_header_parse_matches_compiler(tmp_path):
    """The values read from the header text are the ones the compiler gives them."""
    if _compiler() is None:
        pytest.skip("no C compiler")
    parsed = header_constants(_header_text())
    out = _compile_and_run(tmp_path, [f'printf("{n} %lld\\n", (long long)({n}));' for n in parsed])
    compiled = {n: int(v) for n, v in (line.split() for line in out)}
    assert compiled == parsed


def test_struct_layout_matches_header(tmp_path):
    if _compiler() is None or not os.path.isfile(HEADER):
        pytest.skip("no C compiler or header (installed without the checkout)")
    lines = []
    for name, cls in STRUCTS.items():
        lines.append(f'printf("{name} sizeof %zu\\n", sizeof({name}));')
        for f, _ in cls._fields_:
            lines.append(f'printf("{name} {f} %zu\\n", offsetof({name}, {f}));')
    for line in _compile_and_run(tmp_path, lines):
        name, field, value = line.split()
        cls = STRUCTS[name]
        got = ctypes.sizeof(cls) if field == "sizeof" else getattr(cls, field).offset
        assert got == int(value), f"{name}.{field}: ctypes {got}, C {value}"


def test_status_strings_and_enums():
    lib = _ffi.lib()
    if os.path.isfile(HEADER):
        statuses = header_statuses(_header_text())
    else:  # an installed package: the mirror's own codes
        statuses = [(n, v, None) for n, v in ffi_names(r"LTK_(OK|E[A-Z0-9_]+)").items()]
    for name, value, text in statuses:
        got = lib.ltk_status_str(value)
        assert got is not None and got != b"unknown status", f"{name} ({value}): {got!r}"
        if text is not None:
            assert got == text.encode(), f"{name} ({value}): library {got!r}, header {text!r}"
    assert lib.ltk_status_str(-1000) is not None  # never NULL, also for a value that is no status
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
