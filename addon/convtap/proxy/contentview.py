"""The `convtap` content view: mitmproxy shows an f/conversation or Responses API body, or a
frame of the user WebSocket, decoded (messages, tool calls, decode errors) instead of raw
`data: {"v": ...}` lines, in mitmweb, the console and mitmdump's flow detail. The decoder and the
text are those of `convtap decode`.

mitmproxy 11 and 12 have two content view APIs (docs/architecture.md, "The content view"): `View`
subclasses with `__call__` on 11, `Contentview` classes with `prettify` on 12. Both are made here
from one renderer, and `register` / `unregister` pick the one the running mitmproxy has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mitmproxy import contentviews, http

from convtap.ingest.rendering import decoded_text, socket_frame_text
from convtap.wire.bounded import Bounded
from convtap.wire.jsonvalue import escape_lone_surrogates
from convtap.wire.session import Endpoint, endpoint_kind
from convtap.wire.turn import TurnDecoder, message_text, tool_call
from convtap.wire.wsturn import TURN_TOPIC_PREFIX, TurnTopicAssembler

NAME = "convtap"
TURNS = 8  # turn topics whose decoding is kept between frames, for showing the next frame
MAX_TURN = 16 << 20  # characters of a turn kept to show it whole in the frame that ends it
FRAME_LINES, LINE = 40, 240  # a frame's own SSE text shown, in lines and characters
PRIORITY = 3.0  # above mitmproxy's own JSON and text views, for the flows it knows
DECODED = (Endpoint.CONVERSATION, Endpoint.RESUME, Endpoint.RESPONSES)


def applies(flow: Any, http_message: Any = None, websocket_message: Any = None) -> bool:
    """A body convtap decodes: the answer to a conversation, resume or Responses request, or a
    user socket's frame on a turn topic. Requests keep mitmproxy's own JSON view."""
    if not isinstance(flow, http.HTTPFlow):
        return False
    kind = endpoint_kind(flow.request.method, flow.request.path)
    if websocket_message is not None:
        if kind == Endpoint.RESPONSES_SOCKET:  # every frame of WebSocket mode
            return True
        return (
            kind == Endpoint.WEBSOCKET and TURN_TOPIC_PREFIX.encode() in websocket_message.content
        )
    return kind in DECODED and http_message is not None and http_message is flow.response


def render(data: bytes, flow: Any = None, websocket_message: Any = None) -> str:
    """The view's text; a lone surrogate the stream escaped (`\\ud800`, which JSON allows)
    stays escaped, since mitmproxy writes the text as UTF-8 (its dumper failed on it)."""
    if websocket_message is None:
        return escape_lone_surrogates(decoded_text(data))
    request = getattr(flow, "request", None)
    if (
        request is not None
        and endpoint_kind(request.method, request.path) == Endpoint.RESPONSES_SOCKET
    ):
        return escape_lone_surrogates(socket_frame_text(data))
    return escape_lone_surrogates(_frame(data, flow, websocket_message))


@dataclass
class _Turn:
    """A turn topic of one socket decoded up to a frame, kept so that showing its frames one
    after the other (mitmweb shows them all at once) costs each frame only its own items."""

    assembler: TurnTopicAssembler
    decoder: TurnDecoder = field(default_factory=TurnDecoder)
    sse: list[str] = field(default_factory=list)
    size: int = 0
    upto: int = 0  # the socket's frames fed: messages[:upto]


_TURNS: Bounded[tuple[str, str], _Turn] = Bounded(TURNS)


def _index(frames: list[Any], message: Any, guess: int) -> int | None:
    """Where `message` is among the socket's frames: mostly `guess`, the frame after the one
    shown last, so that showing every frame in order stays linear."""
    if guess < len(frames) and frames[guess] is message:
        return guess
    return next((n for n, m in enumerate(frames) if m is message), None)


def _turn(flow: Any, topic: str, frames: list[Any], index: int) -> _Turn:
    key = (flow.id, topic)
    turn = _TURNS.get(key)
    if turn is None or turn.upto > index + 1:  # an earlier frame (or mitmproxy dropped some)
        turn = _TURNS[key] = _Turn(TurnTopicAssembler(topic))
    for message in frames[turn.upto : index + 1]:
        text = turn.assembler.feed(message.content)
        if text:
            turn.decoder.feed(text.encode())
            turn.size += len(text)
            if turn.size <= MAX_TURN:
                turn.sse.append(text)
    turn.upto = index + 1
    return turn


def _frame(data: bytes, flow: Any, message: Any) -> str:
    """A turn topic's frame: its own stream items, then where the turn stands after it; the
    frame that ends the turn shows the whole turn decoded."""
    alone = TurnTopicAssembler()
    text = alone.feed(data) + alone.close()
    frames = getattr(getattr(flow, "websocket", None), "messages", None) or []
    known = _TURNS.get((getattr(flow, "id", ""), alone.topic_id or ""))
    index = _index(frames, message, known.upto if known else 0)
    head = f"WebSocket frame {index if index is not None else '?'} · turn topic "
    lines = [head + (alone.topic_id or "-")]
    lines += [f"   error: {e}" for e in alone.errors]
    items = text.splitlines()
    lines += [f"   {line[:LINE]}" for line in items[:FRAME_LINES]]
    if len(items) > FRAME_LINES:
        lines.append(f"   … {len(items) - FRAME_LINES} more line(s)")
    if alone.topic_id is None or index is None:
        return "\n".join(lines) + "\n"
    turn = _turn(flow, alone.topic_id, frames, index)
    if turn.assembler.done and alone.done and turn.size <= MAX_TURN:
        lines += ["", "the turn, ended in this frame:", decoded_text("".join(turn.sse).encode())]
        return "\n".join(lines)
    d = turn.decoder.summary()
    lines += ["", f"the turn so far: {d.event_count} events · {len(d.messages)} message(s)"]
    for msg in d.messages:
        author = (msg.get("author") or {}).get("role", "?")
        size = len(message_text(msg))
        lines.append(f"   ── {author} → {msg.get('recipient') or 'all'} · {msg.get('status')}"
                     f" · {size} chars · {msg['id']}")  # fmt: skip
        call = tool_call(msg)
        if call is not None:
            lines.append(f"      ⚙ {call.kind} tool call: {call.tool}")
    return "\n".join(lines) + "\n"


if hasattr(contentviews, "Contentview"):  # mitmproxy 12

    class ConvtapView(contentviews.Contentview):  # type: ignore[misc,name-defined,unused-ignore]
        name = NAME
        syntax_highlight = "none"

        def prettify(self, data: bytes, metadata: Any) -> str:
            return render(data, metadata.flow, metadata.websocket_message)

        def render_priority(self, data: bytes, metadata: Any) -> float:
            wanted = applies(metadata.flow, metadata.http_message, metadata.websocket_message)
            return PRIORITY if wanted else -1

    def register() -> None:
        contentviews.add(ConvtapView)  # type: ignore[arg-type,unused-ignore]

    def unregister() -> None:
        pass  # 12 replaces a view of the same name when the script is loaded again

else:  # mitmproxy 11
    from mitmproxy.contentviews.base import View, format_text

    class LegacyConvtapView(View):
        name = NAME

        def __call__(self, data: bytes, **metadata: Any) -> Any:
            text = render(data, metadata.get("flow"), metadata.get("websocket_message"))
            return "convtap: decoded", format_text(text)

        def render_priority(self, data: bytes, **metadata: Any) -> float:
            get = metadata.get
            wanted = applies(get("flow"), get("http_message"), get("websocket_message"))
            return PRIORITY if wanted else 0

    _VIEW = LegacyConvtapView()
    # addons holding the view (a reloaded script loads the new one before the old is done)
    _users = 0

    def register() -> None:
        global _users
        _users += 1
        if _VIEW not in contentviews.views:
            contentviews.add(_VIEW)

    def unregister() -> None:
        global _users
        _users = max(0, _users - 1)
        if _users == 0 and _VIEW in contentviews.views:
            contentviews.remove(_VIEW)
