"""Servers the tests start on loopback: a free port in this suite's range, and waiting for one to serve."""

import os
import socket
import subprocess
import time

import requests

PORTS = range(18500, 18600)


def own_ports() -> range:
    """This process's share of PORTS: xdist workers (`make test` runs two) each probe their own
    slice, so two servers starting at once never both find the same port free."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return PORTS
    share = len(PORTS) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker[2:])
    return PORTS[index * share:(index + 1) * share]


def free_port() -> int:
    """A port in 18500-18599 (this process's share of it) that nothing listens on."""
    for port in own_ports():
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError("no free port in 18500-18599")


def wait_until_serving(url: str, server: subprocess.Popen, headers: dict | None = None, limit_s: float = 90) -> bool:
    """True once `url` answers; False if the server exits or the limit passes (a loaded machine is slow)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            requests.get(url, headers=headers or {}, timeout=10, allow_redirects=False)
            return True
        except requests.RequestException:  # not listening yet, or its worker still booting
            time.sleep(0.2)
    return False
