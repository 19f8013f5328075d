"""Version 13: outputs (the output table: where records are forwarded, and how far they got).
A new table: reconcile.py makes it (as the privacy, access-log and alert tables of the same
days, which came without a version number)."""


def up():
    pass
