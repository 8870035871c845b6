"""The downward-API annotations file as the kubelet writes it, and the watcher that polls it."""

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from tessera_checkpoint.podinfo import MalformedAnnotations, RequestWatcher, parse_annotations, unquote_go

# What the kubelet writes (Go's %q per value, keys sorted), including kubectl's JSON annotation.
KUBELET_FILE = (
    'kubectl.kubernetes.io/last-applied-configuration="{\\"apiVersion\\":\\"v1\\",\\"kind\\":\\"Pod\\"}\\n"\n'
    'note="tab\\there, quote \\" and backslash \\\\ and caf\\u00e9 and caf\u00e9 and \\x00"\n'
    'tessera.io/checkpoint-reason="preempt"\n'
    'tessera.io/checkpoint-request="preempt-42"'
)


def test_it_reads_the_kubelet_format_with_its_escapes():
    annotations = parse_annotations(KUBELET_FILE)
    assert annotations["tessera.io/checkpoint-request"] == "preempt-42"
    assert annotations["tessera.io/checkpoint-reason"] == "preempt"
    assert annotations["kubectl.kubernetes.io/last-applied-configuration"] == '{"apiVersion":"v1","kind":"Pod"}\n'
    assert annotations["note"] == 'tab\there, quote " and backslash \\ and caf\u00e9 and caf\u00e9 and \x00'


@pytest.mark.parametrize("quoted, value", [
    ('""', ""),
    ('"a=b=c"', "a=b=c"),
    ('"\\a\\b\\f\\n\\r\\t\\v\\\\\\\'\\""', "\a\b\f\n\r\t\v\\'\""),
    ('"\\xe2\\x82\\xac"', "\u20ac"),        # UTF-8 bytes one by one
    ('"\\xff"', "\ufffd"),                  # invalid UTF-8, as Go writes it
    ('"\\U0001f600 \\u20ac"', "\U0001f600 \u20ac"),
    ('"\\101\\102"', "AB"),                 # octal, legal in Go literals
])
def test_it_unquotes_go_literals(quoted, value):
    assert unquote_go(quoted) == value


@pytest.mark.parametrize("bad", ['"open', 'bare', '"a"b"', '"ends\\"', '"\\q"', '"\\x4"', '"\\u12"', '"\\400"',
                                 '"\\UFFFFFFFF"'])
def test_it_refuses_what_go_would_not_write(bad):
    with pytest.raises(MalformedAnnotations):
        unquote_go(bad)


KUBECTL = Path(os.environ.get("TESSERA_KUBE_CACHE", "/var/cache/tessera/kube")) / "bin" / "kubectl"
# The kubelet's fieldpath.FormatMap: `fmt.Sprintf("%v=%q\n", key, value)` per key, sorted. kubectl's
# go-template `printf "%q"` is the same Go formatting, and needs no API server with --local.
FORMAT_MAP = '{{range $k, $v := .metadata.annotations}}{{$k}}={{printf "%q" $v}}{{"\\n"}}{{end}}'


def random_value(rng: random.Random) -> str:
    pools = [(0x20, 0x7E), (0x00, 0x1F), (0x7F, 0xFF), (0x100, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
    return "".join(chr(rng.randint(*rng.choice(pools))) for _ in range(rng.randint(0, 24)))


@pytest.mark.skipif(not KUBECTL.exists(), reason=f"no kubectl at {KUBECTL} (tools/kube-control-plane/build.sh)")
def test_it_reads_what_go_writes_for_any_text(tmp_path):
    rng = random.Random(14)
    values = {f"example.org/k{i}": random_value(rng) for i in range(300)}
    values["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps({"metadata": {"a": 'q"\\\n'}}) + "\n"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": values},
           "spec": {"containers": [{"name": "c", "image": "i"}]}}
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    written = subprocess.run([str(KUBECTL), "annotate", "--local", "-f", str(tmp_path / "pod.json"),
                              "tessera.io/checkpoint-request=preempt-3", "-o", f"go-template={FORMAT_MAP}"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    assert "\\u" in written and "\\x" in written  # Go escaped some characters, as the kubelet does
    assert parse_annotations(written) == {**values, "tessera.io/checkpoint-request": "preempt-3"}


def test_a_line_without_key_or_equals_is_malformed():
    with pytest.raises(MalformedAnnotations, match="line 2"):
        parse_annotations('a="1"\nnot a pair\n')
    assert parse_annotations('\na="1"\n\n') == {"a": "1"}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_watcher_reports_each_new_request_once(tmp_path):
    clock, path = Clock(), tmp_path / "annotations"
    watcher = RequestWatcher(path, interval_s=1.0, clock=clock)
    assert watcher.poll() is None  # no file yet (the kubelet has not written it)
    path.write_text('tessera.io/checkpoint-reason="interval"\ntessera.io/checkpoint-request="interval-7"\n')
    assert watcher.poll() is None  # read at most once a second
    clock.now = 1.0
    assert watcher.poll() == "interval-7" and watcher.reason == "interval"
    clock.now = 2.0
    assert watcher.poll() is None  # the same id again is not a new request
    path.write_text('tessera.io/checkpoint-request="preempt-9"\n')
    clock.now = 3.0
    assert watcher.poll() == "preempt-9"


def test_the_watcher_starts_from_the_request_already_answered(tmp_path):
    path = tmp_path / "annotations"
    path.write_text('tessera.io/checkpoint-request="interval-7"\n')
    assert RequestWatcher(path, seen="interval-7").poll() is None
    assert RequestWatcher(path, seen="interval-6").poll() == "interval-7"


def test_a_malformed_file_is_no_request_and_says_why(tmp_path):
    path = tmp_path / "annotations"
    path.write_text('tessera.io/checkpoint-request="interval-7\n')
    watcher = RequestWatcher(path)
    assert watcher.poll() is None
    assert "double-quoted" in watcher.error
