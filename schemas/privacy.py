"""The Privacy group on the wire: an endpoint's settings (the store's names and words are
models/privacy/privacy.py's, the API's are here)."""

import marshmallow as ma
from marshmallow import fields

from models.privacy.privacy import COUNTED, DOMAIN, DROP, HASH, KEEP, NOT_COUNTED, TRUNCATE

from .fields import BaseSchema, Datetime, Integer


class Choice(fields.String):
    """One of a setting's choices: its API name on the wire, the store's word inside."""

    def __init__(self, choices: dict[str, str], **kwargs):
        self.choices, self.names = choices, {word: name for name, word in choices.items()}
        super().__init__(metadata={"enum": list(choices), **kwargs.pop("metadata", {})}, **kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        return self.names[value]

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str) or value not in self.choices:
            raise ma.ValidationError(f"Must be one of: {', '.join(self.choices)}.")
        return self.choices[value]


_KEEP_DROP = {"keep": KEEP, "drop": DROP}


class DetailSchema(BaseSchema):
    """What is kept of a record: the fields a setting and an age step set."""

    client_ip = Choice(
        {"keep": KEEP, "truncate": TRUNCATE, "hash": HASH, "drop": DROP},
        data_key="clientIp",
        metadata={
            "description": "The client's address (sourceIp, the client entry's ip, and a client id that is an "
            "address): kept, truncated to ipv4Prefix/ipv6Prefix, hashed with the endpoint's own key (an address "
            "under 100::/64, stable for the endpoint), or dropped (a client id that is an address becomes "
            "'anonymous'). Hashed or dropped, the source's city goes with it."
        },
    )
    ipv4_prefix = Integer(
        data_key="ipv4Prefix",
        validate=ma.validate.Range(min=0, max=32),
        metadata={"description": "The bits of an IPv4 address that truncate keeps."},
    )
    ipv6_prefix = Integer(
        data_key="ipv6Prefix",
        validate=ma.validate.Range(min=0, max=128),
        metadata={"description": "The bits of an IPv6 address that truncate keeps."},
    )
    client_metadata = Choice(
        _KEEP_DROP,
        data_key="clientMetadata",
        metadata={"description": "The client's host name, MAC address, vendor and OS."},
    )
    question = Choice(
        {"keep": KEEP, "registrableDomain": DOMAIN, "drop": DROP},
        metadata={
            "description": "The name asked: kept, reduced to its registrable domain, or dropped (stored as '', "
            "counted in the statistics); with either of the last two the blocking rule (triggerValue) goes too."
        },
    )
    answers = Choice(
        _KEEP_DROP,
        metadata={"description": "The answers, with their geography and the spoofTarget."},
    )


class PrivacySpanSchema(DetailSchema):
    """The detail kept of the records stored between startTime and endTime."""

    startTime = Datetime(required=True, allow_none=True)
    endTime = Datetime(required=True)


def privacy_spans(spans: list[tuple[int, dict]], now: int, horizon: int | None) -> list[dict]:
    """models.privacy.privacy.ages as periods back from `now` (to the records' `horizon`, None: none),
    for PrivacySpanSchema to dump."""
    out = []
    for i, (since, settings) in enumerate(spans):
        end = now - since
        start = now - spans[i + 1][0] + 1 if i + 1 < len(spans) else horizon
        if horizon is not None and end < horizon:
            break
        out.append(
            {
                **settings,
                "startTime": start if horizon is None or start is None else max(start, horizon),
                "endTime": end,
            }
        )
    return out


class PrivacyStepSchema(DetailSchema):
    """From `afterDays` on, a record is kept at most as this says (a field not set: as before)."""

    class Meta:
        min_properties = 2  # afterDays, and what it changes

    after_days = Integer(
        data_key="afterDays",
        required=True,
        validate=ma.validate.Range(min=1, max=36500),
        metadata={"description": "The age in days of the records it applies to."},
    )

    @ma.validates_schema
    def sets_something(self, data, **kwargs):
        if set(data) == {"after_days"}:
            raise ma.ValidationError("An age step sets at least one field besides afterDays.")


class PrivacySettingsSchema(DetailSchema):
    """A change sets only the fields it holds; an answer holds every field in force."""

    class Meta:
        min_properties = 1  # a change sets a field

    unlogged_clients = Choice(
        {"counted": COUNTED, "notCounted": NOT_COUNTED},
        data_key="unloggedClients",
        metadata={
            "description": "The queries of clients marked not logged (PUT /v2/client/logging/...), of which no "
            "record is kept: counted in the daily statistics that name no client, or not at all."
        },
    )
    age_steps = fields.List(
        fields.Nested(PrivacyStepSchema),
        data_key="steps",
        validate=ma.validate.Length(max=10),
        metadata={
            "description": "Age steps: privacy that tightens with age. A record older than a step's afterDays is "
            "kept as coarsely as every step up to it and the fields above say (a step never makes detail "
            "finer). Sent, the list replaces the one in force ([]: none)."
        },
    )
    pending_rewrite = Integer(
        data_key="pendingRewrite",
        dump_only=True,
        metadata={
            "description": "Stored records still to be rewritten to a stricter change of these settings by the "
            "privacy job (0: none)."
        },
    )

    @ma.validates("age_steps")
    def distinct_ages(self, steps, **kwargs):
        days = [step.get("after_days") for step in steps]
        if len(days) != len(set(days)):
            raise ma.ValidationError("Each step has an afterDays of its own.")


class PrivacyListSchema(BaseSchema):
    items = fields.Dict(
        keys=fields.String(),
        values=fields.Nested(PrivacySettingsSchema),
        required=True,
        metadata={"description": "'_default' and every endpoint with settings of its own: the settings in force."},
    )


def settings_json(settings: dict, pending: int = 0) -> dict:
    """An endpoint's settings in force (the store's form) as the API shows them, with the
    stored records still to be rewritten."""
    return PrivacySettingsSchema().dump({**settings, "pending_rewrite": pending})


def settings_items(in_force: dict[str, tuple[dict, int]]) -> dict:
    """GET /v2/privacy's items from models.privacy.rewrites.in_force."""
    return {name: settings_json(settings, pending) for name, (settings, pending) in in_force.items()}
