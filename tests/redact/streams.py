"""Streams that carry a secret, in every form the wire allows, for the property tests of
redaction by value (`tests/redact/test_stream.py`) and its long run in `make bench`.

A generator takes a `random.Random` (Hypothesis's `st.randoms()`, or a seeded one) and a secret,
and writes a session that streams "my key is SECRET ok" into one message while a second message
says "hello there" on another channel: each text cut at random places into pieces, each piece
brought by a random form (the message added with its text begun, bare frames, explicit appends,
`patch` sub-ops, `replace` of the string, the text set by an `add` of the content), the two
messages' ops interleaved in random turns, typed events and pings between, the bytes cut into
random network chunks. Responses API streams interleave an output text's deltas with a function
call's argument deltas; WebSocket mode sends the same events as frames; a turn handed off to the
user socket sends its SSE as stream items out of order, with catch-ups repeating them.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"


def _s(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


# Every kind of secret docs/guarantees.md lists: how one is made. The part that must never be
# stored is what `find_secrets` finds of it (a Bearer's scheme word, a key's name may stay).
KINDS: dict[str, Callable[[random.Random], str]] = {
    "openai": lambda r: "sk-proj-" + _s(r, ALNUM, 48),
    "anthropic": lambda r: "sk-ant-api03-" + _s(r, ALNUM, 40),
    "google": lambda r: "AIza" + _s(r, ALNUM, 35),
    "hugging-face": lambda r: "hf_" + _s(r, ALNUM, 34),
    "aws-key-id": lambda r: "AKIA" + _s(r, string.ascii_uppercase + string.digits, 16),
    "aws-secret": lambda r: "AWS_SECRET_ACCESS_KEY=" + _s(r, B64, 39) + "7",
    "github": lambda r: "ghp_" + _s(r, ALNUM, 36),
    "github-fine-grained": lambda r: "github_pat_" + _s(r, ALNUM, 22) + "_" + _s(r, ALNUM, 59),
    "gitlab": lambda r: "glpat-" + _s(r, ALNUM, 20),
    "slack": lambda r: (
        f"xoxb-{_s(r, string.digits, 11)}-{_s(r, string.digits, 12)}-" + _s(r, ALNUM, 24)
    ),
    "stripe": lambda r: "sk_live_" + _s(r, ALNUM, 30),
    "sendgrid": lambda r: "SG." + _s(r, ALNUM, 22) + "." + _s(r, ALNUM, 43),
    "pypi": lambda r: "pypi-AgEIcHlwaS5vcmc" + _s(r, ALNUM, 80),
    "square": lambda r: "sq0csp-" + _s(r, ALNUM, 43),
    "azure-storage": lambda r: "AccountKey=" + _s(r, B64, 86) + "==",
    "npm": lambda r: "//registry.npmjs.org/:_authToken=npm_" + _s(r, ALNUM, 36),
    "mailchimp": lambda r: _s(r, HEX, 32) + "-us12",
    "artifactory": lambda r: "AKC" + _s(r, ALNUM, 70),
    "telegram": lambda r: _s(r, string.digits, 9) + ":AA" + _s(r, ALNUM, 33),
    "jwt": lambda r: f"eyJ{_s(r, ALNUM, 20)}.eyJ{_s(r, ALNUM, 30)}.{_s(r, ALNUM, 20)}",
    "bearer": lambda r: "Bearer " + _s(r, ALNUM, 32),
    "basic": lambda r: "Basic " + _s(r, ALNUM, 24),
    "url-credentials": lambda r: f"https://deploy:{_s(r, ALNUM, 20)}@git.example.com/x",
    "password": lambda r: "password: " + _s(r, ALNUM, 12) + "!" + _s(r, string.digits, 4),
    "private-key": lambda r: (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + _s(r, B64, 64)
        + "\n"
        + _s(r, B64, 40)
        + "\n-----END RSA PRIVATE KEY-----"
    ),
    "openssh-key": lambda r: (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + _s(r, B64, 70)
        + "\n-----END OPENSSH PRIVATE KEY-----"
    ),
}

TEXT_PATH = "/message/content/parts/0"
HELLO = "hello there, nothing to hide here"


@dataclass
class Generated:
    """A stream, cut into network chunks; what each message's text is once decoded."""

    chunks: list[bytes]
    texts: dict[str, str]  # message id -> its text
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


def cut_into(rng: random.Random, text: str, most: int = 8) -> list[str]:
    """`text` cut at up to `most` random places (no piece empty)."""
    if len(text) < 2:
        return [text]
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, most))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def chunked(rng: random.Random, body: bytes, most: int = 12) -> list[bytes]:
    """`body` cut into network chunks at random bytes (inside UTF-8 and CRLF too)."""
    if rng.random() < 0.2:  # byte at a time, now and then, for short stretches
        size = rng.randint(1, 5)
        return [body[i : i + size] for i in range(0, len(body), size)]
    count = rng.randint(0, most)
    cuts = sorted({rng.randint(0, len(body)) for _ in range(count)})
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if b > a]


def _dumps(rng: random.Random, value: Any) -> str:
    if rng.random() < 0.5:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False)


class _Writer:
    """Deltas written as a server writes them: keys equal to the sticky record left out (often),
    bare frames where they continue the string the record names."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.record = (0, "", "add")
        self.events: list[str] = ['event: delta_encoding\ndata: "v1"\n\n']

    def delta(self, c: int, p: str, o: str, v: Any, *, bare: bool = False) -> None:
        rng = self.rng
        if bare and self.record == (c, p, o) and o == "append" and isinstance(v, str):
            body: dict[str, Any] = {"v": v}
        else:
            body = {"p": p, "o": o, "v": v, "c": c}
            for key, now in zip("cpo", self.record, strict=True):
                if body[key] == now and rng.random() < 0.5:
                    del body[key]
            if o == "patch" and "p" not in body:
                body["p"] = p
        self.record = (c, p, o)
        self.events.append(f"event: delta\ndata: {_dumps(rng, body)}\n\n")
        if rng.random() < 0.15:
            marker = {"type": "message_marker", "marker": "cot_token", "event": "first"}
            self.events.append(f"data: {_dumps(rng, marker)}\n\n")
        if rng.random() < 0.1:
            self.events.append(": ping - 2026-12-02 05:00:00.000000+00:00\n\n")


def _message(message_id: str, parts: list[str], status: str = "in_progress") -> dict[str, Any]:
    return {"id": message_id, "author": {"role": "assistant", "name": None, "metadata": {}},
            "create_time": 1.0, "content": {"content_type": "text", "parts": parts},
            "status": status, "end_turn": None, "weight": 1.0,
            "metadata": {"model_slug": "gpt-5-thinking"}, "recipient": "all",
            "channel": "final"}  # fmt: skip


def _ops(
    rng: random.Random, message_id: str, channel: int, text: str
) -> list[Callable[[_Writer], None]]:
    """The ops that bring `text` into a new message on `channel`, in order."""
    pieces = cut_into(rng, text)
    first, rest = pieces[0], pieces[1:]
    form = rng.choice(["add", "add-append", "replace", "patch", "content"])
    ops: list[Callable[[_Writer], None]] = []
    root = {"conversation_id": "conv-gen", "error": None}
    if form == "add":
        ops.append(
            lambda w: w.delta(
                channel, "", "add", {"message": _message(message_id, [first]), **root}
            )
        )
    elif form == "content":
        ops.append(lambda w: w.delta(channel, "", "add", {"message": {**_message(
            message_id, []), "content": {}}, **root}))  # fmt: skip
        ops.append(
            lambda w: w.delta(
                channel, "/message/content", "add", {"content_type": "text", "parts": [first]}
            )
        )
    else:
        ops.append(
            lambda w: w.delta(channel, "", "add", {"message": _message(message_id, [""]), **root})
        )
        if form == "add-append":
            ops.append(lambda w: w.delta(channel, TEXT_PATH, "append", first))
        elif form == "replace":
            ops.append(lambda w: w.delta(channel, TEXT_PATH, "replace", first))
        else:
            ops.append(lambda w: w.delta(channel, "", "patch", [
                {"p": TEXT_PATH, "o": "append", "v": first}]))  # fmt: skip
    for piece in rest:
        how = rng.choice(["bare", "bare", "append", "patch"])
        if how == "patch":
            ops.append(lambda w, piece=piece: w.delta(channel, "", "patch", [
                {"p": TEXT_PATH, "o": "append", "v": piece},
                {"p": "/message/metadata", "o": "append", "v": {"n": len(piece)}}]))  # fmt: skip
        else:
            ops.append(lambda w, piece=piece, how=how: w.delta(
                channel, TEXT_PATH, "append", piece, bare=how == "bare"))  # fmt: skip
    finish = rng.choice(["replace", "patch"])
    if finish == "replace":
        ops.append(
            lambda w: w.delta(channel, "/message/status", "replace", "finished_successfully")
        )
    else:
        ops.append(lambda w: w.delta(channel, "", "patch", [
            {"p": "/message/status", "o": "replace", "v": "finished_successfully"},
            {"p": "/message/end_turn", "o": "replace", "v": True}]))  # fmt: skip
    return ops


def delta_stream(rng: random.Random, secret: str, suffix: str = "") -> Generated:
    """An f/conversation answer carrying `secret` in one message, "hello there" in another
    (their ids `msg-secret` and `msg-hello`, `suffix` added)."""
    texts = {f"msg-secret{suffix}": f"my key is {secret} ok", f"msg-hello{suffix}": HELLO}
    channels = rng.sample(range(4), 2)
    queues = [_ops(rng, mid, c, text) for (mid, text), c in zip(texts.items(), channels,
                                                                  strict=True)]  # fmt: skip
    writer = _Writer(rng)
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        queue.pop(0)(writer)
    writer.events.append('data: {"type": "message_stream_complete", "conversation_id": '
                         '"conv-gen"}\n\ndata: [DONE]\n\n')  # fmt: skip
    body = "".join(writer.events).encode()
    return Generated(chunked(rng, body), texts)


def responses_events(
    rng: random.Random, secret: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """A Responses API response: an output text carrying `secret` and a function call whose
    arguments carry it too, their deltas interleaved."""
    text = f"my key is {secret} ok"
    arguments = json.dumps({"note": text, "city": "Lisboa"})
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "note",
            "arguments": arguments, "status": "completed"}  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_gen", "status": "in_progress",
                                                  "output": []}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**message, "status": "in_progress", "content": []}},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {**call, "arguments": "", "status": "in_progress"}},
    ]  # fmt: skip
    deltas = [
        [{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
          "content_index": 0, "delta": piece} for piece in cut_into(rng, text)],
        [{"type": "response.function_call_arguments.delta", "item_id": "fc_1",
          "output_index": 1, "delta": piece} for piece in cut_into(rng, arguments)],
    ]  # fmt: skip
    while any(deltas):
        events.append(rng.choice([d for d in deltas if d]).pop(0))
    events += [
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0,
         "content_index": 0, "text": text},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 1,
         "arguments": arguments},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": {"id": "resp_gen", "status": "completed",
                                                    "output": [message, call]}},
    ]  # fmt: skip
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events, {"msg_1": text, "fc_1": arguments}


def responses_stream(rng: random.Random, secret: str) -> Generated:
    events, texts = responses_events(rng, secret)
    body = "".join(f"event: {e['type']}\ndata: {_dumps(rng, e)}\n\n" for e in events).encode()
    return Generated(chunked(rng, body), texts)


def responses_frames(rng: random.Random, secret: str) -> Generated:
    """The same response over WebSocket mode: a create, then one frame per event."""
    events, texts = responses_events(rng, secret)
    create = {"type": "response.create", "model": "gpt-5.1", "input": "hi"}
    frames = [json.dumps(create), *(_dumps(rng, e) for e in events)]
    return Generated([f.encode() for f in frames], texts, {"frames": frames})


def handoff_frames(rng: random.Random, secret: str, topic: str) -> Generated:
    """A turn handed off to the user socket: its SSE as stream items (cut at event bounds),
    sent out of order now and then, a catch-up repeating the items so far once."""
    stream = delta_stream(rng, secret)
    events = [e for e in stream.body.decode().split("\n\n") if e]
    items: list[str] = []
    for event in events:
        if items and rng.random() < 0.4:
            items[-1] += event + "\n\n"
        else:
            items.append(event + "\n\n")
    made = [{"type": "message", "topic_id": topic, "offset": n + 1, "payload": {
        "type": "conversation-turn-stream", "payload": {
            "type": "stream-item", "conversation_id": "conv-gen", "turn_id": "turn-gen",
            "encoded_item": item, "stream_item_id": f"si-{n}",
            "parent_stream_item_id": f"si-{n - 1}" if n else None}}}
        for n, item in enumerate(items)]  # fmt: skip
    order = list(range(len(made)))
    for n in range(len(order) - 1):  # swap neighbours now and then (a child before its parent)
        if rng.random() < 0.25:
            order[n], order[n + 1] = order[n + 1], order[n]
    frames = [json.dumps([made[n]]) for n in order]
    if frames and rng.random() < 0.5:  # a reply whose catch-ups repeat what came so far
        at = rng.randint(1, len(frames))
        reply = {"id": 2, "reply": {"type": "subscribe", "topic_id": topic, "recovered": True,
                                    "catchups": [made[n] for n in order[:at]]}}  # fmt: skip
        frames.insert(at, json.dumps([reply]))
    done = {
        "type": "message",
        "topic_id": topic,
        "offset": len(made) + 1,
        "payload": {"type": "conversation-turn-stream", "payload": {"type": "done"}},
    }
    frames.append(json.dumps([done]))
    return Generated([f.encode() for f in frames], stream.texts, {"frames": frames})
