"""The Kafka connection a worker uses, from the Kafka group of its settings."""

from __future__ import annotations

from stream_dp.config import ConfigError, KafkaSettings, label
from stream_dp.kafka.connection import KafkaConnection


def connection_from_settings(
    settings: KafkaSettings, bootstrap: str | None = None
) -> KafkaConnection:
    """``bootstrap`` (e.g. an embedded broker's) overrides ``kafka_bootstrap``."""
    servers = bootstrap or settings.kafka_bootstrap
    if not servers:
        raise ConfigError(
            f"invalid setting {label('kafka_bootstrap')}: not set, and no embedded broker "
            "was started"
        )

    def secret(value: object) -> str | None:
        return None if value is None else value.get_secret_value()  # type: ignore[attr-defined]

    def path(value: object) -> str | None:
        return None if value is None else str(value)

    return KafkaConnection(
        bootstrap_servers=servers,
        security_protocol=settings.kafka_security_protocol,
        sasl_mechanism=settings.kafka_sasl_mechanism,
        sasl_username=settings.kafka_sasl_username,
        sasl_password=secret(settings.kafka_sasl_password),
        ssl_cafile=path(settings.kafka_ssl_cafile),
        ssl_certfile=path(settings.kafka_ssl_certfile),
        ssl_keyfile=path(settings.kafka_ssl_keyfile),
        ssl_key_password=secret(settings.kafka_ssl_key_password),
        embedded=settings.kafka_embedded or bootstrap is not None,
        client_id=settings.app_id,
    )
