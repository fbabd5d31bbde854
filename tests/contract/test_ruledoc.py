"""docs/rules.md is what convtap.contract.ruledoc writes from the registry now."""

from __future__ import annotations

import re
from pathlib import Path

from convtap.contract.registry import registry
from convtap.contract.ruledoc import render

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "rules.md"


def test_docs_rules_md_is_up_to_date() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(registry().values()), (
        "docs/rules.md is not what the rule registry makes now: run `make docs`"
    )


def test_every_rule_has_a_section_with_its_severity_source_and_examples() -> None:
    page = render(registry().values())
    for rule in registry().values():
        section = page.split(f"\n## {rule.id}\n", 1)[1].split("\n## ", 1)[0]
        assert section.startswith(f"\n**{rule.severity}**: {rule.summary}\n")
        assert "Source: [docs/protocol.md](protocol.md)" in section
        assert section.count("```json\n") == 2


def test_every_source_cites_a_section_of_docs_protocol_md() -> None:
    headings = set(re.findall(r"^#{2,3} (.+)$", (ROOT / "docs" / "protocol.md").read_text(), re.M))
    for rule in registry().values():
        assert rule.seed.startswith("docs/protocol.md, "), rule.id
        cited = re.findall(r'"([A-Z][^"]*)"', rule.seed.split(":", 1)[0])
        assert cited and set(cited) <= headings, (rule.id, cited)
