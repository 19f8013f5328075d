"""Frame Streams as the collector reads it (feeds/framestream.py cuts the data frames out of
each read itself): a connection's frames come out whole and in order however the stream is cut
into reads, its handshake answered as fstrm's codec writes it."""

import asyncio
import random

import fstrm
import pytest

from feeds.framestream import CONTENT_TYPE, READ_SIZE, ProtocolError, data_frames

CODEC = fstrm.FstrmCodec()


class Writer:
    """What the reading answers on the connection."""

    def __init__(self):
        self.written = b""

    def write(self, data: bytes):
        self.written += data

    async def drain(self):
        pass


def read(stream: bytes, pieces: list[int]) -> tuple[list[bytes], bytes]:
    """The payloads the reading yields from `stream` arriving in pieces of the given sizes
    (the rest at once), and what it answered."""

    async def run():
        reader, writer = asyncio.StreamReader(limit=1 << 22), Writer()
        offset = 0
        for size in pieces:
            reader.feed_data(stream[offset : offset + size])
            offset += size
        if offset < len(stream):
            reader.feed_data(stream[offset:])
        reader.feed_eof()
        return [payload async for payload in data_frames(reader, writer)], writer.written

    return asyncio.run(run())


def handshake_and(payloads: list[bytes]) -> bytes:
    ready = CODEC.encode(fstrm.FSTRM_CONTROL_READY, ct=[CONTENT_TYPE])
    start = CODEC.encode(fstrm.FSTRM_CONTROL_START, ct=[CONTENT_TYPE])
    frames = b"".join(CODEC.encode(fstrm.FSTRM_DATA_FRAME, payload=payload) for payload in payloads)
    return ready + start + frames + CODEC.encode(fstrm.FSTRM_CONTROL_STOP)


ANSWER = CODEC.encode_ctrlaccept(CONTENT_TYPE) + CODEC.encode(fstrm.FSTRM_CONTROL_FINISH)


@pytest.mark.parametrize("seed", range(5))
def test_frames_come_out_whole_however_the_stream_is_cut(seed):
    rng = random.Random(seed)
    payloads = [rng.randbytes(rng.choice([1, 2, 3, 4, 5, 150, 300, 70_000])) for _ in range(400)]
    stream = handshake_and(payloads)
    pieces = [rng.choice([1, 2, 3, 4, 5, 7, 100, READ_SIZE - 1, READ_SIZE + 3]) for _ in range(3000)]
    assert read(stream, pieces) == (payloads, ANSWER)


def test_a_byte_at_a_time():
    payloads = [bytes([n]) * n for n in range(1, 60)]
    stream = handshake_and(payloads)
    assert read(stream, [1] * len(stream)) == (payloads, ANSWER)


def test_a_frame_past_the_bound_and_a_broken_control_frame_are_refused():
    start = CODEC.encode(fstrm.FSTRM_CONTROL_START, ct=[CONTENT_TYPE])
    with pytest.raises(ProtocolError, match="larger than 1 MiB"):
        read(start + (1 << 20 | 1).to_bytes(4, "big"), [])
    with pytest.raises(ProtocolError, match="malformed control frame"):
        read(start + b"\0\0\0\0\0\0\0\2\0\0", [])
    with pytest.raises(ProtocolError, match="data frame before START"):
        read(CODEC.encode(fstrm.FSTRM_DATA_FRAME, payload=b"x"), [])
