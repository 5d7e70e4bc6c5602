"""The pure streaming engine: readings in, window releases out, no Kafka.

It is what the Kafka adapter does, minus the I/O: input partitions (keyed by vehicle with
Kafka's default partitioner, so the same input gives the same windows as the service),
per-partition watermarks and windows, the coordinator that merges partials, and the
release step. ``stream-dp release`` (offline backfills and audits) and the tests drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.kafka.partitioner import partition_for
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.window import record_stored, release_ready_windows
from stream_dp.secret_routes import SECRET_ROUTES
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.window import SecretRoutesReleaser
from stream_dp.sources import SourceError
from stream_dp.windows.closing import close_all_windows, close_due_windows
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.readings import InvalidReading, ParsedBatch, ReadingValidator
from stream_dp.windows.reject_reasons import Reject, RejectReason
from stream_dp.windows.state import PartitionState


@dataclass
class EngineCounts:
    accepted: int = 0
    invalid: int = 0
    late: int = 0
    #: Skipped readings per :class:`RejectReason` code.
    invalid_reasons: dict[str, int] = field(default_factory=dict)


def checked_span(span: tuple[int, int] | None, window_seconds: int) -> tuple[int, int]:
    """Secret routes' span, required (docs/math.md §14.5): a start read from the data would
    say when its first vehicle appeared. Window starts, ``from < to``."""
    if span is None:
        raise ValueError(
            "span: required under secret-routes (the public [from, to) of window starts; "
            "stream-dp release --from/--to), never read from the data"
        )
    first, end = span
    if first % window_seconds or end % window_seconds or first >= end:
        raise ValueError(
            f"span: must be window starts (multiples of {window_seconds}) with from < to, "
            f"got {span!r}"
        )
    return first, end


class OfflineEngine:
    """Replays readings through the same windowing, closing and release as the service."""

    def __init__(
        self,
        settings: Settings,
        noise: LaplaceNoise,
        partitions: int | None = None,
        span: tuple[int, int] | None = None,
    ) -> None:
        """``span``: secret routes' public span ``[from, to)`` of window starts (docs/math.md
        §14.5), required there and refused under public occupancy: every window in it is
        released, nothing outside it."""
        self.settings = settings
        self.params = ReleaseParams.from_settings(settings)  # all the release reads
        self.noise = noise
        self.partitions = partitions or settings.partitions
        # Files are replayed long after they were recorded: no wall-clock limit here, so the
        # same file gives the same release whenever it is run (the fixed range still holds).
        self.validator = ReadingValidator(settings.upper, settings.resolution)
        self.states = [PartitionState.for_settings(settings) for _ in range(self.partitions)]
        self.coordinator = ReleaseCoordinator(
            self.partitions, settings.window_seconds, settings.prefix_limit
        )
        self.counts = EngineCounts()
        self.ledger = PrivacyAccountant(self.params).new_ledger()
        #: The entries the last release deferred to the next window (spans; never published).
        self.carry: WindowColumns | None = None
        #: The secret-routes model's releaser (docs/math.md §14); None: public occupancy.
        self.secret: SecretRoutesReleaser | None = None
        if settings.privacy_model == SECRET_ROUTES:
            first, end = checked_span(span, settings.window_seconds)
            self.secret = SecretRoutesReleaser(
                SecretRoutesParams.from_settings(settings), noise.source, first, end
            )
        elif span is not None:
            raise ValueError("span: only under privacy_model secret-routes")

    def feed(self, readings: Iterable[Any], batch_size: int = 5000) -> Iterator[WindowRelease]:
        """Ingest raw reading objects (dicts) in order; yield windows as they complete."""
        return self.feed_numbered(enumerate(readings, start=1), batch_size)

    def feed_numbered(
        self,
        readings: Iterable[tuple[int, Any]],
        batch_size: int = 5000,
        on_reject: Callable[[Reject], None] | None = None,
    ) -> Iterator[WindowRelease]:
        """Like :meth:`feed`, for ``(line, reading)`` pairs (``stream_dp.sources``'
        ``numbered_readings``: a bad row is a ``SourceError`` there). Every reading that
        is not accepted is skipped, counted by reason and handed to ``on_reject``."""
        batches = [ParsedBatch() for _ in range(self.partitions)]
        pending = 0
        for line, obj in readings:
            try:
                partition = partition_for(_vehicle_key(obj), self.partitions)
                self.validator.add(obj, batches[partition])
            except InvalidReading as exc:
                self._invalid(Reject(line, exc.reason, exc.detail), on_reject)
                continue
            pending += 1
            if pending >= batch_size:
                yield from self._flush(batches)
                batches = [ParsedBatch() for _ in range(self.partitions)]
                pending = 0
        yield from self._flush(batches)

    def finish(self, release_held: bool = False) -> Iterator[WindowRelease]:
        """Close every open window (end of input, like the idle fallback) and release. With
        ``release_held`` (``stream-dp release``: a file ends) the last window holds no cell
        back for a longer span (docs/math.md §13.3); without, the windows are released as
        the service releases them, which never sees an end."""
        for partition, state in enumerate(self.states):
            self.coordinator.accept(close_all_windows(state, partition))
        yield from self._release_ready(end_of_input=release_held)
        if self.secret is not None:
            yield from self.secret.release_to_end()

    def _flush(self, batches: list[ParsedBatch]) -> Iterator[WindowRelease]:
        for partition, (state, batch) in enumerate(zip(self.states, batches, strict=True)):
            if len(batch):
                outcome = state.add_batch(batch.vehicle, batch.ts, batch.cell, batch.speed)
                self.counts.accepted += outcome.accepted
                self.counts.late += outcome.late
            self.coordinator.accept(close_due_windows(state, partition))
        yield from self._release_ready()

    def _release_ready(self, end_of_input: bool = False) -> Iterator[WindowRelease]:
        if self.secret is not None:  # the one dispatch point between the privacy models
            yield from self.secret.release_ready(self.coordinator)
            return
        # A window whose computation raises comes back as a failed window (charged to the
        # ledger like a release) and the replay goes on with the next one.
        for release in release_ready_windows(
            self.coordinator, self.params, self.noise, self.ledger, lambda: self.carry,
            end_of_input,
        ):  # fmt: skip
            record_stored(self.coordinator, self.ledger, release.window_start, release.loss)
            self.carry = release.carry
            yield release

    def first_reject(self, readings: Iterable[tuple[int, Any]]) -> Reject | None:
        """The first ``(line, reading)`` the ingest would skip, or None: ``--strict``'s
        check of the whole input, before anything is released (nothing is kept)."""
        scratch = ParsedBatch()
        for line, obj in readings:
            try:
                _vehicle_key(obj)
                self.validator.add(obj, scratch)
            except InvalidReading as exc:
                return Reject(line, exc.reason, exc.detail)
            if len(scratch) >= 5000:
                scratch = ParsedBatch()
        return None

    def _invalid(self, reject: Reject, on_reject: Callable[[Reject], None] | None) -> None:
        self.counts.invalid += 1
        reasons = self.counts.invalid_reasons
        reasons[reject.reason] = reasons.get(reject.reason, 0) + 1
        if on_reject is not None:
            on_reject(reject)


def _vehicle_key(obj: Any) -> str:
    """The partitioning key; a row the source could not parse is rejected with its reason."""
    if isinstance(obj, dict):
        vehicle = obj.get("vehicle_id")
        if isinstance(vehicle, str | int) and not isinstance(vehicle, bool):
            return str(vehicle)
        if "vehicle_id" not in obj:
            raise InvalidReading(RejectReason.MISSING_FIELD, "vehicle_id is missing")
        raise InvalidReading(RejectReason.BAD_VEHICLE_ID, "vehicle_id must be a non-empty string")
    if isinstance(obj, SourceError):
        raise InvalidReading(obj.code or RejectReason.MALFORMED_ROW, obj.reason)
    raise InvalidReading(RejectReason.NOT_AN_OBJECT, "a reading must be a JSON object")
