"""The wire protocol: framing, binary arrays, handshake, malformed input."""

from __future__ import annotations

import array
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurok_blender.bridge import protocol
from neurok_blender.errors import ProtocolError


def test_roundtrip_with_arrays():
    verts = np.arange(12, dtype=np.float32).reshape(4, 3)
    frame = protocol.encode(protocol.REQUEST, {"a": 1}, {"vertices": verts, "ids": array.array("i", [1, 2])})
    [msg] = protocol.Decoder().feed(frame)
    assert msg.type == protocol.REQUEST and msg.data == {"a": 1}
    got = np.frombuffer(msg.arrays["vertices"].data, msg.arrays["vertices"].dtype).reshape(msg.arrays["vertices"].shape)
    assert np.array_equal(got, verts)
    assert msg.arrays["ids"].dtype == "<i4" and msg.arrays["ids"].shape == (2,)


def test_arrays_are_binary_not_json_lists():
    frame = protocol.encode(protocol.REQUEST, {}, {"v": np.zeros((1000, 3), np.float32)})
    header_len = struct.unpack(">I", frame[4:8])[0]
    header = json.loads(frame[16 : 16 + header_len])
    assert header["arrays"][0]["nbytes"] == 12000 and header_len < 300


def test_split_reads_byte_by_byte():
    frames = protocol.encode(protocol.PROGRESS, {"stage": "x"}) + protocol.encode(protocol.FRAME, {"index": 3})
    decoder = protocol.Decoder()
    got = []
    for i in range(len(frames)):
        got += decoder.feed(frames[i : i + 1])
    assert [m.type for m in got] == [protocol.PROGRESS, protocol.FRAME]
    assert got[1].data == {"index": 3} and decoder.pending == 0


def test_many_messages_in_one_read():
    blob = b"".join(protocol.encode(protocol.FRAME, {"index": i}) for i in range(50))
    assert [m.data["index"] for m in protocol.Decoder().feed(blob)] == list(range(50))


def test_version_mismatch_is_a_clear_error():
    msg = protocol.Message(protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION + 1})
    with pytest.raises(ProtocolError, match="does not match"):
        protocol.check_hello(msg)


def test_first_message_must_be_hello():
    with pytest.raises(ProtocolError, match="HELLO"):
        protocol.check_hello(protocol.Message(protocol.DONE, {}))


def test_stray_print_on_stdout_is_detected():
    with pytest.raises(ProtocolError, match="bad magic"):
        protocol.Decoder().feed(b"hello from a stray print\n" + b"\0" * 16)


def test_oversized_header_is_rejected_before_reading_it():
    preamble = struct.pack(">4sIQ", protocol.MAGIC, protocol.MAX_HEADER_BYTES + 1, 0)
    with pytest.raises(ProtocolError, match="exceeds"):
        protocol.Decoder().feed(preamble)


def test_unknown_message_type_is_rejected():
    with pytest.raises(ProtocolError):
        protocol.encode("launch_missiles")
    header = json.dumps({"type": "nope", "data": {}, "arrays": []}).encode()
    with pytest.raises(ProtocolError, match="unknown message type"):
        protocol.Decoder().feed(struct.pack(">4sIQ", protocol.MAGIC, len(header), 0) + header)


def test_array_outside_payload_is_rejected():
    header = json.dumps({"type": "request", "data": {}, "arrays": [
        {"name": "v", "dtype": "<f4", "shape": [3], "offset": 0, "nbytes": 400}]}).encode()
    with pytest.raises(ProtocolError, match="outside"):
        protocol.Decoder().feed(struct.pack(">4sIQ", protocol.MAGIC, len(header), 4) + header + b"\0" * 4)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_fuzzed_bytes_either_decode_or_raise_protocol_error(blob):
    try:
        protocol.Decoder().feed(protocol.MAGIC + blob)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=20), st.none()), max_size=5),
       st.sampled_from(sorted(protocol.MESSAGE_TYPES)))
def test_fuzzed_headers_roundtrip(data, msg_type):
    [msg] = protocol.Decoder().feed(protocol.encode(msg_type, data))
    assert msg.type == msg_type and msg.data == data
