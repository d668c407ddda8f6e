"""Django settings, read from the environment (django-environ).

SQLite and the in-memory channel layer are the embedded default;
``DATABASE_URL`` and ``REDIS_URL`` switch to PostgreSQL and Redis.
"""

from __future__ import annotations

import os
from pathlib import Path

import django_stubs_ext
import environ

# Django's generic classes (ModelAdmin, ModelForm, ...) take type arguments at run time as in the stubs.
django_stubs_ext.monkeypatch()

_SOURCE = Path(__file__).resolve().parent.parent
# Where the gateway keeps what is its own on this host: its `.env`, the SQLite database, the request-log
# spool, collected static files. GATEWAY_HOME when set; else the checkout it runs from (`make run`,
# whatever the current directory); an installed wheel has no checkout, so the current directory.
BASE_DIR = Path(os.environ.get("GATEWAY_HOME") or (_SOURCE if (_SOURCE / "manage.py").is_file() else Path.cwd())).absolute()

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default="insecure-dev-only-key" if DEBUG else None)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "accounts",
    "gateway",
    "dashboard",
    "alerts",
    "conversations",
    "signin",
    "telemetry",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "gateway.edge.security.security_headers",
    "gateway.edge.static.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gateway.urls"
ASGI_APPLICATION = "gateway.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Ahead of the apps' own directories: it overrides the admin's templates (admin/base_site.html).
        "DIRS": [Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# Connections are kept a minute and pinged before reuse: every database hop checks them
# (accounts.db), so one that broke (the database restarted) is replaced, never reused.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A database host that drops packets must not hold a worker thread for the OS's two minutes.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the log writer and request handlers read while one writes.
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=10000;"
    )
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"

REDIS_URL = env("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# HTTPS. Off by default: `make run` and local use speak plain HTTP, where secure-only cookies would
# never come back and a redirect to HTTPS would lead nowhere. GATEWAY_BEHIND_TLS=1 is the switch for a
# gateway behind a TLS-terminating proxy (README, "Production"); each setting can also be set alone.
# These act on pages (admin, dashboard) only: the API paths never pass Django's middleware, so API
# clients are never redirected (a key sent over plain HTTP is exposed already, and many clients
# would turn the redirected POST into an error or a GET); health checks neither.
GATEWAY_BEHIND_TLS = env.bool("GATEWAY_BEHIND_TLS", default=False)
# The header the proxy sets (overwriting any the client sent) to the scheme the client used.
_PROXY_SSL_HEADER = env("SECURE_PROXY_SSL_HEADER", default="X-Forwarded-Proto" if GATEWAY_BEHIND_TLS else "")
if _PROXY_SSL_HEADER:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _PROXY_SSL_HEADER.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=GATEWAY_BEHIND_TLS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # load balancers probe over plain HTTP
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=GATEWAY_BEHIND_TLS)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=GATEWAY_BEHIND_TLS)
# A year, as the preload list requires; browsers learn it from any page and apply it to the whole host.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if GATEWAY_BEHIND_TLS else 0)
# Separate opt-ins: they bind every subdomain, and preloading is hard to undo.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Origins (https://gateway.example.com) whose admin forms are accepted when the proxy changes the host.
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
# Times to the second with their zone, in the admin too (accounts.formats is the one place).
FORMAT_MODULE_PATH = ["accounts.formatlocale"]
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
LOGIN_URL = "/admin/login/"

# Gateway knobs
GATEWAY_MAX_BODY_BYTES = env.int("GATEWAY_MAX_BODY_BYTES", default=32 * 1024 * 1024)
# A request's line and headers: larger ones get 431, slower ones 408 (gateway/serve.py).
GATEWAY_MAX_HEAD_BYTES = env.int("GATEWAY_MAX_HEAD_BYTES", default=64 * 1024)
GATEWAY_HEAD_TIMEOUT = env.float("GATEWAY_HEAD_TIMEOUT", default=30.0)
GATEWAY_KEEPALIVE_SECONDS = env.float("GATEWAY_KEEPALIVE_SECONDS", default=10.0)
GATEWAY_MAX_ATTEMPTS = env.int("GATEWAY_MAX_ATTEMPTS", default=10)
# What the gateway keeps at rest (upstream keys, stored answers, logged bodies: the atrest package) is
# encrypted with this; SECRET_KEY when unset. While rotating, the earlier values (comma-separated) are
# still read: run manage.py reencrypt, then drop them.
GATEWAY_ENCRYPTION_KEY = env("GATEWAY_ENCRYPTION_KEY", default="")
GATEWAY_ENCRYPTION_OLD_KEYS = env.list("GATEWAY_ENCRYPTION_OLD_KEYS", default=[])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}
GATEWAY_EVENTS_GROUP = env("GATEWAY_EVENTS_GROUP", default="dashboard")  # channel-layer group for live events
GATEWAY_CONFIG_TTL = env.float("GATEWAY_CONFIG_TTL", default=2.0)
# PostgreSQL: the configuration's version is read at least this often besides the change notifications
# (gateway.configwatch): a lost notification delays a change (a revoked key) this long at most.
GATEWAY_CONFIG_CHECK_SECONDS = env.float("GATEWAY_CONFIG_CHECK_SECONDS", default=0.5)
# SQLite only: how often the in-memory account pool re-reads the accounts (accounts.localpool).
GATEWAY_POOL_TTL = env.float("GATEWAY_POOL_TTL", default=1.0)
GATEWAY_UPSTREAM_MAX_CONNECTIONS = env.int("GATEWAY_UPSTREAM_MAX_CONNECTIONS", default=4096)
# An upstream answer is read within these bounds (decoded bytes): one SSE line or event's data, and
# the whole body (JSON or stream). A real answer of 128k tokens is about half a megabyte.
GATEWAY_MAX_UPSTREAM_EVENT_BYTES = env.int("GATEWAY_MAX_UPSTREAM_EVENT_BYTES", default=8 * 1024 * 1024)
GATEWAY_MAX_UPSTREAM_BYTES = env.int("GATEWAY_MAX_UPSTREAM_BYTES", default=32 * 1024 * 1024)
# ...and the text a streamed answer carries (2 Mi characters is four times today's longest outputs).
GATEWAY_MAX_ANSWER_CHARS = env.int("GATEWAY_MAX_ANSWER_CHARS", default=2 * 1024 * 1024)
GATEWAY_MODELS_CACHE_TTL = env.float("GATEWAY_MODELS_CACHE_TTL", default=300.0)
# How often the request-log writer writes its batch (and the dashboard hears of it).
GATEWAY_LOG_BATCH_SECONDS = env.float("GATEWAY_LOG_BATCH_SECONDS", default=1.0)
GATEWAY_LOG_BODIES = env.bool("GATEWAY_LOG_BODIES", default=False)
GATEWAY_LOG_BODY_LIMIT = env.int("GATEWAY_LOG_BODY_LIMIT", default=16384)
# Each finished request's log record is also appended here at once, so a killed process loses no row
# (gateway.log.spool); one directory per database underneath. Empty: no spool.
GATEWAY_LOG_SPOOL_DIR = env("GATEWAY_LOG_SPOOL_DIR", default=str(BASE_DIR / "var" / "log-spool"))
# Called with each batch of request-log rows inside the writer's transaction (gateway.log.writer).
GATEWAY_LOG_SINKS = ["dashboard.rollup.add", "dashboard.spend.add", "signin.hints.add"]
# What a client key spent in USD per slice since a time, for the floor under its USD budgets (gateway.limits): read
# from the spend buckets that sink keeps (a month of a busy key is thousands of rows there, not millions in
# the log). Empty: summed from the request log.
GATEWAY_USD_SPENT = "dashboard.spend.spent_by_slice"
# What each account of an admin list page used since a time (its "today" columns): read from the usage
# buckets the log sink keeps. Empty: counted from the request log.
GATEWAY_ACCOUNT_USAGE_SINCE = "dashboard.stats.used_since"
# How often a gateway process looks for account tests ops asked for in the admin (gateway.background.prober).
GATEWAY_PROBE_INTERVAL = env.float("GATEWAY_PROBE_INTERVAL", default=5.0)
# One gateway process at a time ends cool-downs and queues scheduled account tests (gateway.background.poolhealth):
# it holds a lease for this many seconds, renewing it every second; if it dies another takes over then.
GATEWAY_LEASE_TTL = env.float("GATEWAY_LEASE_TTL", default=10.0)
# Sessions each process remembers the account of (gateway.exchange.affinity); past it the least recently used is forgotten.
GATEWAY_AFFINITY_SESSIONS = env.int("GATEWAY_AFFINITY_SESSIONS", default=200_000)
# Picks skip accounts whose rate limits (as their answers' headers report them) the request would overrun.
GATEWAY_POOL_QUOTA = env.bool("GATEWAY_POOL_QUOTA", default=True)
# How stale the request log's figure for a client key's token use may be (a floor under the
# counters that gateway.limits keeps; the log alone lags a batch behind).
GATEWAY_TOKEN_USAGE_TTL = env.float("GATEWAY_TOKEN_USAGE_TTL", default=5.0)
# A request with a token budget that sets no max_tokens reserves this many output tokens (gateway.limits).
GATEWAY_RESERVE_OUTPUT_TOKENS = env.int("GATEWAY_RESERVE_OUTPUT_TOKENS", default=4096)
# On SIGTERM, how long open requests may run on before their streams are ended (gateway.edge.drain).
GATEWAY_SHUTDOWN_GRACE = env.float("GATEWAY_SHUTDOWN_GRACE", default=10.0)
# Bodies of pages (admin, dashboard) are bounded before Django reads them (gateway.edge.bodylimit); a form's
# fields within Django's own default on top.
GATEWAY_MAX_PAGE_BODY_BYTES = env.int("GATEWAY_MAX_PAGE_BODY_BYTES", default=10 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = min(GATEWAY_MAX_PAGE_BODY_BYTES, 2_621_440)
# Seconds a request body may take, plus one for every 64 KB that arrives (gateway.edge.bodylimit).
GATEWAY_BODY_TIMEOUT = env.float("GATEWAY_BODY_TIMEOUT", default=30.0)
# The bearer token a Prometheus scrape of /metrics must send; empty (the default): /metrics answers 404.
# With PROMETHEUS_MULTIPROC_DIR set (several processes), any process's /metrics sums them all (gateway.log.metrics).
GATEWAY_METRICS_TOKEN = env("GATEWAY_METRICS_TOKEN", default="")
# Alerts to webhooks (the alerts app): seconds before a failed delivery is tried again (then doubling,
# up to an hour; 8 tries), and the most one POST may take.
GATEWAY_ALERT_RETRY_SECONDS = env.float("GATEWAY_ALERT_RETRY_SECONDS", default=10.0)
GATEWAY_ALERT_TIMEOUT = env.float("GATEWAY_ALERT_TIMEOUT", default=10.0)
# Responses answered on /v1/responses are kept (unless the request says store: false) for
# previous_response_id and GET /v1/responses/{id}; prunelogs deletes those older than this.
GATEWAY_RESPONSES_RETENTION_DAYS = env.int("GATEWAY_RESPONSES_RETENTION_DAYS", default=30)
# Stored answers are committed behind the answer: a read on another process waits this long for the commit
# before it calls an id unknown (gateway.exchange.conversation).
GATEWAY_RESPONSES_WAIT_SECONDS = env.float("GATEWAY_RESPONSES_WAIT_SECONDS", default=1.0)
# Megabytes of recently committed stored answers each process keeps packed for follow-ups; older
# ones are read from the database (answers not committed yet are always kept).
GATEWAY_RESPONSES_CACHE_MB = env.float("GATEWAY_RESPONSES_CACHE_MB", default=8.0)
# Claude Code's gateway protocol (README "Claude Code fleets"). What a caller whose USD budget is spent is
# told to do, after when it frees: the end of the one sentence Claude Code prints (a URL of your
# limits page, a chat channel).
GATEWAY_BUDGET_HELP = env("GATEWAY_BUDGET_HELP", default="ask your gateway's administrators if you need it raised")
# The request tag (Messages "tags") whose value is the request's billing group, kept on its log row; empty: none.
GATEWAY_BILLING_GROUP_TAG = env("GATEWAY_BILLING_GROUP_TAG", default="")
# Telemetry Claude Code sends to /v1/{metrics,logs,traces} (the telemetry app): a body over this many bytes is
# refused (413); more than this many exports a minute per client key are answered 200 and dropped; figures
# are kept this many days (prunelogs); and, when set, each export is also forwarded as it came to this
# OTLP/HTTP collector (its base URL: /v1/<signal> is added), with these headers ("Name=value,Name2=value2").
GATEWAY_TELEMETRY_MAX_BYTES = env.int("GATEWAY_TELEMETRY_MAX_BYTES", default=4 * 1024 * 1024)
GATEWAY_TELEMETRY_PER_MINUTE = env.int("GATEWAY_TELEMETRY_PER_MINUTE", default=120)
GATEWAY_TELEMETRY_RETENTION_DAYS = env.int("GATEWAY_TELEMETRY_RETENTION_DAYS", default=30)
GATEWAY_OTLP_FORWARD_URL = env("GATEWAY_OTLP_FORWARD_URL", default="")
GATEWAY_OTLP_FORWARD_HEADERS = env("GATEWAY_OTLP_FORWARD_HEADERS", default="")
# When a client leaves a stream, the upstream is read on (nothing written) for at most this many seconds
# for the usage it reports at its end; what never comes is estimated (gateway.exchange.outcome). 0: not.
GATEWAY_ABANDONED_STREAM_SECONDS = env.float("GATEWAY_ABANDONED_STREAM_SECONDS", default=5.0)
# Responses websockets one client key may hold open at once, across processes with Redis (0: no cap).
GATEWAY_MAX_SOCKETS_PER_KEY = env.int("GATEWAY_MAX_SOCKETS_PER_KEY", default=32)
# A compaction item the gateway sealed (gateway.endpoints.sealing) opens for this many days (0: for ever).
GATEWAY_COMPACTION_ITEM_DAYS = env.float("GATEWAY_COMPACTION_ITEM_DAYS", default=GATEWAY_RESPONSES_RETENTION_DAYS)
WHITENOISE_USE_FINDERS = True  # admin and dashboard assets are served even before collectstatic

# Developers signing in (Claude Code's gateway protocol, the signin app; README "Developer sign-in").
# The base URL the discovery document and the verification link name; empty: the request's own.
GATEWAY_PUBLIC_URL = env("GATEWAY_PUBLIC_URL", default="")
GATEWAY_SIGNIN_ACCESS_TTL = env.int("GATEWAY_SIGNIN_ACCESS_TTL", default=3600)  # a bearer token's seconds
GATEWAY_SIGNIN_REFRESH_TTL = env.int("GATEWAY_SIGNIN_REFRESH_TTL", default=30 * 86400)  # a refresh token's
GATEWAY_SIGNIN_DEVICE_TTL = env.int("GATEWAY_SIGNIN_DEVICE_TTL", default=600)  # a device code's
GATEWAY_SIGNIN_POLL_INTERVAL = env.int("GATEWAY_SIGNIN_POLL_INTERVAL", default=5)
# The verification page's per-address limit: codes that matched nothing, in a window of seconds.
GATEWAY_SIGNIN_ATTEMPTS_PER_IP = env.int("GATEWAY_SIGNIN_ATTEMPTS_PER_IP", default=10)
GATEWAY_SIGNIN_ATTEMPT_WINDOW = env.int("GATEWAY_SIGNIN_ATTEMPT_WINDOW", default=600)
# Plain text (up to 500 characters) the client shows beside the code on its sign-in screen.
GATEWAY_SIGNIN_LOGIN_NOTICE = env("GATEWAY_SIGNIN_LOGIN_NOTICE", default="")
# The company's OpenID Connect identity provider for the verification page; empty: password login only.
GATEWAY_OIDC_ISSUER = env("GATEWAY_OIDC_ISSUER", default="")
GATEWAY_OIDC_CLIENT_ID = env("GATEWAY_OIDC_CLIENT_ID", default="")
GATEWAY_OIDC_CLIENT_SECRET = env("GATEWAY_OIDC_CLIENT_SECRET", default="")
GATEWAY_OIDC_SCOPES = env("GATEWAY_OIDC_SCOPES", default="openid email profile")
GATEWAY_OIDC_GROUPS_CLAIM = env("GATEWAY_OIDC_GROUPS_CLAIM", default="groups")
GATEWAY_OIDC_NAME = env("GATEWAY_OIDC_NAME", default="")  # the button's words: "Sign in with <name>"
