"""detect-secrets' token-shaped detectors (1.5.0), as the regular expressions they hold: what
`patterns` takes from them, without importing the package (its `__init__` loads its scanner,
its filters and `requests`: 0.15 s of CPU at every start of `convtap decode`).

Each name is the detector's; its `denylist` is the detector's, pattern for pattern, flag for
flag. tests/redact/test_denylists.py compares them with the installed detect-secrets, so an
upgrade that changes a format fails there and is copied here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Denylist:
    """The regular expressions of one of detect-secrets' detectors, in its order."""

    name: str
    denylist: tuple[re.Pattern[str], ...]


AWSKeyDetector = Denylist(
    "AWSKeyDetector",
    (
        re.compile("(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"),
        re.compile(
            "aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?"
            "[\\'\\\"]([0-9a-zA-Z/+]{40})[\\'\\\"]",
            re.IGNORECASE,
        ),
    ),
)

AzureStorageKeyDetector = Denylist(
    "AzureStorageKeyDetector", (re.compile("AccountKey=[a-zA-Z0-9+\\/=]{88}"),)
)

GitHubTokenDetector = Denylist(
    "GitHubTokenDetector", (re.compile("(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}"),)
)

GitLabTokenDetector = Denylist(
    "GitLabTokenDetector",
    (
        re.compile("(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
        re.compile("GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
        re.compile("glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)"),
        re.compile("glimt-[A-Za-z0-9_\\-]{25}(?!\\w)"),
        re.compile("glptt-[A-Za-z0-9_\\-]{40}(?!\\w)"),
        re.compile("glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)"),
        re.compile("gloas-[A-Za-z0-9_\\-]{64}(?!\\w)"),
    ),
)

NpmDetector = Denylist(
    "NpmDetector", (re.compile("\\/\\/.+\\/:_authToken=\\s*((npm_.+)|([A-Fa-f0-9-]{36})).*"),)
)

OpenAIDetector = Denylist(
    "OpenAIDetector", (re.compile("sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),)
)

PypiTokenDetector = Denylist(
    "PypiTokenDetector",
    (
        re.compile("pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}"),
        re.compile("pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}"),
    ),
)

SendGridDetector = Denylist(
    "SendGridDetector", (re.compile("SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}"),)
)

SlackDetector = Denylist(
    "SlackDetector",
    (
        re.compile("xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+", re.IGNORECASE),
        re.compile(
            "https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+",
            re.IGNORECASE | re.VERBOSE,
        ),
    ),
)

SquareOAuthDetector = Denylist(
    "SquareOAuthDetector", (re.compile("sq0csp-[0-9A-Za-z\\\\\\-_]{43}"),)
)

DENYLISTS = (
    AWSKeyDetector,
    AzureStorageKeyDetector,
    GitHubTokenDetector,
    GitLabTokenDetector,
    NpmDetector,
    OpenAIDetector,
    PypiTokenDetector,
    SendGridDetector,
    SlackDetector,
    SquareOAuthDetector,
)
