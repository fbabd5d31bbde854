"""convtap as a package: a wheel built from the checkout works outside it, and the layers hold."""

from __future__ import annotations

import ast
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from convtap.contract.auditor import checks
from convtap.contract.registry import registry
from convtap.models import TOOL_RETURN_FIXED, ToolReturnMessage

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "addon" / "convtap"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return next(out.glob("convtap-*.whl"))


@pytest.mark.release
@pytest.mark.process  # its wheel is built by pip, a process
def test_the_wheel_holds_convtap_and_nothing_else_at_the_top(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"convtap"}
    for data in ("convtap/contract/rules.toml", "convtap/mock/scenarios/alefita_way.json",
                 "convtap/mock/seed/signature_handoff.json", "convtap/store/canned.py",
                 "convtap/proxy/script.py", "convtap/py.typed", "convtap/diff/checks.toml",
                 "convtap/diff/userdata.toml"):  # fmt: skip
        assert data in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    declared = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[datasette]\nconvtap = convtap.store.datasette_plugin" in declared  # Datasette's


@pytest.mark.release
@pytest.mark.process
def test_an_installed_wheel_runs_the_demo_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    """A fresh virtualenv gets the wheel (its dependencies are lent from this environment)."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    site = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip())  # fmt: skip
    (site / "lent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    assert not (site / "addon").exists() and (site / "convtap").is_dir()
    where = subprocess.check_output(
        [python, "-c", "import convtap; print(convtap.__file__)"], cwd=tmp_path, text=True
    )
    assert where.startswith(str(site))
    script = subprocess.check_output([env_dir / "bin" / "convtap", "mitm-script"], text=True)
    assert Path(script.strip()).is_file() and script.startswith(str(site))
    demo = subprocess.run([env_dir / "bin" / "convtap", "demo", "--db", "demo.db"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-2000:]
    for rule in ("return-recipient", "return-call-id", "responses-output-call-id"):
        assert rule in demo.stdout
    assert (tmp_path / "demo.db").is_file()
    ci = [  # README's CI recipe: a baseline, then a capture diffed against it
        ["shapes", "demo.db", "--output", "baseline.json"],
        ["diff", "baseline.json", "demo.db", "--fail-on", "breaking", "--format", "github"],
    ]
    for args in ci:
        ran = subprocess.run([env_dir / "bin" / "convtap", *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-2000:]


def test_every_rule_has_exactly_one_check() -> None:
    assert set(checks()) == set(registry())


def test_the_return_contract_is_one_table() -> None:
    """The model holds a return to TOOL_RETURN_FIXED, field by field, as the rules do."""
    good = {
        "author": {"metadata": {}, "name": "t", "role": "tool"}, "channel": "commentary",
        "content": {"content_type": "code", "text": "{}"}, "create_time": 1.0,
        "end_turn": None, "id": "r", "metadata": {}, "recipient": "all",
        "status": "finished_successfully", "weight": 1,
    }  # fmt: skip
    ToolReturnMessage.model_validate(good)
    for path in TOOL_RETURN_FIXED:
        bad = {**good, "author": dict(good["author"]), "content": dict(good["content"])}
        holder = bad
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = "something else"
        with pytest.raises(ValueError):
            ToolReturnMessage.model_validate(bad)


def test_every_layer_says_what_it_is_and_may_import() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and ("import" in doc.lower()), init


def test_modules_stay_under_500_lines_and_functions_under_80() -> None:
    modules, functions = set(), set()
    for path in PACKAGE.rglob("*.py"):
        name = str(path.relative_to(PACKAGE))
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 500:
            modules.add(name)
        for node in ast.walk(ast.parse(text)):
            is_function = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            if is_function and (node.end_lineno or 0) - node.lineno >= 80:
                functions.add(f"{name}:{node.name}")
    assert modules == set()
    assert functions == set()
