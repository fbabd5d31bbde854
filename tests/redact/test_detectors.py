"""detect-secrets' detectors are loaded only when text holds one of their hints, and each one
convtap names is there, with the patterns it takes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from convtap.redact.patterns import VALUE_PATTERNS, Detector, find_secrets


def test_every_detector_named_is_in_detect_secrets_with_its_patterns() -> None:
    detectors = [p for p in VALUE_PATTERNS if isinstance(p.regex, Detector)]
    assert len(detectors) == 10
    for pattern in detectors:
        assert pattern.regexes and all(hasattr(r, "finditer") for r in pattern.regexes)
    (aws,) = [p for p in detectors if p.name == "aws"]
    assert len(aws.regexes) == 1  # the key id only (the other is the assignment's)


@pytest.mark.process
def test_detect_secrets_is_loaded_only_for_text_with_a_hint() -> None:
    script = (
        "import sys\n"
        "from convtap.redact.patterns import find_secrets, hints\n"
        "hints('plain words'); find_secrets('plain words, sk- nothing')\n"
        "assert 'detect_secrets' not in sys.modules, 'loaded for clean text'\n"
        "assert find_secrets('a ghp_' + 'A' * 36 + ' b')\n"
        "assert 'detect_secrets' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_detector_pattern_still_finds_its_token() -> None:
    token = "ghp_" + "a1B2" * 9
    assert [secret for _, _, secret in find_secrets(f"token {token} here")] == [token]
