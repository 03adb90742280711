"""eskv: a Python client of the eskv HTTP API (standard library only).

:class:`Client` (sync, http.client keep-alive) and :class:`AsyncClient`
(asyncio streams) have the same methods; both share the sans-IO core
(:mod:`eskv.ops`, :mod:`eskv._core`): request building, answer parsing,
typed errors (:mod:`eskv.errors`) and the retry policy (:class:`RetryPolicy`).
"""

from ._core import Answer, Backoff, Request, Response, RetryPolicy, SSEParser, WatchState, classify, uuid7
from .aio import AsyncClient, AsyncLease, AsyncWatch
from .client import Client, Lease, Watch
from .errors import (CursorExpired, EscalationError, EskvError, FieldMismatch, Forbidden, ForwardLoop, Internal,
                     Invalid, LeaseLost, LockHeld, NotFound, NotLeader, NotLockHolder, OutcomeUnknown, OutOfRange,
                     PartitionUnavailable, QueueEmpty, SlowConsumer, SnapshotExpired, StaleReceipt, TooManyKeys,
                     TooManyRequests, TooManyWatches, TransportError, Unauthenticated, UntrustedCertificate,
                     ValueTooLarge, VersionConflict, WrongType)

__all__ = [
    "Answer", "AsyncClient", "AsyncLease", "AsyncWatch", "Backoff", "Client", "CursorExpired", "EscalationError",
    "EskvError", "FieldMismatch", "Forbidden", "ForwardLoop", "Internal", "Invalid", "Lease", "LeaseLost",
    "LockHeld", "NotFound", "NotLeader", "NotLockHolder", "OutcomeUnknown", "OutOfRange", "PartitionUnavailable",
    "QueueEmpty", "Request", "Response", "RetryPolicy", "SSEParser", "SlowConsumer", "SnapshotExpired",
    "StaleReceipt", "TooManyKeys", "TooManyRequests", "TooManyWatches", "TransportError", "Unauthenticated", "UntrustedCertificate",
    "ValueTooLarge", "VersionConflict", "Watch", "WatchState", "WrongType", "classify", "uuid7",
]
__version__ = "0.1.0"
