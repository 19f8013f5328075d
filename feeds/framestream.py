"""Frame Streams, the receiving side (fstrm's reader): the handshake resolvers open a dnstap
connection with, then its data frames, on an asyncio stream.

Bidirectional (Unix sockets and TCP, as Unbound, BIND, Knot Resolver, PowerDNS, CoreDNS and
dnsdist speak it): READY -> ACCEPT, START, data frames..., STOP -> FINISH. A sender that
starts with START (unidirectional, as a file or an older sender writes) is read as well.
The framing itself is the `fstrm` package's codec.
"""

import asyncio
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
    """(frame type, content types, payload) of each frame until the peer hangs up."""
    codec = fstrm.FstrmCodec()
    while True:
        chunk = await reader.read(READ_SIZE)
        if not chunk:
            return
        codec.append(chunk)
        while True:
            try:
                complete = codec.process()
            except Exception as exc:  # the codec raises bare Exceptions for malformed frames
                raise ProtocolError(f"malformed frame: {exc}") from exc
            if (codec.df_length or 0) > MAX_FRAME or (codec.cf_length or 0) > MAX_FRAME:
                raise ProtocolError("frame larger than 1 MiB")
            if not complete:
                break
            try:
                frame = codec.decode()
            except Exception as exc:
                raise ProtocolError(f"malformed control frame: {exc}") from exc
            yield frame
