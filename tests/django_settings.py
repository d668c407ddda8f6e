"""Settings for the test run: the real ones, with a fixed key and a test database of this run's own."""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
# Live events of this run (and of the gateways it starts, which inherit the environment) stay
# among themselves even when other runs share the Redis server.
os.environ.setdefault("GATEWAY_EVENTS_GROUP", f"dashboard-test-{os.getpid()}")
# Tests change the pool from outside the gateway between requests: its in-memory pool re-reads every pick.
os.environ.setdefault("GATEWAY_POOL_TTL", "0")

# Parallel workers (pytest-xdist) each have a database of their own (the names below carry the worker's
# pid) and a Redis database of their own: keys' counters, rate windows and affinity live in Redis under
# the key's id, which every worker's database numbers from 1. Set before the settings read it, so the
# gateways a worker starts (they inherit the environment) use the same one.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    from urllib.parse import urlsplit, urlunsplit

    _url = urlsplit(os.environ["REDIS_URL"])
    _base = int(_url.path.strip("/") or 0)
    os.environ["REDIS_URL"] = urlunsplit(_url._replace(path=f"/{_base + 1 + int(_worker[2:])}"))

from gateway.settings import *  # noqa: E402,F403
from gateway.settings import DATABASES  # noqa: E402

# Per process, so that concurrent test runs on one machine never share a database.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory: the gateway processes started by end-to-end tests open it too.
    DATABASES["default"]["TEST"] = {"NAME": os.path.join(tempfile.gettempdir(), f"gateway_test_{os.getpid()}.sqlite3")}
else:
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}
