"""How a long-running process that moves records in bulk (a web worker, the collector) runs."""

import gc


def quiet_garbage_collector():
    """Freeze what start-up made and collect young objects less often.

    Parsing a batch of 5,000 records makes about 150,000 dicts: with the default thresholds each
    batch set off hundreds of young collections and several full passes over the whole heap
    (measured in-process: the JSON of one batch read in 91 ms with them, 33 ms without; HTTP
    ingest through gunicorn 11,100 -> 13,300 records/s). What start-up made lives as long as
    the process, so a full pass need never walk it; cycles made later are still collected.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
