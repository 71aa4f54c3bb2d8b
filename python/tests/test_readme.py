"""Every ```python block of python/README.md runs as written (against the installed package)."""
import importlib.util
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 5, "python/README.md lost its examples"


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block(i):
    code = BLOCKS[i]
    for mod in re.findall(r"^import (\w+)", code, flags=re.M):
        if importlib.util.find_spec(mod) is None:
            pytest.importorskip(mod)  # torch: the block runs where it is installed
    exec(compile(code, f"python/README.md block {i + 1}", "exec"), {})
