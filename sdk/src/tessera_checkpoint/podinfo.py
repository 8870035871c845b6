"""The checkpoint request as the pod sees it: the downward-API `annotations` file.

The kubelet writes one `key="value"` line per annotation, sorted by key, each value quoted the way
Go's `%q` quotes (strconv.Quote: `\\"`, `\\\\`, `\\n`, `\\t`, `\\xNN`, `\\uNNNN`, ...). An annotation such as
kubectl's last-applied-configuration holds JSON with quotes and newlines, so the value must be
unquoted properly, never split on the first quote. The kubelet refreshes the file by swapping a
symlink, so a read sees the old file or the new one, never half of each.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

REQUEST_ANNOTATION = "tessera.io/checkpoint-request"
REASON_ANNOTATION = "tessera.io/checkpoint-reason"

_SIMPLE_ESCAPES = {"a": 0x07, "b": 0x08, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B,
                   "\\": 0x5C, "'": 0x27, '"': 0x22}
_UNICODE_ESCAPES = {"u": 4, "U": 8}


class MalformedAnnotations(ValueError):
    """A line of the annotations file is not `key="value"` in Go's quoting."""


def unquote_go(quoted: str) -> str:
    """The string a Go double-quoted literal stands for. `\\xNN` and octal escapes are bytes (Go
    writes invalid UTF-8 that way), so the value is assembled as bytes and decoded at the end."""
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise MalformedAnnotations(f"not a double-quoted value: {quoted[:40]!r}")
    body, out, i = quoted[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char == '"':
            raise MalformedAnnotations("unescaped quote inside a value")
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
            continue
        i = _escape(body, i + 1, out)
    return out.decode("utf-8", errors="replace")


def _escape(body: str, i: int, out: bytearray) -> int:
    """Append the escape starting at body[i] (just after the backslash); return the next index."""
    if i >= len(body):
        raise MalformedAnnotations("a value ends in a lone backslash")
    kind = body[i]
    if kind in _SIMPLE_ESCAPES:
        out.append(_SIMPLE_ESCAPES[kind])
        return i + 1
    if kind == "x":
        out.append(_hex(body[i + 1:i + 3], 2))
        return i + 3
    if kind in _UNICODE_ESCAPES:
        width = _UNICODE_ESCAPES[kind]
        out += chr(_hex(body[i + 1:i + 1 + width], width)).encode("utf-8", errors="surrogatepass")
        return i + 1 + width
    if kind in "01234567":
        digits = body[i:i + 3]
        if len(digits) != 3 or any(d not in "01234567" for d in digits) or int(digits, 8) > 255:
            raise MalformedAnnotations(f"bad octal escape \\{digits}")
        out.append(int(digits, 8))
        return i + 3
    raise MalformedAnnotations(f"unknown escape \\{kind}")


def _hex(digits: str, width: int) -> int:
    try:
        if len(digits) != width:
            raise ValueError
        value = int(digits, 16)
    except ValueError:
        raise MalformedAnnotations(f"bad hex escape {digits!r}") from None
    if value > 0x10FFFF:
        raise MalformedAnnotations(f"escape beyond Unicode: {digits!r}")
    return value


def parse_annotations(text: str) -> dict[str, str]:
    """`key="value"` lines (the kubelet's format) as a dict. Blank lines are skipped."""
    found = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, quoted = line.partition("=")
        if not sep or not key:
            raise MalformedAnnotations(f"line {number} is not key=\"value\": {line[:60]!r}")
        found[key] = unquote_go(quoted)
    return found


class RequestWatcher:
    """Polls the annotations file for a new `tessera.io/checkpoint-request` id.

    Reads at most once per `interval_s`, so calling it every training step costs a clock read.
    An id is reported once; `seen` starts at the id already answered (from the checkpoint
    manifest), so a restarted container does not save again for a request it confirmed.
    """

    def __init__(self, path: str | Path, *, interval_s: float = 1.0, seen: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.interval_s = interval_s
        self.seen = seen
        self.reason: str | None = None
        self.error: str | None = None  # the last read's problem, if any (a malformed file)
        self._clock = clock
        self._next_read = float("-inf")

    def current(self) -> tuple[str | None, str | None]:
        """(request id, reason) in the file now; (None, None) when absent or unreadable."""
        try:
            annotations = parse_annotations(self.path.read_text(encoding="utf-8", errors="replace"))
        except FileNotFoundError:
            return None, None
        except (OSError, MalformedAnnotations) as problem:
            self.error = str(problem)
            return None, None
        self.error = None
        return annotations.get(REQUEST_ANNOTATION) or None, annotations.get(REASON_ANNOTATION)

    def poll(self) -> str | None:
        """A request id not reported before, or None (also between reads)."""
        now = self._clock()
        if now < self._next_read:
            return None
        self._next_read = now + self.interval_s
        request, reason = self.current()
        if request is None or request == self.seen:
            return None
        self.seen, self.reason = request, reason
        return request
