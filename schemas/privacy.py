"""The Privacy group on the wire: an endpoint's settings (the store's names and words are
models/privacy.py's, the API's are here)."""

import marshmallow as ma
from marshmallow import fields

from models.privacy import COUNTED, DOMAIN, DROP, HASH, KEEP, NOT_COUNTED, TRUNCATE

from .fields import BaseSchema


class Choice(fields.String):
    """One of a setting's choices: its API name on the wire, the store's word inside."""

    def __init__(self, choices: dict[str, str], **kwargs):
        self.choices, self.names = choices, {word: name for name, word in choices.items()}
        super().__init__(metadata={"enum": list(choices), **kwargs.pop("metadata", {})}, **kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        return self.names[value]

    def _deserialize(self, value, attr, data, **kwargs):
        if value not in self.choices:
            raise ma.ValidationError(f"Must be one of: {', '.join(self.choices)}.")
        return self.choices[value]


_KEEP_DROP = {"keep": KEEP, "drop": DROP}


class PrivacySettingsSchema(BaseSchema):
    """A change sets only the fields it holds; an answer holds every field in force."""

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
    ipv4_prefix = fields.Integer(
        data_key="ipv4Prefix",
        validate=ma.validate.Range(min=0, max=32),
        metadata={"description": "The bits of an IPv4 address that truncate keeps."},
    )
    ipv6_prefix = fields.Integer(
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
    unlogged_clients = Choice(
        {"counted": COUNTED, "notCounted": NOT_COUNTED},
        data_key="unloggedClients",
        metadata={
            "description": "The queries of clients marked not logged (PUT /v2/client/logging/...), of which no "
            "record is kept: counted in the daily statistics that name no client, or not at all."
        },
    )


class PrivacyListSchema(BaseSchema):
    items = fields.Dict(
        keys=fields.String(),
        values=fields.Nested(PrivacySettingsSchema),
        required=True,
        metadata={"description": "'_default' and every endpoint with settings of its own: the settings in force."},
    )


def settings_json(settings: dict) -> dict:
    """An endpoint's settings in force (the store's form) as the API shows them."""
    return PrivacySettingsSchema().dump(settings)
