"""Version 3: daily rollups (rollup_day: counts per column, day, endpoint and value), counted
from the records already stored. Nothing to do here: step 5 replaced the table, and the rollups
are counted under the current layout at every start (models/migrations/reconcile.py)."""


def up():
    pass
