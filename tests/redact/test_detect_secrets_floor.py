"""detect-secrets' plugins as a floor: for each, text it flags (checked here, so that an example
that stopped being a secret to it fails), and convtap's redaction must leave none of what it
flags. The plugins convtap does not follow are listed with the reason; a plugin added to
detect-secrets fails the test until it is in one list or the other."""

from __future__ import annotations

import pytest
from convtap.redact.redactor import Redactor
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

HEX64 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
AZURE = "lJzRc1YdHaAA2KCNJJ1tkYwF/+mKK6Ygw0NGe170Xu592euJv2wYUtBlV8z+qnlcNQSnIYVTkLWntUO1F8j8rQ=="

FLAGGED = {
    "ArtifactoryDetector": [
        "artifactory key AKCp5bueTFpfypEqQbGJPp7BHFqvMU2ZwVmsZ9sB8Q7Kdnm4ttLm9XCgaVqQVjTMeAK7eYeMx"
    ],
    "AWSKeyDetector": [
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    ],
    "AzureStorageKeyDetector": [f"AccountName=x;AccountKey={AZURE};EndpointSuffix=core"],
    "BasicAuthDetector": ["https://admin:s3cr3tPassw0rd@example.com/x"],
    "CloudantDetector": [
        f'cloudant_password = "{HEX64}"',
        f"https://myaccount:{HEX64}@myaccount.cloudant.com",
    ],
    "GitHubTokenDetector": ["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"],
    "GitLabTokenDetector": ["glpat-abcdefghijklmnopqrst"],
    "IbmCloudIamDetector": [f'ibm_cloud_iam_api_key = "{"abcd1234" * 5}--__"'],
    "IbmCosHmacDetector": [f'ibm_cos_hmac_secret_access_key = "{"1234567890abcdef" * 3}"'],
    "JwtTokenDetector": [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "eyJhbGciOiJub25lIn0.e30.",  # a payload that is no object
    ],
    "KeywordDetector": ['password = "hunter2hunter2"', 'my_api_key: "abcdefgh12345"'],
    "MailchimpDetector": ["343ea45721923ed956e2b38c31db76aa-us30"],
    "NpmDetector": ["//registry.npmjs.org/:_authToken=743b294a-cd03-11ec-9d64-0242ac120002"],
    "OpenAIDetector": ["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"],
    "PrivateKeyDetector": [
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nP2/56wAAAi4AAAA3aWYtbW9kbjJ5\n"
        "---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        "PuTTY-User-Key-File-2: ssh-rsa\nPrivate-Lines: 1\nAAAAgCmDoE2vFRtKTGkS\n"
        "Private-MAC: 0123456789abcdef",
    ],
    "PypiTokenDetector": ["pypi-AgEIcHlwaS5vcmc" + "CJDU3OTM1MjliLWIyYTYtNDEwOC05NzRk" * 3],
    "SendGridDetector": ["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"],
    "SlackDetector": [
        "xoxb-34532454-e039d02840a0b9379c",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    ],
    "SoftlayerDetector": [f'softlayer_api_key = "{HEX64}"'],
    "SquareOAuthDetector": ["sq0csp-ABCDEFGHIJK_LMNOPQRSTUVWXYZ-0123456789abcde"],
    "StripeDetector": ["sk_live_ReTllpYQYfIZu2Jnf2lAPFjD", "rk_live_ReTllpYQYfIZu2Jnf2lAPFjDxYz"],
    "TelegramBotTokenDetector": ["110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX"],
}  # fmt: skip

# Not followed, and why (docs/guarantees.md says the same).
NOT_FOLLOWED = {
    "Base64HighEntropyString": "ids, hashes and signatures the rows join on look like it",
    "HexHighEntropyString": "ids, hashes and signatures the rows join on look like it",
    "IPPublicDetector": "an address is no credential",
    "DiscordBotTokenDetector": "no literal to look for cheaply; caught under a secret key",
    "TwilioKeyDetector": "no literal to look for cheaply; caught under a secret key",
}


def test_every_plugin_is_followed_or_said_not_to_be() -> None:
    plugins = {cls.__name__ for cls in get_mapping_from_secret_type_to_class().values()}
    assert plugins == set(FLAGGED) | set(NOT_FOLLOWED)
    assert not set(FLAGGED) & set(NOT_FOLLOWED)


@pytest.mark.parametrize(
    ("plugin", "text"), [(plugin, text) for plugin, texts in FLAGGED.items() for text in texts]
)
def test_what_detect_secrets_flags_is_redacted(plugin: str, text: str) -> None:
    cls = next(c for c in get_mapping_from_secret_type_to_class().values() if c.__name__ == plugin)
    flagged = {
        found.secret_value
        for line in text.split("\n")
        for found in cls().analyze_line(filename="notes.txt", line=line, line_number=1)
    }
    assert flagged, f"{plugin} no longer flags the example"
    scrubbed = Redactor(b"k" * 32).scrub(f"here: {text} (end)")
    secrets = {s.strip() for s in flagged if s} - {"BEGIN OPENSSH PRIVATE KEY", "ghp", "glpat"}
    if plugin == "PrivateKeyDetector":  # it flags the header line: the body is the secret
        secrets = {line for line in text.split("\n")[1:-1] if not line.startswith("Private-")}
    assert [secret for secret in secrets if secret in scrubbed] == []
    assert scrubbed.startswith("here: ") and "<redacted:" in scrubbed
