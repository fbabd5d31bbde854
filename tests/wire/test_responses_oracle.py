"""The official SDK as an oracle for the Responses API's unions: every `type` literal of the
pinned `openai` package's tool, input item, output item and stream event unions is one convtap
knows (its Tool models, `ITEM_TYPES`, `EVENT_TYPES`). A newer SDK that adds a type fails here
until convtap learns it. The SDK lives in the clients' virtualenv (`make test` makes it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from convtap.models import TOOLS_ADAPTER
from convtap.wire.responses import EVENT_TYPES, ITEM_TYPES

ROOT = Path(__file__).resolve().parents[2]
# Run in the clients' virtualenv: the `type` literals of the SDK's unions, as JSON.
LIST_LITERALS = """
import json, types, typing
from typing import Annotated, Literal, Union, get_args, get_origin
import openai.types.responses as R

def literals(tp):
    origin = get_origin(tp)
    if origin is Annotated:
        return literals(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(literals(arg) for arg in get_args(tp)))
    field = getattr(tp, "model_fields", {}).get("type")
    if field is None:
        raise SystemExit(f"a member without a type field: {tp}")
    kind = field.annotation
    if get_origin(kind) in (Union, types.UnionType):  # Optional[Literal[...]]
        kind = next(arg for arg in get_args(kind) if arg is not type(None))
    return set(get_args(kind))

print(json.dumps({name: sorted(literals(getattr(R, name))) for name in (
    "Tool", "ResponseInputItem", "ResponseOutputItem", "ResponseStreamEvent")}))
"""


def sdk_literals() -> dict[str, list[str]]:
    python = Path(os.environ.get("CONVTAP_CLIENTS_PYTHON", ROOT / ".venv-clients/bin/python"))
    if not python.exists():
        pytest.skip("the SDK clients' virtualenv is missing: `make test` creates .venv-clients")
    done = subprocess.run([str(python), "-c", LIST_LITERALS], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def tool_types() -> set[str]:
    """The `type` values of convtap's Tool union (its discriminator's mapping, or mappings)."""
    types: set[str] = set()
    pending = [TOOLS_ADAPTER.json_schema()["items"]]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            types.update(node.get("discriminator", {}).get("mapping", {}))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return types


@pytest.mark.process
def test_every_type_of_the_sdks_unions_is_known() -> None:
    sdk = sdk_literals()
    assert len(sdk["ResponseStreamEvent"]) > 50, sdk  # the walk found the unions
    unknown = {
        "tools": set(sdk["Tool"]) - tool_types(),
        "input items": set(sdk["ResponseInputItem"]) - ITEM_TYPES,
        "output items": set(sdk["ResponseOutputItem"]) - ITEM_TYPES,
        "stream events": set(sdk["ResponseStreamEvent"]) - EVENT_TYPES,
    }
    assert not any(unknown.values()), (
        f"types the pinned openai SDK has and convtap lacks: {unknown}"
    )
