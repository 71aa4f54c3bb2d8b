"""Build hook: compile liblitetopk.so with CMake in the enclosing checkout and copy it into the
package (litetopk/_lib/, git-ignored), so the installed package loads the library it was built with.

Environment (also in python/README.md):
  LTK_CUDA=OFF|ON|AUTO  OFF builds the CPU library alone (in <checkout>/build-cpu, about a minute);
                        ON/AUTO build the CUDA backend too (AUTO: when nvcc is found). Unset: the
                        checkout's build/ is reused as it is configured (seconds when the README's
                        commands built it already), or configured with AUTO
  LTK_BUILD_DIR=dir     the CMake build directory instead
  LTK_LIBRARY=path      package this prebuilt library instead of building
  LTK_SKIP_BUILD=1      no CMake run; copy LTK_LIBRARY if set, else nothing (the package then looks
                        for <checkout>/build*/liblitetopk.so at import time)
  LTK_CMAKE_ARGS="..."  extra configure arguments
Progress goes to the terminal (pip hides a build's own output unless -v), else to stderr.
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


def _progress_stream():
    try:
        return open("/dev/tty", "w", buffering=1)
    except OSError:
        return sys.stderr


_OUT = None


def log(msg):
    global _OUT
    if _OUT is None:
        _OUT = _progress_stream()
    print(f"litetopk setup: {msg}", file=_OUT, flush=True)


def _run(cmd):
    """Runs a CMake step with its output shown line by line (pip would hold it back)."""
    log("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        _OUT.write(line)
    if p.wait() != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd)


def _cached_cuda(bdir):
    """LTK_CUDA as an existing build directory was configured, or None."""
    try:
        for line in (bdir / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("LTK_CUDA:"):
                return line.split("=", 1)[1]
    except OSError:
        pass
    return None


def build_library():
    """Returns the path of a liblitetopk.so to ship, or None (import-time search takes over)."""
    env_lib = os.environ.get("LTK_LIBRARY")
    if env_lib:
        log(f"packaging LTK_LIBRARY={env_lib}")
        return Path(env_lib) if Path(env_lib).is_file() else None
    if os.environ.get("LTK_SKIP_BUILD") == "1":
        return None
    if not (ROOT / "CMakeLists.txt").is_file():
        log(f"no CMakeLists.txt in {ROOT}; not building the library")
        return None
    cmake = shutil.which("cmake")
    if cmake is None:
        log("cmake not found; not building the library (apt-get install cmake, or set LTK_LIBRARY)")
        return None
    cuda = os.environ.get("LTK_CUDA", "").upper() or None
    if cuda not in (None, "ON", "OFF", "AUTO"):
        raise SystemExit(f"litetopk setup: LTK_CUDA={cuda!r}: expected ON, OFF or AUTO")
    bdir = Path(os.environ.get("LTK_BUILD_DIR") or (ROOT / ("build-cpu" if cuda == "OFF" else "build")))
    extra = shlex.split(os.environ.get("LTK_CMAKE_ARGS", ""))
    attempts = []
    if cuda is None and _cached_cuda(bdir) is not None and not extra:
        log(f"reusing the build in {bdir} (configured with LTK_CUDA={_cached_cuda(bdir)}; LTK_CUDA=OFF for CPU only)")
        attempts.append((bdir, None))
    else:
        attempts.append((bdir, [f"-DLTK_CUDA={cuda or 'AUTO'}", *extra]))
    if cuda is None:
        # a broken or half-written CUDA toolchain must not cost the user the CPU library
        attempts.append((ROOT / "build-cpu", ["-DLTK_CUDA=OFF", *extra]))
    jobs = str(os.cpu_count() or 2)
    for d, args in attempts:
        try:
            if args is not None:
                log(f"configuring {d}")
                _run([cmake, "-S", ROOT, "-B", d, "-DCMAKE_BUILD_TYPE=Release", *args])
            log(f"building liblitetopk in {d} (the CMake lines above say whether the CUDA kernels are compiled)")
            _run([cmake, "--build", d, "--target", "litetopk", "-j", jobs])
        except (subprocess.CalledProcessError, OSError) as e:
            log(f"the build in {d} failed ({e})")
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
