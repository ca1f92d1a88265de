"""README's command 2 itself: scripts/test and scripts/install, run with stand-in tools (a python that
records what it is asked, apt-get, sudo, id, nvidia-smi), and the chromium lookup of vlfair.browser."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from vlfair import browser

REPO = Path(__file__).resolve().parents[1]

# Answers like the tools it stands for; every call is appended to $CALLS. torch imports once pip has
# installed it (or from the start unless FAKE_TORCH_MISSING=1).
FAKE_PYTHON = r"""#!/bin/bash
echo "python ${*//$'\n'/ }" >> "$CALLS"
case "$1 $2" in
  "-m vlfair.browser")
    if [ -e "$FAKE_CHROMIUM" ]; then echo "$FAKE_CHROMIUM"; exit 0; fi
    echo "vlfair browser: no chromium for the browser tests: install Debian's chromium" >&2; exit 1 ;;
  "-m pip")
    case " $* " in
      *" --dry-run "*) echo "$FAKE_REPORT" ;;
      *" install "*" torch=="*) touch "$CALLS.torch" ;;
    esac
    exit 0 ;;
esac
case "$2" in
  *EXTERNALLY-MANAGED*) exit "${FAKE_SYSTEM_PYTHON:-1}" ;;  # exit 0: the system's python
  *"import sys, torch"*) [ -z "${FAKE_TORCH_MISSING:-}" ] || [ -e "$CALLS.torch" ]; exit ;;
  *urllib*) exit "${FAKE_CPU_INDEX_DOWN:-0}" ;;
  *find_spec*) [ -n "${FAKE_BROKEN_TORCHVISION:-}" ]; exit ;;
  "import torchvision") [ -z "${FAKE_BROKEN_TORCHVISION:-}" ]; exit ;;
esac
exit 0
"""
FAKE_TOOLS = {
    "apt-get": ('echo "apt-get $*" >> "$CALLS"\ncase " $* " in *" install "*)\n'
                '  if [ -n "${FAKE_APT_FAILS:-}" ]; then echo "E: Unable to locate package chromium" >&2; '
                'exit 100; fi\n'
                '  touch "$FAKE_CHROMIUM" ;;\nesac'),
    "id": 'echo "${FAKE_UID:-0}"',
    "sudo": 'if [ "$1" = -n ]; then exit "${FAKE_SUDO_REFUSES:-0}"; fi; echo "sudo $*" >> "$CALLS"; "$@"',
    "nvidia-smi": 'exit 0',
}
# what the scripts run besides the stand-ins
REAL_TOOLS = ("bash", "dirname", "basename", "grep", "cat", "touch", "env")
CPU_REPORT = '{"install": [{"metadata": {"name": "torch"}}, {"metadata": {"name": "sympy"}}]}'
CUDA_REPORT = '{"install": [{"metadata": {"name": "torch"}}, {"metadata": {"name": "nvidia-cublas-cu12"}}]}'


@pytest.fixture()
def sandbox(tmp_path):
    """A PATH of stand-ins (no chromium, no curl), and the environment the scripts read."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def tool(name: str, body: str) -> None:
        path = bin_dir / name
        path.write_text(body if body.startswith("#!") else f"#!/bin/bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    for name in REAL_TOOLS:
        (bin_dir / name).symlink_to(shutil.which(name))
    tool("python", FAKE_PYTHON)
    for name, body in FAKE_TOOLS.items():
        if name != "nvidia-smi":
            tool(name, body)
    env = {"PATH": str(bin_dir), "PYTHON": str(bin_dir / "python"), "CALLS": str(tmp_path / "calls"),
           "FAKE_CHROMIUM": str(tmp_path / "chromium"), "FAKE_REPORT": CPU_REPORT, "HOME": str(tmp_path),
           "FAKE_CPU_INDEX_DOWN": "1"}

    def run(script: str, *args: str, **extra: str) -> tuple[subprocess.CompletedProcess, list[str]]:
        done = subprocess.run([str(REPO / "scripts" / script), *args], env={**env, **extra}, capture_output=True,
                              text=True, timeout=60)
        calls = Path(env["CALLS"]).read_text().splitlines() if Path(env["CALLS"]).exists() else []
        for state in (env["CALLS"], env["CALLS"] + ".torch"):
            Path(state).unlink(missing_ok=True)
        return done, [c for c in calls if not c.startswith("python -c")]  # the probes; what is installed and run

    run.tool = tool  # type: ignore[attr-defined]
    run.chromium = Path(env["FAKE_CHROMIUM"])  # type: ignore[attr-defined]
    return run


def test_with_a_chromium_it_installs_the_test_extra_and_runs_the_suite_on_every_core(sandbox):
    sandbox.chromium.touch()
    done, calls = sandbox("test", "tests/test_stats.py", "-x")
    assert done.returncode == 0, done.stderr
    assert "python -m pip install -qq -e .[test]" in calls
    assert not any(c.startswith("apt-get") for c in calls)
    assert calls[-1] == ("python -m pytest -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder "
                         "--durations 15 -p no:benchmark tests/test_stats.py -x")
    assert f"browser tests drive {sandbox.chromium}" in done.stderr


def test_without_one_it_installs_debian_s_chromium_first(sandbox):
    done, calls = sandbox("test")
    assert done.returncode == 0, done.stderr
    assert calls.index("apt-get update -qq") < calls.index("apt-get install -y -qq chromium") < len(calls) - 1
    assert calls[-1].startswith("python -m pytest") and "installing Debian's" in done.stderr


def test_through_password_less_sudo_when_not_root(sandbox):
    done, calls = sandbox("test", FAKE_UID="1000")
    assert done.returncode == 0, done.stderr
    assert "sudo apt-get update -qq" in calls and "apt-get install -y -qq chromium" in calls
    assert "sudo env DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq chromium" in calls


@pytest.mark.parametrize("why", [{"FAKE_UID": "1000", "FAKE_SUDO_REFUSES": "1"},
                                 {"VLFAIR_CHROMIUM": "/nowhere/chrome"}])
def test_where_none_can_be_had_it_says_what_to_install_before_any_test(sandbox, why):
    done, calls = sandbox("test", **why)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("vlfair browser: no chromium for the browser tests: install")
    assert not any(c.startswith(("apt-get", "sudo apt-get", "python -m pytest")) for c in calls)


def test_when_apt_get_fails_it_still_ends_on_the_sentence_saying_what_to_install(sandbox):
    done, calls = sandbox("test", FAKE_APT_FAILS="1")  # Ubuntu: apt-get, but no package named chromium
    assert done.returncode == 1 and "apt-get install -y -qq chromium" in calls
    lines = done.stderr.strip().splitlines()
    assert "E: Unable to locate package chromium" in lines and "apt-get could not install chromium" in done.stderr
    assert lines[-1].startswith("vlfair browser: no chromium for the browser tests: install")
    assert not any(c.startswith("python -m pytest") for c in calls)


def test_without_torch_and_without_a_gpu_it_installs_the_cpu_build(sandbox):
    done, calls = sandbox("install", "test", FAKE_TORCH_MISSING="1")
    assert done.returncode == 0, done.stderr
    assert "python -m pip install -qq --dry-run --ignore-installed --report - torch==2.13.0" in calls
    assert calls.index("python -m pip install -qq torch==2.13.0") < calls.index("python -m pip install -qq -e .[test]")
    assert "installing the CPU build of torch==2.13.0" in done.stderr
    done, calls = sandbox("install", FAKE_TORCH_MISSING="1", FAKE_CPU_INDEX_DOWN="")  # PyTorch's CPU index answers
    assert done.returncode == 0, done.stderr
    assert ("python -m pip install -qq --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0"
            in calls)


def test_a_torch_that_still_does_not_import_is_said(sandbox, tmp_path):
    sandbox.tool("python", FAKE_PYTHON.replace('touch "$CALLS.torch"', ":"))  # pip "installs", torch never imports
    done, _ = sandbox("install", FAKE_TORCH_MISSING="1")
    assert done.returncode == 1 and "torch still does not import after installing torch==2.13.0" in done.stderr


def test_it_never_pulls_the_cuda_libraries_onto_a_machine_without_a_gpu(sandbox):
    done, calls = sandbox("install", "test", FAKE_TORCH_MISSING="1", FAKE_REPORT=CUDA_REPORT)
    assert done.returncode == 1 and "would install torch==2.13.0 with its CUDA libraries" in done.stderr
    assert "-m pip install 'torch==2.13.0' --index-url https://download.pytorch.org/whl/cpu)" in done.stderr
    assert not any(c.startswith("python -m pip install -qq torch") or "-e ." in c for c in calls)


def test_with_a_gpu_it_takes_pypi_s_torch_and_a_working_torch_is_kept(sandbox):
    sandbox.tool("nvidia-smi", FAKE_TOOLS["nvidia-smi"])
    done, calls = sandbox("install", FAKE_TORCH_MISSING="1", FAKE_REPORT=CUDA_REPORT)
    assert done.returncode == 0 and "python -m pip install -qq torch==2.13.0" in calls
    assert not any("--dry-run" in c for c in calls) and calls[-1] == "python -m pip install -qq -e ."
    done, calls = sandbox("install")
    assert done.returncode == 0 and not any("torch==" in c for c in calls)


@pytest.mark.parametrize("python, says", [
    ({"FAKE_SYSTEM_PYTHON": "0"}, "is the system's Python, which pip may not install into: make a virtual environment "
                                  "first (python -m venv .venv && . .venv/bin/activate)"),
    ({"FAKE_BROKEN_TORCHVISION": "1"}, "torchvision is installed but does not import beside this torch"),
])
def test_a_python_it_cannot_use_is_said_in_a_sentence(sandbox, python, says):
    done, calls = sandbox("test", **python)
    assert done.returncode == 1 and says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not any(c.startswith("python -m pytest") for c in calls)


def test_without_any_python_it_says_so(sandbox, tmp_path):
    env = {"PATH": str(tmp_path / "bin"), "HOME": str(tmp_path)}  # the stand-ins' folder, then no python in it
    (tmp_path / "bin" / "python").unlink()
    done = subprocess.run([str(REPO / "scripts" / "test")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.strip() == (
        "scripts/install: no python or python3 on PATH: install Python 3.10 or newer, or set PYTHON")


def test_ci_runs_exactly_readme_s_command():
    readme = (REPO / "README.md").read_text()
    assert "scripts/test\n" in readme.split("```bash", 1)[1].split("```", 1)[0]
    assert (REPO / ".ci" / "run").read_text().strip().splitlines()[-1] == "exec scripts/test"


# ---- the chromium lookup ------------------------------------------------------------------------
def _executable(path: Path, body: str = "echo Chromium 156") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _playwright_s_path(browsers: Path) -> Path:
    """Where Playwright puts its chromium under PLAYWRIGHT_BROWSERS_PATH=browsers (asked in a process of
    its own: this one may hold the browser tests' Playwright session)."""
    code = ("from playwright.sync_api import sync_playwright\n"
            "with sync_playwright() as p: print(p.chromium.executable_path)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PLAYWRIGHT_BROWSERS_PATH": str(browsers)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip())


def test_the_chromium_lookup_takes_the_variable_then_path_then_playwright_s(tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "ms-playwright"))  # nothing downloaded there
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(browser.ENV, raising=False)
    with pytest.raises(browser.ChromiumNotFound, match="apt-get install -y chromium.*playwright install --with-deps"):
        browser.find_chromium()
    downloaded = _executable(_playwright_s_path(tmp_path / "ms-playwright"))
    assert browser.find_chromium() == str(downloaded)  # Playwright's own download
    debian = _executable(tmp_path / "bin" / "chromium")
    monkeypatch.setenv("PATH", str(debian.parent))
    assert browser.find_chromium() == str(debian)  # on PATH first
    monkeypatch.setenv(browser.ENV, str(tmp_path / "missing"))
    with pytest.raises(browser.ChromiumNotFound, match="VLFAIR_CHROMIUM=.*missing is not an executable file"):
        browser.find_chromium()
    monkeypatch.setenv(browser.ENV, str(_executable(tmp_path / "other" / "chrome")))
    assert browser.find_chromium() == str(tmp_path / "other" / "chrome")


def test_a_chromium_that_does_not_run_is_named_with_the_reason(tmp_path, monkeypatch):
    """Playwright's download without its system libraries, for one: found, but it cannot start."""
    broken = _executable(tmp_path / "bin" / "chromium",
                         "echo 'error while loading shared libraries: libnss3.so' >&2; exit 127")
    monkeypatch.setenv("PATH", str(broken.parent))
    monkeypatch.delenv(browser.ENV, raising=False)
    with pytest.raises(browser.ChromiumNotFound, match=r"chromium does not run \(error while loading shared libraries: "
                                                       r"libnss3.so\): install .*--with-deps"):
        browser.find_chromium()


def test_python_m_vlfair_browser_prints_the_path_or_one_line_saying_what_to_install(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "none")}
    env.pop(browser.ENV, None)
    done = subprocess.run([sys.executable, "-m", "vlfair.browser"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("vlfair browser: no chromium for the browser tests: install Debian's chromium")


def test_playwright_s_chromium_is_looked_up_also_while_a_playwright_session_runs(tmp_path):
    """The browser tests hold a Playwright session for the whole run; its sync API refuses a second
    one in the same thread (a fresh process: this one may hold the browser tests' session already)."""
    (tmp_path / "ms-playwright").mkdir()
    code = ("from playwright.sync_api import sync_playwright\nfrom vlfair import browser\n"
            "with sync_playwright() as playwright:\n"
            "    print(browser._playwright_chromium() is None, playwright.chromium.executable_path)")
    env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "ms-playwright")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    missing, path = done.stdout.split()
    assert missing == "True" and path.startswith(str(tmp_path / "ms-playwright"))  # asked, and not downloaded here
