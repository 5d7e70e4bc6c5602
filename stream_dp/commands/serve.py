"""`stream-dp serve`: run one worker (Faust) against Kafka or the embedded broker.

Without ``STREAM_DP_KAFKA_BOOTSTRAP`` (or ``--bootstrap``) it starts the embedded Tansu
broker on a free loopback port (memory only: for trying the service, not production).
All topics are created explicitly, with their partition counts, before any client starts.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import logging.config
from typing import TYPE_CHECKING

from stream_dp.commands.basemap_options import add_basemap_options
from stream_dp.commands.clock_options import add_clock_options
from stream_dp.commands.profile import period_words, promise_line
from stream_dp.commands.release import add_release_options, settings_from_args
from stream_dp.commands.shared import (
    CliError,
    add_bootstrap_option,
    plain_text,
)
from stream_dp.config import ConfigError, Settings
from stream_dp.secret_routes import SECRET_ROUTES

if TYPE_CHECKING:
    from stream_dp.worker.metrics import ServiceMetrics

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "serve",
        help="run a worker",
        description=plain_text(__doc__),
    )
    add_bootstrap_option(parser, ", else an embedded broker")
    parser.add_argument(
        "--web-port", type=int, metavar="N", help="HTTP port of /metrics etc. (default 8000)"
    )
    parser.add_argument("--web-host", metavar="HOST", help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning"],
        help="the lowest level logged (default info)",
    )
    parser.add_argument("--log-format", choices=["text", "json"], help="log lines (default text)")
    add_basemap_options(parser)
    add_release_options(parser)
    add_clock_options(parser)
    parser.set_defaults(run=run)


def serve_settings(args: argparse.Namespace) -> Settings:
    """The worker's settings: its options over the environment and the settings file, each
    unset release setting at the budget profile's default (``config``)."""
    given = {
        "kafka_bootstrap": args.bootstrap,
        "web_port": args.web_port,
        "web_host": args.web_host,
        "log_format": args.log_format,
    }
    settings = settings_from_args(args, **given)
    if settings.web_port == 0:  # Faust binds the port it is given, and refuses 0
        raise CliError(
            "invalid setting web_port (--web-port / STREAM_DP_WEB_PORT): serve needs a port "
            "in [1, 65535], got 0"
        )
    return settings


def busiest_period_line(metrics: ServiceMetrics, settings: Settings) -> str:
    """The busiest vehicle's loss over the budget period, as the worker last exported it,
    beside the promise (the worker's last line)."""
    if settings.privacy_model == SECRET_ROUTES:
        return secret_period_line(metrics, settings)
    worst = metrics.busiest_period_loss()
    return (
        f"busiest vehicle's loss over the last {period_words(settings.budget_period_seconds)}: "
        f"epsilon {worst:.2f} (basic); {promise_line(settings)}"
    )


def secret_period_line(metrics: ServiceMetrics, settings: Settings) -> str:
    """Secret routes (docs/math.md §14.5): the loss every vehicle has taken over the period
    so far, the same for all, beside B per period."""
    epsilon, delta = metrics.model_period_loss(SECRET_ROUTES)
    return (
        f"every vehicle's loss over the period so far (secret-routes): epsilon {epsilon:.2f} "
        f"at delta {delta:.2g}; {start_line(settings)}"
    )


def start_line(settings: Settings) -> str:
    """The worker's first line: the promise, and under secret routes the model's own (every
    vehicle, at delta; docs/math.md §14.5)."""
    if settings.privacy_model != SECRET_ROUTES:
        return promise_line(settings)
    return (
        f"promise (secret-routes): every vehicle loses at most epsilon "
        f"{settings.vehicle_budget:g} at delta {settings.accounting_delta:g} per "
        f"{period_words(settings.budget_period_seconds)}"
    )


def web_url(settings: Settings) -> str:
    """The worker's HTTP address as a URL (an IPv6 host in brackets)."""
    host = f"[{settings.web_host}]" if ":" in settings.web_host else settings.web_host
    return f"http://{host}:{settings.web_port}"


def run(args: argparse.Namespace) -> int:
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.kafka.embedded_broker import EmbeddedBroker
    from stream_dp.kafka.service_topics import ensure_service_topics
    from stream_dp.worker.app import EXIT_FAILED, build_app
    from stream_dp.worker.connection_settings import connection_from_settings
    from stream_dp.worker.faust_worker import ServiceWorker
    from stream_dp.worker.ledger_backup import ledger_missing
    from stream_dp.worker.log_setup import logging_config

    settings = serve_settings(args)
    log_config = logging_config(args.log_level, settings.log_format)
    logging.config.dictConfig(log_config)
    log.info("%s", start_line(settings))
    if settings.keep_freed_memory:
        from stream_dp.allocator import keep_freed_memory

        keep_freed_memory()
    broker = None
    if not settings.kafka_bootstrap:
        broker = EmbeddedBroker().start()
        log.warning("embedded broker (memory only: a restart loses everything) started")
    try:
        conn = connection_from_settings(settings, broker.bootstrap if broker else None)
        log.info("kafka bootstrap servers: %s", conn.bootstrap_servers)
        ensure_service_topics(settings, conn)
        if refusal := asyncio.run(ledger_missing(conn, settings)):
            log.error("stream-dp worker stopping: %s", refusal)
            return EXIT_FAILED
        app = build_app(settings, conn, LaplaceNoise())
        asyncio.set_event_loop(asyncio.new_event_loop())
        worker = ServiceWorker(
            app,
            web_url=web_url(settings),
            loglevel=args.log_level.upper(),
            quiet=True,
            logging_config=dict(log_config),
        )
        try:
            worker.execute_from_commandline()
        except SystemExit:
            pass
        runtime = app.stream_dp_runtime  # type: ignore[attr-defined]
        log.info("%s", busiest_period_line(runtime.metrics, settings))
        if runtime.failed:
            return EXIT_FAILED
        if worker.interrupted:  # Faust stopped cleanly; Ctrl-C ends it as every command
            raise KeyboardInterrupt
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    finally:
        if broker is not None:
            broker.stop()
    return 0
