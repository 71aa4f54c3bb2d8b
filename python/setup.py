"""Build hook: compile liblitetopk.so with CMake from the enclosing checkout and copy it into the
package (litetopk/_lib/, git-ignored), so the installed package loads the library it was built with.

Environment:
  LTK_SKIP_BUILD=1     do not run CMake; copy LTK_LIBRARY (if set) or nothing (the package then
                       looks for <checkout>/build*/liblitetopk.so at import time)
  LTK_LIBRARY=path     copy this prebuilt library instead of building
  LTK_BUILD_DIR=dir    CMake build directory (default <checkout>/build-pip)
  LTK_CMAKE_ARGS="..." extra configure arguments (default -DLTK_CUDA=AUTO)
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIBDIR = HERE / "litetopk" / "_lib"


def log(msg):
    print(f"litetopk setup: {msg}", file=sys.stderr, flush=True)


def build_library():
    """Returns the path of a liblitetopk.so to ship, or None (import-time search takes over)."""
    env_lib = os.environ.get("LTK_LIBRARY")
    if env_lib:
        return Path(env_lib) if Path(env_lib).is_file() else None
    if os.environ.get("LTK_SKIP_BUILD") == "1":
        return None
    if not (ROOT / "CMakeLists.txt").is_file():
        log(f"no CMakeLists.txt in {ROOT}; not building the library")
        return None
    cmake = shutil.which("cmake")
    if cmake is None:
        log("cmake not found; not building the library")
        return None
    bdir = Path(os.environ.get("LTK_BUILD_DIR", ROOT / "build-pip"))
    user_args = os.environ.get("LTK_CMAKE_ARGS")
    attempts = [(bdir, shlex.split(user_args if user_args is not None else "-DLTK_CUDA=AUTO"))]
    if user_args is None:
        # a broken or half-written CUDA toolchain/backend must not cost the user the CPU library
        attempts.append((Path(str(bdir) + "-cpu"), ["-DLTK_CUDA=OFF"]))
    jobs = str(os.cpu_count() or 2)
    for d, extra in attempts:
        try:
            subprocess.run([cmake, "-S", str(ROOT), "-B", str(d), "-DCMAKE_BUILD_TYPE=Release", *extra], check=True,
                           stdout=sys.stderr)
            subprocess.run([cmake, "--build", str(d), "--target", "litetopk", "-j", jobs], check=True,
                           stdout=sys.stderr)
        except (subprocess.CalledProcessError, OSError) as e:
            log(f"CMake build in {d} with {extra} failed ({e})")
            continue
        lib = d / "liblitetopk.so"
        if lib.is_file():
            return lib
    # still install: an existing build*/ library or LTK_LIBRARY can be found at import time
    log("no library built; the package will look for <checkout>/build*/liblitetopk.so at import time")
    return None


class BuildWithLibrary(build_py):
    def run(self):
        LIBDIR.mkdir(parents=True, exist_ok=True)
        lib = build_library()
        target = LIBDIR / "liblitetopk.so"
        if lib is not None:
            shutil.copy2(lib, target)
            log(f"packaged {lib}")
        elif target.exists():
            target.unlink()  # never ship a stale copy from an earlier build
        (LIBDIR / "checkout.txt").write_text(str(ROOT) + "\n")
        super().run()


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # the wheel carries a platform library: tag it as such


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
