"""``TACOS_CPP`` for benchmarks/tacos_scaling.py: the C++ reference TACOS to run beside ours.

Either an executable driver of your own (used as it is), or an astra-sim/tacos source checkout: then
the workbench's driver (``benchmarks/tacos_cpp/driver.cpp``) is compiled with the checkout's library
sources into ``build/tacos_cpp/<key>/driver`` (git-ignored; ``make clean`` removes it), where the key
hashes the driver, the checkout's headers and sources, the compiler and its flags, so a changed input
builds again and an unchanged one is reused.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "tacos_cpp" / "driver.cpp"
CACHE = HERE.parent / "build" / "tacos_cpp"
FLAGS = ("-std=c++17", "-O2")
# what the driver includes and the library must define; a directory without them is not a checkout
REQUIRED = tuple(f"include/tacos/{name}.h" for name in (
    "collective/all_gather", "event_queue/timer", "synthesizer/synthesizer", "topology/mesh_2d",
    "topology/torus_2d", "topology/hypercube_3d", "topology/torus_3d")) + ("src/synthesizer/synthesizer.cpp",)


def resolve(value: str, cache: Path = CACHE, driver: Path = DRIVER) -> str:
    """The executable to run for ``TACOS_CPP=value``, building it first when ``value`` is a checkout."""
    path = Path(value).expanduser()
    if path.is_dir():
        return str(build(path, cache, driver))
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    if not path.exists():
        raise SystemExit(f"TACOS_CPP={value}: no such file or directory")
    raise SystemExit(f"TACOS_CPP={value}: neither an executable file nor an astra-sim/tacos checkout")


def library_sources(checkout: Path) -> list[Path]:
    """The checkout's library sources (``src/<part>/*.cpp``; ``src/main.cpp`` has its own ``main``)."""
    missing = [name for name in REQUIRED if not (checkout / name).is_file()]
    if missing:
        named = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise SystemExit(f"TACOS_CPP={checkout}: not an astra-sim/tacos checkout, missing {named}")
    return sorted(checkout.glob("src/*/*.cpp"))


def find_compiler() -> list[str]:
    """``CXX`` (which may carry words of its own, e.g. ``ccache g++``), else g++, else clang++."""
    given = shlex.split(os.environ.get("CXX", ""))
    if given:
        if shutil.which(given[0]) is None:
            raise SystemExit(f"CXX={os.environ['CXX']}: compiler not found")
        return given
    for name in ("g++", "clang++"):
        if shutil.which(name):
            return [name]
    raise SystemExit("TACOS_CPP names a checkout to build, but no C++ compiler was found (set CXX, or install g++)")


def compiler_version(compiler: list[str]) -> str:
    """``compiler --version``: in the key, so an upgraded compiler at the same path builds again."""
    try:
        done = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as error:
        raise SystemExit(f"{' '.join(compiler)}: cannot run ({error.strerror})") from None
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(compiler)} --version: exit {done.returncode}")
    return done.stdout


def cache_key(checkout: Path, sources: list[Path], driver: Path, compiler: list[str], version: str) -> str:
    """Hash of everything the binary is made of; file names relative to the checkout, so a moved copy
    of the same sources reuses the same build."""
    digest = hashlib.sha256()
    for part in (*compiler, version, *FLAGS):
        digest.update(part.encode() + b"\0")
    digest.update(b"driver\0" + driver.read_bytes())
    for path in sorted({*(p for p in (checkout / "include").rglob("*") if p.is_file()), *sources}):
        digest.update(path.relative_to(checkout).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def first_error(stderr: str) -> str:
    """The compiler's first line that reports an error (a linker's "undefined reference" too), else
    its first line: most of a failed build is follow-on noise, the first error is the one to fix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line or "undefined reference" in line]
    return (errors or lines or ["no message"])[0][:400]


def build(checkout: Path, cache: Path = CACHE, driver: Path = DRIVER) -> Path:
    """The driver built against ``checkout``, compiled now unless an identical build is cached."""
    checkout = checkout.absolute()
    sources = library_sources(checkout)
    compiler = find_compiler()
    target = cache / cache_key(checkout, sources, driver, compiler, compiler_version(compiler)) / "driver"
    if target.is_file() and os.access(target, os.X_OK):
        print(f"astra-sim/tacos driver: {target} (built before)", flush=True)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # compile to a temporary name beside the target and rename it into place: a build that is
    # interrupted or fails leaves nothing that a later run would take for a finished binary
    handle, partial = tempfile.mkstemp(prefix=".driver-", dir=target.parent)
    os.close(handle)
    include = checkout / "include"
    command = [*compiler, *FLAGS, "-I", str(include), "-I", str(include / "tacos"), str(driver),
               *map(str, sources), "-o", partial]
    print(f"building astra-sim/tacos driver from {checkout} ...", end=" ", flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print("failed", flush=True)
            raise SystemExit(f"TACOS_CPP={checkout}: {' '.join(compiler)} failed: {first_error(done.stderr)}")
        os.chmod(partial, 0o755)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    print(f"done in {time.perf_counter() - started:.1f} s -> {target}", flush=True)
    return target
