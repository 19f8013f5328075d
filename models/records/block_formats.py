"""The formats of record blocks on disk, and the refusal of a block this release does not read.
docs/record-store.md, "Block formats", has what each format held, which commits wrote it, and
why only the newest has a reader (blocks.Inflated).

From format 3 on a block's first byte is its format; formats 1 and 2 compressed the whole blob,
their format byte included, so theirs begin with zlib's header byte (0x78): no format is ever
numbered 0x78."""

import zlib

_ZLIB = 0x78
# Formats that committed code wrote but no release's database holds, by number: what wrote them.
UNRELEASED = {
    1: "only the development branch 'blocks' wrote it (ffa8397-21df58c), never main",
    2: "only main's commits between releases wrote it (229b64a-319f490, reverted, and 9a94d8b-ee6a923)",
}


class UnreadableBlock(ValueError):
    """A record block of a format this release has no reader for."""

    def __init__(self, form: int | None, current: int):
        if form is not None and form > current:
            message = (
                f"a record block of format {form}, newer than this release reads (format {current}):"
                " a newer release wrote it. Run that release (or a later one) on this database, or"
                " restore a backup made before it ran."
            )
        else:
            why = UNRELEASED.get(form, "no commit of this project wrote it")
            message = (
                f"a record block of format {form}, which this release does not read (it reads format"
                f" {current}): {why} (docs/record-store.md, Block formats)."
            )
        super().__init__(message)
        self.form = form


def refusal(blob: bytes, current: int) -> UnreadableBlock:
    """The refusal of `blob`, a block not of format `current`, naming its format."""
    form = blob[0]
    if form == _ZLIB:
        try:
            form = zlib.decompressobj().decompress(blob, 1)[0]
        except (zlib.error, IndexError):
            form = None  # not a block of any format
    return UnreadableBlock(form, current)
