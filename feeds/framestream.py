"""Frame Streams, the receiving side (fstrm's reader): the handshake resolvers open a dnstap
connection with, then its data frames, on an asyncio stream.

Bidirectional (Unix sockets and TCP, as Unbound, BIND, Knot Resolver, PowerDNS, CoreDNS and
dnsdist speak it): READY -> ACCEPT, START, data frames..., STOP -> FINISH. A sender that
starts with START (unidirectional, as a file or an older sender writes) is read as well.
Control frames are read by the `fstrm` package's codec; data frames are cut out of each read
here (see `_frames`).
"""

import asyncio
import struct
from collections.abc import AsyncIterator

import fstrm

CONTENT_TYPE = b"protobuf:dnstap.Dnstap"
# No dnstap message is anywhere near this; a larger frame is a broken or hostile sender, and
# reading it would hold that much memory.
MAX_FRAME = 1 << 20
READ_SIZE = 1 << 16


class ProtocolError(Exception):
    """The peer does not speak Frame Streams as expected; the connection is dropped."""


async def data_frames(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> AsyncIterator[bytes]:
    """The payloads of the connection's data frames, after answering its handshake; ends at
    STOP (answered with FINISH on a bidirectional connection) or when the peer hangs up."""
    started = bidirectional = False
    async for kind, types, payload in _frames(reader):
        if kind == fstrm.FSTRM_DATA_FRAME:
            if not started:
                raise ProtocolError("data frame before START")
            yield payload
        elif kind == fstrm.FSTRM_CONTROL_READY:
            _check_content_type(types)
            bidirectional = True
            writer.write(_CODEC.encode_ctrlaccept(CONTENT_TYPE))
            await writer.drain()
        elif kind == fstrm.FSTRM_CONTROL_START:
            _check_content_type(types)
            started = True
        elif kind == fstrm.FSTRM_CONTROL_STOP:
            if bidirectional:  # a unidirectional sender expects no answer, and may be gone
                writer.write(_CODEC.encode(fstrm.FSTRM_CONTROL_FINISH))
                await writer.drain()
            return
        else:
            raise ProtocolError(f"unexpected control frame {kind}")


# Encoding keeps no state in the codec, so one instance serves every connection.
_CODEC = fstrm.FstrmCodec()


def _check_content_type(types: list[bytes]) -> None:
    # A sender may offer several content types, or (unidirectional) name none.
    if types and CONTENT_TYPE not in types:
        raise ProtocolError(f"content type {b', '.join(types).decode(errors='replace')} is not dnstap")


async def _frames(reader: asyncio.StreamReader) -> AsyncIterator[tuple[int, list[bytes], bytes]]:
    """(frame type, content types, payload) of each frame until the peer hangs up.

    Data frames are cut out of what was read here, each read's frames in one pass: the fstrm
    codec copies the rest of its buffer twice a frame (a 64 KiB read of 150-byte frames copied
    some 400 times), which cost the collector's reading more than any other step but decoding.
    Control frames, a handful a connection, are the codec's to read."""
    pending = b""
    while True:
        chunk = await reader.read(READ_SIZE)
        if not chunk:
            return
        data = pending + chunk if pending else chunk
        offset, size = 0, len(data)
        while size - offset >= 4:
            (length,) = _LENGTH.unpack_from(data, offset)
            if length:  # a data frame: its length, then its payload
                if length > MAX_FRAME:
                    raise ProtocolError("frame larger than 1 MiB")
                end = offset + 4 + length
                if end > size:
                    break
                yield fstrm.FSTRM_DATA_FRAME, [], data[offset + 4 : end]
            else:  # a control frame: an escape (0), its length, then its content
                if size - offset < 8:
                    break
                (length,) = _LENGTH.unpack_from(data, offset + 4)
                if length > MAX_FRAME:
                    raise ProtocolError("frame larger than 1 MiB")
                end = offset + 8 + length
                if end > size:
                    break
                yield _control(data[offset:end])
            offset = end
        pending = data[offset:]


_LENGTH = struct.Struct(">I")


def _control(frame: bytes) -> tuple[int, list[bytes], bytes]:
    """A whole control frame (escape and length included) read by the fstrm codec."""
    codec = fstrm.FstrmCodec()
    codec.append(frame)
    try:
        codec.process()
        return codec.decode()
    except Exception as exc:  # the codec raises bare Exceptions for malformed frames
        raise ProtocolError(f"malformed control frame: {exc}") from exc
