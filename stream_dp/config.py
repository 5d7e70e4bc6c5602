"""Service configuration: environment variables (``STREAM_DP_*``) over an optional file.

The file is TOML or JSON, named by ``STREAM_DP_CONFIG_FILE``. Every value is validated here,
at start (numbers must be finite and in range; ``none`` unsets an optional setting); an invalid
one fails fast with one line naming the setting, its flag and its variable
(:func:`load_settings`, :func:`explain`); a cross-field rule raises :class:`SettingError`.
Release parameters (``epsilon``, ``upper``, ``resolution``, ``window_seconds``) are
configuration, never derived from the data.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
import tomllib
from collections.abc import Collection, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from stream_dp.dp.secret_accounting import pld_available as secret_routes_available
from stream_dp.web.basemap import OSM, check_map_tiles

#: ``privacy_model`` of the two models (docs/math.md §1-13 and §14).
PUBLIC_OCCUPANCY, SECRET_ROUTES = "public-occupancy", "secret-routes"
PrivacyModel = Literal["public-occupancy", "secret-routes"]
#: ``budget_planner``: how the vehicle budget plans a window (docs/math.md §13.1, §13.5).
BudgetPlanner = Literal["auto", "rules", "optimiser"]
BUDGET_PLANNERS: tuple[str, ...] = get_args(BudgetPlanner)
#: The planners that plan a window (the summary's ``planned_by``; "auto" picks one of them).
WINDOW_PLANNERS: tuple[str, ...] = ("rules", "optimiser")
#: ``resolution_choice`` under secret routes with two levels (docs/math.md §14.9, §14.10).
ResolutionChoice = Literal["fixed", "adaptive"]
RESOLUTION_CHOICES: tuple[str, ...] = get_args(ResolutionChoice)
#: The pacing burst when unset: this share of the vehicle budget B (docs/math.md §13.1).
DEFAULT_BURST_SHARE = 0.25
#: The longest span a cell may pool under a vehicle budget, in windows (§13.3).
DEFAULT_MAX_SPAN_HOURS = 8
#: ``optimiser_max_pairs``'s default: with ``budget_planner = "auto"`` a window of more pooled
#: (cell, vehicle) pairs than this is planned by the rules, a smaller one by the optimiser
#: (docs/math.md §13.5, "Which planner").
#: The optimiser's solve grows with the pairs it weighs: on the panel's data (at most 66,607
#: pooled pairs a window, the simulated city's rush hour) it takes 0.8-1.4x the rules' time
#: (the city day: 0.96x the fixed-epsilon release); on the 1M-reading window (551,916 pairs)
#: 4.4-4.6x the fixed-epsilon release where the rules took 1.4-2.0x (the same runs, by machine;
#: 1.32-1.35x since their re-plans stop sooner, docs/math.md §13.3).
OPTIMISER_MAX_PAIRS = 200_000
#: The budget profile (docs/configuration.md, "Defaults"): each vehicle loses at most B over
#: any period, B and the period as the settings' defaults.
DEFAULT_VEHICLE_BUDGET = 14.0
DEFAULT_BUDGET_PERIOD_SECONDS = 7 * 86400
#: The default target T is a share of U: 10 km/h at the AIS sample's U of 65 km/h (2/13 of U).
TARGET_AT_UPPER = (10.0, 65.0)

ENV_PREFIX = "STREAM_DP_"
#: Adaptive cells merge up to this many resolutions above ``resolution`` unless
#: ``coarsest_resolution`` is set (README, "Adaptive cells").
COARSEST_RESOLUTION_STEPS = 5
CONFIG_FILE_ENV = "STREAM_DP_CONFIG_FILE"
# STREAM_DP_* variables that are not settings (the config file's name, test-only fault points).
EXTRA_ENV_VARS: tuple[str, ...] = (CONFIG_FILE_ENV, "STREAM_DP_FAULT_INJECTION")
#: Written for an optional setting (flag, variable or config file) to unset it.
NONE_WORD = "none"


class ConfigError(ValueError):
    """An invalid configuration value; the message names the field."""


class SettingError(ValueError):
    """Raised by a cross-field rule of :class:`Settings`: ``field`` is the setting to change."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


class ReleaseSettings(BaseModel):
    """The DP release: what the windows and the release read (through ``ReleaseParams``)."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    epsilon: float = Field(
        1.0,
        gt=0,
        le=100,  # e^100: no privacy left, and a far larger one stalls the exact sampler
        description="Per-cell budget: (1 - variance_share) eps mean + the rest var.",
    )
    variance_share: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Share of each cell's epsilon spent on the variance (0: the variance is "
        "not released and the mean gets all of epsilon).",
    )
    upper: float = Field(65.0, gt=0, description="Public upper bound U of a reading (km/h).")
    resolution: int = Field(8, ge=0, le=15, description="H3 resolution of the cells.")
    window_seconds: int = Field(3600, gt=0, description="Event-time window (aligned to epoch).")
    grace_seconds: float = Field(600.0, ge=0, description="Watermark = max event time - grace.")
    idle_close_seconds: float = Field(
        30.0, gt=0, description="Wall-clock seconds without readings before open windows close."
    )
    max_future_seconds: float | None = Field(
        3600.0,
        ge=0,
        description="The service refuses readings stamped more than this ahead of the wall "
        "clock (STREAM_DP_MAX_FUTURE_SECONDS=none: only the fixed range 1970..9000 applies; "
        "the offline release never reads the clock).",
    )
    prefix_limit: int = Field(
        64, ge=1, description="C: first readings kept per (window, cell, vehicle) for the cap."
    )
    error_bound: float | None = Field(None, gt=0, description="Optional E* for CLIP-USER.")
    pseudo_user: bool = Field(True, description="Run the pseudo-user cap step (Sec. V-B3).")
    min_vehicles: int = Field(1, ge=1, description="Release only cells with this many vehicles.")
    top_cells: int | None = Field(None, ge=1, description="Release only the N busiest cells.")
    mean_mechanism: str = Field("clip", description="Per-cell mean mechanism (see docs).")
    delta: float | None = Field(None, gt=0, lt=1, description="delta for (eps, delta) means.")
    budget_cap: float | None = Field(
        None,
        gt=0,
        description="Per-vehicle cap on summed epsilon over the rolling budget period "
        "(unset: losses are tracked, not capped).",
    )
    budget_period_seconds: int = Field(
        DEFAULT_BUDGET_PERIOD_SECONDS,
        gt=0,
        description="Rolling period of the per-vehicle budget ledger.",
    )
    accounting: Literal["basic", "pld"] = Field(
        "basic",
        description="Per-vehicle loss over the budget period: 'basic' (summed epsilon) or "
        "'pld' (epsilon at accounting_delta from the privacy-loss distribution of the "
        "vehicle's Laplace releases; needs the [pld] extra).",
    )
    accounting_delta: float = Field(
        1e-6, gt=0, lt=1, description="delta at which the 'pld' accounting states epsilon."
    )
    target_mean_error: float | None = Field(
        None,
        gt=0,
        description="T (units of U): release adaptive cells whose mean_error is <= T, "
        "between coarsest_resolution and resolution (unset: 2/13 of U, 10 at U 65; none: "
        "fixed cells at resolution; the default applies to the clip mean only, another "
        "mean_mechanism gets none).",
    )
    coarsest_resolution: int | None = Field(
        None,
        ge=0,
        le=15,
        description="R0: the coarsest resolution adaptive cells merge up to (unset: "
        f"max(0, resolution - {COARSEST_RESOLUTION_STEPS})).",
    )
    adaptive_shape: Literal["compact", "remainder"] = Field(
        "remainder",
        description="Adaptive cells: 'compact' (siblings merge into their parent together) "
        "or 'remainder' (a parent releases what its released children leave).",
    )
    vehicle_budget: float | None = Field(
        DEFAULT_VEHICLE_BUDGET,
        gt=0,
        allow_inf_nan=False,
        description="B: each vehicle loses at most this epsilon over any budget_period_seconds "
        "(per-cell epsilon, pacing, sit-outs; needs target_mean_error; replaces budget_cap; "
        "none: the fixed-epsilon mode, also with fixed cells).",
    )
    vehicle_budget_burst: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Pacing: the most a vehicle may spend at once (token bucket capacity, "
        "refilled at B per period; default B/4).",
    )
    max_span_hours: int = Field(
        DEFAULT_MAX_SPAN_HOURS,
        ge=1,
        le=168,
        description="With vehicle_budget: a cell may pool this many consecutive windows.",
    )
    budget_planner: BudgetPlanner = Field(
        "auto",
        description="With vehicle_budget: 'optimiser' (expected useful readings within each "
        "vehicle's room, docs/math.md §13.5), 'rules' (the least epsilon meeting T, refusals) "
        "or 'auto' (the optimiser up to optimiser_max_pairs pooled cell-vehicle pairs a "
        "window, else the rules; §13.5).",
    )
    optimiser_max_pairs: int = Field(
        OPTIMISER_MAX_PAIRS,
        ge=0,
        description="With budget_planner 'auto': a window of at most this many pooled "
        "cell-vehicle pairs is planned by the optimiser, a larger one by the rules (docs/math.md "
        "§13.5, 'Which planner'; 0: every window with readings by the rules).",
    )
    privacy_model: PrivacyModel = Field(
        "public-occupancy",
        description="'public-occupancy': who was in which cell is public (fixed routes; "
        "docs/math.md §1-13); 'secret-routes': nothing about a vehicle is public, every "
        "vehicle loses B per period (docs/math.md §14).",
    )
    contribution_cells: int = Field(
        1, ge=1, le=16, description="secret-routes: L0, the most cells a vehicle adds to a window."
    )
    coarse_resolution: int | None = Field(
        None,
        ge=0,
        le=15,
        description="secret-routes: also release the parents of the cells at this coarser "
        "resolution (two levels, each L0 cells a vehicle; none: one level).",
    )
    resolution_choice: ResolutionChoice = Field(
        "adaptive",
        description="secret-routes with coarse_resolution: 'adaptive' releases the fine level "
        "only under the coarse cells whose noisy count asks for it (docs/math.md §14.10); "
        "'fixed' releases both levels everywhere (§14.9).",
    )
    count_share: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="secret-routes: share of each cell's epsilon spent on the vehicle count.",
    )


class KafkaSettings(BaseModel):
    """The broker, the topics and the ingest batches."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    kafka_bootstrap: str | None = Field(
        None, description="host:port[,host:port]; unset = start the embedded broker."
    )
    kafka_embedded: bool = Field(
        False, description="The broker is the embedded Tansu (enables its workarounds)."
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: SecretStr | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    kafka_ssl_key_password: SecretStr | None = None
    app_id: str = Field("stream-dp", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    partitions: int = Field(4, ge=1, le=1024, description="Partitions of the readings topic.")
    topic_readings: str = "stream-dp.readings"
    topic_dlq: str = "stream-dp.readings.dlq"
    topic_releases: str = "stream-dp.releases"
    topic_partials: str = "stream-dp.partials"
    topic_state: str = "stream-dp.state"
    topic_release_log: str = "stream-dp.release-log"
    batch_size: int = Field(2000, ge=1, description="Max messages per ingest batch.")
    batch_seconds: float = Field(0.2, gt=0, description="Max wait to fill an ingest batch.")

    @field_validator("kafka_bootstrap")
    @classmethod
    def _some_host(cls, value: str | None) -> str | None:
        if value is not None and not [h for h in value.split(",") if h.strip()]:
            raise ValueError("names no host:port")
        return value


class OperationsSettings(BaseModel):
    """Running a worker: health, logs, topic creation, the ledger's guard, local scratch."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    broker_unavailable_seconds: float = Field(
        10.0, gt=0, description="/readyz is 503 once the broker has not answered this long."
    )
    stall_seconds: float = Field(
        120.0,
        gt=0,
        description="/healthz fails and the worker exits (status 1) once the broker has not "
        "answered this long; it exits at once if the broker lost the service's topics.",
    )
    log_format: Literal["text", "json"] = Field("text", description="Worker log lines.")
    topic_replication_factor: int | None = Field(
        None, ge=1, description="Replication of the topics created (unset: min(3, brokers))."
    )
    topic_min_insync_replicas: int | None = Field(
        None,
        ge=1,
        description="min.insync.replicas of the topics created (unset: one less than the "
        "replication factor, at least 1).",
    )
    topic_retention_ms: int = Field(
        7 * 24 * 3600 * 1000,
        ge=-1,
        description="retention.ms of readings, dead letters, releases, partials, state "
        "(the release log is kept forever).",
    )
    require_existing_ledger: bool = Field(
        False,
        description="A worker that finds the release log (the privacy ledger) empty exits "
        "(status 1) instead of starting every vehicle's loss from zero; restore it with "
        "`stream-dp ledger import`, or start a first one with `stream-dp ledger init`.",
    )

    keep_freed_memory: bool = Field(
        True,
        description="glibc only: keep freed memory for the next window instead of returning "
        "it to the OS (far fewer page faults per release; see stream_dp.allocator).",
    )
    data_dir: Path = Field(
        Path(tempfile.gettempdir()) / "stream-dp",
        description="Local scratch directory of the worker (state itself lives in Kafka).",
    )
    clock_start: float | None = Field(
        None,
        description="secret-routes, serve: a declared replay clock starting here (RFC 3339 or "
        "epoch seconds) when the worker starts; none: the wall clock (docs/math.md §14.7).",
    )
    clock_speed: float = Field(
        1.0, gt=0, description="secret-routes, serve: replay clock seconds per real second."
    )

    @field_validator("clock_start", mode="before")
    @classmethod
    def _clock_start(cls, value: Any) -> Any:
        return parse_instant(value)


class WebSettings(BaseModel):
    """The worker's HTTP pages and the dashboard."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    web_host: str = "127.0.0.1"
    web_port: int = Field(8000, ge=0, le=65535)
    map_tiles: str | None = Field(
        OSM,
        description="Basemap under the live map's hexagons, fetched by the viewer's browser: "
        "osm (OpenStreetMap's standard tiles), none (a plain background; the page loads "
        "nothing from elsewhere) or an XYZ tile URL template https://host/{z}/{x}/{y}.png.",
    )
    map_tiles_attribution: str = Field(
        "",
        description="Credit of the tiles, plain text: required with a tile URL; with osm "
        "shown after OpenStreetMap's.",
    )

    @field_validator("map_tiles")
    @classmethod
    def _tile_template(cls, value: str | None) -> str | None:
        return None if value is None else check_map_tiles(value)


class Settings(WebSettings, OperationsSettings, KafkaSettings, ReleaseSettings, BaseSettings):
    """Everything a worker, the offline release and the demo need to know: the four groups
    above (listed last to first, so the fields keep the order release, Kafka, operations,
    web), read from one flat set of ``STREAM_DP_*`` variables and the config file."""

    model_config = SettingsConfigDict(
        env_prefix="STREAM_DP_",
        extra="forbid",
        frozen=True,
        env_parse_none_str="none",
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _none_word(cls, value: Any, info: ValidationInfo) -> Any:
        optional = type(None) in get_args(cls.model_fields[str(info.field_name)].annotation)
        return none_word_to_none(value) if optional else value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        self._profile_defaults()
        if 86400 % self.window_seconds:
            raise SettingError(
                "window_seconds",
                f"must divide a day (86400) so windows align, got {self.window_seconds}",
            )
        if self.budget_cap is not None and self.budget_cap < self.epsilon:
            raise SettingError(
                "budget_cap",
                "must be >= epsilon (one released cell costs epsilon), got "
                f"{self.budget_cap:g} < {self.epsilon:g}",
            )
        if self.privacy_model == SECRET_ROUTES:
            self._check_secret_routes()
        else:
            self._check_no_secret_routes_knobs()
        if self.clock_start is None and self.clock_speed != 1.0:
            raise SettingError("clock_speed", "needs clock_start (the wall clock runs at 1)")
        if self.vehicle_budget is not None:
            if self.budget_cap is not None:
                raise SettingError(
                    "budget_cap",
                    "caps the fixed-epsilon mode: add --fixed-epsilon (vehicle_budget none); "
                    "vehicle_budget replaces it",
                )
            if self.target_mean_error is None:
                raise SettingError("vehicle_budget", "needs target_mean_error (per-cell epsilon)")
            if self.vehicle_burst > self.vehicle_budget:
                raise SettingError("vehicle_budget_burst", "must be <= vehicle_budget")
            self._check_budget_period()
            if self.budget_planner != "auto" and self._changed("optimiser_max_pairs"):
                raise SettingError(
                    "optimiser_max_pairs",
                    f"has no effect with budget_planner {self.budget_planner!r} (only 'auto')",
                )
        else:
            self._check_no_budget_knobs()
        if self.coarsest_resolution is not None and self.coarsest_resolution > self.resolution:
            raise SettingError(
                "coarsest_resolution",
                f"must be <= resolution ({self.resolution}), got {self.coarsest_resolution}",
            )
        if self.kafka_security_protocol.startswith("SASL"):
            if not self.kafka_sasl_mechanism:
                raise SettingError("kafka_sasl_mechanism", "is required with a SASL protocol")
            if not self.kafka_sasl_username or self.kafka_sasl_password is None:
                raise SettingError(
                    "kafka_sasl_username",
                    f"{self.kafka_security_protocol} needs kafka_sasl_username and "
                    "kafka_sasl_password",
                )
        self._check_basemap()
        if self.target_mean_error is not None and self.coarsest_resolution is None:
            # Documented default of R0 (frozen model: set once, here, before anyone reads it).
            default = max(0, self.resolution - COARSEST_RESOLUTION_STEPS)
            object.__setattr__(self, "coarsest_resolution", default)
        return self

    def _profile_defaults(self) -> None:
        """Each release setting left unset takes the profile's value on its own: T a share of U
        (:func:`default_target_mean_error`). Fixed cells (T none) leave the budget no per-cell
        epsilon to pace, so they need B none said too (``--fixed-cells`` says both): dropping T
        alone must not drop the promise unsaid. Frozen model: set once, here."""
        given = self.model_fields_set
        if "target_mean_error" not in given:
            object.__setattr__(self, "target_mean_error", default_target_mean_error(self.upper))
        if "vehicle_budget" not in given and self.target_mean_error is None:
            raise SettingError(
                "target_mean_error",
                "none (fixed cells) drops the vehicle budget's per-cell epsilon: set "
                "vehicle_budget none too (--fixed-cells sets both; STREAM_DP_VEHICLE_BUDGET=none)",
            )

    def _check_budget_period(self) -> None:
        """The budget period is a whole number of windows (the ledger sums whole windows)."""
        period, window = self.budget_period_seconds, self.window_seconds
        if period < window or period % window:
            raise SettingError(
                "budget_period_seconds",
                f"must be a multiple of window_seconds ({window}) with vehicle_budget, "
                f"got {period}",
            )

    def _check_secret_routes(self) -> None:
        """Secret routes (docs/math.md §14): B per period, no knob of the public model that
        reads the occupancy or paces a vehicle (its cells, spans and burst are the public
        model's), and dp-accounting for the PLD."""
        if self.vehicle_budget is None:
            raise SettingError("vehicle_budget", "secret-routes needs a budget B per period")
        refused = (
            "vehicle_budget_burst", "max_span_hours", "budget_planner", "optimiser_max_pairs",
            "budget_cap", "top_cells", "min_vehicles", "error_bound", "mean_mechanism", "delta",
            "accounting",
        )  # fmt: skip
        changed = [n for n in refused if self._changed(n)]
        if self.target_mean_error != default_target_mean_error(self.upper):
            changed.append("target_mean_error")
        if changed:
            raise SettingError(
                changed[0], "belongs to the public-occupancy model, not secret-routes"
            )
        if self.variance_share:
            raise SettingError("variance_share", "secret-routes releases no variance: set 0")
        coarse = self.coarse_resolution
        if coarse is not None and coarse >= self.resolution:
            raise SettingError(
                "coarse_resolution", f"must be < resolution ({self.resolution}), got {coarse}"
            )
        if coarse is None and self._changed("resolution_choice"):
            raise SettingError("resolution_choice", "has no effect without coarse_resolution")
        if not secret_routes_available():
            raise SettingError(
                "privacy_model", "secret-routes needs dp-accounting: pip install 'stream-dp[pld]'"
            )

    def _check_no_secret_routes_knobs(self) -> None:
        for name in ("contribution_cells", "count_share", "coarse_resolution",
                     "resolution_choice", "clock_start"):  # fmt: skip
            if self._changed(name):
                raise SettingError(name, "has no effect without privacy_model secret-routes")

    def _check_no_budget_knobs(self) -> None:
        """Pacing and spans belong to vehicle_budget: set without it they would do nothing."""
        if self.vehicle_budget_burst is not None:
            raise SettingError("vehicle_budget_burst", "has no effect without vehicle_budget")
        if self._changed("max_span_hours"):
            raise SettingError(
                "max_span_hours",
                f"has no effect without vehicle_budget (got {self.max_span_hours})",
            )
        for name in ("budget_planner", "optimiser_max_pairs"):
            if self._changed(name):
                raise SettingError(name, "has no effect without vehicle_budget")

    def _changed(self, name: str) -> bool:
        """Whether the setting ``name`` differs from its default."""
        return bool(getattr(self, name) != type(self).model_fields[name].default)

    def _check_basemap(self) -> None:
        """A tile server's credit is the operator's to give; no tiles, nothing to credit."""
        credit = self.map_tiles_attribution.strip()
        if self.map_tiles not in (None, OSM) and not credit:
            raise SettingError(
                "map_tiles_attribution", "is required with a tile URL (the tiles' credit)"
            )
        if self.map_tiles is None and credit:
            raise SettingError("map_tiles_attribution", "has no effect with map_tiles none")

    @property
    def vehicle_burst(self) -> float:
        """The pacing burst: ``vehicle_budget_burst``, else B/4 (0 without a budget)."""
        if self.vehicle_budget_burst is not None:
            return self.vehicle_budget_burst
        return 0.0 if self.vehicle_budget is None else self.vehicle_budget * DEFAULT_BURST_SHARE

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _ConfigFileSource(settings_cls))

    def to_env(self) -> dict[str, str]:
        """``STREAM_DP_*`` variables reproducing these settings in a child process."""
        env: dict[str, str] = {}
        for name, value in self.model_dump().items():
            if value is None:  # explicit: an unset setting may have a default (target_mean_error)
                env[f"STREAM_DP_{name.upper()}"] = "none"
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            text = str(value).lower() if isinstance(value, bool) else str(value)
            env[f"STREAM_DP_{name.upper()}"] = text
        return env

    def info_labels(self) -> dict[str, str]:
        """Release parameters for the ``stream_dp_info`` metric (no data-derived values)."""
        return {
            "epsilon": repr(self.epsilon),
            "upper": repr(self.upper),
            "resolution": str(self.resolution),
            "window_seconds": str(self.window_seconds),
            "mean_mechanism": self.mean_mechanism,
            "budget_cap": "none" if self.budget_cap is None else repr(self.budget_cap),
            "budget_period_seconds": str(self.budget_period_seconds),
            "vehicle_budget": "none" if self.vehicle_budget is None else repr(self.vehicle_budget),
            "variance_share": repr(self.variance_share),
            "accounting": self.accounting,
            "target_mean_error": (
                "none" if self.target_mean_error is None else repr(self.target_mean_error)
            ),
        }


class _ConfigFileSource(PydanticBaseSettingsSource):
    """Values from the TOML/JSON file named by ``STREAM_DP_CONFIG_FILE`` (lowest priority)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self._values = _read_config_file(os.environ.get(CONFIG_FILE_ENV))

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def _read_config_file(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8-sig")  # as the readings files: a BOM is fine
    except OSError as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}: {path} is not UTF-8: {exc.reason}") from exc
    try:
        is_json = file.suffix.lower() == ".json"
        data = json.loads(text) if is_json else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}: {path} is not valid: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{CONFIG_FILE_ENV}: {path} must hold a table of settings")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def default_target_mean_error(upper: float) -> float:
    """The default T: the share ``TARGET_AT_UPPER`` of U (10 at U 65, so the AIS sample's)."""
    target, at_upper = TARGET_AT_UPPER
    return upper * target / at_upper


def known_environment_variables() -> list[str]:
    """Every STREAM_DP_* name the service reads: one per setting, and EXTRA_ENV_VARS."""
    return sorted(
        {ENV_PREFIX + name.upper() for name in Settings.model_fields} | set(EXTRA_ENV_VARS)
    )


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` naming the first STREAM_DP_* variable that is no setting.

    pydantic-settings ignores such a variable, so a typo (STREAM_DP_EPSILONN) would otherwise
    run silently with the default value.
    """
    environ = os.environ if environ is None else environ
    known = known_environment_variables()
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(f"{name}: unknown environment variable, no such setting{hint}")


def load_settings(*, flags: Collection[str] = (), **overrides: Any) -> Settings:
    """Settings from overrides > environment > file; ``None`` overrides are left out.

    Invalid values raise :class:`ConfigError`: one line per bad setting, naming its
    ``STREAM_DP_*`` variable and, for the settings in ``flags``, its command-line option.
    """
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise explain(exc, Settings.model_fields, flags) from None


# --- reporting a bad setting: one line naming it, its flag and its variable ---------------


def label(field: str, flags: Collection[str] = ()) -> str:
    """``epsilon (--epsilon / STREAM_DP_EPSILON)``; the flag only where ``flags`` has it."""
    names = [f"--{field.replace('_', '-')}"] if field in flags else []
    names.append(ENV_PREFIX + field.upper())
    return f"{field} ({' / '.join(names)})"


def numeric_rule(info: FieldInfo) -> str | None:
    """``a finite number > 0``, ``an integer in [0, 15]``: what a numeric field accepts."""
    kinds = {t for t in (info.annotation, *get_args(info.annotation)) if t in (int, float)}
    if not kinds:
        return None
    kind = "an integer" if kinds == {int} else "a finite number"
    bounds: dict[str, Any] = {}  # pydantic's Ge/Gt/Le/Lt constraints, by attribute name
    for m in info.metadata:
        bounds.update({a: getattr(m, a) for a in ("ge", "gt", "le", "lt") if hasattr(m, a)})
    ops = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    low = next(((ops[a], bounds[a]) for a in ("ge", "gt") if a in bounds), None)
    high = next(((ops[a], bounds[a]) for a in ("le", "lt") if a in bounds), None)
    unset = f" (or {NONE_WORD})" if type(None) in get_args(info.annotation) else ""
    if low and high:
        left, right = "[" if low[0] == ">=" else "(", "]" if high[0] == "<=" else ")"
        return f"{kind} in {left}{low[1]:g}, {high[1]:g}{right}{unset}"
    parts = [f"{op} {value:g}" for op, value in filter(None, (low, high))]
    return " ".join([kind, " and ".join(parts)]).strip() + unset


def explain(
    exc: ValidationError, fields: Mapping[str, FieldInfo], flags: Collection[str] = ()
) -> ConfigError:
    """One line for pydantic's errors: ``invalid setting NAME (...): REASON``, joined by ``;``."""
    problems: dict[str, str] = {}
    for err in exc.errors():
        error = (err.get("ctx") or {}).get("error")
        if isinstance(error, SettingError):
            field, reason = error.field, error.reason
        elif err["type"] == "extra_forbidden":
            field = str(err["loc"][0])
            close = difflib.get_close_matches(field, list(fields), n=1, cutoff=0.6)
            reason = "no such setting" + (f"; did you mean {close[0]}?" if close else "")
        else:
            field = str(err["loc"][0]) if err["loc"] else "configuration"
            info = fields.get(field)
            rule = numeric_rule(info) if info is not None else None
            reason = (
                f"must be {rule}, got {_shown(err['input'])}"
                if rule and err["type"] != "value_error"
                else _message(err)
            )
        name = label(field, flags) if field in fields else field
        problems.setdefault(field, f"invalid setting {name}: {reason}")
    return ConfigError("; ".join(problems.values()))


def none_word_to_none(value: Any) -> Any:
    """``"none"`` (any case) means unset: TOML has no null, and a flag takes only text."""
    if isinstance(value, str) and value.strip().lower() == NONE_WORD:
        return None
    return value


def parse_instant(value: Any) -> Any:
    """Epoch seconds from an RFC 3339 text with its offset (``2026-01-05T07:00:00Z``) or a
    number (as text too); anything else is left to the field's own check."""
    value = none_word_to_none(value)
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"must be RFC 3339 or epoch seconds, got {text!r}") from None
    if when.tzinfo is None:
        raise ValueError(f"needs its UTC offset (e.g. Z), got {text!r}")
    return when.timestamp()


def parse_int_option(name: str, text: str, minimum: int) -> int:
    """``--name``'s integer value (a command's own option), or a :class:`ConfigError`."""
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"--{name} must be an integer, got {text!r}") from None
    if value < minimum:
        raise ConfigError(f"--{name} must be >= {minimum}, got {value}")
    return value


def _shown(value: Any) -> str:
    """A bad value as the user wrote it; text quoted only where blank or spaced."""
    if isinstance(value, str):
        return value if value and value.split() == [value] else repr(value)
    return repr(value) if isinstance(value, float) else str(value)


def _message(err: Any) -> str:
    error = (err.get("ctx") or {}).get("error")
    text = str(error) if err["type"] == "value_error" and error is not None else err["msg"]
    text = text[0].lower() + text[1:] if text else text
    return f"{text}, got {_shown(err['input'])}" if err["type"] != "value_error" else text
