"""The mock server's routes: every endpoint `convtap mock` serves, and its handler."""

from __future__ import annotations

from tornado.web import Application

from convtap.mock.app import (
    ConversationHandler,
    GoHandler,
    MockState,
    NotFound,
    PrepareHandler,
    ReceivedHandler,
    ResumeHandler,
    SentinelHandler,
    TreeHandler,
    UserSocket,
    WsUrlHandler,
)
from convtap.mock.responses_http import (
    CompactHandler,
    InputItemsHandler,
    ResponseHandler,
    ResponsesHandler,
)


def make_app(state: MockState) -> Application:
    args = {"state": state}
    api = "/backend-api"
    responses = rf"(?:/v1|{api}/codex)/responses"
    return Application(
        [
            (rf"{api}/sentinel/chat-requirements/(prepare|finalize)", SentinelHandler, args),
            (rf"{api}/f/conversation/prepare", PrepareHandler, args),
            (rf"{api}/f/conversation/resume", ResumeHandler, args),
            (rf"{api}/(?:f/)?conversation", ConversationHandler, args),
            (rf"{api}/conversation/([^/]+)", TreeHandler, args),
            (rf"{api}/celsius/ws/user", WsUrlHandler, args),
            (responses, ResponsesHandler, args),
            (rf"{responses}/compact", CompactHandler, args),
            (rf"{responses}/([^/]+)/input_items", InputItemsHandler, args),
            (rf"{responses}/([^/]+)", ResponseHandler, args),
            (r"/ws/user/([^/]+)", UserSocket, args),
            (r"/_mock/go", GoHandler, args),
            (r"/_mock/received", ReceivedHandler, args),
        ],
        default_handler_class=NotFound,
        default_handler_args=args,
        log_function=lambda handler: None,
    )
