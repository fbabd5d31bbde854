"""`convtap mock`: a local stand-in for ChatGPT's conversation backend, playing a scenario.

`run()` serves until SIGINT/SIGTERM (the CLI calls it); `MockServer` runs the same server in a
background thread for tests. The application itself (endpoints, streaming, hold/die/gzip, the
user WebSocket) is `convtap.mock.app`; what the server says is `convtap.mock.scenario`. TLS uses a
throwaway CA and a certificate for 127.0.0.1 made at start; the CA's PEM is written where the
`cert_file` option says, for clients to trust.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import signal
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any, TypedDict

from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from typing_extensions import Unpack

from convtap.mock.app import MockOptions, MockState
from convtap.mock.routes import make_app
from convtap.mock.scenario import Scenario, load_scenario

DEFAULT_PORT = 8765


def tls_context(cert_file: Path) -> ssl.SSLContext:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it; the CA's PEM goes
    to `cert_file` for clients to trust (the cryptography package comes with mitmproxy)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "convtap mock CA")])
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])

    def build(subject: x509.Name, public: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        )

    ca = (
        build(ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(x509, cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    leaf = (
        build(name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(x509, cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    cert_file.write_bytes(ca.public_bytes(pem))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain reads files only
        chain = Path(tmp) / "server.pem"
        key_pem = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        chain.write_bytes(key_pem + leaf.public_bytes(pem) + ca.public_bytes(pem))
        context.load_cert_chain(chain)
    return context


def _key_usage(x509: Any, *, cert_sign: bool) -> Any:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


async def listen(state: MockState, host: str, port: int) -> tuple[HTTPServer, int]:
    """Start serving on the running loop; returns the server and the port bound."""
    opts = state.options
    context = None
    if opts.tls:
        assert opts.cert_file is not None
        context = tls_context(opts.cert_file)
    sockets = bind_sockets(port, address=host)
    server = HTTPServer(make_app(state), ssl_options=context)
    server.add_sockets(sockets)
    return server, sockets[0].getsockname()[1]


class OptionArgs(TypedDict, total=False):
    """The keyword options of `MockServer` and `run` (see `MockOptions`)."""

    gzip: bool
    hold_after: int | None
    die_after: int | None
    tls: bool
    cert_file: str | Path | None
    delay: float
    seed: int | None
    lenient: bool


def mock_options(scenario: str | Path | Scenario, **options: Unpack[OptionArgs]) -> MockOptions:
    """Options with the scenario loaded; with TLS and no `cert_file`, a temporary one."""
    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    tls = options.get("tls", False)
    cert_file = options.get("cert_file")
    if tls and cert_file is None:
        cert_file = Path(tempfile.mkdtemp(prefix="convtap-mock-")) / "ca.pem"
    return MockOptions(
        loaded,
        gzip=options.get("gzip", False),
        hold_after=options.get("hold_after"),
        die_after=options.get("die_after"),
        tls=tls,
        cert_file=Path(cert_file) if cert_file is not None else None,
        delay=options.get("delay", 0.0),
        seed=options.get("seed"),
        lenient=options.get("lenient", False),
    )


class MockServer:
    """The mock in a background thread with its own event loop, for tests:

    with MockServer("alefita_way", hold_after=3) as server:
        ... server.url, server.received, server.go() ...
    """

    def __init__(
        self,
        scenario: str | Path | Scenario = "alefita_way",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        **options: Unpack[OptionArgs],
    ) -> None:
        self.options = mock_options(scenario, **options)
        self.host = host
        self._state = MockState(self.options)
        self._requested_port = port
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.options.tls else 'http'}://{self.host}:{self.port}"

    @property
    def cert_file(self) -> Path | None:
        return self.options.cert_file

    @property
    def received(self) -> list[dict[str, Any]]:
        return self._state.received()

    @property
    def sent(self) -> list[tuple[str, bytes]]:
        """The stream bodies the mock sent (the last 1,000): (path, the bytes exactly as they
        left), in the order the streams started; a stream still going shows what has left so
        far."""
        return self._state.sent_bodies()

    @property
    def holding(self) -> int:
        """How many streams are parked at their hold point now."""
        return self._state.gate.holding

    def wait_held(self, count: int = 1, timeout: float = 5.0) -> bool:
        return self._state.gate.wait_held(count, timeout)

    def go(self) -> None:
        """The go-ahead for `hold_after` (what `POST /_mock/go` does)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._state.gate.go)

    def start(self) -> MockServer:
        self._thread = threading.Thread(target=self._serve, name="convtap-mock", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server, self.port = loop.run_until_complete(
                listen(self._state, self.host, self._requested_port)
            )
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(_shutdown(self._server, self._state))
        loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _shutdown(server: HTTPServer, state: MockState) -> None:
    server.stop()
    while state.gate.holding:
        state.gate.go()
    for sockets in list(state.subscribers.values()):
        for socket in list(sockets):
            socket.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.close_all_connections(), timeout=2)
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def run(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    scenario: str | Path | Scenario = "alefita_way",
    **options: Unpack[OptionArgs],
) -> None:
    """Serve until SIGINT or SIGTERM (what `convtap mock` calls); prints one line, `convtap
    mock listening at <url>`, once listening."""
    asyncio.run(_serve_until_signal(mock_options(scenario, **options), host, port))


async def _serve_until_signal(options: MockOptions, host: str, port: int) -> None:
    state = MockState(options)
    server, bound = await listen(state, host, port)
    scheme = "https" if options.tls else "http"
    print(f"convtap mock listening at {scheme}://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await _shutdown(server, state)
