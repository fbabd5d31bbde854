"""Every install line in README.md works as written: each `python3 -m venv` and `pip install`
line of its shell blocks runs, in a fresh home folder, from a copy of the checkout, and what it
installed then runs (`--help`, Datasette's plugin list)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
INSTALLS = re.compile(r"-m venv |pip install |pipx |uv tool ")
LEFT_OUT = shutil.ignore_patterns(".venv*", ".git", "__pycache__", "*.egg-info", "build", "dist",
                                  ".*_cache", ".hypothesis", "*.db*")  # fmt: skip


def install_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return [line.strip() for block in BLOCK.findall(text) for line in block.splitlines()
            if INSTALLS.search(line)]  # fmt: skip


def test_the_readme_installs_nothing_by_a_name_pypi_does_not_have() -> None:
    lines = install_lines()
    assert lines and all(" convtap" not in line.split("#")[0] for line in lines)


@pytest.mark.release  # `make dist`: minutes of pip from PyPI, the installs a reader makes
@pytest.mark.process
def test_every_install_line_works_as_written(tmp_path: Path) -> None:
    home, checkout = tmp_path / "home", tmp_path / "checkout"
    home.mkdir()
    shutil.copytree(ROOT, checkout, ignore=LEFT_OUT)
    cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    env = {**os.environ, "HOME": str(home), "PIP_CACHE_DIR": cache, "PIP_QUIET": "1"}
    env.pop("VIRTUAL_ENV", None)

    def sh(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip

    for line in install_lines():
        done = sh(line)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    assert re.search(r"^  record ", sh("~/convtap/bin/convtap --help").stdout, re.MULTILINE)
    plugins = json.loads(sh("~/datasette/bin/datasette plugins").stdout)
    assert [p["name"] for p in plugins] == ["convtap"]
    assert sh("~/phoenix/bin/phoenix --help").returncode == 0
