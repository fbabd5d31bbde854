"""The environment `convtap run` gives its command: where the proxy is, which CA to trust.

Regular mode (no `--upstream`): the proxy variables every HTTP library reads, a CA bundle that
holds the system's CAs and mitmproxy's CA under each variable a client reads it from, and the
switches a known client needs to use them (docs/commands.md, "convtap run"). Reverse mode: the
base URLs the OpenAI SDKs (and convtap's own tests) read.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
# The variables a CA bundle is read from: OpenSSL and Python's ssl (SSL_CERT_FILE), requests,
# curl, Node (which adds it to its own roots) and the Codex CLI (its own, before SSL_CERT_FILE).
CA_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CODEX_CA_CERTIFICATE",
)
# The hosts the clients convtap knows talk to: a NO_PROXY that names one sends it around the proxy.
API_HOSTS = ("api.openai.com", "chatgpt.com", "chat.openai.com")
# Node (>= 22.21 / 24.5) ignores the proxy variables unless told to read them.
CLIENT_SWITCHES = {"NODE_USE_ENV_PROXY": "1"}


class CertificateError(Exception):
    """mitmproxy's CA cannot be read (the proxy did not make it)."""


def system_cas() -> bytes:
    """The system's CA certificates (PEM): OpenSSL's default file, else certifi's bundle."""
    paths = ssl.get_default_verify_paths()
    for candidate in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return Path(candidate).read_bytes()
    if paths.capath and Path(paths.capath).is_dir():
        pems = sorted(Path(paths.capath).glob("*.pem")) + sorted(Path(paths.capath).glob("*.crt"))
        if pems:
            return b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in pems)
    import certifi

    return Path(certifi.where()).read_bytes()


def write_bundle(where: Path, mitmproxy_ca: Path) -> Path:
    """A CA bundle at `where`: the system's CAs, then mitmproxy's."""
    try:
        ca = mitmproxy_ca.read_bytes()
    except OSError as exc:
        raise CertificateError(
            f"cannot read mitmproxy's CA {mitmproxy_ca}: {exc.strerror}"
        ) from exc
    where.write_bytes(system_cas().rstrip(b"\n") + b"\n" + ca)
    return where


def regular_env(base: Mapping[str, str], proxy_port: int, bundle: Path) -> dict[str, str]:
    """The command's environment in front of a regular proxy on 127.0.0.1:`proxy_port`."""
    env = dict(base)
    proxy = f"http://127.0.0.1:{proxy_port}"
    env.update(dict.fromkeys(PROXY_VARIABLES, proxy))
    env.update(dict.fromkeys(CA_VARIABLES, str(bundle)))
    env.update(CLIENT_SWITCHES)
    return env


def bypassed(env: Mapping[str, str]) -> list[str]:
    """The API hosts that `NO_PROXY` / `no_proxy` in `env` sends around the proxy, as curl,
    requests, httpx and Node read it: `*`, the host, or a domain it is in (`openai.com`,
    `.openai.com`, `*.openai.com`), with or without a port."""
    entries = [
        e.strip().lower() for name in ("NO_PROXY", "no_proxy") for e in env.get(name, "").split(",")
    ]
    if "*" in entries:
        return list(API_HOSTS)
    domains = {re.sub(r":\d+$", "", entry).lstrip("*").lstrip(".") for entry in entries} - {""}
    return [h for h in API_HOSTS if any(h == d or h.endswith("." + d) for d in domains)]


def reverse_env(base: Mapping[str, str], proxy_port: int) -> dict[str, str]:
    """The command's environment in front of a reverse proxy on 127.0.0.1:`proxy_port`."""
    env = dict(base)
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{proxy_port}/v1"
    env["CONVTAP_BASE_URL"] = f"http://127.0.0.1:{proxy_port}"
    return env
