"""Two versions of the service side by side: the same records into each and the same reads of
each, taken in turns, so that whatever else the machine does falls on both alike.

    python bench/ab.py --before COMMIT [--after COMMIT] [--records N] [--calls N]

Prints a markdown table: ingest time and each read probe's p50 for both, and their ratio.
"""

import argparse
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import codecopy  # noqa: E402
import probes  # noqa: E402
from server import Server  # noqa: E402
from traffic import Traffic  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the commit to compare against")
    parser.add_argument("--after", help="the commit to measure (default: the working tree)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=15, help="timed calls per read and version")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="dns-ab-")
    traffic = Traffic(args.records, int(time.time() // 60 * 60_000), args.batch, args.seed)
    versions = {}
    for name, commit in (("before", args.before), ("after", args.after)):
        code = os.path.join(workdir, name)
        origin = codecopy.snapshot(code, commit)
        database, log = os.path.join(workdir, f"{name}.db"), os.path.join(workdir, f"{name}.log")
        server = Server(database, secrets.token_urlsafe(24), 2, log, code)
        versions[name] = {"origin": origin, "server": server, "post": [], "reads": {}}
    try:
        print(f"{args.records:,} records into each, batch by batch in turns ...", flush=True)
        for index in range(traffic.batches):
            body = traffic.batch_json(index)
            for version in versions.values():
                started = time.perf_counter()
                status, data = version["server"].call("POST", "/v2/ingest", body)
                version["post"].append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"POST /v2/ingest: {status} {data[:300]!r}")
        for version in versions.values():
            probes.housekeeping(version["server"])
        print("reads in turns ...", flush=True)
        for probe in probes.read_probes(traffic):
            samples = {name: [] for name in versions}
            for turn in range(args.calls + 2):  # two warm-up calls each
                for name, version in versions.items():
                    started = time.perf_counter()
                    status, _ = version["server"].call("GET", probe.path)
                    elapsed = time.perf_counter() - started
                    if status != 200:
                        raise RuntimeError(f"GET {probe.path}: {status} ({name})")
                    if turn >= 2:
                        samples[name].append(elapsed)
            for name, version in versions.items():
                version["reads"][probe.label] = statistics.median(samples[name]) * 1000
            shown = ", ".join(f"{n} {v['reads'][probe.label]:.1f} ms" for n, v in versions.items())
            print(f"  {probe.label}: {shown}", flush=True)
    finally:
        for version in versions.values():
            version["server"].stop()
    before, after = versions["before"], versions["after"]
    lines = [
        f"A/B of {args.records:,} records (seed {args.seed}), {args.calls} timed calls per read and version, in turns.",
        f"before: {before['origin']}; after: {after['origin']}.",
        "",
        "| measurement | before | after | after / before |",
        "|---|---|---|---|",
    ]
    rate = {name: args.records / sum(v["post"]) for name, v in versions.items()}
    lines.append(
        f"| HTTP ingest, records/s (one batch at a time) | {rate['before']:,.0f} | {rate['after']:,.0f} "
        f"| {rate['after'] / rate['before']:.2f} |"
    )
    for label, ms in before["reads"].items():
        then = after["reads"][label]
        lines.append(f"| {label}, p50 ms | {ms:,.1f} | {then:,.1f} | {then / ms:.2f} |")
    print("\n" + "\n".join(lines))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
