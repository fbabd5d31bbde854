"""docs/rules.md, written from the rule registry (`make docs`).

    python -m convtap.contract.ruledoc > docs/rules.md

The page is generated so that it cannot drift from `rules.toml`: tests/contract/test_ruledoc.py
fails when the page in the repository is not what `render` writes now. Pure: rules in, text out.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from convtap.contract.registry import Rule, registry

INTRO = """\
# Contract rules

<!-- Generated from addon/convtap/contract/rules.toml by `make docs`; do not edit by hand. -->

`convtap audit` checks every tool call and tool return of a capture against these rules, and
`convtap record` runs the same checks live. Each rule has a stable id and a severity, says what
must hold and why, names the passage of [protocol.md](protocol.md) it comes from, and shows a
bad and a good example (minimal excerpts: an object is a fragment of the return message or of
the request body; an array is a sequence in capture order, `{"sse": …}` a message the server
streamed, `{"POST": …, "body": …}` a request the client sent). `convtap rules ID` prints the
same text.

Severities: `error` where the contract states what must hold, so that the real server or the
real client refuses the alternative; `warning` where the evidence is split (`return-hidden`: the
client's builder sets the flag, the record observed on the wire does not) or the rule is about
sequencing, which a capture may cut short. Each rule has a failing and a passing fixture in
`captures/examples/rules/<id>/` (HAR files built by `build.py` there), and one test runs them
all.

A return is every `tool` message in a conversation request; a request whose
`parent_message_id` is a local call but that carries no `tool` message is checked with its
first message as the attempted return. Returns are paired with calls by `parent_message_id`,
else by the body's `call_id`. The rules that need the call (`return-author-name`,
`return-call-id`, `return-body-tool`, `return-parent`, `return-conversation`,
`return-duplicate`, `prepare-missing`) are skipped for an orphan, which `return-orphan` reports
instead.
"""

VERDICTS = ("Error:", "Warning:", "Info:")


def render(rules: Iterable[Rule]) -> str:
    """The whole page: the introduction, an index table, then one section per rule."""
    rules = list(rules)
    parts = [INTRO, "\n| rule | severity | what must hold |\n| --- | --- | --- |\n"]
    parts += [f"| [`{r.id}`](#{r.id}) | {r.severity} | {_cell(r.summary)} |\n" for r in rules]
    parts += [_section(r) for r in rules]
    return "".join(parts)


def _section(rule: Rule) -> str:
    return (
        f"\n## {rule.id}\n\n"
        f"**{rule.severity}**: {rule.summary}\n\n"
        f"{_explanation(rule.explanation)}\n\n"
        f"Source: {_linked(rule.seed.strip())}\n\n"
        f"Bad:\n\n```json\n{_example(rule.bad)}\n```\n\n"
        f"Good:\n\n```json\n{_example(rule.good)}\n```\n\n"
        f"Fixtures: [`captures/examples/rules/{rule.id}/`]"
        f"(../captures/examples/rules/{rule.id}/)\n"
    )


def _explanation(text: str) -> str:
    """The explanation as written, its closing verdict ("Error: ...") a paragraph of its own."""
    lines = text.strip().splitlines()
    return "\n".join(("\n" + line) if line.startswith(VERDICTS) else line for line in lines)


def _linked(text: str) -> str:
    """The source passage, its page a link (the text is the one `convtap rules ID` prints)."""
    return text.replace("docs/protocol.md", "[docs/protocol.md](protocol.md)")


def _example(text: str) -> str:
    """An example as the rule file lays it out; it is checked to be one JSON document."""
    json.loads(text)
    return text.strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> None:
    sys.stdout.write(render(registry().values()))


if __name__ == "__main__":
    main()
