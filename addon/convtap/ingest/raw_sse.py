"""A raw `.sse` body (and its sidecars) imported as a live stream is recorded: read in pieces
of `PIECE` bytes (`convtap.journal.flows`) and fed one piece at a time, so that its raw events are
stored a piece's events a row, as a live stream's are stored a network chunk's a row, and no body
is ever whole in memory.

`X.sse` is an f/conversation stream, or a Responses API stream (told apart by its first events,
as `convtap decode --protocol auto` does). It may come with `X.request.json` (its request body)
and, for f/conversation, `X.resume.sse`, `X.resume2.sse`, ... (its resume legs, which name the
conversation the first leg streamed). Each
leg is read twice: once for its id (a digest of its content, as any imported flow's) and to see
that it holds events, once to feed it.
"""

from __future__ import annotations

import errno
import json
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from convtap.journal.events import (
    BodyChunk,
    RecorderEvent,
    RequestSeen,
    ResponseEnded,
    ResponseStarted,
)
from convtap.journal.flows import PIECE
from convtap.vocab import Source
from convtap.wire.responses import looks_like_responses
from convtap.wire.sse import SSEParser
from convtap.wire.turn import TurnDecoder

SSE_URL = "https://chatgpt.com/backend-api/f/conversation"
RESPONSES_URL = "https://api.openai.com/v1/responses"  # a Responses API stream's
RESUME_URL = "https://chatgpt.com/backend-api/f/conversation/resume"
SSE_HEADERS = (("content-type", "text/event-stream"),)


class NoEvents(Exception):
    """A leg with no server-sent event in it."""


@dataclass(frozen=True)
class Leg:
    """One body of a raw stream: its file, the request it answers, when (the file's time)."""

    path: Path
    url: str
    request: bytes
    at: float

    def pieces(self) -> Iterator[bytes]:
        with self.path.open("rb") as handle:
            while piece := handle.read(PIECE):
                yield piece

    def digest_parts(self) -> Iterator[bytes]:
        """What its id is a digest of (`readers.content_id`'s parts, for a flow so made); raises
        `NoEvents` when the body holds none."""
        yield from (part.encode() + b"\0" for part in ("POST", self.url, repr(self.at)))
        yield self.request + b"\0"
        parser, found = SSEParser(), False
        for piece in self.pieces():
            found = found or bool(parser.feed(piece))
            yield piece
        if not found:
            raise NoEvents(f"{self.path}: no server-sent events in it (nothing to import)")

    def events(self, flow_id: str) -> Iterator[RecorderEvent]:
        """The recorder events of the leg, its body a piece at a time."""
        size = self.path.stat().st_size
        where = urlsplit(self.url)
        yield RequestSeen(
            flow_id=flow_id, method="POST", url=self.url, host=where.hostname or "",
            path=where.path,
            headers=(("content-type", "application/json"),
                     ("content-length", str(len(self.request)))),
            body=self.request, at=self.at, source=Source.IMPORT,
        )  # fmt: skip
        headers = (*SSE_HEADERS, ("content-length", str(size)))
        yield ResponseStarted(flow_id, 200, headers)
        for piece in self.pieces():
            yield BodyChunk(flow_id, piece, self.at)
        yield ResponseEnded(flow_id, 200, headers, None, "complete", self.at)


def sse_legs(path: Path) -> list[Leg]:
    """The legs of a raw stream: the body, then its resume legs."""
    started = path.stat().st_mtime
    stem = path.name.removesuffix(".sse")
    sidecar = path.with_name(stem + ".request.json")
    with _regular(path).open("rb") as handle:
        responses = looks_like_responses(handle.read(PIECE))
    url = RESPONSES_URL if responses else SSE_URL
    request = _regular(sidecar).read_bytes() if sidecar.exists() else b""
    first = Leg(path, url, request, started)
    resumes = [_regular(leg) for leg in sorted(path.parent.glob(stem + ".resume*.sse"))]
    if responses or not resumes:  # resume legs are f/conversation's
        return [first]
    turn = TurnDecoder()
    for piece in first.pieces():
        turn.feed(piece)
    turn.end_leg()
    turn.close()
    request = json.dumps({"conversation_id": turn.summary().conversation_id}).encode()
    return [
        first,
        *(Leg(leg, RESUME_URL, request, started + n) for n, leg in enumerate(resumes, 1)),
    ]


def _regular(path: Path) -> Path:
    """`path`, when it is a file to read (a FIFO would be waited on, a device read forever)."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a folder: said when it is read
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket)", str(path))
    return path
