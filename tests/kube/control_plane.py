"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager.

The binaries come from tools/kube-control-plane/build.sh (cached in $TESSERA_KUBE_CACHE). There is
no kubelet and no scheduler: tests/kube/kubelet.py plays the GPU nodes, Tessera binds the pods.
Identities are static tokens: an admin (system:masters) for the tests and the controller manager,
and Tessera's worker as the ServiceAccount deploy/rbac.yaml grants its rights to, so the backend
runs with exactly the rights the manifests give it in production.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import urllib3
import yaml
from kubernetes import client

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tools" / "kube-control-plane" / "build.sh"
CACHE = Path(os.environ.get("TESSERA_KUBE_CACHE", "/var/cache/tessera/kube"))
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
BACKEND_USER = "system:serviceaccount:tessera-system:tessera-backend"
BACKEND_GROUPS = "system:serviceaccounts,system:serviceaccounts:tessera-system,system:authenticated"
BEAT_USER = "system:serviceaccount:tessera-system:tessera-beat"  # the leader election's candidates


class ControlPlaneMissing(RuntimeError):
    pass


def binaries() -> Path:
    """The folder with the three binaries, or a loud error that says how to get them."""
    folder = CACHE / "bin"
    missing = [name for name in BINARIES if not (folder / name).exists()]
    if missing:
        raise ControlPlaneMissing(
            f"The real Kubernetes control plane is not built: {', '.join(missing)} missing in {folder}.\n"
            f"Build it once (about 5 minutes): {BUILD_SCRIPT.relative_to(ROOT)}   (`make test` does this too)")
    return folder


def free_ports(count: int) -> list[int]:
    """Ports from TESSERA_KUBE_PORTS ("18300-18399") when set, else any free ones."""
    wanted = os.environ.get("TESSERA_KUBE_PORTS", "")
    if wanted:
        low, high = (int(part) for part in wanted.split("-"))
        candidates: range | list[int] = range(low, high + 1)
    else:
        candidates = [0] * count  # the kernel picks
    found = []
    for candidate in candidates:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            found.append(probe.getsockname()[1])
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free ports in {wanted or 'the ephemeral range'}")


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, stdin=subprocess.DEVNULL)


def make_certificates(folder: Path) -> None:
    """A private CA, the API server's serving certificate and the ServiceAccount signing key."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=tessera-test-ca", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver", cwd=folder)
    (folder / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\n")
    _openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "apiserver.crt", "-days", "2", "-extfile", "san.ext", cwd=folder)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)


@dataclass
class ControlPlane:
    folder: Path
    admin_token: str = field(default_factory=lambda: secrets.token_hex(16))
    backend_token: str = field(default_factory=lambda: secrets.token_hex(16))
    beat_token: str = field(default_factory=lambda: secrets.token_hex(16))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bin = binaries()
        self.etcd_port, self.peer_port, self.api_port, self.cm_port = free_ports(4)
        self.url = f"https://127.0.0.1:{self.api_port}"

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        make_certificates(self.folder)
        (self.folder / "tokens.csv").write_text(
            f'{self.admin_token},admin,admin,"system:masters"\n'
            f'{self.backend_token},{BACKEND_USER},tessera-backend,"{BACKEND_GROUPS}"\n'
            f'{self.beat_token},{BEAT_USER},tessera-beat,"{BACKEND_GROUPS}"\n')
        self.write_kubeconfig(self.folder / "admin.kubeconfig", self.admin_token)
        self._start_etcd()
        self.start_apiserver()
        self._start_controller_manager()
        return self

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            self._stop(name)

    def _stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 - the process keeps it
        self.processes[name] = subprocess.Popen([str(self.bin / name), *args], stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL, cwd=self.folder)

    def _start_etcd(self) -> None:
        data = Path(tempfile.mkdtemp(prefix="etcd-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
        self._etcd_data = data
        self._spawn("etcd", [
            "--name", "default", "--data-dir", str(data),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{self.peer_port}",
            "--log-level", "warn"])

    def start_apiserver(self) -> None:
        f = self.folder
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}", "--insecure-port=0",
            f"--tls-cert-file={f}/apiserver.crt", f"--tls-private-key-file={f}/apiserver.key",
            f"--client-ca-file={f}/ca.crt", f"--token-auth-file={f}/tokens.csv",
            "--authorization-mode=Node,RBAC", "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={f}/sa.pub", f"--service-account-signing-key-file={f}/sa.key",
            "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--allow-privileged=true",
            "--v=0"])
        self.wait_ready()

    def stop_apiserver(self) -> None:
        self._stop("kube-apiserver")

    def _start_controller_manager(self) -> None:
        f = self.folder
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={f}/admin.kubeconfig", "--bind-address=127.0.0.1", f"--secure-port={self.cm_port}",
            "--port=0", f"--cert-dir={f}/cm-certs", f"--service-account-private-key-file={f}/sa.key",
            f"--root-ca-file={f}/ca.crt", "--use-service-account-credentials=true", "--leader-elect=false",
            # Faster than a stock cluster's 40 s so that the silent-node tests take seconds.
            "--node-monitor-grace-period=12s", "--node-monitor-period=2s", "--v=0"])

    def wait_ready(self, timeout: float = 90.0) -> None:
        http = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(self.folder / "ca.crt"))
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited ({process.returncode}); see {self.folder}/{name}.log")
            try:
                answer = http.request("GET", f"{self.url}/readyz", timeout=2.0, retries=False,
                                      headers={"Authorization": f"Bearer {self.admin_token}"})
                if answer.status == 200:
                    return
                last = answer.data.decode()[-300:]
            except urllib3.exceptions.HTTPError as error:
                last = str(error)
            time.sleep(0.3)
        raise RuntimeError(f"kube-apiserver not ready after {timeout:.0f} s: {last}")

    # -- clients -----------------------------------------------------------------------------

    def configuration(self, token: str) -> client.Configuration:
        config = client.Configuration(host=self.url)
        config.ssl_ca_cert = str(self.folder / "ca.crt")
        config.api_key = {"authorization": f"Bearer {token}"}
        return config

    def admin_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration(self.admin_token))

    def backend_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration(self.backend_token))

    def beat_client(self) -> client.ApiClient:
        return client.ApiClient(self.configuration(self.beat_token))

    def write_kubeconfig(self, path: Path, token: str) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url,
                                                     "certificate-authority": str(self.folder / "ca.crt")}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}]}))
        return path

    def backend_kubeconfig(self) -> Path:
        return self.write_kubeconfig(self.folder / "backend.kubeconfig", self.backend_token)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(getattr(self, "_etcd_data", ""), ignore_errors=True)
