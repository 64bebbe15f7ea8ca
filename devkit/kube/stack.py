"""Start the real stack — etcd, kube-apiserver and the Kueue manager — on 127.0.0.1, and stop it by PID.

The binaries come from ``devkit/kube/build.sh`` (pinned in ``devkit/kube/go.mod``, built once into
``~/.cache/idleshare/kube``; another Kueue from its own module set in ``devkit/kube/kueue/<version>/``: the versions
and what differs between them are :mod:`devkit.kube.kueue_versions`). One :class:`KubeStack` is one cluster:

* etcd on a free loopback port, ``--unsafe-no-fsync``, data in the stack's work directory;
* kube-apiserver with TLS on 127.0.0.1 (a CA made here signs its serving certificate), bearer tokens from
  a token file — ``admin`` in ``system:masters`` for set-up and the tests' own changes, ``idleshare`` in
  the group ``idleshare-recompute``, which only ``infra/k8s/rbac.yaml`` grants anything — and RBAC on;
* Kueue's 11 CRDs from the pinned module (``kueue_version``: the default, else one of
  :data:`devkit.kube.kueue_versions.VERSIONS`), then the Kueue manager (leader election off, health and webhook
  on 127.0.0.1, metrics off, ``batch/job`` integration only), with Kueue's own webhook configurations
  installed pointing at it: every webhook for ``kueue.x-k8s.io`` objects and ``batch/v1`` Jobs is served;
  those for integrations not enabled (pods, deployments, statefulsets, JobSet, Kubeflow, Ray, AppWrapper,
  LeaderWorkerSet) are left out, since their objects are never created here; fair sharing on (the
  ``fairSharing`` section, :data:`FAIR_SHARING_STRATEGIES`) unless ``fair_sharing=False``; the Configuration it
  runs with is also written to the ``kueue-system/kueue-manager-config`` ConfigMap, as an operator's install does;
* ``infra/k8s/rbac.yaml`` applied, so idleshare talks as its own restricted user;
* kube-scheduler and kube-controller-manager (its job, daemonset, replicaset, garbage-collector, namespace and
  service-account-token controllers; never the node-lifecycle one), each with its own bearer token, and a kubelet
  stand-in: pods are created and bound, never run (:mod:`devkit.kube.placement`), unless ``place_pods=False``.

Each process logs to ``<workdir>/logs/<name>.log``; :attr:`KubeStack.started_seconds` and
:meth:`KubeStack.rss` are what the README's figures come from.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devkit.kube import kueue_versions, placement
from devkit.kube.kueue_versions import KueueVersion

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BUILD_SCRIPT = HERE / "build.sh"
RBAC_MANIFESTS = (REPO / "infra" / "k8s" / "rbac.yaml", REPO / "infra" / "k8s" / "rbac-headroom-all.yaml")
"""What every stack applies: the base grants and those of headroom ``all`` (tests/infra/test_infra_rbac holds
these to infra/constructs/eks_access.RBAC_MANIFESTS)."""
IDLESHARE_GROUP = "idleshare-recompute"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_FRAMEWORKS = ("batch/job",)
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
"""Where an operator's Kueue install (its Helm chart, its kustomize manifests) keeps the manager's Configuration:
the stack writes the one it runs with there too, so idleshare can read it as it would on EKS."""
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
"""The fair-sharing preemption strategies the stack states (Kueue v1beta2 requires them whenever the
``fairSharing`` section is present, which is what turns fair sharing on): S2-a, then S2-b — Kueue's documented
pair. A preemptor ClusterQueue within its nominal quota preempts borrowers regardless (the feature gate
``FairSharingPreemptWithinNominal``, on by default in v0.19)."""
SERVED_WEBHOOK_GROUPS = {"kueue.x-k8s.io": None, "batch": {"jobs"}}
"""Webhooks installed: every one for Kueue's own kinds, and the Job integration's (``batch/v1`` jobs)."""


class StackError(RuntimeError):
    """The stack could not be built or started; the message says which process and why."""


# -- binaries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binaries:
    """The stack's binaries: etcd, kube-apiserver and kubectl in ``root``; the Kueue manager, its CRDs and webhook
    manifest in ``kueue_root`` (``root`` itself for the default Kueue, built from the same module)."""

    root: Path
    kueue_root: Path | None = None
    kueue_version: str = kueue_versions.DEFAULT

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def path(self, name: str) -> Path:
        return (self._kueue / "bin" / name) if name == "kueue" else self.bin / name

    @property
    def _kueue(self) -> Path:
        return self.kueue_root or self.root

    @property
    def crds(self) -> Path:
        return self._kueue / "kueue" / "crds"

    @property
    def webhook_manifest(self) -> Path:
        return self._kueue / "kueue" / "webhook.yaml"

    @property
    def kubectl(self) -> Path:
        return self.path("kubectl")


def _facts(kueue_version: str | None) -> KueueVersion:
    try:
        return kueue_versions.get(kueue_version or kueue_versions.DEFAULT)
    except kueue_versions.UnknownKueueVersion as exc:
        raise StackError(str(exc)) from None


def _binaries(stdout: str, facts: KueueVersion) -> Binaries:
    stack_dir, kueue_dir = stdout.strip().splitlines()[-2:]
    return Binaries(Path(stack_dir), Path(kueue_dir), facts.version)


def built(kueue_version: str | None = None) -> Binaries | None:
    """The cached binaries for the pinned versions (Kueue: ``kueue_version``, default the one go.mod pins), or
    None when they are not built yet."""
    facts = _facts(kueue_version)
    r = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print", "--kueue", facts.version], capture_output=True, text=True, check=False
    )
    return _binaries(r.stdout, facts) if r.returncode == 0 and len(r.stdout.split()) >= 2 else None


def build(kueue_version: str | None = None, *, quiet: bool = False) -> Binaries:
    """Build what is missing (minutes, once per machine and pin), with progress on stderr."""
    facts = _facts(kueue_version)
    argv = ["bash", str(BUILD_SCRIPT), "--kueue", facts.version]
    r = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if quiet else None, text=True, check=False
    )
    if r.returncode != 0 or len(r.stdout.split()) < 2:
        raise StackError(f"building the Kubernetes/Kueue stack failed (exit {r.returncode}): {' '.join(argv)}")
    return _binaries(r.stdout, facts)


def ensure_built(kueue_version: str | None = None) -> Binaries:
    """The binaries for Kueue ``kueue_version`` (default: the one go.mod pins), built first if missing."""
    return built(kueue_version) or build(kueue_version)


# -- certificates -------------------------------------------------------------------------------------


def _write_pki(directory: Path) -> dict[str, Path]:
    """A CA, a serving certificate for 127.0.0.1/localhost signed by it, and a service-account key."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)

    def pem_key(key: Any) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idleshare-test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "tls.crt": serving.public_bytes(serialization.Encoding.PEM),
        "tls.key": pem_key(serving_key),
        "sa.key": pem_key(sa_key),
    }
    out = {}
    for name, data in files.items():
        (directory / name).write_bytes(data)
        out[name] = directory / name
    return out


# -- processes ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    started_seconds: float = 0.0

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


@dataclass
class KubeStack:
    """One real cluster on loopback. ``start()`` returns when the apiserver is ready and Kueue serves its
    webhooks; ``stop()`` ends every process by its PID (SIGTERM, then SIGKILL after ``grace`` seconds)."""

    workdir: Path
    binaries: Binaries
    kueue: bool = True
    rbac_manifests: tuple[Path, ...] = RBAC_MANIFESTS
    admin_token: str = "idleshare-test-admin-token"
    idleshare_token: str = "idleshare-test-recompute-token"
    extra_tokens: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """More bearer tokens: ``{token: (user, (group, ...))}``."""
    grace: float = 10.0
    fair_sharing: bool = True
    """Kueue's fair sharing (manager-wide): on — the ``fairSharing`` section with :data:`FAIR_SHARING_STRATEGIES`
    — as the suites and the demo run it; off, no section (classical preemption: a borrower's admitted work is
    only reclaimed by a lender, never evened out)."""
    fair_sharing_strategies: tuple[str, ...] = FAIR_SHARING_STRATEGIES
    place_pods: bool | None = None
    """kube-scheduler, kube-controller-manager and the kubelet stand-in (:mod:`devkit.kube.placement`); None: when
    Kueue runs."""
    scheduler_token: str = "idleshare-test-kube-scheduler-token"
    controller_manager_token: str = "idleshare-test-kube-controller-manager-token"
    etcd_quota_bytes: int | None = None
    """etcd's ``--quota-backend-bytes`` (None: etcd's default, 2 GiB): the scale bench's 100k nodes need more."""
    kueue_version: str | None = None
    """The Kueue this stack runs (:data:`devkit.kube.kueue_versions.VERSIONS`); None: the one ``binaries`` hold,
    which must be the same (``ensure_built(kueue_version)`` builds them)."""

    processes: dict[str, _Process] = field(default_factory=dict, init=False)
    started_seconds: dict[str, float] = field(default_factory=dict, init=False)
    server: str = field(default="", init=False)
    ports: dict[str, int] = field(default_factory=dict, init=False)
    kubelet: placement.KubeletStandIn | None = field(default=None, init=False)

    # -- public ------------------------------------------------------------------------------------

    @property
    def kueue_facts(self) -> KueueVersion:
        """What this stack's Kueue serves and is configured with (:mod:`devkit.kube.kueue_versions`)."""
        return _facts(self.kueue_version or self.binaries.kueue_version)

    @property
    def ca_pem(self) -> bytes:
        return (self.workdir / "pki" / "ca.crt").read_bytes()

    @property
    def ca_file(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def logs(self) -> dict[str, Path]:
        return {name: p.log for name, p in self.processes.items()}

    def kubeconfig(self, user: str = "admin") -> Path:
        """A kubeconfig for ``admin`` (system:masters), ``idleshare`` (the restricted group), ``kube-scheduler`` or
        ``kube-controller-manager``."""
        token = {
            "admin": self.admin_token,
            "idleshare": self.idleshare_token,
            "kube-scheduler": self.scheduler_token,
            "kube-controller-manager": self.controller_manager_token,
        }[user]
        path = self.workdir / f"kubeconfig-{user}"
        if not path.exists():
            config = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": self.server,
                            "certificate-authority-data": base64.b64encode(self.ca_pem).decode(),
                        },
                    }
                ],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": user, "context": {"cluster": "local", "user": user}}],
                "current-context": user,
            }
            path.write_text(json.dumps(config, indent=1))
        return path

    def kubectl(self, *args: str, user: str = "admin", check: bool = True, input: str | None = None) -> str:
        """Run the pinned kubectl against this stack; returns stdout (raises StackError on failure)."""
        r = subprocess.run(
            [str(self.binaries.kubectl), "--kubeconfig", str(self.kubeconfig(user)), *args],
            capture_output=True,
            text=True,
            input=input,
            check=False,
            timeout=120,
        )
        if check and r.returncode != 0:
            raise StackError(f"kubectl {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def rss(self) -> dict[str, int]:
        """Resident memory of each running process, bytes (from /proc)."""
        out = {}
        for name, p in self.processes.items():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{p.popen.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1]) * 1024
        return out

    def pids(self) -> dict[str, int]:
        return {name: p.popen.pid for name, p in self.processes.items()}

    def describe(self) -> str:
        times = ", ".join(f"{n} {s:.1f} s" for n, s in self.started_seconds.items())
        rss = ", ".join(f"{n} {b / 2**20:.0f} MB" for n, b in self.rss().items())
        return f"kube stack (Kueue {self.kueue_facts.version}) at {self.server}: started {times}; RSS {rss}; logs in {self.workdir / 'logs'}"

    def start(self) -> KubeStack:
        if self.kueue_facts.version != self.binaries.kueue_version:
            raise StackError(
                f"KubeStack(kueue_version={self.kueue_version!r}) with the binaries of Kueue "
                f"{self.binaries.kueue_version}: pass ensure_built({self.kueue_version!r})"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        try:
            pki = _write_pki(self.workdir / "pki")
            self._start_etcd()
            self._start_apiserver(pki)
            self._install_crds()
            for manifest in self.rbac_manifests:
                self._create_all(manifest)
            places = self.kueue if self.place_pods is None else self.place_pods
            if places:
                self._spawn_placement(pki)  # they start while Kueue does
            if self.kueue:
                self._start_kueue(pki)
            if places:
                self._wait_placement(pki)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
            self.kubelet = None
        for name in reversed(list(self.processes)):
            p = self.processes[name].popen
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for proc in reversed(list(self.processes.values())):
            p = proc.popen
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=10)

    def __enter__(self) -> KubeStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP as admin (set-up only; tests use devkit.kube.client) ---------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, *, token: str | None = None, content_type: str | None = None
    ) -> tuple[int, Any]:
        """One request as ``token`` (default: admin): (status, the answer's JSON or text). A PATCH is a JSON merge
        patch unless ``content_type`` says otherwise."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        if data is not None:
            merge = "application/merge-patch+json" if method == "PATCH" else "application/json"
            req.add_header("Content-Type", content_type or merge)
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, raw.decode(errors="replace")

    # -- internals ---------------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> _Process:
        log = self.workdir / "logs" / f"{name}.log"
        fh = log.open("ab")
        popen = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, not them: stop() ends them
        )
        fh.close()
        proc = _Process(name, popen, log)
        self.processes[name] = proc
        return proc

    def _wait(self, proc: _Process, what: str, ready: Any, timeout: float) -> None:
        t0 = time.monotonic()
        last = ""
        while time.monotonic() - t0 < timeout:
            if not proc.alive():
                raise StackError(f"{proc.name} exited ({proc.popen.returncode}) before {what}:\n{proc.tail()}")
            try:
                if ready():
                    self.started_seconds[proc.name] = time.monotonic() - t0
                    return
            except Exception as exc:  # not up yet
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
        raise StackError(f"{proc.name}: not {what} after {timeout:.0f} s ({last}):\n{proc.tail()}")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.ports.update(etcd=client, etcd_peer=peer)
        url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        proc = self._spawn(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                "--name=idleshare-test",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=idleshare-test={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
                *([f"--quota-backend-bytes={self.etcd_quota_bytes}"] if self.etcd_quota_bytes else []),
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                return bool(json.loads(r.read()).get("health") == "true")

        self._wait(proc, "healthy", healthy, 60)

    def _start_apiserver(self, pki: Mapping[str, Path]) -> None:
        port = free_port()
        self.ports["apiserver"] = port
        self.server = f"https://127.0.0.1:{port}"
        tokens = self.workdir / "tokens.csv"
        rows = [
            f'{self.admin_token},admin,uid-admin,"system:masters"',
            f"{self.idleshare_token},idleshare,uid-idleshare,{IDLESHARE_GROUP}",
        ]
        kcm_user, kcm_groups = placement.CONTROLLER_MANAGER_USER
        rows.append(f"{self.scheduler_token},{placement.SCHEDULER_USER},uid-kube-scheduler")
        rows.append(f'{self.controller_manager_token},{kcm_user},uid-kube-controller-manager,"{",".join(kcm_groups)}"')
        for i, (token, (user, groups)) in enumerate(self.extra_tokens.items()):
            rows.append(f'{token},{user},uid-extra-{i},"{",".join(groups)}"')
        tokens.write_text("\n".join(rows) + "\n")
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.path("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={pki['tls.crt']}",
                f"--tls-private-key-file={pki['tls.key']}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--service-account-key-file={pki['sa.key']}",
                f"--service-account-signing-key-file={pki['sa.key']}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--authorization-mode=RBAC",
                f"--token-auth-file={tokens}",
                # No node lifecycle controller runs here (devkit.kube.placement.CONTROLLERS): TaintNodesByCondition
                # would leave every new node with the not-ready taint that controller lifts. Nodes are created as
                # they stand.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                # As EKS: a pod asking for nvidia.com/gpu (aws.amazon.com/neuron, ...) tolerates the NoSchedule taint
                # of that name, which GPU and Neuron nodes carry (events/examples/nodes.json): the scheduler places it.
                "--enable-admission-plugins=ExtendedResourceToleration",
                "--allow-privileged=false",
                "--endpoint-reconciler-type=none",  # the kubernetes Service cannot point at a loopback address
                "--v=1",
                *self._audit_flags(),
            ],
        )

        def ready() -> bool:
            status, _ = self.request("GET", "/readyz")
            return status == 200

        self._wait(proc, "ready (/readyz)", ready, 120)

    def _audit_flags(self) -> list[str]:
        """``IDLESHARE_KUBE_AUDIT=1``: every request's metadata in ``logs/audit.log`` (for debugging a test)."""
        if os.environ.get("IDLESHARE_KUBE_AUDIT") != "1":
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]})
        )
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.workdir / 'logs' / 'audit.log'}"]

    def _install_crds(self) -> None:
        t0 = time.monotonic()
        names = []
        served: dict[str, set[str]] = {}  # group/version -> the plurals its discovery must list
        for path in sorted(self.binaries.crds.glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            status, body = self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            if status not in (201, 409):
                raise StackError(f"installing CRD {path.name}: HTTP {status}: {body}")
            names.append(crd["metadata"]["name"])
            for version in crd["spec"]["versions"]:
                if version.get("served"):
                    group_version = f"{crd['spec']['group']}/{version['name']}"
                    served.setdefault(group_version, set()).add(crd["spec"]["names"]["plural"])
        deadline = time.monotonic() + 60
        pending = set(names)
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                status, body = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conditions = (
                    {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}
                    if status == 200
                    else {}
                )
                if conditions.get("Established") == "True":
                    pending.discard(name)
            if pending:
                time.sleep(0.2)
        if pending:
            raise StackError(f"CRDs not established after 60 s: {sorted(pending)}")
        # Discovery must list them, in every version they serve, before clients that use it (kubectl, Kueue) start.
        deadline = time.monotonic() + 30
        while served and time.monotonic() < deadline:
            for group_version in sorted(served):
                status, body = self.request("GET", f"/apis/{group_version}")
                listed = {r.get("name") for r in body.get("resources", [])} if status == 200 else set()
                if served[group_version] <= listed:
                    del served[group_version]
            if served:
                time.sleep(0.2)
        if served:
            raise StackError(f"Kueue's CRDs not in discovery after 30 s: {sorted(served)}")
        self.started_seconds["crds"] = time.monotonic() - t0

    def _create_all(self, manifest: Path) -> None:
        """Create every object of a YAML manifest (RBAC and core kinds) as admin."""
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        paths = {
            "ClusterRole": f"{rbac}/clusterroles",
            "ClusterRoleBinding": f"{rbac}/clusterrolebindings",
            "Namespace": "/api/v1/namespaces",
            "Role": f"{rbac}/namespaces/{{namespace}}/roles",
            "RoleBinding": f"{rbac}/namespaces/{{namespace}}/rolebindings",
        }
        for doc in yaml.safe_load_all(manifest.read_text()):
            if not doc:
                continue
            if doc["kind"] not in paths:
                raise StackError(f"{manifest}: cannot install kind {doc['kind']} (one of {sorted(paths)})")
            namespace = doc["metadata"].get("namespace")
            if namespace:  # a Role in Kueue's namespace: as on a cluster, the namespace is there before it
                status, body = self.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
                if status not in (201, 409):
                    raise StackError(f"creating namespace {namespace}: HTTP {status}: {body}")
            status, body = self.request("POST", paths[doc["kind"]].format(namespace=namespace), doc)
            if status not in (201, 409):
                raise StackError(f"{manifest}: creating {doc['kind']}/{doc['metadata']['name']}: HTTP {status}: {body}")

    def _start_kueue(self, pki: Mapping[str, Path]) -> None:
        health, webhook = free_port(), free_port()
        self.ports.update(kueue_health=health, kueue_webhook=webhook)
        certs = self.workdir / "kueue-certs"
        certs.mkdir(exist_ok=True)
        shutil.copy(pki["tls.crt"], certs / "tls.crt")
        shutil.copy(pki["tls.key"], certs / "tls.key")
        status, body = self.request("POST", "/api/v1/namespaces", {"metadata": {"name": KUEUE_NAMESPACE}})
        if status not in (201, 409):
            raise StackError(f"creating namespace {KUEUE_NAMESPACE}: HTTP {status}: {body}")
        facts = self.kueue_facts
        config: dict[str, Any] = {
            "apiVersion": f"config.kueue.x-k8s.io/{facts.config_api}",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        }
        if self.fair_sharing:
            config["fairSharing"] = {
                **facts.fair_sharing_switch,
                "preemptionStrategies": list(self.fair_sharing_strategies),
            }
        _ensure_metrics_certs(pki)
        config_path = self.workdir / "kueue-config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        self._write_config_map(config_path.read_text())
        proc = self._spawn(
            "kueue",
            [
                str(self.binaries.path("kueue")),
                f"--config={config_path}",
                f"--feature-gates={','.join(facts.feature_gates)}",
                f"--zap-log-level={os.environ.get('IDLESHARE_KUEUE_LOG_LEVEL', 'info')}",
            ],
            env={"KUBECONFIG": str(self.kubeconfig("admin"))},
        )

        def ready() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as r:
                if r.status != 200:
                    return False
            with socket.create_connection(("127.0.0.1", webhook), timeout=2):
                return True

        self._wait(proc, "ready (/readyz and its webhook port)", ready, 120)
        t0 = time.monotonic()
        self._install_webhooks(webhook)
        self._wait_webhooks_answer()
        self.started_seconds["kueue-webhooks"] = time.monotonic() - t0

    def _spawn_placement(self, pki: Mapping[str, Path]) -> None:
        """kube-scheduler and kube-controller-manager, each on a free secure port with the stack's serving
        certificate, as their own users (:mod:`devkit.kube.placement`)."""
        self.ports.update(kube_scheduler=free_port(), kube_controller_manager=free_port())
        config = placement.write_scheduler_config(
            self.workdir / "kube-scheduler.yaml", self.kubeconfig("kube-scheduler")
        )
        self._spawn(
            "kube-scheduler",
            placement.scheduler_argv(self.binaries.path("kube-scheduler"), config, self.ports["kube_scheduler"], pki),
        )
        self._spawn(
            "kube-controller-manager",
            placement.controller_manager_argv(
                self.binaries.path("kube-controller-manager"),
                self.kubeconfig("kube-controller-manager"),
                self.ports["kube_controller_manager"],
                pki,
            ),
        )

    def _wait_placement(self, pki: Mapping[str, Path]) -> None:
        for name in ("kube-scheduler", "kube-controller-manager"):
            port = self.ports[name.replace("-", "_")]
            self._wait(
                self.processes[name], "healthy (/healthz)", lambda p=port: placement.healthy(p, pki["ca.crt"]), 120
            )
        self.kubelet = placement.KubeletStandIn(self.server, self.ca_file, self.admin_token).start()

    def _write_config_map(self, text: str) -> None:
        """``kueue-system/kueue-manager-config``: the Configuration the manager runs with, as an install keeps it."""
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": KUEUE_CONFIG_MAP, "namespace": KUEUE_NAMESPACE},
            "data": {KUEUE_CONFIG_KEY: text},
        }
        status, answer = self.request("POST", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/configmaps", body)
        if status == 409:
            status, answer = self.request(
                "PUT", f"/api/v1/namespaces/{KUEUE_NAMESPACE}/configmaps/{KUEUE_CONFIG_MAP}", body
            )
        if status not in (200, 201):
            raise StackError(f"writing ConfigMap {KUEUE_NAMESPACE}/{KUEUE_CONFIG_MAP}: HTTP {status}: {answer}")

    def _install_webhooks(self, port: int) -> None:
        ca = base64.b64encode(self.ca_pem).decode()
        for doc in yaml.safe_load_all(self.binaries.webhook_manifest.read_text()):
            if not doc:
                continue
            kept = []
            for hook in doc.get("webhooks", []):
                if not any(_served(rule) for rule in hook.get("rules", [])):
                    continue
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
                kept.append(hook)
            doc["webhooks"] = kept
            plural = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations"}.get(
                doc["kind"], "validatingwebhookconfigurations"
            )
            status, body = self.request("POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", doc)
            if status not in (201, 409):
                raise StackError(f"installing {doc['kind']}: HTTP {status}: {body}")

    def _wait_webhooks_answer(self) -> None:
        """A dry-run ResourceFlavor create goes through Kueue's webhooks: when it is admitted, they answer."""
        api_version = self.kueue_facts.api_version
        probe = {"apiVersion": api_version, "kind": "ResourceFlavor", "metadata": {"name": "webhook-probe"}, "spec": {}}
        deadline = time.monotonic() + 60
        last: Any = None
        while time.monotonic() < deadline:
            status, last = self.request("POST", f"/apis/{api_version}/resourceflavors?dryRun=All", probe)
            if status == 201:
                return
            time.sleep(0.2)
        raise StackError(f"Kueue's webhooks do not answer after 60 s: {last}\n{self.processes['kueue'].tail()}")


KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Kueue v0.19 opens a certificate here at start whenever its internal cert management is off, even with
metrics disabled (``cmd/kueue/main.go``: a fixed path, no flag). The stack puts one there once."""


def _ensure_metrics_certs(pki: Mapping[str, Path]) -> None:
    if (KUEUE_METRICS_CERTS / "tls.crt").exists() and (KUEUE_METRICS_CERTS / "tls.key").exists():
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            tmp = KUEUE_METRICS_CERTS / f".{name}.{os.getpid()}"
            shutil.copy(pki[name], tmp)
            os.replace(tmp, KUEUE_METRICS_CERTS / name)  # atomic: parallel stacks may race here
    except OSError as exc:
        raise StackError(
            f"Kueue needs a certificate in {KUEUE_METRICS_CERTS} (a path fixed in Kueue v0.19; metrics are off): "
            f"{exc}. Create it once as root: mkdir -p {KUEUE_METRICS_CERTS} && cp CERT KEY there as tls.crt/tls.key"
        ) from exc


def _served(rule: Mapping[str, Any]) -> bool:
    for group in rule.get("apiGroups", []):
        if group in SERVED_WEBHOOK_GROUPS:
            wanted = SERVED_WEBHOOK_GROUPS[group]
            if wanted is None or set(rule.get("resources", [])) & wanted:
                return True
    return False


@contextlib.contextmanager
def running(workdir: Path | None = None, **kwargs: Any) -> Iterator[KubeStack]:
    """Build if needed (Kueue ``kueue_version``, default the pinned one), start a stack in ``workdir`` (a
    temporary directory if None), stop it after."""
    binaries = ensure_built(kwargs.get("kueue_version"))
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="idleshare-kube-")))
        ks = KubeStack(workdir, binaries, **kwargs)
        stack.enter_context(ks)
        yield ks


class _Stopped(BaseException):
    """A stop signal reached ``python -m devkit.kube.stack``: raised where it runs, so that the stack stops."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _ignore_stop_signals() -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def _stop_on_signals() -> None:
    """SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop the stack: its processes run in sessions of their own (a terminal's
    Ctrl-C reaches only this module), so a signal left to its default would end this process alone and leave etcd,
    the apiserver and Kueue running. The first one raises :class:`_Stopped`; any further one is ignored, so that it
    cannot cut the stop short."""

    def stop(signum: int, frame: object) -> None:
        _ignore_stop_signals()
        raise _Stopped(signal.Signals(signum).name)

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)


def main(argv: list[str] | None = None) -> int:
    """``python -m devkit.kube.stack [--build-only] [--no-fair-sharing] [--kueue VERSION]``: build, start, print
    how to reach it, run until a process of the stack ends or a signal comes — SIGTERM, SIGINT (Ctrl-C), SIGHUP —
    then stop every process of it and exit 0 (Kueue: VERSION, else ``$IDLESHARE_KUEUE_VERSION``, else the pinned
    one)."""
    args = sys.argv[1:] if argv is None else argv
    version = args[args.index("--kueue") + 1] if "--kueue" in args[:-1] else None
    try:
        facts = kueue_versions.get(version)
        binaries = ensure_built(facts.version)
    except (kueue_versions.UnknownKueueVersion, StackError) as exc:
        print(f"kube stack: {exc}", file=sys.stderr)
        return 2
    if "--build-only" in args:
        print(binaries.kueue_root or binaries.root)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="idleshare-kube-"))
    _stop_on_signals()
    try:
        with running(workdir, fair_sharing="--no-fair-sharing" not in args, kueue_version=facts.version) as ks:
            try:
                print(ks.describe())
                print(
                    f"export KUBECONFIG={ks.kubeconfig('admin')}   # admin; idleshare's own: {ks.kubeconfig('idleshare')}"
                )
                print(f"kubectl: {binaries.kubectl}", flush=True)
                while all(p.alive() for p in ks.processes.values()):
                    time.sleep(1)
            finally:
                _ignore_stop_signals()  # the stop on the way out is not cut short
    except _Stopped as stopped:
        print(f"kube stack: {stopped}: stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
