"""The real DynamoDB Local (the jar shipped by the npm package ``amplify-dynamodb-simulator``, pinned in
``package.json``; ``npm ci`` installs it), run with the machine's Java on a free loopback port.

    with DynamoDBLocal.start() as ddb:   # or the ``dynamodb_local`` pytest fixture
        boto3.resource("dynamodb", endpoint_url=ddb.endpoint, ...)

It runs ``-inMemory``: :meth:`DynamoDBLocal.restart` (stop, then start on the same port — for fault
tests) loses every table and item; that is expected, a test that restarts recreates what it needs.
Every wait is bounded (``START_TIMEOUT`` seconds to answer — 20, or ``IDLESHARE_DDB_LOCAL_START_TIMEOUT`` —,
``STOP_TIMEOUT`` to exit).

DynamoDB Local deletes items whose ``ttl`` lies in the past (as DynamoDB does, but within seconds):
tests that write history items must use a clock near the real now.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]
EMULATOR_DIR = REPO / "node_modules" / "amplify-dynamodb-simulator" / "emulator"
JAR = "DynamoDBLocal.jar"
START_TIMEOUT = float(os.environ.get("IDLESHARE_DDB_LOCAL_START_TIMEOUT", "20"))
STOP_TIMEOUT = 10.0
HOST = "127.0.0.1"
# A short-lived test server: C1 JIT only and the serial GC start it about twice as fast.
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms64m", "-Xmx512m")


class Unavailable(RuntimeError):
    """Java or the jar is missing: the reason says what to install."""


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        java_home = os.environ.get("JAVA_HOME")
        candidate = Path(java_home, "bin", "java") if java_home else None
        if candidate is not None and candidate.is_file():
            return str(candidate)
        raise Unavailable(
            "java not found on PATH (DynamoDB Local needs Java 17+: apt-get install openjdk-17-jre-headless)"
        )
    return java


def check_available(emulator_dir: Path = EMULATOR_DIR) -> tuple[str, Path]:
    """(java, emulator dir) or Unavailable with what is missing."""
    java = java_binary()
    if not (emulator_dir / JAR).is_file():
        raise Unavailable(
            f"{emulator_dir / JAR} not found: run `npm ci` at the repository root "
            "(package.json pins amplify-dynamodb-simulator, which ships DynamoDB Local)"
        )
    return java, emulator_dir


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class DynamoDBLocal:
    """One DynamoDB Local process on ``127.0.0.1:<port>``."""

    def __init__(self, port: int | None = None, emulator_dir: Path = EMULATOR_DIR) -> None:
        self.java, self.emulator_dir = check_available(emulator_dir)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server; close()

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    @classmethod
    def start(cls, port: int | None = None) -> DynamoDBLocal:
        server = cls(port)
        server.launch()
        return server

    def launch(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self.process = subprocess.Popen(
            [
                self.java,
                *JVM_FLAGS,
                "-Djava.library.path=./DynamoDBLocal_lib",
                "-jar",
                JAR,
                "-inMemory",
                "-port",
                str(self.port),
            ],
            cwd=self.emulator_dir,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_answering()

    def _wait_until_answering(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"DynamoDB Local exited with {self.process.returncode} on port {self.port}:\n{self.output()}"
                )
            if self.answering():
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"DynamoDB Local did not answer on {self.endpoint} within {START_TIMEOUT:.0f}s:\n{self.output()}"
        )

    def answering(self) -> bool:
        """True once the HTTP endpoint answers (any HTTP status: an unsigned GET gets a 400)."""
        try:
            with urllib.request.urlopen(self.endpoint, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except (urllib.error.URLError, OSError):
            return False

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)
        self.process = None
        # the port must be free again before a restart binds it
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and self.answering():
            time.sleep(0.1)

    def restart(self) -> None:
        """Stop, then start on the same port. In-memory: every table and item is gone afterwards."""
        self.stop()
        self.launch()

    def close(self) -> None:
        self.stop()
        self._log.close()

    def __enter__(self) -> DynamoDBLocal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
