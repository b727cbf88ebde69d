"""The messages of memtide's application balloon protocol, version 1, as typed values.

Each message is a frozen dataclass that checks its fields' rules when it is built (so a
message that breaks docs/balloon-protocol.md cannot be built), ``encode`` turns a message an
agent sends into its JSON line, and ``decode`` reads a line memtide sends into a message or
raises ``ProtocolError`` with the error code the agent answers with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, TypeVar, Union

PROTOCOL_VERSION = 1
"""The protocol version this SDK speaks."""

MAX_LINE_BYTES = 65_536
"""The longest line, its ``\\n`` included."""

MAX_INTEGER = 2**53 - 1
"""The largest byte count, counter or sequence number (exact in every language's JSON)."""

MAX_REASON_BYTES = 1_024
"""The longest ``reason`` of a ``progress`` or a ``bye``, in UTF-8 bytes."""

MAX_APP_BYTES = 128
"""The longest ``hello.app``, in UTF-8 bytes."""


class PoolKind(str, Enum):
    """What kind of pool an application balloons."""

    BUFFER_POOL = "buffer_pool"
    HEAP = "heap"
    CACHE = "cache"
    OTHER = "other"


class ProgressStatus(str, Enum):
    """Where the agent is with a target."""

    WORKING = "working"
    DONE = "done"
    FAILED = "failed"


class ErrorCode(str, Enum):
    """The error codes of version 1 (docs/balloon-protocol.md, "error")."""

    MALFORMED = "malformed"
    TOO_LONG = "too_long"
    UNKNOWN_TYPE = "unknown_type"
    BAD_FIELD = "bad_field"
    VERSION = "version"
    NOT_REGISTERED = "not_registered"
    ALREADY_REGISTERED = "already_registered"
    IDENTITY = "identity"
    BUSY = "busy"
    UNKNOWN_SEQ = "unknown_seq"
    VIOLATIONS = "violations"
    DEAD = "dead"
    DEADLINE = "deadline"
    DISHONEST = "dishonest"


class ProtocolError(Exception):
    """A line from memtide that the agent cannot take: ``code`` is what it answers with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _shown(value: object) -> str:
    """A value as it would appear in JSON, ASCII only and clipped, for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."


def _integer(where: str, value: object, lowest: int = 0, highest: int = MAX_INTEGER) -> int:
    # bool is an int subclass in Python but not an integer on the wire.
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise ValueError(f"{where} = {_shown(value)}: not an integer in [{lowest}, {highest}]")
    return value


def _utf8_length(where: str, value: str) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{where} = {_shown(value)}: not valid Unicode text") from None


def _text(where: str, value: object, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where} = {_shown(value)}: not a string")
    length = _utf8_length(where, value)
    if max_bytes is not None and length > max_bytes:
        raise ValueError(f"{where} is {length} bytes long, over {max_bytes:,}")
    return value


def _name(where: str, value: object, *, max_bytes: int | None = None) -> str:
    text = _text(where, value, max_bytes=max_bytes)
    if not text:
        raise ValueError(f"{where} is empty")
    return text


def _no_more_than(where: str, value: int, other: str, limit: int) -> None:
    if value > limit:
        raise ValueError(f"{where} = {value} > {other} = {limit}")


_E = TypeVar("_E", bound=Enum)


def _member(where: str, enum: type[_E], value: object) -> _E:
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in enum)
        raise ValueError(f"{where} = {_shown(value)}: not one of {allowed}") from None


def _set(message: object, field: str, value: object) -> None:
    """Stores a checked value on a frozen dataclass (an enum member for its string)."""
    object.__setattr__(message, field, value)


@dataclass(frozen=True)
class Hello:
    """The agent's first message: who it is and what its pool is."""

    app: str
    kind: PoolKind
    pid: int
    pool_bytes: int
    min_bytes: int
    max_bytes: int
    granule_bytes: int

    def __post_init__(self) -> None:
        app = _name("hello.app", self.app, max_bytes=MAX_APP_BYTES)
        if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in app):
            raise ValueError(f"hello.app = {_shown(app)}: has a control character")
        _set(self, "kind", _member("hello.kind", PoolKind, self.kind))
        _integer("hello.pid", self.pid, lowest=1)
        pool = _integer("hello.pool_bytes", self.pool_bytes)
        low = _integer("hello.min_bytes", self.min_bytes)
        high = _integer("hello.max_bytes", self.max_bytes)
        granule = _integer("hello.granule_bytes", self.granule_bytes, lowest=1)
        _no_more_than("hello.min_bytes", low, "max_bytes", high)
        _no_more_than("hello.pool_bytes", pool, "max_bytes", high)
        if pool < low:
            raise ValueError(f"hello.pool_bytes = {pool} < min_bytes = {low}")
        if high > 0:
            _no_more_than("hello.granule_bytes", granule, "max_bytes", high)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "version": PROTOCOL_VERSION,
            "app": self.app,
            "kind": self.kind.value,
            "pid": self.pid,
            "pool_bytes": self.pool_bytes,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "granule_bytes": self.granule_bytes,
        }


@dataclass(frozen=True)
class Welcome:
    """memtide registered the agent for ``tenant``."""

    tenant: str
    stats_interval_ms: int
    dead_after_ms: int

    def __post_init__(self) -> None:
        _name("welcome.tenant", self.tenant)
        interval = _integer("welcome.stats_interval_ms", self.stats_interval_ms, lowest=1)
        dead = _integer("welcome.dead_after_ms", self.dead_after_ms, lowest=1)
        if dead < interval:
            raise ValueError(f"welcome.dead_after_ms = {dead} < stats_interval_ms = {interval}")

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "welcome",
            "version": PROTOCOL_VERSION,
            "tenant": self.tenant,
            "stats_interval_ms": self.stats_interval_ms,
            "dead_after_ms": self.dead_after_ms,
        }


@dataclass(frozen=True)
class Target:
    """Resize the pool to ``pool_bytes`` within ``deadline_ms``."""

    seq: int
    pool_bytes: int
    deadline_ms: int

    def __post_init__(self) -> None:
        _integer("target.seq", self.seq, lowest=1)
        _integer("target.pool_bytes", self.pool_bytes)
        _integer("target.deadline_ms", self.deadline_ms, lowest=1)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "target",
            "seq": self.seq,
            "pool_bytes": self.pool_bytes,
            "deadline_ms": self.deadline_ms,
        }


@dataclass(frozen=True)
class Progress:
    """Where the agent is with target ``seq``; the pool is ``pool_bytes`` now."""

    seq: int
    pool_bytes: int
    status: ProgressStatus
    reason: str | None = None

    def __post_init__(self) -> None:
        _integer("progress.seq", self.seq, lowest=1)
        _integer("progress.pool_bytes", self.pool_bytes)
        _set(self, "status", _member("progress.status", ProgressStatus, self.status))
        if self.reason is not None:
            _text("progress.reason", self.reason, max_bytes=MAX_REASON_BYTES)

    def to_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "type": "progress",
            "seq": self.seq,
            "pool_bytes": self.pool_bytes,
            "status": self.status.value,
        }
        if self.reason is not None:
            fields["reason"] = self.reason
        return fields


@dataclass(frozen=True)
class Stats:
    """The pool's statistics: its size, the part holding data, and counters since start."""

    pool_bytes: int
    used_bytes: int
    hits: int
    misses: int
    evictions: int
    dirty_bytes: int

    def __post_init__(self) -> None:
        pool = _integer("stats.pool_bytes", self.pool_bytes)
        used = _integer("stats.used_bytes", self.used_bytes)
        _integer("stats.hits", self.hits)
        _integer("stats.misses", self.misses)
        _integer("stats.evictions", self.evictions)
        dirty = _integer("stats.dirty_bytes", self.dirty_bytes)
        _no_more_than("stats.used_bytes", used, "pool_bytes", pool)
        _no_more_than("stats.dirty_bytes", dirty, "pool_bytes", pool)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "stats",
            "pool_bytes": self.pool_bytes,
            "used_bytes": self.used_bytes,
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "dirty_bytes": self.dirty_bytes,
        }


@dataclass(frozen=True)
class Bye:
    """The sender closes the connection after this message."""

    reason: str | None = None

    def __post_init__(self) -> None:
        if self.reason is not None:
            _text("bye.reason", self.reason, max_bytes=MAX_REASON_BYTES)

    def to_json(self) -> dict[str, Any]:
        if self.reason is None:
            return {"type": "bye"}
        return {"type": "bye", "reason": self.reason}


@dataclass(frozen=True)
class ErrorMessage:
    """An ``error`` line: ``code`` is one of version 1's ``ErrorCode`` values."""

    code: str
    message: str
    fatal: bool

    def __post_init__(self) -> None:
        code = _name("error.code", self.code)
        known = {c.value for c in ErrorCode}
        value = code.value if isinstance(code, ErrorCode) else code
        if value not in known:
            raise ValueError(f"error.code = {_shown(value)}: not a code of version 1")
        # An ErrorCode is kept as its plain string, so a message compares and prints alike
        # whether it was built or decoded.
        _set(self, "code", value)
        _text("error.message", self.message)
        if not isinstance(self.fatal, bool):
            raise ValueError(f"error.fatal = {_shown(self.fatal)}: not true or false")

    def to_json(self) -> dict[str, Any]:
        return {"type": "error", "code": self.code, "message": self.message, "fatal": self.fatal}


MessageToAgent = Union[Welcome, Target, Bye, ErrorMessage]
"""A message memtide sends to an agent."""

MessageToMemtide = Union[Hello, Stats, Progress, Bye, ErrorMessage]
"""A message an agent sends to memtide."""


def encode(message: MessageToMemtide) -> bytes:
    """The message as one compact JSON line, ``\\n`` included.

    Raises ``ValueError`` if the line would be longer than ``MAX_LINE_BYTES``.
    """
    line = json.dumps(message.to_json(), ensure_ascii=False, separators=(",", ":"))
    data = line.encode("utf-8") + b"\n"
    if len(data) > MAX_LINE_BYTES:
        kind = message.to_json()["type"]
        raise ValueError(f"a {kind} line of {len(data):,} bytes is over {MAX_LINE_BYTES:,}")
    return data


def _parse_int(text: str) -> int | float:
    # Far past 2^53 - 1 an integer is kept as a float, which the field checks refuse: Python
    # would otherwise refuse to convert a number of more than 4,300 digits at all.
    return int(text) if len(text) <= 20 else float(text)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


_M = TypeVar("_M")


def _build(
    make: Callable[..., _M],
    obj: Mapping[str, Any],
    name: str,
    required: Sequence[str],
    optional: Sequence[str] = (),
) -> _M:
    fields: dict[str, Any] = {}
    for field in required:
        if field not in obj:
            raise ProtocolError(ErrorCode.BAD_FIELD, f"{name}.{field} is missing")
        fields[field] = obj[field]
    for field in optional:
        if field in obj:
            fields[field] = obj[field]
    try:
        return make(**fields)
    except ValueError as error:
        raise ProtocolError(ErrorCode.BAD_FIELD, str(error)) from None


def _read_welcome(obj: Mapping[str, Any]) -> Welcome:
    if "version" not in obj:
        raise ProtocolError(ErrorCode.BAD_FIELD, "welcome.version is missing")
    version = obj["version"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise ProtocolError(
            ErrorCode.BAD_FIELD, f"welcome.version = {_shown(version)}: not an integer"
        )
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.VERSION,
            f"welcome.version = {version}: this agent speaks version {PROTOCOL_VERSION}",
        )
    return _build(Welcome, obj, "welcome", ("tenant", "stats_interval_ms", "dead_after_ms"))


def _read_target(obj: Mapping[str, Any]) -> Target:
    return _build(Target, obj, "target", ("seq", "pool_bytes", "deadline_ms"))


def _read_bye(obj: Mapping[str, Any]) -> Bye:
    return _build(Bye, obj, "bye", (), ("reason",))


def _read_error(obj: Mapping[str, Any]) -> ErrorMessage:
    return _build(ErrorMessage, obj, "error", ("code", "message", "fatal"))


_READERS: dict[str, Callable[[Mapping[str, Any]], MessageToAgent]] = {
    "welcome": _read_welcome,
    "target": _read_target,
    "bye": _read_bye,
    "error": _read_error,
}

_SENT_BY_AGENTS = frozenset(("hello", "stats", "progress"))


def decode(line: bytes) -> MessageToAgent:
    """Reads one line from memtide, given without its ``\\n``.

    Raises ``ProtocolError`` whose ``code`` is ``too_long``, ``malformed``,
    ``unknown_type``, ``bad_field`` or ``version`` and whose message names what is wrong.
    """
    if len(line) + 1 > MAX_LINE_BYTES:
        raise ProtocolError(
            ErrorCode.TOO_LONG,
            f"a line of {len(line) + 1:,} bytes is over {MAX_LINE_BYTES:,}",
        )
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProtocolError(
            ErrorCode.MALFORMED, f"the line is not UTF-8 (byte {error.start})"
        ) from None
    try:
        value = json.loads(text, parse_int=_parse_int, parse_constant=_refuse_constant)
    except RecursionError:
        raise ProtocolError(
            ErrorCode.MALFORMED, "the line is not JSON: nested too deeply"
        ) from None
    except ValueError as error:
        raise ProtocolError(ErrorCode.MALFORMED, f"the line is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ProtocolError(
            ErrorCode.MALFORMED, f"the line is a JSON {_json_kind(value)}, not an object"
        )
    if "type" not in value:
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, "the message has no type")
    kind = value["type"]
    if not isinstance(kind, str):
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"type = {_shown(kind)}: not a string")
    read = _READERS.get(kind)
    if read is None:
        if kind in _SENT_BY_AGENTS:
            raise ProtocolError(
                ErrorCode.UNKNOWN_TYPE, f"type = {_shown(kind)}: agents send it, memtide does not"
            )
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"type = {_shown(kind)}: no message of version {PROTOCOL_VERSION} has it",
        )
    return read(value)
