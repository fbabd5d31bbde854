"""The repository documents itself: nothing in it points at notes outside it, and every relative
link in README.md and docs/ leads to a file (and a heading) that exists."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Notes the team keeps outside the repository, by the names the code once cited them with. The
# test module `tests/seeds.py` (imported as `tests.seeds`) is ours, and is not one of them.
# The notes' file names are upper case (our docs/protocol.md is not one of them); the seeds are
# matched in any case.
OUTSIDE = re.compile(
    r"(?-i:PROTOCOL\.md|DESIGN\.md|STYLE\.md)|\.\./shared|\bshared/|mitmproxy-notes"
    r"|\bseeds?[ _-]?(?:000|003|004)\b|(?<!tests\.)(?<!tests/)\bseeds\b",
    re.IGNORECASE,
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def repository_files() -> list[Path]:
    """Every file git tracks, and the untracked ones it does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return [ROOT / n.decode() for n in names if n and (ROOT / n.decode()).is_file()]


@pytest.mark.process
def test_nothing_refers_to_notes_outside_the_repository() -> None:
    hits = []
    for path in repository_files():
        if path == Path(__file__).resolve():
            continue  # the patterns themselves
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), 1):
            for match in OUTSIDE.finditer(line):
                where = f"{path.relative_to(ROOT)}:{number}"
                hits.append(f"{where}: {match.group(0)!r}: {line.strip()[:120]}")
    assert not hits, (
        "cite docs/ (protocol.md, architecture.md, rules.md) instead of notes outside the "
        "repository:\n" + "\n".join(hits)
    )


def slug(heading: str) -> str:
    """The anchor GitHub makes of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: Counter[str] = Counter()
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return found


def test_every_relative_link_in_the_docs_points_to_a_file_that_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            name, _, anchor = target.partition("#")
            linked = (page.parent / name).resolve() if name else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_docs_pages_exist() -> None:
    for name in ("protocol.md", "architecture.md", "rules.md"):
        assert (ROOT / "docs" / name).is_file(), name
