"""Version 14: records past the hot horizon frozen into compressed blocks (record_block, and
client.last_frozen: the newest time of a client's frozen records). A new table and a NULL-able
column: reconcile.py makes both; no block exists before this version."""


def up():
    pass
