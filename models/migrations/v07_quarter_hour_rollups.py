"""Version 7: quarter-hour plain counts and an hourly client rollup. Only rollups changed: they
are counted under the current layout at start (reconcile.py)."""


def up():
    pass
