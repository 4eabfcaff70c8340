"""The worker wire protocol: typed, length-framed messages with binary arrays. Standard library only.

A frame is ``MAGIC | uint32 header length | uint64 payload length | JSON header | payload``.
The header is ``{"type": ..., "data": {...}, "arrays": [{name, dtype, shape, offset, nbytes}]}``;
arrays travel as raw bytes in the payload, never as JSON lists. The worker's stdout carries
frames only; anything else it has to say goes to stderr.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProtocolError

PROTOCOL_VERSION = 1
MAGIC = b"NRK\x01"
_PREAMBLE = struct.Struct(">4sIQ")
MAX_HEADER_BYTES = 1 << 20  # a header is metadata; a larger one is malformed or hostile
MAX_PAYLOAD_BYTES = 1 << 34

HELLO = "hello"
REQUEST = "request"
PROGRESS = "progress"
FRAME = "frame"
WARNING = "warning"
ERROR = "error"
DONE = "done"
CANCELLED = "cancelled"
MESSAGE_TYPES = frozenset({HELLO, REQUEST, PROGRESS, FRAME, WARNING, ERROR, DONE, CANCELLED})
FINAL_TYPES = frozenset({ERROR, DONE, CANCELLED})

_FORMAT_TO_DTYPE = {"f": "<f4", "d": "<f8", "i": "<i4", "l": "<i8", "q": "<i8", "B": "|u1", "b": "|i1"}


@dataclass(frozen=True)
class Array:
    """A received (or to-be-sent) array: numpy-style dtype string, shape and raw bytes."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes


@dataclass(frozen=True)
class Message:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, Array] = field(default_factory=dict)


def as_array(obj: Any) -> Array:
    """Wrap a C-contiguous buffer (a numpy array, array.array, bytes) for sending."""
    if isinstance(obj, Array):
        return obj
    view = memoryview(obj)
    if not view.c_contiguous:
        raise ProtocolError("arrays sent to the worker must be C-contiguous")
    dtype = getattr(getattr(obj, "dtype", None), "str", None) or _FORMAT_TO_DTYPE.get(view.format)
    if dtype is None:
        raise ProtocolError(f"unsupported array element format {view.format!r}")
    return Array(dtype=dtype, shape=tuple(view.shape), data=view.tobytes())


def encode(msg_type: str, data: dict[str, Any] | None = None, arrays: dict[str, Any] | None = None) -> bytes:
    """Serialize one message into a frame."""
    if msg_type not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown message type {msg_type!r}")
    specs, chunks, offset = [], [], 0
    for name, obj in (arrays or {}).items():
        arr = as_array(obj)
        specs.append({"name": name, "dtype": arr.dtype, "shape": list(arr.shape), "offset": offset, "nbytes": len(arr.data)})
        chunks.append(arr.data)
        offset += len(arr.data)
    header = json.dumps({"type": msg_type, "data": data or {}, "arrays": specs}, allow_nan=False).encode("utf-8")
    return _PREAMBLE.pack(MAGIC, len(header), offset) + header + b"".join(chunks)


def _parse_arrays(specs: Any, payload: bytes) -> dict[str, Array]:
    if not isinstance(specs, list):
        raise ProtocolError("malformed header: 'arrays' must be a list")
    arrays = {}
    for spec in specs:
        try:
            name, dtype, offset, nbytes = spec["name"], spec["dtype"], int(spec["offset"]), int(spec["nbytes"])
            shape = tuple(int(s) for s in spec["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed array spec {spec!r}") from exc
        if not isinstance(name, str) or not isinstance(dtype, str):
            raise ProtocolError(f"malformed array spec {spec!r}")
        if offset < 0 or nbytes < 0 or offset + nbytes > len(payload) or any(s < 0 for s in shape):
            raise ProtocolError(f"array {name!r} lies outside its payload")
        arrays[name] = Array(dtype=dtype, shape=shape, data=payload[offset : offset + nbytes])
    return arrays


def _parse_header(raw: bytes, payload: bytes) -> Message:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"malformed message header: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("data", {}), dict):
        raise ProtocolError("malformed message header: not an object")
    msg_type = header.get("type")
    if msg_type not in MESSAGE_TYPES:
        raise ProtocolError(f"unknown message type {msg_type!r}")
    return Message(type=msg_type, data=header.get("data", {}), arrays=_parse_arrays(header.get("arrays", []), payload))


class Decoder:
    """Incremental frame decoder: feed it bytes as they arrive, in chunks of any size."""

    def __init__(self, max_header: int = MAX_HEADER_BYTES, max_payload: int = MAX_PAYLOAD_BYTES) -> None:
        self._buf = bytearray()
        self._max_header = max_header
        self._max_payload = max_payload

    def feed(self, chunk: bytes) -> list[Message]:
        self._buf += chunk
        messages = []
        while (msg := self._next()) is not None:
            messages.append(msg)
        return messages

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)

    def _next(self) -> Message | None:
        if len(self._buf) < _PREAMBLE.size:
            return None
        magic, header_len, payload_len = _PREAMBLE.unpack_from(self._buf)
        if magic != MAGIC:
            raise ProtocolError("stream is not NeuROK protocol (bad magic); did something print to stdout?")
        if header_len > self._max_header:
            raise ProtocolError(f"message header of {header_len} bytes exceeds the {self._max_header}-byte limit")
        if payload_len > self._max_payload:
            raise ProtocolError(f"message payload of {payload_len} bytes exceeds the limit")
        end = _PREAMBLE.size + header_len + payload_len
        if len(self._buf) < end:
            return None
        raw = bytes(self._buf[_PREAMBLE.size : _PREAMBLE.size + header_len])
        payload = bytes(self._buf[_PREAMBLE.size + header_len : end])
        del self._buf[:end]
        return _parse_header(raw, payload)


def hello_data(**info: Any) -> dict[str, Any]:
    """The worker's HELLO payload: the protocol version plus whatever it reports about itself."""
    return {"protocol": PROTOCOL_VERSION, **info}


def check_hello(msg: Message) -> None:
    """Raise ProtocolError unless ``msg`` is a HELLO of our protocol version."""
    if msg.type != HELLO:
        raise ProtocolError(f"expected a HELLO from the worker, got {msg.type!r}")
    theirs = msg.data.get("protocol")
    if theirs != PROTOCOL_VERSION:
        raise ProtocolError(
            f"runtime protocol version {theirs} does not match the add-on's version {PROTOCOL_VERSION}; "
            "update the add-on and its runtime together"
        )
