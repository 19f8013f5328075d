"""Fixtures: a fresh app on its own SQLite file per test, its client and CLI runner."""

import pytest

from app import create_app

from helpers import API_KEY


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "analytics.db")


@pytest.fixture
def app(tmp_path, db_path):
    return create_app(
        {
            "TESTING": True,
            # Unexpected exceptions go through the error handler, as in production.
            "PROPAGATE_EXCEPTIONS": False,
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "ANALYTICS_DATABASE": db_path,
            "ANALYTICS_API_KEY": API_KEY,
        }
    )


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()
