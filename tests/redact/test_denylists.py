"""convtap's copy of detect-secrets' token-shaped detectors is theirs, pattern for pattern and
flag for flag: an upgrade of detect-secrets that changes a format fails here."""

from __future__ import annotations

import importlib

import pytest
from convtap.redact.denylists import DENYLISTS, Denylist

MODULES = {"AWSKeyDetector": "aws", "AzureStorageKeyDetector": "azure_storage_key",
           "GitHubTokenDetector": "github_token", "GitLabTokenDetector": "gitlab_token",
           "NpmDetector": "npm", "OpenAIDetector": "openai", "PypiTokenDetector": "pypi_token",
           "SendGridDetector": "sendgrid", "SlackDetector": "slack",
           "SquareOAuthDetector": "square_oauth"}  # fmt: skip


@pytest.mark.parametrize("copied", DENYLISTS, ids=lambda d: d.name)
def test_each_denylist_is_the_detectors_own(copied: Denylist) -> None:
    module = importlib.import_module(f"detect_secrets.plugins.{MODULES[copied.name]}")
    theirs = getattr(module, copied.name).denylist
    assert [(p.pattern, p.flags) for p in copied.denylist] == [(p.pattern, p.flags) for p in theirs]


def test_every_detector_patterns_takes_is_copied() -> None:
    assert sorted(d.name for d in DENYLISTS) == sorted(MODULES)
