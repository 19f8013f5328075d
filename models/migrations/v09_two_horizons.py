"""Version 9: statistics outlive the records (rollups of a day or longer kept past the
records' retention), question counted with action over all endpoints by blocks of days, and
rollups brought to a new layout by renumbering rather than recounting. Only rollups changed:
reconcile.py brings them to the current layout at start."""


def up():
    pass
