"""Small helpers shared by the store's query modules."""

ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, as SQLite's LIKE compares them (see
    Engine.like_ascii_nocase)."""
    return text.translate(str.maketrans(ASCII_UPPER, ASCII_UPPER.lower()))


def chunks(items, size: int):
    """Successive lists of at most `size` items (keeps SQL parameter counts bounded)."""
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def statement_parts(items: list, size: int):
    """Successive lists of `items`, in order: of `size` items, then of powers of two for the
    rest. For statements written with a row of placeholders per item: a few texts whatever the
    number of items, as sqlite3 keeps a connection's last 128 statements prepared, and one of
    many rows holds megabytes (1,310 rows of 25 values: 2.5 MB, and 5 ms to prepare against
    1.4 ms to run; a text per number of rows kept 320 MB a connection)."""
    start = 0
    while start < len(items):
        left = len(items) - start
        n = size if left >= size else 1 << (left.bit_length() - 1)
        yield items[start : start + n]
        start += n


def placeholders(count: int) -> str:
    return ", ".join(["?"] * count)


def like_escape(text: str) -> str:
    """`text` as a LIKE pattern that matches it literally (with ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def can_be_id(value: int) -> bool:
    """Whether `value` can be a stored row's id: a number past what either engine's integers
    hold (an id in a URL) names no row rather than failing the query."""
    return 0 < value < 1 << 63
