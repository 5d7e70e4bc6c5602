"""The ledger backup file: the release log's records, byte for byte, as JSON lines.

The release log holds the privacy ledger (each window's per-vehicle losses), the record of
which windows were released (their stored copies) and the snapshots summarising both (see
:mod:`stream_dp.worker.release_log` and :mod:`stream_dp.worker.release_snapshots`).
``stream-dp ledger export`` writes it to a file of this format, ``stream-dp ledger import``
writes it back. UTF-8 text, one JSON object per line:

- line 1, the header: ``{"format": "stream-dp-ledger", "version": 1, "app_id": ...,
  "topics": [{"role": "release_log", "name": ..., "partitions": 1}], "records": N,
  "sha256": ...}`` — ``sha256`` is the hex SHA-256 of the N record lines below, each with
  its ``\\n``;
- then N record lines, in log order per partition: ``{"role", "partition", "offset",
  "timestamp"`` (ms), ``"key"``, ``"value"`` (base64, or null), ``"headers"``
  (``[[name, base64 value], ...]``) ``}``.

Offsets matter: snapshots name release-log offsets (``read_from``), so an import must put
every record back at the offset it had. Pure: no Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "stream-dp-ledger"
VERSION = 1
RELEASE_LOG = "release_log"


class LedgerFileError(ValueError):
    """A ledger file that cannot be used; the message says why (one line)."""


@dataclass(frozen=True)
class LedgerRecord:
    """One record of a backed-up topic, as it was in the log."""

    role: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    def to_line(self) -> str:
        return json.dumps(
            {
                "role": self.role,
                "partition": self.partition,
                "offset": self.offset,
                "timestamp": self.timestamp,
                "key": _b64(self.key),
                "value": _b64(self.value),
                "headers": [[name, _b64(value)] for name, value in self.headers],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_line(cls, line: str) -> LedgerRecord:
        data = json.loads(line)
        return cls(
            role=str(data["role"]),
            partition=int(data["partition"]),
            offset=int(data["offset"]),
            timestamp=int(data["timestamp"]),
            key=_unb64(data["key"]),
            value=_unb64(data["value"]),
            headers=tuple((str(n), _unb64(v) or b"") for n, v in data["headers"]),
        )


@dataclass(frozen=True)
class LedgerHeader:
    app_id: str
    #: role -> (topic name, partition count)
    topics: dict[str, tuple[str, int]]
    records: int
    sha256: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_line(self) -> str:
        topics = [
            {"role": role, "name": name, "partitions": partitions}
            for role, (name, partitions) in sorted(self.topics.items())
        ]
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "app_id": self.app_id,
                "topics": topics,
                "records": self.records,
                "sha256": self.sha256,
                **self.extra,
            }
        )

    @classmethod
    def from_line(cls, line: str) -> LedgerHeader:
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LedgerFileError(f"not a {FORMAT} file (its first line has no format {FORMAT!r})")
        if data.get("version") != VERSION:
            raise LedgerFileError(f"format version {data.get('version')!r} is not {VERSION}")
        known = {"format", "version", "app_id", "topics", "records", "sha256"}
        return cls(
            app_id=str(data["app_id"]),
            topics={t["role"]: (str(t["name"]), int(t["partitions"])) for t in data["topics"]},
            records=int(data["records"]),
            sha256=str(data["sha256"]),
            extra={k: v for k, v in data.items() if k not in known},
        )


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def write_ledger_file(
    path: Path,
    app_id: str,
    topics: dict[str, tuple[str, int]],
    records: Iterable[LedgerRecord],
    extra: dict[str, Any] | None = None,
) -> LedgerHeader:
    """Write the file atomically (a temporary file beside ``path``, renamed when complete):
    a failed export never leaves a partial file, nor replaces an existing one."""
    digest = hashlib.sha256()
    lines: list[str] = []
    for record in records:
        line = record.to_line() + "\n"
        digest.update(line.encode())
        lines.append(line)
    header = LedgerHeader(app_id, dict(topics), len(lines), digest.hexdigest(), extra or {})
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(header.to_line() + "\n")
            out.writelines(lines)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return header


def read_ledger_file(path: Path) -> tuple[LedgerHeader, list[LedgerRecord]]:
    """The header and records, checked: format, version, record count, checksum, and each
    partition's offsets in increasing order."""
    with Path(path).open("r", encoding="utf-8") as src:
        first = src.readline()
        if not first:
            raise LedgerFileError("the file is empty")
        try:
            header = LedgerHeader.from_line(first)
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, LedgerFileError):
                raise
            raise LedgerFileError(f"line 1 is not a ledger header: {exc}") from None
        digest = hashlib.sha256()
        records: list[LedgerRecord] = []
        for number, line in enumerate(src, start=2):
            digest.update(line.encode())
            try:
                records.append(LedgerRecord.from_line(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise LedgerFileError(f"line {number} is not a ledger record: {exc}") from None
    if len(records) != header.records:
        raise LedgerFileError(
            f"the header says {header.records} records, the file holds {len(records)}"
        )
    if digest.hexdigest() != header.sha256:
        raise LedgerFileError("checksum mismatch: the records are not those exported")
    for record in records:
        if record.role not in header.topics:
            raise LedgerFileError(f"a record of topic role {record.role!r} not in the header")
    check_order(records)
    return header, records


def check_order(records: Sequence[LedgerRecord]) -> None:
    """Each partition's records in increasing offset order."""
    last: dict[tuple[str, int], int] = {}
    for record in records:
        where = (record.role, record.partition)
        if record.offset <= last.get(where, -1):
            raise LedgerFileError(
                f"{record.role} partition {record.partition}: offset {record.offset} "
                "after a later one"
            )
        last[where] = record.offset


def check_restorable(records: Sequence[LedgerRecord]) -> None:
    """An import into an empty topic gives offsets 0, 1, ...: the records must have had
    exactly those (no gap), or the snapshots' offsets would point at other records."""
    expected: dict[tuple[str, int], int] = {}
    for record in records:
        where = (record.role, record.partition)
        want = expected.get(where, 0)
        if record.offset != want:
            raise LedgerFileError(
                f"{record.role} partition {record.partition}: the file's record at offset "
                f"{record.offset} would be written at offset {want} (the exported log did "
                "not start at 0, or has a gap), which the snapshots' offsets do not allow"
            )
        expected[where] = want + 1
