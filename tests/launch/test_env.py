"""`convtap run`'s environment: which API hosts a NO_PROXY sends around the recorder."""

from __future__ import annotations

import pytest
from convtap.launch.env import API_HOSTS, bypassed


@pytest.mark.parametrize(
    ("no_proxy", "around"),
    [
        ("", []),
        ("localhost,127.0.0.1,::1,.internal", []),
        ("*", list(API_HOSTS)),
        ("localhost, *", list(API_HOSTS)),
        (".openai.com", ["api.openai.com", "chat.openai.com"]),
        ("OpenAI.com:443", ["api.openai.com", "chat.openai.com"]),
        ("*.chatgpt.com", ["chatgpt.com"]),
        ("api.openai.com", ["api.openai.com"]),
        ("notopenai.com,i.com,.", []),
    ],
)
def test_a_no_proxy_entry_sends_the_hosts_it_names_around_the_proxy(
    no_proxy: str, around: list[str]
) -> None:
    assert bypassed({"NO_PROXY": no_proxy}) == around
    assert bypassed({"no_proxy": no_proxy}) == around
