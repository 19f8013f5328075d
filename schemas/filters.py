"""The shared filters and time window on the wire, generated from the catalogue."""

import marshmallow as ma
from marshmallow import fields

from catalogue import BOOLEAN, FILTERABLE, INTEGER
from models.records.filters import SEARCH_MODES, Filters, compile_pattern
from models.runtime.clock import request_now_ms

from .fields import BaseSchema, Boolean, DatetimeInput, Integer, Trigger
from .records import ACTIONS

MAX_FILTER_VALUES = 1000
SEARCH_MODE_HELP = (
    "How searchQuestion matches a question (every mode but regex ignores case): `includes` anywhere in it, "
    "`startsWith`, `endsWith`, `excludes` (questions not including it), `apex` the name itself or any "
    "name under it (`example.co.uk` matches `example.co.uk` and `www.example.co.uk`, not "
    "`myexample.co.uk`), `regex` an RE2 pattern (see docs/api.md)."
)


def _value_field(column):
    if column.name == "trigger":
        return Trigger()
    if column.name == "action":
        return Integer(validate=ma.validate.OneOf(list(ACTIONS)))
    if column.storage == INTEGER:
        return Integer(validate=ma.validate.Range(min=0, max=2**32 - 1))
    if column.storage == BOOLEAN:
        return Boolean()
    return fields.String(validate=ma.validate.Length(min=1, max=1024))


def _filter_fields() -> dict:
    columns = {
        column.name: fields.List(
            _value_field(column),
            data_key=f"{column.name}[]",
            validate=ma.validate.Length(max=MAX_FILTER_VALUES),
            metadata={"description": f"Only records whose {column.name} is one of these."},
        )
        for column in FILTERABLE
    }
    return {
        **columns,
        "searchQuestion": fields.String(
            validate=ma.validate.Length(min=1, max=253),
            metadata={"description": "Only records whose question matches it, as searchQuestionMode says."},
        ),
        "searchQuestionMode": fields.String(
            load_default="includes",
            validate=ma.validate.OneOf(SEARCH_MODES),
            metadata={"description": SEARCH_MODE_HELP},
        ),
    }


class _PatternChecked(BaseSchema):
    @ma.validates_schema
    def _pattern_runs(self, data, **kwargs):
        if data.get("searchQuestionMode") == "regex" and data.get("searchQuestion"):
            try:
                compile_pattern(data["searchQuestion"])
            except ValueError as exc:
                raise ma.ValidationError(f"searchQuestion is {exc}.", field_name="searchQuestion") from None


FiltersSchema = type("FiltersSchema", (_PatternChecked,), _filter_fields())


class _WindowSchema(BaseSchema):
    @ma.validates_schema
    def _start_not_after_end(self, data, **kwargs):
        end = data.get("endTime", request_now_ms())
        if "startTime" in data and data["startTime"] > end:
            raise ma.ValidationError("startTime is after endTime.", field_name="startTime")


class WindowSchema(_WindowSchema):
    startTime = DatetimeInput(required=True, metadata={"description": "Start of the window (inclusive)."})
    endTime = DatetimeInput(metadata={"description": "End of the window (inclusive); default now."})


class OptionalWindowSchema(_WindowSchema):
    startTime = DatetimeInput(metadata={"description": "Start of the window (inclusive)."})
    endTime = DatetimeInput(metadata={"description": "End of the window (inclusive); default now."})


def filters_from(args: dict, endpoint_limit=None, window: bool = True) -> Filters:
    """Filters from loaded query arguments; endTime defaults to now when a window applies."""
    return Filters(
        values={column.sql: _stored(column, args[column.name]) for column in FILTERABLE if args.get(column.name)},
        search=args.get("searchQuestion"),
        search_mode=args.get("searchQuestionMode", "includes"),
        start_ms=args.get("startTime") if window else None,
        end_ms=args.get("endTime", request_now_ms()) if window else None,
        endpoint_limit=endpoint_limit,
    )


def _stored(column, values: list) -> list:
    """Filter values as the store compares them (booleans as 0 and 1)."""
    return [int(value) for value in values] if column.storage == BOOLEAN else values
