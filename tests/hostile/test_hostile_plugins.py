"""Plugin EP libraries and packages as the attack: libraries built here with gcc that segfault,
abort or hang when loaded or in ``CreateEpFactories``, or hand ONNX Runtime a factory of NULL
functions; the real WebGPU plugin cut short; ``--ep plugin:NAME`` naming a module of the standard
library, a package that raises, or one that crashes when imported.

Whatever a plugin does when it is loaded happens first in a probe process: each is one message
and exit 2 naming what was loaded, never a signal, a hang or exit 70 of ep-testbed; and a module
no installed distribution provides is never imported at all.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
from environment_kit import FAKE_PLUGINS, check, clean_env, cli, fake_plugin, truncated_copy

from ep_testbed.harness.eps import plugins
from ep_testbed.harness.eps.providers import EpNotAvailable

pytestmark = pytest.mark.slow  # builds libraries, runs ep-testbed commands

#: Seconds the probe may wait for a library that loads (a healthy fake loads in milliseconds; the
#: rest is the probe process's start on a loaded machine).
PROBE_S = "15"
#: Seconds it waits for one that hangs: any limit ends in "did not end within", however slowly
#: the probe starts, so a short one costs no certainty.
HANG_PROBE_S = "2"
COMMANDS = {"devices": ["devices"], "doctor": ["doctor"], "run": ["run", "--tier", "smoke", "--no-progress"]}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugins")
    return {name: fake_plugin(folder, name) for name in FAKE_PLUGINS}


def _env(probe: str = PROBE_S, **extra):
    return clean_env(EP_TESTBED_PROBE_TIMEOUT=probe, **extra)


def in_turn(names, commands):
    """``(name, command)``: every name once, the commands taken in turn, so that every command
    meets at least two kinds of failure. Every command loads a library through the one probe
    (``plugins.register``), so the whole names x commands grid would repeat the probe's work."""
    commands = sorted(commands)
    return [(name, commands[i % len(commands)]) for i, name in enumerate(sorted(names))]


@pytest.mark.parametrize("name, command", in_turn(set(FAKE_PLUGINS) - {"no-factory", "noise-at-load"}, COMMANDS))
def test_a_plugin_library_that_crashes_or_hangs_when_loaded_is_one_message(tmp_path, libraries, name, command):
    out = ["--out", tmp_path / "r"] if command == "run" else []
    done = check(cli(*COMMANDS[command], "--ep", "WebGpuExecutionProvider", "--ep-library", libraries[name], *out,
                     env=_env(HANG_PROBE_S if name.startswith("hang") else PROBE_S)), (2,))
    assert str(libraries[name]) in done.stderr and "probe process" in done.stderr
    expected = {"hang": "did not end within", "exit": "ended the probe process"}.get(name.split("-")[0],
                                                                                 "killed the probe process")
    assert expected in done.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("name", ["no-factory", "noise-at-load"])
def test_a_plugin_library_that_loads_and_lists_no_device_is_refused_as_before(tmp_path, libraries, name):
    """Loaded without harm (what it prints on stdout never passes for the probe's answer)."""
    done = check(cli("run", "--ep", "WebGpuExecutionProvider", "--ep-library", libraries[name], "--out",
                     tmp_path / "r", env=_env()), (2,))
    assert "lists no device for WebGpuExecutionProvider" in done.stderr


@pytest.mark.parametrize("name", ["segfault-at-load", "abort-in-create", "null-factory"])
def test_registering_a_crashing_library_in_process_raises_instead_of_killing_the_process(libraries, name):
    """This test's own process is the one that would die: it survives to see the refusal."""
    with pytest.raises(EpNotAvailable, match="killed the probe process"):
        plugins.register(str(libraries[name]), "--ep-library")


def test_the_real_webgpu_plugin_cut_short_is_one_message(tmp_path):
    spec = importlib.util.find_spec("onnxruntime_ep_webgpu")
    if spec is None:
        pytest.skip("onnxruntime-ep-webgpu is not installed (bash tools/plugin-packages.sh)")
    import onnxruntime_ep_webgpu

    cut = truncated_copy(onnxruntime_ep_webgpu.get_library_path(), tmp_path / "libonnxruntime_providers_webgpu.so")
    for command in ("devices", "run"):
        out = ["--out", tmp_path / "r"] if command == "run" else []
        done = check(cli(*COMMANDS[command], "--ep", "webgpu", "--ep-library", cut, *out, env=_env()), (2,))
        assert "SIGBUS" in done.stderr or "SIGSEGV" in done.stderr, done.stderr


# --- plugin packages by name -------------------------------------------------------------------

def _package(site, name, source, library=None):
    """A distribution ``name`` installed into ``site`` (metadata and one module), its module's source."""
    module = name.replace("-", "_")
    (site / f"{module}.py").write_text(textwrap.dedent(source).replace("LIBRARY", repr(str(library))))
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(module + "\n")
    (info / "RECORD").write_text(f"{module}.py,,\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory, libraries):
    """A folder of fake plugin packages (put first on PYTHONPATH)."""
    folder = tmp_path_factory.mktemp("site")
    _package(folder, "ep-raises", "raise RuntimeError('broken at import \\x1b[2J')\n")
    _package(folder, "ep-segfaults", "import ctypes\nctypes.string_at(16)\n")
    _package(folder, "ep-exits", "import os\nos._exit(3)\n")
    _package(folder, "ep-path-raises", "def get_library_path():\n    raise OSError('no library here')\n"
                                       "def get_ep_names():\n    return ['X']\n")
    _package(folder, "ep-crashing-library", "def get_library_path():\n    return LIBRARY\n"
                                            "def get_ep_names():\n    return ['WebGpuExecutionProvider']\n",
             library=libraries["segfault-in-create"])
    _package(folder, "ep-no-factory", "def get_library_path():\n    return LIBRARY\n"
                                      "def get_ep_names():\n    return ['WebGpuExecutionProvider']\n",
             library=libraries["no-factory"])
    return folder


PACKAGE_WORDS = {
    "ep-raises": ["importing ep_raises (from ep-raises) raised RuntimeError: broken at import"],
    "ep_raises": ["importing ep_raises (from ep-raises) raised RuntimeError"],
    "ep-segfaults": ["the plugin package ep_segfaults", "SIGSEGV"],
    "ep-exits": ["the plugin package ep_exits", "with status 3"],
    "ep-path-raises": ["ep_path_raises.get_library_path() raised OSError: no library here"],
    "ep-crashing-library": ["the plugin package ep_crashing_library", "SIGSEGV"],
    "ep-no-factory": ["lists no device for WebGpuExecutionProvider"],
}


@pytest.mark.parametrize("spec, command", in_turn(PACKAGE_WORDS, ["run", "devices"]))
def test_a_plugin_package_that_breaks_when_loaded_is_one_message_naming_it(tmp_path, site, spec, command):
    words = PACKAGE_WORDS[spec]
    out = ["--out", tmp_path / "r"] if command == "run" else []
    done = check(cli(*COMMANDS[command], "--ep", f"plugin:{spec}", *out, env=_env(PYTHONPATH=str(site))), (2,))
    assert all(word in done.stderr for word in words), done.stderr


@pytest.mark.parametrize("name", ["this", "antigravity", "os", "sandbox_server"])
def test_a_module_no_distribution_installs_is_never_imported(tmp_path, name):
    """``plugin:this`` used to import the standard library's ``this`` (which prints the Zen of
    Python as it loads); a module no installed distribution provides is refused unimported."""
    done = check(cli("run", "--ep", f"plugin:{name}", "--out", tmp_path / "r",
                     env=_env(PYTHONPATH=str(sys.path[0]))), (2,))
    assert "no installed distribution is or provides it" in done.stderr
    assert "Beautiful is better than ugly" not in done.stdout + done.stderr


def test_a_package_is_found_by_its_distribution_or_module_name_from_metadata_alone():
    assert plugins.find_distribution("this") is None and plugins.find_distribution("os") is None
    by_name, by_module = plugins.find_distribution("ep-testbed"), plugins.find_distribution("ONNXRUNTIME")
    assert by_name is not None and by_name[0] == "ep-testbed"
    assert by_module is not None and by_module[0] == "onnxruntime" and by_module[2] == "onnxruntime"
