"""memtide_balloon: let memtide shrink and grow an application's own memory pool.

The agent of memtide's application balloon protocol (docs/balloon-protocol.md): an
application gives its pool's facts, a shrink and a grow callback and a stats function, and
``Agent`` registers the pool with memtide over a Unix socket and obeys its targets.
"""

from .agent import (
    DEFAULT_SOCKET_PATH,
    SOCKET_PATH_VARIABLE,
    Agent,
    Backoff,
    Resize,
    ResizeRefused,
    StatsSource,
    socket_path_from_environment,
)
from .messages import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    Bye,
    ErrorCode,
    ErrorMessage,
    Hello,
    MessageToAgent,
    MessageToMemtide,
    PoolKind,
    Progress,
    ProgressStatus,
    ProtocolError,
    Stats,
    Target,
    Welcome,
    decode,
    encode,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SOCKET_PATH",
    "MAX_LINE_BYTES",
    "PROTOCOL_VERSION",
    "SOCKET_PATH_VARIABLE",
    "Agent",
    "Backoff",
    "Bye",
    "ErrorCode",
    "ErrorMessage",
    "Hello",
    "MessageToAgent",
    "MessageToMemtide",
    "PoolKind",
    "Progress",
    "ProgressStatus",
    "ProtocolError",
    "Resize",
    "ResizeRefused",
    "Stats",
    "StatsSource",
    "Target",
    "Welcome",
    "decode",
    "encode",
    "socket_path_from_environment",
]
