"""``TACOS_CPP`` for the TACOS benchmark (benchmarks/tacos_cpp_build.py): an executable is used as
it is, an astra-sim/tacos checkout is built once into a cache keyed by its inputs, anything else
stops with one line naming the path. A stand-in compiler (a shell script) covers the build steps;
one slow case builds against a real checkout named by ``TACOS_CPP_SOURCE``."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks import tacos_cpp_build
from benchmarks.tacos_cpp_build import DRIVER, REQUIRED, build, cache_key, first_error, library_sources, resolve


def one_line_exit(call) -> str:
    with pytest.raises(SystemExit) as caught:
        call()
    message = str(caught.value.code)
    assert "\n" not in message
    return message


def fake_checkout(root: Path) -> Path:
    for name in (*REQUIRED, "src/topology/topology.cpp", "src/main.cpp"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"// {name}\n")
    return root


def fake_compiler(tmp_path: Path, body: str) -> Path:
    """A compiler stand-in: answers --version, otherwise runs ``body`` (with $out the -o argument)
    and appends its arguments to calls.log."""
    script = tmp_path / "fake-cxx"
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = --version ]; then echo "fake c++ 1.0"; exit 0; fi\n'
                      f'echo "$@" >> "{tmp_path}/calls.log"\n'
                      'while [ $# -gt 1 ]; do [ "$1" = -o ] && out="$2"; shift; done\n' + body)
    script.chmod(0o755)
    return script


def test_a_missing_path_is_refused_naming_it(tmp_path):
    missing = tmp_path / "nowhere"
    message = one_line_exit(lambda: resolve(str(missing), cache=tmp_path / "cache"))
    assert str(missing) in message and "no such file" in message


def test_a_directory_that_is_not_a_checkout_is_refused_naming_what_is_missing(tmp_path):
    (tmp_path / "src" / "include").mkdir(parents=True)
    message = one_line_exit(lambda: resolve(str(tmp_path / "src"), cache=tmp_path / "cache"))
    assert str(tmp_path / "src") in message and "not an astra-sim/tacos checkout" in message
    assert "include/tacos/synthesizer/synthesizer.h" in message
    assert not (tmp_path / "cache").exists()


def test_a_file_that_is_not_executable_is_refused(tmp_path):
    plain = tmp_path / "driver.txt"
    plain.write_text("not a program\n")
    message = one_line_exit(lambda: resolve(str(plain), cache=tmp_path / "cache"))
    assert str(plain) in message and "neither an executable" in message


def test_an_executable_file_is_used_as_it_is(tmp_path):
    program = tmp_path / "my-driver"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert resolve(str(program), cache=tmp_path / "cache") == str(program)
    assert not (tmp_path / "cache").exists()


def test_the_library_sources_leave_out_the_reference_main(tmp_path):
    sources = library_sources(fake_checkout(tmp_path / "tacos"))
    names = [p.relative_to(tmp_path / "tacos").as_posix() for p in sources]
    assert names == ["src/synthesizer/synthesizer.cpp", "src/topology/topology.cpp"]


def test_the_cache_key_follows_the_driver_the_checkout_and_the_compiler(tmp_path):
    checkout = fake_checkout(tmp_path / "tacos")
    sources = library_sources(checkout)
    driver = tmp_path / "driver.cpp"
    driver.write_text("int main() { return 0; }\n")
    key = cache_key(checkout, sources, driver, ["g++"], "g++ 12")
    assert cache_key(checkout, sources, driver, ["g++"], "g++ 12") == key
    driver.write_text("int main() { return 1; }\n")
    changed_driver = cache_key(checkout, sources, driver, ["g++"], "g++ 12")
    assert changed_driver != key
    (checkout / "include/tacos/topology/mesh_2d.h").write_text("// another header\n")
    changed_header = cache_key(checkout, sources, driver, ["g++"], "g++ 12")
    assert changed_header not in (key, changed_driver)
    assert cache_key(checkout, sources, driver, ["g++"], "g++ 13") != changed_header
    assert cache_key(checkout, sources, driver, ["clang++"], "g++ 12") != changed_header


def test_no_compiler_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    message = one_line_exit(lambda: build(fake_checkout(tmp_path / "tacos"), tmp_path / "cache"))
    assert "no-such-c++" in message and "not found" in message


def test_a_checkout_is_built_once_and_then_reused(tmp_path, monkeypatch, capsys):
    compiler = fake_compiler(tmp_path, 'printf "#!/bin/sh\\necho built\\n" > "$out"\n')
    monkeypatch.setenv("CXX", str(compiler))
    checkout = fake_checkout(tmp_path / "tacos")
    first = resolve(str(checkout), cache=tmp_path / "cache")
    assert "building astra-sim/tacos driver" in capsys.readouterr().out
    assert resolve(str(checkout), cache=tmp_path / "cache") == first
    assert "built before" in capsys.readouterr().out
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 1  # the second call compiled nothing
    assert subprocess.run([first], capture_output=True, text=True).stdout == "built\n"
    arguments = (tmp_path / "calls.log").read_text().split()
    assert {"-std=c++17", "-O2", str(DRIVER)} <= set(arguments)
    assert str(checkout / "src/main.cpp") not in arguments
    assert [p.name for p in Path(first).parent.iterdir()] == ["driver"]  # no partial file left beside it


def test_a_compile_error_stops_with_the_first_error_line_and_leaves_no_binary(tmp_path, monkeypatch):
    compiler = fake_compiler(tmp_path, 'echo "In file included from x.h:1," >&2\n'
                                       'echo "driver.cpp:3:5: error: first thing wrong" >&2\n'
                                       'echo "driver.cpp:9:1: error: second thing" >&2\nexit 1\n')
    monkeypatch.setenv("CXX", str(compiler))
    message = one_line_exit(lambda: resolve(str(fake_checkout(tmp_path / "tacos")), cache=tmp_path / "cache"))
    assert message.endswith("driver.cpp:3:5: error: first thing wrong")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_a_link_error_is_named_by_its_undefined_reference_not_by_the_linker_summary():
    stderr = ("/usr/bin/ld: /tmp/cc1.o: in function `main':\n"
              "driver.cpp:(.text+0x1f): undefined reference to `tacos::Synthesizer::Synthesizer()'\n"
              "collect2: error: ld returned 1 exit status\n")
    assert first_error(stderr).endswith("undefined reference to `tacos::Synthesizer::Synthesizer()'")
    assert first_error("\n  only a note\n") == "only a note"


@pytest.mark.slow
def test_the_driver_builds_against_a_real_checkout_and_prints_both_lines(tmp_path):
    checkout = os.environ.get("TACOS_CPP_SOURCE")
    if not checkout:
        pytest.skip("TACOS_CPP_SOURCE does not name an astra-sim/tacos checkout")
    driver = tacos_cpp_build.build(Path(checkout), tmp_path / "cache")
    done = subprocess.run([str(driver), "mesh", "4", "4"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^Time to solve: [0-9.]+ ms$", done.stdout, re.MULTILINE)
    collective = re.search(r"^Collective Time: ([0-9.]+) us$", done.stdout, re.MULTILINE)
    assert collective and float(collective.group(1)) > 0
    assert subprocess.run([str(driver), "ring", "4", "4"], capture_output=True).returncode == 2
