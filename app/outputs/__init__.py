"""Outputs: forwarding every stored record to a receiver (models/delivery/outputs.py keeps their settings
and cursors). `delivery.py` is the background job every worker runs; one module per kind of
receiver sends a batch of encoded records and raises OutputError unless the receiver took it."""


class OutputError(Exception):
    """The receiver did not accept the batch (the message says why); it is sent again later."""


def make_sender(output):
    """The sender for an output row (models.delivery.outputs.OutputRow)."""
    from . import http_post, jsonl_file, syslog

    kinds = {"http": http_post.HttpSender, "syslog": syslog.SyslogSender, "file": jsonl_file.FileSender}
    return kinds[output.kind](output.url, output.options)
