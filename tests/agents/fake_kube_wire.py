"""The fake API server's wire: its Status errors, merge patches and label selectors, and the HTTP
handler that routes requests to a FakeKubeApi (tests/agents/fake_kube_api.py) and streams watches."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from tests.agents.fake_kube_api import FakeKubeApi

MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_WATCHABLE = re.compile(r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/pods$")


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status_body(code, reason, message)


def status_body(code: int, reason: str, message: str = "") -> dict:
    outcome = "Success" if code < 300 else "Failure"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": outcome,
            "message": message, "reason": reason, "code": code}


CONFIGMAP_LIMIT = 1024 * 1024  # bytes of data, as the API server validates it


def check_configmap_size(configmap: dict) -> None:
    size = sum(len(k) + len(v.encode()) for k, v in (configmap.get("data") or {}).items())
    if size > CONFIGMAP_LIMIT:
        name = configmap["metadata"]["name"]
        raise ApiError(422, "Invalid", f'ConfigMap "{name}" is invalid: []: Too long: must have at most '
                                       f"{CONFIGMAP_LIMIT} bytes")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: dict, patch: dict) -> dict:
    """RFC 7386: maps merge, None deletes (strategic merge patch does the same for maps)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


def selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality-based label selectors: `a=b`, `a==b`, `a!=b`, `a`, `!a`, joined by commas."""
    for term in filter(None, (selector or "").split(",")):
        found = re.match(r"^(!?)([^=!]+)(?:(==|=|!=)(.*))?$", term.strip())
        if not found:
            raise ApiError(400, "BadRequest", f"unsupported selector {term!r}")
        negate, key, op, value = found.groups()
        if op is None:
            ok = (key in labels) != bool(negate)
        elif op == "!=":
            ok = labels.get(key) != value
        else:
            ok = labels.get(key) == value
        if not ok:
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    """Routes HTTP to a FakeKubeApi; `api` is set on a subclass per server."""

    api: FakeKubeApi
    protocol_version = "HTTP/1.1"  # keep-alive, and chunked streams for watches

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        try:
            body = self._body()
            watched = _WATCHABLE.match(url.path)
            if self.command == "GET" and query.get("watch") == "true" and watched:
                with self.api._cond:
                    self.api.requests.append(("WATCH", url.path))
                self._stream(self.api.watch_pods(query, watched.group("ns")))
                return
            status, answer = self.api.handle(self.command, url.path, query, body)
        except ApiError as exc:
            status, answer = exc.status["code"], exc.status
        self._send(status, answer)

    do_GET = do_POST = do_PATCH = do_DELETE = _dispatch

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""  # read all: the socket is reused
        if self.command == "PATCH" and self.headers.get("Content-Type") not in MERGE_TYPES:
            # A JSON patch is a list of operations; the backend must not send one by mistake.
            raise ApiError(415, "UnsupportedMediaType", self.headers.get("Content-Type", ""))
        return json.loads(data) if data else None

    def _send(self, status: int, body: dict | str) -> None:
        text = isinstance(body, str)  # a pod's log is plain text
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: Iterator[dict]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%X\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped watching
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass
