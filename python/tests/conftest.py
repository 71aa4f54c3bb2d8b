"""Test setup: import the installed package, or the source tree's (which then finds
<checkout>/build*/liblitetopk.so or $LTK_LIBRARY)."""
import os
import sys
import zlib

try:
    import litetopk  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import litetopk  # noqa: F401

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # a fixed seed per test (crc32, not hash(): str hashes change per process): failures reproduce
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_report_header(config):
    import litetopk
    try:
        return [f"litetopk library: {litetopk.library_path()}",
                "litetopk backends: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in litetopk.backends().items())]
    except ImportError as e:
        return [f"litetopk library: NOT FOUND ({e})"]
