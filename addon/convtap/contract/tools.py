"""What the Responses API refuses in a request's tool definitions: one function, which the audit
(`responses-tools-valid`) and the mock's request validation both call, so that the two can never
disagree (docs/rules.md, "responses-tools-valid", has the evidence for each verdict).

- A member of the `Tool` union is validated against its model (its required fields, its
  enumerations and bounds): the API answers a missing field with `Missing required parameter`.
- An unknown `type` is refused: the API checks `type` against the members it supports
  (`Invalid value: … Supported values are: …`).
- What the API accepts and defaults is no problem: a function tool without `strict` (true) or
  without `parameters` (null: a function that takes none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from convtap.models import TOOL_ADAPTER, TOOL_MODEL_BY_TYPE
from convtap.wire.jsonvalue import REDACTED

PROBLEMS_SAID = 3  # validation errors said per tool


@dataclass(frozen=True)
class ToolProblem:
    """Why a tool is refused, and the API's error for it (its `param` and `code`)."""

    index: int
    kind: str  # the tool's `type`, or what it is when it has none
    detail: str
    param: str
    code: str

    def api_message(self) -> str:
        return f"{self.detail} ({self.param})"


def without_redacted(value: Any) -> Any:
    """A value without the object members redaction replaced whole (an mcp tool's
    `authorization`, a network policy's `domain_secrets`): what they held is not known, and the
    recorder audits what it stores."""
    if isinstance(value, dict):
        return {
            key: without_redacted(item)
            for key, item in value.items()
            if not (isinstance(item, str) and REDACTED.fullmatch(item))
        }
    if isinstance(value, list):
        return [without_redacted(item) for item in value]
    return value


def tool_problems(tools: list[Any], where: str = "tools") -> list[ToolProblem]:
    """Each tool the API would refuse, with why; `where` names the list in `param`."""
    found = []
    for n, tool in enumerate(tools):
        problem = _problem(n, tool, f"{where}[{n}]")
        if problem is not None:
            found.append(problem)
    return found


def _problem(n: int, tool: Any, param: str) -> ToolProblem | None:
    kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
    try:
        TOOL_ADAPTER.validate_python(without_redacted(tool))
    except ValidationError as exc:
        errors = exc.errors()
        missing = [e for e in errors if e["type"] == "missing"]
        first = (missing or errors)[0]
        # the model's path after the union's tag (`known`, the member's type)
        path = [str(p) for p in first["loc"][2:]]
        field = ".".join([param, *path]) if path else param
        detail = "; ".join(
            f"{'.'.join(map(str, e['loc'][2:])) or 'type'}: {e['msg']}"
            for e in errors[:PROBLEMS_SAID]
        )
        code = "missing_required_parameter" if missing else "invalid_value"
        return ToolProblem(n, str(kind), detail, field, code)
    if kind not in TOOL_MODEL_BY_TYPE:
        supported = ", ".join(sorted(TOOL_MODEL_BY_TYPE))
        detail = f"type: {kind!r} is no tool type the API supports (it supports {supported})"
        return ToolProblem(n, str(kind), detail, f"{param}.type", "invalid_value")
    return None
