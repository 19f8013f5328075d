"""The wire format: marshmallow schemas and the JSON and CSV shapes of the API, one module per API group."""
