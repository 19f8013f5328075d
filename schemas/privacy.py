"""The Privacy group on the wire: an endpoint's settings."""

import marshmallow as ma
from marshmallow import fields

from models.privacy import CLIENT_IP, KEEP_DROP, QUESTION

from .fields import BaseSchema


class PrivacySettingsSchema(BaseSchema):
    """A change sets only the fields it holds; an answer holds every field in force."""

    clientIp = fields.String(
        validate=ma.validate.OneOf(CLIENT_IP),
        metadata={
            "description": "The client's address (sourceIp, the client entry's ip, and a client id that is an "
            "address): kept, truncated to ipv4Prefix/ipv6Prefix, hashed with the endpoint's own key (an address "
            "under 100::/64), or dropped (a client id that is an address becomes 'anonymous')."
        },
    )
    ipv4Prefix = fields.Integer(validate=ma.validate.Range(min=0, max=32))
    ipv6Prefix = fields.Integer(validate=ma.validate.Range(min=0, max=128))
    clientMetadata = fields.String(
        validate=ma.validate.OneOf(KEEP_DROP),
        metadata={"description": "The client's host name, MAC address, vendor and OS."},
    )
    question = fields.String(
        validate=ma.validate.OneOf(QUESTION),
        metadata={
            "description": "The name asked: kept, reduced to its registrable domain, or dropped (stored as '', "
            "counted in the statistics); with either of the last two the blocking rule (triggerValue) goes too."
        },
    )
    answers = fields.String(
        validate=ma.validate.OneOf(KEEP_DROP),
        metadata={"description": "The answers, with their geography and the spoofTarget."},
    )


class PrivacyListSchema(BaseSchema):
    items = fields.Dict(
        keys=fields.String(),
        values=fields.Nested(PrivacySettingsSchema),
        required=True,
        metadata={"description": "'_default' and every endpoint with settings of its own: the settings in force."},
    )
