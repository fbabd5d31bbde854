"""Builds the example bodies in this folder: `python captures/examples/sse/build.py`.

Each example is a turn shaped like the real wire (docs/protocol.md): a `delta_encoding` declaration,
a resume token, the input echo, the history echo on their own channels, markers, pings, streamed
text in bare continuation frames, patches, and `[DONE]`. The ids and the call are those of the
example session of docs/protocol.md.
Run it only when an example is meant to change; then regenerate the goldens (`make goldens`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONV = "6a1c3b2e-0d4f-4c1a-9a55-2f1b7c9e8d10"
SYSTEM_ID = "0b4a2d6c-3e1f-4b7a-8c9d-1e2f3a4b5c6d"
USER_ID = "7f3e9a1b-2c4d-4e6f-8a0b-1c2d3e4f5a6b"
CALL_ID = "b6d6e3a6-af6f-4a78-a649-8e3935182fcc"  # docs/protocol.md, "Local tool calls"
RETURN_ID = "b65539dc-d45f-4b37-b735-a11ac75aafed"  # docs/protocol.md, "The tool return contract"
HANDOFF_CALL_ID = "a7da448b-589d-4bf1-bc4a-e378d2629f25"  # the app's own handoff return
TURN_ID = "5d2c1b0a-9f8e-4d7c-b6a5-4f3e2d1c0b9a"


def event(data: Any, name: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {name}\n" if name else "") + f"data: {text}\n\n"


def delta(**fields: Any) -> str:
    return event(fields, "delta")


def message(
    mid: str,
    role: str,
    *,
    text: str = "",
    recipient: str = "all",
    channel: Any = None,
    status: str = "finished_successfully",
    code: bool = False,
    name: str | None = None,
    metadata: dict[str, Any] | None = None,
    end_turn: Any = None,
) -> dict[str, Any]:
    content: dict[str, Any] = (
        {"content_type": "code", "language": "json", "text": text}
        if code
        else {"content_type": "text", "parts": [text]}
    )
    return {
        "id": mid,
        "author": {"role": role, "name": name, "metadata": {}},
        "create_time": 1787848260.0,
        "update_time": None,
        "content": content,
        "status": status,
        "end_turn": end_turn,
        "weight": 1.0 if role != "system" else 0.0,
        "metadata": metadata or {},
        "recipient": recipient,
        "channel": channel,
    }


def root(msg: dict[str, Any]) -> dict[str, Any]:
    return {"message": msg, "conversation_id": CONV, "error": None}


def head(user_text: str) -> list[str]:
    user = message(USER_ID, "user", text=user_text)
    system = message(SYSTEM_ID, "system", metadata={"is_visually_hidden_from_conversation": True})
    return [
        event('"v1"', "delta_encoding"),
        event(
            {
                "type": "resume_conversation_token",
                "kind": "conduit",
                "token": "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWNvbmR1aXQtdG9rZW4.x1y2z3",
                "expires_at": None,
                "conversation_id": CONV,
            }
        ),
        event({"type": "input_message", "input_message": user, "conversation_id": CONV}),
        delta(p="", o="add", v=root(system), c=0),
        delta(v=root(user), c=1),
        ": ping - 2026-08-27 19:51:00.123456+00:00\n\n",
        event(
            {
                "type": "message_marker",
                "conversation_id": CONV,
                "message_id": USER_ID,
                "marker": "user_visible_token",
                "event": "first",
            }
        ),
    ]


def streamed(
    c: int,
    mid: str,
    pieces: list[str],
    *,
    recipient: str = "all",
    code: bool = False,
    channel: str | None = None,
    end_turn: Any = None,
) -> list[str]:
    """A message born empty, its text appended in bare frames, finished by a patch."""
    path = "/message/content/text" if code else "/message/content/parts/0"
    born = message(
        mid,
        "assistant",
        recipient=recipient,
        channel=channel,
        code=code,
        status="in_progress",
        metadata={"cot_version": "v5", "resolved_model_slug": "gpt-5-6-thinking"},
    )
    out = [delta(p="", o="add", v=root(born), c=c), delta(p=path, o="append", v=pieces[0])]
    out += [delta(v=piece) for piece in pieces[1:]]
    out.append(
        delta(
            p="",
            o="patch",
            v=[
                {"p": "/message/status", "o": "replace", "v": "finished_successfully"},
                {"p": "/message/end_turn", "o": "replace", "v": end_turn},
                {
                    "p": "/message/metadata",
                    "o": "append",
                    "v": {"finish_details": {"type": "stop"}, "is_complete": True},
                },
            ],
        )
    )
    return out


def tail() -> list[str]:
    return [
        event({"type": "message_stream_complete", "conversation_id": CONV}),
        event(
            {"type": "conversation_detail_metadata", "banner_info": None, "conversation_id": CONV}
        ),
        event("[DONE]"),
    ]


def words(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


ANSWER = "Olá! O caminho de Alefita é uma ferramenta local — diga a mensagem e eu a registro. 🌿"
ARGS = '{"message": "segundo eco do caminho"}'


def plain_answer() -> str:
    body = head("o que é o caminho de alefita?")
    body += streamed(
        2, "c0ffee00-1111-4222-8333-444455556666", words(ANSWER), channel="final", end_turn=True
    )
    body.insert(
        9,
        event({"type": "title_generation", "title": "Caminho de Alefita", "conversation_id": CONV}),
    )
    return "".join(body + tail()).replace("\n", "\r\n")  # CRLF line ends, as some proxies send


def alefita_call() -> str:
    body = head("use o alefita way com a mensagem: segundo eco do caminho")
    body += streamed(
        2,
        "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b",
        words("Vou chamar a ferramenta."),
        channel="analysis",
    )
    body += streamed(
        3, CALL_ID, words(ARGS, 5), recipient="local.alefita_way", code=True, channel="commentary"
    )
    return "".join(body + tail())


def alefita_continuation() -> str:
    tool = message(
        RETURN_ID,
        "tool",
        name="alefita_way",
        channel="commentary",
        text=json.dumps(
            {
                "call_id": CALL_ID,
                "result": {"message": "segundo eco do caminho"},
                "tool": "alefita_way",
            }
        ),
    )
    tool["content"] = {"content_type": "code", "text": tool["content"]["parts"][0]}
    body = [
        event('"v1"', "delta_encoding"),
        event({"type": "input_message", "input_message": tool, "conversation_id": CONV}),
    ]
    body += streamed(
        0,
        "1d2e3f40-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
        words("Executei a ferramenta alefita_way. Ela devolveu: segundo eco do caminho."),
        channel="final",
        end_turn=True,
    )
    return "".join(body + tail())


def handoff_ws() -> tuple[str, str]:
    """The SSE hands the turn to the WebSocket, where the handoff tool call arrives."""
    topic = f"conversation-turn-{TURN_ID}"
    sse = [
        *head("crie uma planilha com o orçamento")[:5],
        event(
            {
                "type": "stream_handoff",
                "conversation_id": CONV,
                "turn_id": TURN_ID,
                "options": [{"type": "subscribe_ws_topic", "topic_id": topic}],
            }
        ),
        event("[DONE]"),
    ]
    args = '{"prompt": "Criar uma planilha de orçamento", "reason": "Planilhas rodam no Work"}'
    items = [event('"v1"', "delta_encoding")]
    items += streamed(
        0,
        HANDOFF_CALL_ID,
        words(args, 9),
        recipient="local.handoff",
        code=True,
        channel="commentary",
    )
    items += tail()
    frames: list[Any] = [
        [
            {
                "id": 1,
                "reply": {
                    "type": "subscribe",
                    "topic_id": topic,
                    "recovered": False,
                    "last_offset": 0,
                    "catchups": [],
                },
            }
        ],
        [
            {
                "type": "message",
                "topic_id": "conversations",
                "offset": 1,
                "payload": {"type": "conversation-updated", "conversation_id": CONV},
            }
        ],
    ]

    def item(n: int) -> dict[str, Any]:
        return {
            "type": "message",
            "topic_id": topic,
            "offset": n + 1,
            "payload": {
                "type": "conversation-turn-stream",
                "payload": {
                    "type": "stream-item",
                    "conversation_id": CONV,
                    "turn_id": TURN_ID,
                    "encoded_item": items[n],
                    "stream_item_id": f"si-{n}",
                    "parent_stream_item_id": f"si-{n - 1}" if n else None,
                    "server_timestamp_ms": 1787848300000 + n,
                },
            },
        }

    order = list(range(len(items)))
    order[2], order[3] = order[3], order[2]  # an item that arrives before its parent
    for n in order:
        frames.append([item(n)])
        if n == 4:
            frames.append([item(4)])  # a duplicate
            frames.append(
                [
                    {
                        "type": "message",
                        "topic_id": topic,
                        "offset": 0,
                        "payload": {
                            "type": "conversation-turn-stream",
                            "payload": {"type": "heartbeat"},
                        },
                    }
                ]
            )
    frames.append(
        [
            {
                "type": "message",
                "topic_id": topic,
                "offset": len(items) + 1,
                "payload": {"type": "conversation-turn-stream", "payload": {"type": "done"}},
            }
        ]
    )
    lines = "".join(json.dumps(f, ensure_ascii=False) + "\n" for f in frames)
    return "".join(sse), lines


def resumed() -> tuple[str, str]:
    """A stream cut inside an event, and its resume leg starting with a bare continuation."""
    events = head("escreva um haicai")
    events += streamed(
        2,
        "f00dfeed-aaaa-4bbb-8ccc-ddddeeeeffff",
        words("Orvalho na folha —\no sol devagar desperta\nsilêncio no chão", 4),
        channel="final",
        end_turn=True,
    )
    events += tail()
    cut = 12  # events[12] is a bare {"v": ...} frame
    first = "".join(events[:cut]) + events[cut][: len(events[cut]) // 2]
    offset = sum(1 for e in events[:cut] if not e.startswith(":"))  # comments are not events
    return first, f": resumed at offset {offset}\n\n" + "".join(events[cut:])


def legacy() -> str:
    """Legacy framing: cumulative snapshots, no delta_encoding."""
    out = []
    text = ""
    mid = "1e9a8b7c-6d5e-4f3a-9b2c-1d0e9f8a7b6c"
    for piece in words("Legacy streams send the whole message every time.", 9):
        text += piece
        out.append(event(root(message(mid, "assistant", text=text, status="in_progress"))))
    out.append(event(root(message(mid, "assistant", text=text, end_turn=True))))
    out.append(
        event(
            {
                "message_id": mid,
                "is_completion": True,
                "moderation_response": {"flagged": False, "blocked": False},
            }
        )
    )
    out.append(event("[DONE]"))
    return "".join(out)


def malformed() -> str:
    """Bad input: decoding records each problem and goes on."""
    mid = "badc0de0-1234-4567-89ab-cdef01234567"
    body = [
        event('"v1"', "delta_encoding"),
        delta(p="", o="add", v=root(message(mid, "assistant", status="in_progress")), c=0),
        delta(p="/message/content/parts/0", o="append", v="kept "),
    ]
    body += [
        'event: delta\ndata: {"v": "broken\n\n',  # malformed JSON
        delta(v="text "),  # still appends
        delta(p="/message/content/parts/0/x", o="add", v=1),  # a path through a string
        delta(v="survives"),  # the sticky record is the one before the invalid delta
        delta(
            p="",
            o="patch",
            v=[{"p": "/message/status", "o": "replace", "v": "finished"}, {"o": "replace", "v": 1}],
        ),  # a sub-op without p: all or nothing
        delta(p="/message/content/parts", o="truncate", v="one"),
        event("[1, 2]"),
        delta(p="/message/status", o="replace", v="finished_successfully"),
        event("[DONE]"),
    ]
    return "".join(body)


def main() -> None:
    (HERE / "plain_answer.sse").write_bytes(plain_answer().encode())
    (HERE / "alefita_way_call.sse").write_bytes(alefita_call().encode())
    (HERE / "alefita_way_continuation.sse").write_bytes(alefita_continuation().encode())
    sse, frames = handoff_ws()
    (HERE / "handoff_ws.sse").write_bytes(sse.encode())
    (HERE / "handoff_ws.frames.jsonl").write_bytes(frames.encode())
    first, second = resumed()
    (HERE / "resume_cut.sse").write_bytes(first.encode())
    (HERE / "resume_cut.resume.sse").write_bytes(second.encode())
    (HERE / "legacy.sse").write_bytes(legacy().encode())
    (HERE / "malformed.sse").write_bytes(malformed().encode())


if __name__ == "__main__":
    main()
