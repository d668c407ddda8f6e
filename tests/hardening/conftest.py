"""The end-to-end fixtures (a real gateway server, the scripted upstream, the default pool) for these tests."""

from tests.e2e.conftest import gateway, mock_upstream, pool  # noqa: F401
