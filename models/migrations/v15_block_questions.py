"""Version 15: which frozen blocks hold each question name (block_question, written as blocks
are frozen): a search reads the blocks its names are in from it, not from a Bloom test of every
block of its window. reconcile.py makes the table; this fills it for the blocks already frozen,
which a search would otherwise never find."""

from models.records import freezing


def up():
    freezing.index_frozen()
