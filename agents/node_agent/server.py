"""The agent's HTTP side: GET /v1/report answers the node report as JSON to callers `auth` lets
through (agents/node_agent/auth.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agents.node_agent.auth import Authenticator

log = logging.getLogger(__name__)

REPORT_PATHS = {"/", "/v1/report"}


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen wants HOST:PORT, got {listen!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def make_server(
    address: tuple[str, int], auth: Authenticator, report: Callable[[], dict]
) -> ThreadingHTTPServer:
    """An HTTP server that answers `report()` to requests `auth` lets through."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "tessera-node-agent/1"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            verdict = auth.check(self.headers.get("Authorization", ""))
            if verdict.status == 401:
                self._send(401, {"error": verdict.error}, {"WWW-Authenticate": "Bearer"})
            elif verdict.status != 200:  # 403 another identity, 503 the API server not reachable
                self._send(verdict.status, {"error": verdict.error})
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
