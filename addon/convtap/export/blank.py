"""`convtap export --shape-only`: a capture's structure without its words (pure).

Every natural-language string is replaced by a placeholder of the same length (in UTF-16 code
units, as the protocol counts): letters become `x` (`xx` outside the BMP), digits `0`, every
other character (whitespace, punctuation, symbols, emoji) stays. The structure, ids and
enum-like values stay, so that the export decodes to the same events, audits to the same
findings and diffs without a breaking change.

Kept:
- object keys (they are the structure), numbers, booleans and null;
- the value of a key that names an id or an enumeration (its strings; an object inside it is
  shaped by its own keys): `id`, any key ending in `_id`, `_ids`, `_type`, `_slug` or `_version`,
  and `KEEP_KEYS` (`type`, `kind`, `role`, `name`, `recipient`, `channel`, `status`, `content_type`,
  `language`, `tool`, `model`, `marker`, `event`, the delta's `p` and `o`, `finish_details`, a
  signature's `required`, the enumerations of the Responses API's `Tool` union, ...);
- strings that are ids by their look (a UUID, `fc_…`, `call_…`, `resp_…` with a digit in it, a
  long hex string) and redaction placeholders `<redacted:…>` (also inside replaced text);
- event names, `[DONE]`, the `delta_encoding` value, SSE comments;
- an API error's `code` (`error.code`, a snake_case identifier such as `replay_miss`), and the
  words "replay miss" that begin an f/conversation error's `detail` (`convtap mock --replay`'s).

Replaced: every other string: message `content.parts`, titles, user, system and assistant text,
tool descriptions, error messages. A tool call's arguments and a tool's result are JSON text
(`content.text` of code, or any `content.text` that parses as JSON; a Responses call's
`arguments` and an output's `output`): there only string values are replaced, and only those
under `id`, `*_id`, `*_ids` and `tool` are kept (inside tool data a `name` or a `status` is the
user's); outside strings only JSON's own `true`, `false`, `null` and numbers stay. A `\\uXXXX`
escape in a replaced string becomes `\\u0078` (x), whatever it stood for.

Text streams in pieces (docs/protocol.md, "Delta encoding v1", rule 2: a frame without `p` appends
to the last path), so each piece is shaped on its own: plain text character by character, JSON text
by `JsonTextShaper`, which carries its state (in a string or not, key or value, which key, an
escape) from piece to piece, so that any split shapes like the whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from convtap.redact.patterns import PLACEHOLDER_PREFIX
from convtap.vocab import REPLAY_MISS
from convtap.wire.jsonvalue import JSON, MAX_DEPTH, loads_or_none

KEEP_KEYS = frozenset(
    {
        # what a message, an item or an event is
        "id", "type", "kind", "object", "role", "name", "recipient", "channel", "status",
        "content_type", "language", "tool", "model", "execution", "action", "encoding",
        "marker", "event", "finish_details", "error_code",
        # delta encoding v1: ops and paths (docs/protocol.md, "Delta encoding v1", rule 2)
        "o", "p",
        # request enumerations, and the params a signature requires (`call-arguments`)
        "client_prepare_state", "supported_encodings", "required",
        # the enumerations of the Responses API's `Tool` union (`responses-tools-valid`)
        "allowed_callers", "background", "environment", "input_fidelity", "media_type",
        "memory_limit", "moderation", "output_format", "quality", "ranker", "require_approval",
        "search_content_types", "search_context_size", "syntax", "tool_choice",
    }
)  # fmt: skip
KEEP_SUFFIXES = ("_id", "_ids", "_type", "_slug", "_version")
TOOL_DATA_KEYS = frozenset({"id", "tool"})  # kept inside a call's arguments and a tool's result
TOOL_DATA_SUFFIXES = ("_id", "_ids")
TOOL_TEXT_KEYS = frozenset({"arguments", "output"})  # Responses: JSON text of a call, a result

_PLACEHOLDER = re.compile(re.escape(PLACEHOLDER_PREFIX) + r"[0-9a-f]{12}>")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ID = re.compile(  # never only letters, nor only digits (a phone or card number is the user's)
    rf"(?:conversation-turn-)?{_UUID}|(?=[0-9]*[a-fA-F])(?=[a-fA-F]*[0-9])[0-9a-fA-F]{{16,}}"
    r"|(?:fc|call|resp|msg|tsc|ctc|rs|ws|item|file|conv|req|run|step)_"
    r"(?=[A-Za-z]*[0-9])[A-Za-z0-9]{6,}"
)
_LETTER = re.compile(r"[^\W\d_]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_DIGIT = re.compile(r"\d")
_STRING_RUN = re.compile(r'[^"\\]+')
_LITERALS = ("true", "false", "null")


def keeps(key: str | None) -> bool:
    """A key whose value is an id or an enumeration: kept whole."""
    return key is not None and (key in KEEP_KEYS or key.endswith(KEEP_SUFFIXES))


def keeps_in_tool_data(key: str | None) -> bool:
    """Inside a call's arguments or a tool's result only ids and the return's `tool` are kept."""
    return key is not None and (key in TOOL_DATA_KEYS or key.endswith(TOOL_DATA_SUFFIXES))


def shape_chars(text: str) -> str:
    """Letters x, digits 0, everything else as it is, the same length in UTF-16 code units (as
    the protocol counts, rule 4 `truncate`): a letter outside the BMP becomes xx."""
    if not text.isascii() and _ASTRAL.search(text):
        text = _ASTRAL.sub(_astral, text)
    return _DIGIT.sub("0", _LETTER.sub("x", text))


def _astral(match: re.Match[str]) -> str:
    char = match.group()
    return "xx" if _LETTER.match(char) else "00" if _DIGIT.match(char) else char


def shape_text(text: str) -> str:
    """Plain text (a whole string or one streamed piece of it); placeholders stay."""
    if PLACEHOLDER_PREFIX not in text:
        return shape_chars(text)
    out, start = [], 0
    for match in _PLACEHOLDER.finditer(text):
        out += [shape_chars(text[start : match.start()]), match.group()]
        start = match.end()
    out.append(shape_chars(text[start:]))
    return "".join(out)


def shape_string(text: str) -> str:
    """A whole string value: an id or a placeholder stays, anything else is text."""
    if _ID.fullmatch(text) or _PLACEHOLDER.fullmatch(text):
        return text
    return shape_text(text)


def shape_value(value: JSON) -> JSON:
    """A JSON value with its words replaced, by the keep rules."""
    if isinstance(value, dict):
        return shape_object(value, code=False)
    if isinstance(value, list):
        return [shape_value(item) for item in value]
    if isinstance(value, str):
        return shape_string(value)
    return value


def kept(value: JSON) -> JSON:
    """The value of a kept key: its scalars stay, an object in it is shaped by its own keys."""
    if isinstance(value, dict):
        return shape_object(value, code=False)
    if isinstance(value, list):
        return [kept(item) for item in value]
    return value


def shape_json_text(text: str) -> str:
    """Whole JSON text of tool data (arguments, a result), as `JsonTextShaper` shapes it."""
    return JsonTextShaper().feed(text)


def dump(value: JSON) -> str:
    """Shaped JSON as text: ASCII, so that an ASCII capture stays ASCII."""
    return json.dumps(value)


def shape_object(obj: dict[str, JSON], *, code: bool) -> dict[str, JSON]:
    code = code or obj.get("content_type") == "code"
    out: dict[str, JSON] = {}
    for key, item in obj.items():
        if keeps(key):
            out[key] = kept(item)
        elif isinstance(item, str) and _is_tool_text(key, item, code):
            out[key] = shape_json_text(item)
        elif key == "arguments":  # a client call's arguments as an object (tool_search_call)
            out[key] = _shape_tool_data(item)
        elif key == "error" and isinstance(item, dict):  # an API error: its code is an enum
            out[key] = _error(item)
        elif key == "detail" and isinstance(item, str) and item.startswith(REPLAY_MISS):
            out[key] = REPLAY_MISS + shape_text(item[len(REPLAY_MISS) :])  # what the audit reads
        else:
            out[key] = shape_value(item)
    return out


def _error(error: dict[str, JSON]) -> dict[str, JSON]:
    """An API error's object (`{"message", "type", "param", "code"}`), its words replaced but
    its `code` (`replay_miss`, `previous_response_not_found`: what the audit reads)."""
    shaped = shape_object(error, code=False)
    if isinstance(code := error.get("code"), str) and _ERROR_CODE.fullmatch(code):
        shaped["code"] = code
    return shaped


_ERROR_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _is_tool_text(key: str, text: str, code: bool) -> bool:
    if key in TOOL_TEXT_KEYS:
        return True
    return key == "text" and (code or is_json_container(text))


def is_json_container(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[") and isinstance(loads_or_none(text), dict | list)


def _shape_tool_data(value: JSON, key: str | None = None, *, keep: bool = False) -> JSON:
    keep = keep or keeps_in_tool_data(key)
    if isinstance(value, dict):
        return {k: _shape_tool_data(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape_tool_data(item, keep=keep) for item in value]
    return shape_text(value) if isinstance(value, str) and not keep else value


# -- JSON text in pieces -------------------------------------------------------------------------


@dataclass(slots=True)
class _Frame:
    is_object: bool
    kept: bool  # under a kept key: every string inside stays
    expect_key: bool = False


class JsonTextShaper:
    """Pieces of one JSON text in (a call's arguments as they stream), each shaped at once, to
    the same length. Keys stay; a string value stays when its key is kept, else is shaped.
    Outside strings (JSON, or code that is not JSON) only the letters of `true`, `false`, `null`
    and of a number's exponent stay."""

    def __init__(self, keep: Callable[[str | None], bool] = keeps_in_tool_data) -> None:
        self._keep = keep
        self._stack: list[_Frame] = []
        self._deeper = 0  # containers past MAX_DEPTH, not kept on the stack
        self._string: str | None = None  # in a string: "key", "keep" or "shape"
        self._escape = 0  # -1 after a backslash; 1-4: hex digits of a \uXXXX still to come
        self._key: list[str] = []
        self._key_size = 0
        self._last_key: str | None = None
        self._run = ""  # letters in a row outside strings
        self._before_run = ""  # the character before them

    def feed(self, piece: str) -> str:
        out: list[str] = []
        i, end = 0, len(piece)
        while i < end:
            if self._string is None:
                out.append(self._outside(piece[i]))
                i += 1
            else:
                i = self._inside(piece, i, out)
        return "".join(out)

    def _inside(self, piece: str, i: int, out: list[str]) -> int:
        mode, ch = self._string, piece[i]
        if self._escape == -1:  # \n, \", \\, ... kept; \u starts four hex digits
            self._escape = 4 if ch == "u" else 0
            self._take(ch, out)
        elif self._escape > 0:
            self._take("0078"[4 - self._escape] if mode == "shape" else ch, out)
            self._escape -= 1
        elif ch == "\\":
            self._escape = -1
            self._take(ch, out)
        elif ch == '"':
            if mode == "key":
                self._last_key = "".join(self._key)
            self._string = None
            out.append(ch)
        else:
            match = _STRING_RUN.match(piece, i)
            assert match is not None  # ch is neither a quote nor a backslash
            run = match.group()
            self._take(shape_chars(run) if mode == "shape" else run, out)
            return match.end()
        return i + 1

    def _take(self, text: str, out: list[str]) -> None:
        out.append(text)
        if self._string == "key" and self._key_size < 256:
            self._key.append(text)
            self._key_size += len(text)

    def _outside(self, ch: str) -> str:
        if _LETTER.match(ch):
            self._run = (self._run + ch)[:8]
            exponent = self._run in ("e", "E") and (
                self._before_run.isdigit() or self._before_run == "."
            )
            literal = any(word.startswith(self._run) for word in _LITERALS)
            return ch if literal or exponent else shape_chars(ch)
        self._run, self._before_run = "", ch
        top = self._stack[-1] if self._stack else None
        if ch == '"':
            if top is not None and top.is_object and top.expect_key and not self._deeper:
                self._string, self._key, self._key_size = "key", [], 0
            else:
                self._string = "keep" if self._value_kept(top) else "shape"
        elif ch in "{[":
            if len(self._stack) >= MAX_DEPTH:
                self._deeper += 1
            elif ch == "{":  # an object is shaped by its own keys, even under a kept one
                self._stack.append(_Frame(is_object=True, kept=False, expect_key=True))
            else:
                self._stack.append(_Frame(is_object=False, kept=self._value_kept(top)))
        elif ch in "}]":
            if self._deeper:
                self._deeper -= 1
            elif self._stack:
                self._stack.pop()
        elif top is not None and top.is_object and ch in ":,":
            top.expect_key = ch == ","
        return ch

    def _value_kept(self, top: _Frame | None) -> bool:
        if top is None:
            return False
        return top.kept or (top.is_object and self._keep(self._last_key))
