"""The agent's HTTP side: GET /v1/report answers the node report as JSON, behind a bearer token."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)

REPORT_PATHS = {"/", "/v1/report"}


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def make_server(
    address: tuple[str, int], token: str, report: Callable[[], dict]
) -> ThreadingHTTPServer:
    """An HTTP server that answers `report()` to requests that carry `token`."""
    if not token:
        raise ValueError("the agent token must not be empty")
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        server_version = "tessera-node-agent/1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            given = self.headers.get("Authorization", "").encode()
            # compare_digest: the time taken must not tell how much of the token was right.
            if not hmac.compare_digest(given, expected):
                self._send(401, {"error": "unauthorized"}, {"WWW-Authenticate": "Bearer"})
            elif self.path.split("?", 1)[0] not in REPORT_PATHS:
                self._send(404, {"error": "not found"})
            else:
                self._answer_report()

        def _answer_report(self) -> None:
            try:
                body = report()
            except Exception:  # a GPU fell off the bus: say so, keep serving
                log.exception("collecting the node report failed")
                self._send(500, {"error": "collecting the node report failed"})
                return
            self._send(200, body)

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            log.info("%s %s", self.address_string(), format % args)

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    return server
