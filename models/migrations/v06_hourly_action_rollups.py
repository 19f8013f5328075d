"""Version 6: hourly rollups of actions, and windows split into whole days and hours. Only
rollups changed: they are counted under the current layout at start (reconcile.py)."""


def up():
    pass
