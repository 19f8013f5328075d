"""What the importer tests read back: the activity log over HTTP, and row counts of the store
for what HTTP does not show (the import positions, duplicates)."""

import stores

from helpers import AUTH

WHOLE_WINDOW = "startTime=2000-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z"


def logged(client) -> list[dict]:
    """Every record in the activity log, oldest first."""
    records, page = [], 0
    while True:
        response = client.get(f"/v2/activity-log?{WHOLE_WINDOW}&sortOrder=asc&pageSize=500&page={page}", headers=AUTH)
        assert response.status_code == 200, response.json
        records += response.json["queries"]
        if len(response.json["queries"]) < 500:
            return records
        page += 1


def questions(client) -> list[str]:
    return [r["question"] for r in logged(client)]


def count_rows(database, table: str) -> int:
    return stores.scalar(database, f"SELECT COUNT(*) FROM {table}")
