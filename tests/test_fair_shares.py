"""One key, or a client with no valid key at all, cannot take the service from the others:
against real gunicorn with few threads, so that a held thread shows."""

import http.client
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import API_KEY, AUTH
from servers import Gunicorn


@pytest.fixture
def few_threads(tmp_path):
    """gunicorn with 2 workers of 4 threads each."""
    env = {"ANALYTICS_DATABASE": str(tmp_path / "fair.db"), "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_THREADS": "4"}
    server = Gunicorn(tmp_path, env, workers=2)
    yield server
    server.stop()


def get(server, path, headers, timeout=60) -> tuple[int, dict]:
    """(status, headers) of one GET on a connection of its own."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.headers)
    finally:
        connection.close()


def timed(server, path, headers) -> float:
    started = time.monotonic()
    status, _ = get(server, path, headers)
    assert status == 200
    return time.monotonic() - started


def test_wrong_keys_do_not_hold_threads_and_valid_keys_are_not_delayed(few_threads):
    server = few_threads
    answers = []

    def guess(i):
        answers.append(get(server, "/v2/client", {"Authorization": f"guess-{i}"}))

    with ThreadPoolExecutor(200) as pool:
        for i in range(200):
            pool.submit(guess, i)
        time.sleep(0.5)  # the guesses are in flight
        valid = [timed(server, "/v2/client", AUTH) for _ in range(5)]
    assert max(valid) < 2, f"a valid key waited {max(valid):.1f} s behind 200 wrong keys"
    statuses = {status for status, _ in answers}
    assert len(answers) == 200 and statuses <= {401, 429}, statuses
    refused = [headers for status, headers in answers if status == 429]
    assert refused and all(1 <= int(h["Retry-After"]) <= 60 for h in refused), "past the free ones: 429"
