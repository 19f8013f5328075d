"""The OpenAPI document generated from the code."""


def test_document_names_the_contract_schemas(client):
    spec = client.get("/v2/openapi.json").json
    schemas = spec["components"]["schemas"]
    for name in (
        "ClientActivity",
        "DeleteClientResponse",
        "GetClientResponse",
        "ErrorResponse",
        "QueryData",
        "GeoIPData",
        "Datetime",
        "IP",
        "Domain",
        "Trigger",
    ):
        assert name in schemas, name
    assert schemas["Trigger"]["enum"] == ["default", "filter", "service", "custom", "grule", "rebind"]
    last = schemas["ClientActivity"]["properties"]["lastActivityTime"]
    # Nullable as OpenAPI 3.0.3 validators read it: a type beside `nullable` (not a bare allOf).
    assert last == {**schemas["Datetime"], "nullable": True}


def test_every_operation_of_the_clients_group_is_described(client):
    paths = client.get("/v2/openapi.json").json["paths"]
    assert set(paths["/v2/client"]) >= {"get", "delete"}
    assert set(paths["/v2/client/alias/{endpointId}/{clientId}"]) >= {"put", "delete"}
    assert "post" in paths["/v2/ingest"]
    get = paths["/v2/client"]["get"]
    assert {p["name"] for p in get["parameters"]} == {"endpointId", "clientId[]"}
    assert get["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/GetClientResponse"
    }
    assert "400" in paths["/v2/client"]["delete"]["responses"]
