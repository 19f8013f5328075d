"""The schema's history, one module a version (v01_... to v15_...): each says what its version
changed, and its `up()` brings a database of the version before to it."""

from models.migrations import (
    v01_first_tables,
    v02_strings_as_terms,
    v03_daily_rollups,
    v04_client_ids_never_reused,
    v05_rollups_by_period,
    v06_hourly_action_rollups,
    v07_quarter_hour_rollups,
    v08_record_catalogue,
    v09_two_horizons,
    v10_feed_losses,
    v11_registrable_domains,
    v12_first_seen,
    v13_outputs,
    v14_record_blocks,
    v15_block_questions,
)
from models.schema.tables import SCHEMA_VERSION

STEPS = {
    int(module.__name__.rsplit(".", 1)[1][1:3]): module
    for module in (
        v01_first_tables,
        v02_strings_as_terms,
        v03_daily_rollups,
        v04_client_ids_never_reused,
        v05_rollups_by_period,
        v06_hourly_action_rollups,
        v07_quarter_hour_rollups,
        v08_record_catalogue,
        v09_two_horizons,
        v10_feed_losses,
        v11_registrable_domains,
        v12_first_seen,
        v13_outputs,
        v14_record_blocks,
        v15_block_questions,
    )
}
assert sorted(STEPS) == list(range(1, SCHEMA_VERSION + 1)), "a step a version, none missing"


def due(version: int) -> list[int]:
    """The steps a database at `version` runs: step 1 alone for a new one (it makes the newest
    schema), every later step for an older one."""
    if version == 0:
        return [1]
    return [step for step in STEPS if step > version]


def summary(step: int) -> str:
    """The first line of the step's docstring."""
    return STEPS[step].__doc__.strip().splitlines()[0]
