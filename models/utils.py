"""Small helpers shared by the store's query modules."""


def chunks(items, size: int):
    """Successive lists of at most `size` items (keeps SQL parameter counts bounded)."""
    items = list(items)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def placeholders(count: int) -> str:
    return ", ".join(["?"] * count)


def like_escape(text: str) -> str:
    """`text` as a LIKE pattern that matches it literally (with ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def can_be_id(value: int) -> bool:
    """Whether `value` can be a stored row's id: a number past what either engine's integers
    hold (an id in a URL) names no row rather than failing the query."""
    return 0 < value < 1 << 63
