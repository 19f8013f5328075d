"""What each family of rollups costs ingestion: the same batches stored in-process (POST
/v2/ingest through Flask's test client, no sockets) into fresh SQLite databases, once with every
rollup and once with one family left out, in turns; a family's cost is the difference.

    python bench/rollup_cost.py [--density 10000000] [--records 200000] [--rounds 3]
    python bench/rollup_cost.py --candidates [--density 10000000]

The batches are the first `--records` of a `--density`-record data set over 30 days, so each
batch holds as many distinct names, clients and hours as at that size. Prints a markdown table.
With --candidates it counts instead the rows that candidate rollups of names would have over the
whole data set (the keys a rollup keeps are its rows), without storing anything.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from traffic import Traffic  # noqa: E402

import models.statistics.rollups as rollups  # noqa: E402
from app import create_app  # noqa: E402

KEY = "bench-rollup-cost"
FAMILIES = {
    "every rollup (the service as it is)": lambda dim: True,
    "without the per-endpoint daily columns": lambda dim: not (dim.per_endpoint and dim.statistics and dim.columns),
    "without the plain hourly and quarter-hour counts": lambda dim: dim.columns or dim.statistics,
    "without the per-endpoint hourly and quarter-hour columns (client, action)": lambda dim: (
        not (dim.columns and not dim.statistics and dim.per_endpoint)
    ),
    "without question+action over all endpoints (16 d, 4 d, 1 d, 6 h, 1 h)": lambda dim: dim.per_endpoint,
    "without its 16- and 4-day blocks": lambda dim: dim.per_endpoint or dim.period_ms <= rollups.DAY_MS,
    "without its 6-hour and hourly rows": lambda dim: dim.per_endpoint or dim.statistics,
    "no rollups at all": lambda dim: False,
}


def store(bodies: list[bytes], keep, workdir: str) -> float:
    """Seconds to ingest `bodies` into a fresh database with the dims `keep` selects."""
    path = tempfile.mkdtemp(dir=workdir)
    everything, built = rollups.DIMS, rollups.BUILT
    rollups.DIMS = tuple(dim for dim in everything if keep(dim))
    # A block left out is not summed either; one whose days or hours are left out cannot be.
    rollups.BUILT = tuple(dim for dim in built if keep(dim) and keep(rollups._BY_ID[dim.built_from]))
    try:
        database = os.path.join(path, "a.db")
        app = create_app(
            {"TESTING": True, "INSTANCE_PATH": path, "ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": KEY}
        )
        client = app.test_client()
        headers = {"Authorization": KEY, "Content-Type": "application/json"}
        started = time.perf_counter()
        for body in bodies:
            response = client.post("/v2/ingest", data=body, headers=headers)
            assert response.status_code == 200, response.get_data(as_text=True)
        return time.perf_counter() - started
    finally:
        rollups.DIMS, rollups.BUILT = everything, built
        shutil.rmtree(path, ignore_errors=True)


CANDIDATES = {
    "(day, question) over all endpoints": lambda r, day, hour: (day, r[4]),
    "(day, question, action) over all endpoints": lambda r, day, hour: (day, r[4], r[5]),
    "(day, endpoint, question, action)": lambda r, day, hour: (day, r[6], r[4], r[5]),
    "(hour, question, action) over all endpoints": lambda r, day, hour: (hour, r[4], r[5]),
    "(hour, endpoint, question, action)": lambda r, day, hour: (hour, r[6], r[4], r[5]),
    "(day, client, question)": lambda r, day, hour: (day, r[0], r[4]),
    "(4 days, question, action) over all endpoints": lambda r, day, hour: (day // 4, r[4], r[5]),
    "(16 days, question, action) over all endpoints": lambda r, day, hour: (day // 16, r[4], r[5]),
}


def candidates(traffic) -> dict[str, int]:
    """Rows of each candidate rollup over the whole data set."""
    from datetime import datetime

    keys = {name: set() for name in CANDIDATES}
    endpoints = [base["endpointId"] for base, _ in traffic.clients]
    for index in range(traffic.batches):
        for event in traffic._events(index):
            ms = int(datetime.fromisoformat(event[1].replace("Z", "+00:00")).timestamp() * 1000)
            row = (*event[:6], endpoints[event[0]])
            day, hour = ms // rollups.DAY_MS, ms // rollups.HOUR_MS
            for name, key in CANDIDATES.items():
                keys[name].add(key(row, day, hour))
    return {name: len(found) for name, found in keys.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--density", type=int, default=10_000_000, help="records of the data set over 30 days")
    parser.add_argument("--records", type=int, default=200_000, help="records stored per measurement")
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", action="store_true", help="count candidate rollups' rows instead")
    args = parser.parse_args(argv)
    traffic = Traffic(args.density, int(time.time() // 60 * 60_000), args.batch)
    if args.candidates:
        print(f"Rows of candidate rollups of names over {args.density:,} records (30 days).\n")
        print("| rollup | rows | rows per 1,000 records |\n|---|---|---|")
        for name, rows in candidates(traffic).items():
            print(f"| {name} | {rows:,} | {rows * 1000 / args.density:,.1f} |")
        return 0
    bodies = [traffic.batch_json(i) for i in range(args.records // args.batch)]
    n = len(bodies) * args.batch
    workdir = tempfile.mkdtemp(prefix="dns-rollup-cost-")
    times: dict[str, list[float]] = {name: [] for name in FAMILIES}
    try:
        for round_ in range(args.rounds):
            for name, keep in FAMILIES.items():
                times[name].append(store(bodies, keep, workdir))
                print(f"  round {round_ + 1}: {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    full = statistics.median(times["every rollup (the service as it is)"])
    print(f"{n:,} records at the density of {args.density:,} over 30 days; median of {args.rounds} rounds.\n")
    print("| stored with | seconds | us per record | that family costs (us per record, share of ingest) |")
    print("|---|---|---|---|")
    for name, samples in times.items():
        seconds = statistics.median(samples)
        cost = (full - seconds) / n * 1e6
        share = f"{cost:,.1f} us, {(full - seconds) / full:.0%}" if seconds != full else "-"
        print(f"| {name} | {seconds:,.2f} | {seconds / n * 1e6:,.1f} | {share} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
