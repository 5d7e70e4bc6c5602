"""How to reach the Kafka cluster: one value turned into aiokafka and Faust client arguments."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka.helpers import create_ssl_context

from stream_dp.kafka import tansu_quirks

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENV_PREFIX = "STREAM_DP_KAFKA_"


@dataclass(frozen=True)
class KafkaConnection:
    """Bootstrap servers, security settings, and whether the broker is the embedded Tansu.

    ``bootstrap_servers`` is a comma-separated ``host:port`` list. TLS file paths are used
    when ``security_protocol`` is ``SSL`` or ``SASL_SSL``; SASL fields when it is
    ``SASL_PLAINTEXT`` or ``SASL_SSL``. Tansu workarounds are merged only when ``embedded``.
    """

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    embedded: bool = False
    client_id: str = "stream-dp"

    def __post_init__(self) -> None:
        if not self.hosts:
            raise ValueError("bootstrap_servers is empty")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security_protocol {self.security_protocol!r} is not one of {SECURITY_PROTOCOLS}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"sasl_mechanism {self.sasl_mechanism!r} is not one of {SASL_MECHANISMS}"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"{self.security_protocol} needs sasl_username and sasl_password")

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, bootstrap: str | None = None
    ) -> KafkaConnection:
        """Build from ``STREAM_DP_KAFKA_*`` variables; ``bootstrap`` overrides ``..._BOOTSTRAP``.

        Variables: ``BOOTSTRAP``, ``SECURITY_PROTOCOL``, ``SASL_MECHANISM``, ``SASL_USERNAME``,
        ``SASL_PASSWORD``, ``SSL_CAFILE``, ``SSL_CERTFILE``, ``SSL_KEYFILE``,
        ``SSL_KEY_PASSWORD``, ``EMBEDDED`` (``1``/``true`` when the broker is Tansu).
        """
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            return env.get(ENV_PREFIX + name) or None

        servers = bootstrap or get("BOOTSTRAP")
        if not servers:
            raise ValueError(f"no bootstrap server: set {ENV_PREFIX}BOOTSTRAP")
        return cls(
            bootstrap_servers=servers,
            security_protocol=(get("SECURITY_PROTOCOL") or "PLAINTEXT").upper(),
            sasl_mechanism=get("SASL_MECHANISM"),
            sasl_username=get("SASL_USERNAME"),
            sasl_password=get("SASL_PASSWORD"),
            ssl_cafile=get("SSL_CAFILE"),
            ssl_certfile=get("SSL_CERTFILE"),
            ssl_keyfile=get("SSL_KEYFILE"),
            ssl_key_password=get("SSL_KEY_PASSWORD"),
            embedded=(get("EMBEDDED") or "").lower() in ("1", "true", "yes"),
        )

    @property
    def hosts(self) -> list[str]:
        """The bootstrap servers as a list of ``host:port``."""
        return [h.strip() for h in self.bootstrap_servers.split(",") if h.strip()]

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS context from the CA/cert/key files, or ``None`` without TLS."""
        if not self.uses_tls:
            return None
        return create_ssl_context(
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            password=self.ssl_key_password,
        )

    def _client_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.hosts,
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.uses_tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password
        return kwargs

    def admin_kwargs(self) -> dict[str, Any]:
        """Arguments for ``aiokafka.admin.AIOKafkaAdminClient``."""
        return self._client_kwargs()

    def producer_kwargs(self) -> dict[str, Any]:
        """Arguments for ``aiokafka.AIOKafkaProducer``."""
        return self._client_kwargs()

    def consumer_kwargs(self) -> dict[str, Any]:
        """Arguments for ``aiokafka.AIOKafkaConsumer`` (group timings tuned when embedded)."""
        kwargs = self._client_kwargs()
        if self.embedded:
            kwargs.update(tansu_quirks.aiokafka_consumer_overrides())
        return kwargs

    def reader_kwargs(self, fetch_max_wait_ms: int) -> dict[str, Any]:
        """Arguments for an ``AIOKafkaConsumer`` that reads assigned partitions on its own: no
        group, no commits, an offset out of range reset to the earliest record."""
        return self.consumer_kwargs() | {
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": fetch_max_wait_ms,
        }

    def faust_kwargs(self, *, relies_on_table_recovery: bool = False) -> dict[str, Any]:
        """Arguments for ``faust.App``: ``broker``, ``broker_credentials`` and quirk overrides."""
        kwargs: dict[str, Any] = {"broker": [f"kafka://{host}" for host in self.hosts]}
        credentials = self._faust_credentials()
        if credentials is not None:
            kwargs["broker_credentials"] = credentials
        if self.embedded:
            kwargs.update(
                tansu_quirks.faust_settings_overrides(
                    relies_on_table_recovery=relies_on_table_recovery
                )
            )
        return kwargs

    def _faust_credentials(self) -> Any:
        from faust.auth import SASLCredentials, SSLCredentials

        if self.uses_sasl:
            return SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password,
                ssl_context=self.ssl_context(),
                mechanism=self.sasl_mechanism,
            )
        if self.uses_tls:
            return SSLCredentials(self.ssl_context())
        return None
