"""The command line loads a command's module only when that command runs: `convtap --help` lists
every command from a table (`convtap.cli.common.COMMANDS`) that must say what the commands say,
and `convtap decode` starts without the proxy, the store, the recorder or the models."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from convtap.cli import main
from convtap.cli.common import COMMANDS, Commands

MODULES = sorted({module for module, _ in COMMANDS.values()})


def every_command() -> dict[str, click.Command]:
    """The commands as their modules register them (every module loaded)."""
    for module in MODULES:
        importlib.import_module(f"convtap.cli.{module}")
    return dict(main.commands)


def test_the_table_names_every_command_its_module_and_its_help() -> None:
    commands = every_command()
    assert set(commands) == set(COMMANDS)
    for name, command in commands.items():
        module, summary = COMMANDS[name]
        assert command.callback is not None
        assert command.callback.__module__ == f"convtap.cli.{module}", name
        for limit in (20, 45, 60, 80, 120, 1000):  # as --help shortens it, at every width
            listed = click.Command(name, help=summary).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), (name, limit)


@pytest.mark.parametrize("width", [60, 80, 200])
def test_help_lists_the_commands_as_click_would_from_the_commands_themselves(width: int) -> None:
    eager = click.Group("convtap", commands=every_command())
    ctx = click.Context(main, info_name="convtap", terminal_width=width)
    ours, theirs = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
    main.format_commands(ctx, ours)
    eager.format_commands(click.Context(eager, info_name="convtap", terminal_width=width), theirs)
    assert ours.getvalue() == theirs.getvalue()
    assert all(name in ours.getvalue() for name in COMMANDS)


def test_a_misspelt_command_is_matched_against_every_command() -> None:
    ctx = click.Context(main, info_name="convtap")
    with pytest.raises(click.NoSuchCommand) as refused:
        main.resolve_command(ctx, ["mitm_script"])
    assert refused.value.possibilities == ["mitm-script"]


# What `convtap decode` of a stream that finishes no message needs none of.
NOT_FOR_DECODE = ("mitmproxy", "sqlite_utils", "sqlite3", "tornado", "pydantic", "detect_secrets",
                  "requests", "convtap.models", "convtap.store", "convtap.record",
                  "convtap.proxy", "convtap.contract", "convtap.cli.recording",
                  "convtap.cli.captures")  # fmt: skip
_LOADED = """import json, sys
from convtap.cli import main
main(["decode", "--format", "json", sys.argv[1]], standalone_mode=False)
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.process
def test_decode_loads_only_what_decoding_needs(tmp_path: Path) -> None:
    body = tmp_path / "typed.sse"
    body.write_text('event: delta_encoding\ndata: "v1"\n\n'
                    'data: {"type": "title_generation", "title": "t", "conversation_id": "c"}\n\n'
                    "data: [DONE]\n\n")  # fmt: skip
    ran = subprocess.run([sys.executable, "-c", _LOADED, str(body)], capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    assert '"title_generation"' in ran.stdout
    loaded = json.loads(ran.stderr.splitlines()[-1])
    found = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_DECODE)]
    assert found == []
    assert "convtap.cli.protocol" in loaded


def test_ctrl_c_while_a_command_loads_ends_it_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """As `convtap.entry` does while the CLI loads: status 130, no traceback, no "Aborted!"."""

    def interrupted(name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", interrupted)
    group = Commands("convtap")  # nothing loaded yet
    with pytest.raises(SystemExit) as stopped:
        group.get_command(click.Context(group), "decode")
    assert stopped.value.code == 130
