"""JSON escapes decoded, with where each character came from: a secret written `\\u0073k-…` or
`https:\\/\\/user:pass@…`, or one inside JSON text carried in a JSON string
(`{\\"password\\": \\"…\\"}`), is found in the decoded text and cut from the text as it came."""

from __future__ import annotations

import bisect
import re
from array import array

# Only the escapes that can hide a secret or a key: `\\n`, `\\t`, ... are kept as they are (no
# secret holds one), so that text full of line ends is not taken apart.
_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/]))')


class Decoded:
    """Text with its `\\uXXXX`, `\\/`, `\\"` and `\\\\` escapes decoded."""

    __slots__ = ("_at", "_ends", "_starts", "text")

    def __init__(self, text: str) -> None:
        out: list[str] = []
        self._at = array("q")  # where each escape's character is in the decoded text
        self._starts, self._ends = array("q"), array("q")  # where the escape was in the text
        cursor = size = 0
        for match in _ESCAPE.finditer(text):
            code, char = match.groups()
            plain = text[cursor : match.start()]
            out += [plain, chr(int(code, 16)) if code is not None else char]
            size += len(plain)
            self._at.append(size)
            self._starts.append(match.start())
            self._ends.append(match.end())
            size += 1
            cursor = match.end()
        out.append(text[cursor:])
        self.text = "".join(out)

    def position(self, index: int) -> int:
        """Where the decoded text's character at `index` (or its end) starts in the text."""
        k = bisect.bisect_right(self._at, index) - 1
        if k < 0:
            return index
        if index == self._at[k]:
            return self._starts[k]
        return self._ends[k] + index - self._at[k] - 1
