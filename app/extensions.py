"""flask-smorest, subclassed once: our error body, 400 for validation, `name[]` query arrays,
unknown parameters and fields refused (app/strict.py)."""

import threading
from functools import partial

import flask_smorest
import marshmallow as ma
import orjson
from flask import Response, jsonify
from flask.json.provider import DefaultJSONProvider
from marshmallow import missing
from webargs.flaskparser import FlaskParser, is_json_request
from werkzeug.datastructures import MultiDict

from schemas.errors import ErrorResponseSchema
from schemas.fields import NAMED_FIELD_SCHEMAS, Datetime, named_field_property, null_branch_property

from . import strict
from .errors import ApiError, ErrorCode, error_response
from .requests import checked_json, loads, refuse_nul


class Parser(FlaskParser):
    DEFAULT_VALIDATION_STATUS = 400
    # The schemas' own rule (BaseSchema: unknown = RAISE) in the query string too.
    DEFAULT_UNKNOWN_BY_LOCATION = {**FlaskParser.DEFAULT_UNKNOWN_BY_LOCATION, "query": None, "querystring": None}

    def load_querystring(self, req, schema):
        """Accept both spellings of a query array: `name[]=a` and `name=a`; ignore the names
        strict.ignored lets through; type each value as its field takes it in JSON."""
        fields = {field.data_key or field.name: field for field in schema.load_fields.values()}
        args = MultiDict()
        for key, value in req.args.items(multi=True):
            if strict.ignored(key):
                continue
            name = f"{key}[]" if isinstance(fields.get(f"{key}[]"), ma.fields.List) else key
            refuse_nul(value, name)
            args.add(name, strict.typed(fields[name], value) if name in fields else value)
        return self._makeproxy(args, schema)

    def handle_error(self, error, req, schema, *, error_status_code, error_headers):
        raise validation_error(error, schema)

    def _raw_load_json(self, req):
        if not is_json_request(req):
            return missing
        data = req.get_data(cache=True)
        # An empty body is "no body" (webargs' rule), anything else must be valid JSON.
        return checked_json(data) if data.strip() else missing

    def _handle_invalid_json_error(self, error, req, *args, **kwargs):
        raise ApiError(ErrorCode.MALFORMED_BODY, "The request body is not valid JSON.")


_LOCATIONS = ("query", "querystring", "json", "path", "view_args")


def validation_error(error: ma.ValidationError, schema) -> ApiError:
    """The ErrorResponse of a failed load of `schema`: its first message, naming the field; an
    unknown name first of all, with the known name nearest to it."""
    unknown = _first_unknown(error.messages)
    if unknown is not None:
        where, steps = unknown
        return strict.unknown_error(steps, strict.known_names(schema, steps[:-1]), where)
    path, message = _first_message(error.messages)
    field = _field_at(schema, path)
    if message == ma.fields.Field.default_error_messages["required"]:
        return ApiError(ErrorCode.MISSING_FIELD, f"Missing required field '{path}'.")
    if isinstance(field, Datetime) and message.startswith("Not a valid datetime"):
        return ApiError(ErrorCode.INVALID_DATETIME, f"Invalid '{path}': {message}")
    return ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid '{path}': {message}")


def _first_message(messages, prefix=""):
    """The dotted path and text of the first validation message (webargs nests by location)."""
    if isinstance(messages, dict):
        key = next(iter(messages))
        if prefix == "" and key in _LOCATIONS:
            return _first_message(messages[key], "")
        if isinstance(key, int):
            # One value of a query array: `clientId[]` names it well enough.
            path = prefix if prefix.endswith("[]") else f"{prefix}[{key}]"
        else:
            path = f"{prefix}.{key}" if prefix else str(key)
        return _first_message(messages[key], path)
    if isinstance(messages, list) and messages:
        if isinstance(messages[0], str):
            return prefix or "body", messages[0]
        return _first_message(messages[0], prefix)
    return prefix or "body", str(messages)


_UNKNOWN = ma.Schema._default_error_messages["unknown"]


def _first_unknown(messages) -> tuple[str, list] | None:
    """(location, the keys down to it) of the first unknown name among `messages` (webargs
    nests them by location; a schema loaded by a view has the body's), or None."""
    if isinstance(messages, dict) and messages and next(iter(messages)) in _LOCATIONS:
        where, messages = next(iter(messages.items()))
    else:
        where = "json"
    steps = _unknown_steps(messages)
    return None if steps is None else ("query" if where in ("query", "querystring") else where, steps)


def _unknown_steps(messages, steps=()):
    if not isinstance(messages, dict):
        return None
    for key, inner in messages.items():
        if inner == [_UNKNOWN] and not isinstance(key, int):
            return [*steps, key]
        found = _unknown_steps(inner, (*steps, key))
        if found is not None:
            return found
    return None


def _field_at(schema, path: str):
    name = path.split(".")[0].split("[")[0]
    for field in schema.fields.values():
        if (field.data_key or field.name) in (name, f"{name}[]"):
            return field
    return None


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = Parser()

    def add_url_rule(self, rule, endpoint=None, view_func=None, provide_automatic_options=None, **kwargs):
        """An operation with no query schema refuses query parameters all the same."""
        arguments = getattr(view_func, "_apidoc", {}).get("arguments", {}).get("parameters", [])
        if not isinstance(view_func, type) and not any(p["in"] in ("query", "querystring") for p in arguments):
            view_func = strict.takes_no_query(view_func)
        super().add_url_rule(rule, endpoint, view_func, provide_automatic_options, **kwargs)

    def register_views_in_doc(self, api, app, spec, *, name, parameters):
        """Noted, and done when the OpenAPI document is first read (Api.spec): building the
        document was two thirds of making an app (0.1 s; the tests make hundreds of apps, a
        worker reads the document rarely), and is done in the same order, to the same text."""
        api.document_later(partial(super().register_views_in_doc, api, app, spec, name=name, parameters=parameters))


# Held while an app's document is completed: a second thread reading it waits for the whole.
_DOCUMENTING = threading.Lock()


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ErrorResponseSchema

    def __init__(self, *args, **kwargs):
        self._undocumented = []  # the blueprints' steps of the document, not taken yet
        self._documenting = None  # the thread taking them (or registering a blueprint)
        super().__init__(*args, **kwargs)

    @property
    def spec(self):
        """The OpenAPI document, with the operations of every blueprint registered so far (once
        per app, by the first thread to read it; another waits for it)."""
        if self._undocumented and self._documenting != threading.get_ident():
            with _DOCUMENTING:
                self._documenting = threading.get_ident()
                try:
                    while self._undocumented:
                        self._undocumented[0]()  # (one that fails stays, and fails every read)
                        self._undocumented.pop(0)
                finally:
                    self._documenting = None
        return self._spec

    @spec.setter
    def spec(self, value):
        self._spec = value

    def register_blueprint(self, blp, **options):
        # (the registration itself reads `spec`: it leaves the blueprint's operations for later)
        self._documenting = threading.get_ident()
        try:
            super().register_blueprint(blp, **options)
        finally:
            self._documenting = None

    def document_later(self, step) -> None:
        self._undocumented.append(step)

    def handle_http_exception(self, error):
        return error_response(error)

    def _init_spec(self, *args, **kwargs):
        super()._init_spec(*args, **kwargs)
        self.ma_plugin.converter.add_attribute_function(named_field_property)
        self.ma_plugin.converter.add_attribute_function(null_branch_property)
        self.ma_plugin.converter.schema2jsonschema = _with_min_properties(self.ma_plugin.converter.schema2jsonschema)
        for name, component in NAMED_FIELD_SCHEMAS.items():
            self.spec.components.schema(name, component)
        self.spec.components.security_scheme(
            "ApiKey",
            {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": "The API key, raw or as 'Bearer <key>'.",
            },
        )
        self.spec.options["security"] = [{"ApiKey": []}]


def _with_min_properties(schema2jsonschema):
    """apispec's conversion of a schema, with `minProperties` where its Meta names one
    (`min_properties`): a change that sets no field is refused, and the document says so."""

    def converted(schema):
        found = schema2jsonschema(schema)
        least = getattr(getattr(schema, "Meta", None), "min_properties", None)
        return found if least is None else {**found, "minProperties": least}

    return converted


# Integer keys become strings, as with the json module.
_OPTIONS = orjson.OPT_NON_STR_KEYS


class JSONProvider(DefaultJSONProvider):
    """Flask's JSON with orjson: request bodies read with the same rules as everywhere else
    (see requests.loads), responses encoded several times faster than by the json module (a
    full client list or log page is hundreds of kilobytes)."""

    sort_keys = False

    def loads(self, s, **kwargs):
        return loads(s)

    def dumps(self, obj, **kwargs):
        return orjson.dumps(obj, default=self.default, option=_OPTIONS).decode("utf-8")

    def response(self, *args, **kwargs):
        body = orjson.dumps(self._prepare_response_obj(args, kwargs), default=self.default, option=_OPTIONS)
        return self._app.response_class(body + b"\n", mimetype=self.mimetype)


def prebuilt(body) -> Response:
    """An answer the view built in its wire shape itself. For the big answers (client lists,
    log pages) a marshmallow dump costs more than the query; the view's @blp.response schema
    still documents the shape, and the schema-driven fuzz test checks the two agree."""
    return jsonify(body)
