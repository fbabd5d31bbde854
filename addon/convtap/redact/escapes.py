"""JSON escapes decoded, with where each character came from: a secret written `\\u0073k-…` or
`https:\\/\\/user:pass@…`, or one inside JSON text carried in a JSON string
(`{\\"password\\": \\"…\\"}`), is found in the decoded text and cut from the text as it came."""

from __future__ import annotations

import bisect
import re

_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))", re.S)
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class Decoded:
    """Text with its JSON escapes decoded (any other backslash kept as it is)."""

    __slots__ = ("_at", "_spans", "text")

    def __init__(self, text: str) -> None:
        out: list[str] = []
        self._at: list[int] = []  # where each escape's character is in the decoded text
        self._spans: list[tuple[int, int]] = []  # and where the escape was in the text
        cursor = size = 0
        for match in _ESCAPE.finditer(text):
            code, char = match.groups()
            if code is None and char not in _SIMPLE:
                continue  # no escape: kept as it is
            plain = text[cursor : match.start()]
            out += [plain, chr(int(code, 16)) if code is not None else _SIMPLE[char]]
            size += len(plain)
            self._at.append(size)
            self._spans.append(match.span())
            size += 1
            cursor = match.end()
        out.append(text[cursor:])
        self.text = "".join(out)

    def position(self, index: int) -> int:
        """Where the decoded text's character at `index` (or its end) starts in the text."""
        k = bisect.bisect_right(self._at, index) - 1
        if k < 0:
            return index
        start, end = self._spans[k]
        return start if index == self._at[k] else end + index - self._at[k] - 1
