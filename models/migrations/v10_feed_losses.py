"""Version 10: feed_loss, the records a feed could not store counted per run, endpoint and
place (models/ingest/losses.py). A new table: reconcile.py makes it."""


def up():
    pass
