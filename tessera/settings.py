"""Tessera settings: one module, every value from the environment (see tessera/env.py)."""

from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from agents.node_agent import auth as agent_auth
from scheduling.engine.policies import POLICIES
from tessera.env import (
    env_bool,
    env_choice,
    env_database,
    env_group_map,
    env_http_url,
    env_int,
    env_kube_name,
    env_kube_names,
    env_label_key,
    env_label_selector,
    env_list,
    env_origins,
    env_redis_url,
    env_secret_key,
    env_str,
    env_token,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret_key("SECRET_KEY", debug=DEBUG, demo_key_file=VAR_DIR / "demo_secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "axes",
    "mozilla_django_oidc",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "scheduling",
    "notifications",
    "billing",
    "checkpoints",
    "agents",
    "whatif",
    "ui",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The portal serves its own static files (collected into STATIC_ROOT when the image is built).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns a sign-in refused for lockout into its 429 answer (tessera/signin.py); last, as Axes asks.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "tessera.urls"
WSGI_APPLICATION = "tessera.wsgi.application"
ASGI_APPLICATION = "tessera.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

DATABASES = {"default": env_database("DATABASE_URL", f"sqlite:///{VAR_DIR / 'demo.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The demo's web server and in-process loops write at once. WAL lets readers run beside the
    # writer; IMMEDIATE takes the write lock when a transaction starts (a deferred one that must
    # upgrade later fails at once with "database is locked", whatever the timeout); writers wait
    # for each other up to 20 s instead of failing (1 in 5 demo submits used to be lost).
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE", "timeout": 20})
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Lockout (django-axes, tessera/signin.py): after TESSERA_SIGNIN_FAILURE_LIMIT wrong passwords for a
# username, every sign-in as it (portal, admin, API token endpoint) is refused for the cool-off,
# the right password too. Counted per username: behind the ingress every client has its address.
AUTHENTICATION_BACKENDS = ["tessera.signin.LockoutBackend", "django.contrib.auth.backends.ModelBackend",
                           "tessera.oidc.SsoBackend"]
AXES_FAILURE_LIMIT = env_int("TESSERA_SIGNIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("TESSERA_SIGNIN_COOLOFF_MIN", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username"]
# Axes warns when the client address is not a lockout parameter (W006); here it would be the
# ingress's own address for every client, so one attacker would lock everybody out.
SILENCED_SYSTEM_CHECKS = ["axes.W006"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "tessera.signin.locked_out"
AXES_VERBOSE = False
# API tokens (portal/tokens.py): named, made in the portal, each valid for at most this many days.
TESSERA_API_TOKEN_MAX_DAYS = env_int("TESSERA_API_TOKEN_MAX_DAYS", 365, minimum=1)
# Single sign-on with OpenID Connect (tessera/oidc.py), on when a client id is set; the provider's
# endpoints are then required. The group claim maps to teams, roles, staff and finance (portal/sso.py).
TESSERA_OIDC_ENABLED = bool(env_str("TESSERA_OIDC_CLIENT_ID"))
OIDC_RP_CLIENT_ID = env_str("TESSERA_OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("TESSERA_OIDC_CLIENT_SECRET")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_http_url("TESSERA_OIDC_AUTHORIZATION_URL", "") if TESSERA_OIDC_ENABLED else ""
OIDC_OP_TOKEN_ENDPOINT = env_http_url("TESSERA_OIDC_TOKEN_URL", "") if TESSERA_OIDC_ENABLED else ""
OIDC_OP_USER_ENDPOINT = env_http_url("TESSERA_OIDC_USERINFO_URL", "") if TESSERA_OIDC_ENABLED else ""
OIDC_OP_JWKS_ENDPOINT = env_http_url("TESSERA_OIDC_JWKS_URL", "") if TESSERA_OIDC_ENABLED else ""
OIDC_RP_SIGN_ALGO = env_choice("TESSERA_OIDC_SIGN_ALGO", "RS256", ("RS256", "ES256"))
OIDC_RP_SCOPES = env_str("TESSERA_OIDC_SCOPES", "openid email profile groups")
TESSERA_OIDC_GROUPS_CLAIM = env_str("TESSERA_OIDC_GROUPS_CLAIM", "groups")
TESSERA_OIDC_GROUP_MAP = env_group_map("TESSERA_OIDC_GROUP_MAP")
TESSERA_OIDC_PROVIDER_NAME = env_str("TESSERA_OIDC_PROVIDER_NAME", "single sign-on")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10  # seconds for each call to the provider
OIDC_AUTHENTICATE_CLASS = "tessera.oidc.SsoStart"
OIDC_CALLBACK_CLASS = "tessera.oidc.SsoCallback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

# Static files: WhiteNoise serves what collectstatic gathered into STATIC_ROOT (the image does it
# at build time) and, where it has not run (gunicorn from a checkout), the source folders themselves.
WHITENOISE_USE_FINDERS = True

# Behind TLS (deploy/configmap.yaml sets SECURE_TLS=1): the ingress terminates TLS and says so in
# X-Forwarded-Proto, so Django knows a request was https (the CSRF origin check needs it), cookies
# are sent over https only, plain http is redirected, and browsers are told to use https (HSTS).
SECURE_TLS = env_bool("SECURE_TLS", False)
SESSION_COOKIE_SECURE = SECURE_TLS
CSRF_COOKIE_SECURE = SECURE_TLS
SECURE_SSL_REDIRECT = SECURE_TLS
# Probes and Prometheus reach the pods over plain http inside the cluster: never redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if SECURE_TLS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE_TLS else None
# Forms may be posted from these origins; behind TLS, by default, https:// each allowed host.
CSRF_TRUSTED_ORIGINS = env_origins("CSRF_TRUSTED_ORIGINS", [
    f"https://*{host}" if host.startswith(".") else f"https://{host}"
    for host in ALLOWED_HOSTS if SECURE_TLS and host != "*"])
SESSION_COOKIE_HTTPONLY = True
CSRF_FAILURE_VIEW = "tessera.errors.csrf_failure"
X_FRAME_OPTIONS = "DENY"

REDIS_URL = env_redis_url("REDIS_URL", "redis://127.0.0.1:6379/0")
# Every key Tessera writes to Redis (cache entries, Celery queues and results) starts with this,
# so installations or test runs that share a Redis database never see each other's keys.
REDIS_KEY_PREFIX = env_str("REDIS_KEY_PREFIX", "tessera")
# One cache for every process (web workers and scheduler) when Redis is configured, so a write in
# one invalidates what another shows; the embedded demo without Redis keeps a per-process cache.
if env_str("REDIS_URL").startswith(("redis://", "rediss://")):
    # Short timeouts: an unreachable cache is a miss at once, not a hung request (tessera/cache.py).
    CACHES = {"default": {"BACKEND": "tessera.cache.PrefixedRedisCache", "LOCATION": REDIS_URL,
                          "KEY_PREFIX": REDIS_KEY_PREFIX,
                          "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Sessions read from the cache and fall back to the database, so most requests skip the session query.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{REDIS_KEY_PREFIX}:"}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"global_keyprefix": f"{REDIS_KEY_PREFIX}:"}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Workers (agents/): which cluster they drive and how often each loop runs.
TESSERA_BACKEND = env_choice("TESSERA_BACKEND", "simulated", ("simulated", "kubernetes"))
TESSERA_POLICY = env_choice("TESSERA_POLICY", "tessera", POLICIES.names())  # the live cycle's engine policy
# Fair share over time (scheduling/engine/fair_history.py): past GPU use weighs half after this long.
TESSERA_FAIRSHARE_HALF_LIFE_H = env_int("TESSERA_FAIRSHARE_HALF_LIFE_H", 168, minimum=1)
# Who carries idle reserved capacity on statements (billing/idle.py): shown separately or spread.
TESSERA_IDLE_COST_POLICY = env_choice("TESSERA_IDLE_COST_POLICY", "showback",
                                      ("showback", "chargeback-by-use", "chargeback-by-guarantee"))
# Seconds of work per second of wall clock: 1 for a real cluster; `manage.py demo` sets its simulated
# cluster's speed (agents/embedded.py), so estimated starts read in the time people wait.
TESSERA_CLOCK_SPEED = 1.0
TESSERA_SIMULATED_STATE = env_str("TESSERA_SIMULATED_STATE", str(VAR_DIR / "simulated-cluster.json"))
# How the workers prove who they are to the node agents (agents/node_agent/auth.py): serviceaccount,
# their own ServiceAccount token, projected for the agents' audience (deploy/worker.yaml), which each
# agent checks with a TokenReview; dev-static-token: DEV ONLY, one fixed token for agents that have no
# API server to ask, refused with DEBUG off unless TESSERA_ALLOW_DEV_AGENT_AUTH=1.
TESSERA_AGENT_AUTH = env_choice("TESSERA_AGENT_AUTH", agent_auth.SERVICEACCOUNT, agent_auth.MODES)
if refusal := agent_auth.dev_auth_refusal(TESSERA_AGENT_AUTH, debug=DEBUG,
                                          allowed=env_bool("TESSERA_ALLOW_DEV_AGENT_AUTH", False)):
    raise ImproperlyConfigured(f"TESSERA_AGENT_AUTH: {refusal}")
# The token file the workers send, read at each poll (the kubelet rotates a projected token).
TESSERA_AGENT_TOKEN_FILE = env_str("TESSERA_AGENT_TOKEN_FILE", "/var/run/secrets/tessera/agent/token")
# Where GPU readings come from on a real cluster: Tessera's node agents, or dcgm-exporter (GPU
# Operator), which measures MIG instances (scraped at each node's own exporter pod, below).
TESSERA_TELEMETRY_SOURCE = env_choice("TESSERA_TELEMETRY_SOURCE", "agent", ("agent", "dcgm-exporter"))
# dcgm-exporter's pods in the GPU Operator's namespace: a node with no agent_url typed is scraped at its
# own exporter pod's IP and `metrics` port, found by this selector each poll (agents/backends/k8s_exporters.py).
TESSERA_DCGM_EXPORTER_SELECTOR = env_label_selector("TESSERA_DCGM_EXPORTER_SELECTOR", "app=nvidia-dcgm-exporter")
# The kubernetes backend: a kubeconfig file (workers outside the cluster), else the pod's ServiceAccount.
TESSERA_KUBECONFIG = env_str("TESSERA_KUBECONFIG", "")
# The kubernetes backend: the teams' namespaces it may create pods in; empty: any but the cluster's own.
TESSERA_NAMESPACES = env_kube_names("TESSERA_NAMESPACES", [])
# The kubernetes backend (agents/backends/kubernetes.py, KubernetesConfig): the schedulerName our pods
# carry, which nodes are GPU nodes, and the node labels that give a node's leaf switch and tier.
TESSERA_SCHEDULER_NAME = env_kube_name("TESSERA_SCHEDULER_NAME", "tessera")
TESSERA_GPU_NODE_SELECTOR = env_label_selector("TESSERA_GPU_NODE_SELECTOR", "nvidia.com/gpu.present=true")
TESSERA_LEAF_SWITCH_LABEL = env_label_key("TESSERA_LEAF_SWITCH_LABEL", "tessera.io/leaf-switch")
TESSERA_TIER_LABEL = env_label_key("TESSERA_TIER_LABEL", "tessera.io/tier")
# Where the GPU Operator runs (OpenShift's is nvidia-gpu-operator) and the mig-parted ConfigMap there
# that its ClusterPolicy's migManager.config.name names; Tessera writes its MIG layouts into it.
TESSERA_GPU_OPERATOR_NAMESPACE = env_kube_name("TESSERA_GPU_OPERATOR_NAMESPACE", "gpu-operator", "label")
TESSERA_MIG_CONFIGMAP = env_kube_name("TESSERA_MIG_CONFIGMAP", "tessera-mig-parted-config")
# How long mig-manager's mounted copy of that ConfigMap may lag our write (the kubelet's syncFrequency,
# 60 s, plus its ConfigMap cache delay): a MIG change failed within it is applied again (agents/mig.py).
TESSERA_MIG_CONFIG_REFRESH_S = env_int("TESSERA_MIG_CONFIG_REFRESH_S", 90, minimum=0)
TESSERA_POLL_INTERVAL_S = env_int("TESSERA_POLL_INTERVAL_S", 15, minimum=1)
TESSERA_CYCLE_INTERVAL_S = env_int("TESSERA_CYCLE_INTERVAL_S", 5, minimum=1)
TESSERA_LOST_AFTER_MISSED = env_int("TESSERA_LOST_AFTER_MISSED", 3, minimum=1)  # heartbeats
TESSERA_PREEMPT_GRACE_S = env_int("TESSERA_PREEMPT_GRACE_S", 120, minimum=0)
TESSERA_CHECKPOINT_SAVE_S = env_int("TESSERA_CHECKPOINT_SAVE_S", 30, minimum=0)  # a spot notice must allow it
# Where a job's pods confirm their checkpoints (CONTRACTS.md): the portal's endpoint, as pods reach it.
TESSERA_CHECKPOINT_URL = env_http_url("TESSERA_CHECKPOINT_URL",
                                      "http://tessera-portal.tessera-system.svc/api/v1/checkpoints/")
# Prometheus presents it as a bearer token to scrape /metrics (tessera/metrics.py).
TESSERA_METRICS_TOKEN = env_token("TESSERA_METRICS_TOKEN")
# Each user's API requests per minute (portal/api_input.py); teams' submit limits are on the team.
TESSERA_API_REQUESTS_PER_MINUTE = env_int("TESSERA_API_REQUESTS_PER_MINUTE", 600, minimum=1)
TESSERA_ACTION_POLL_S = env_int("TESSERA_ACTION_POLL_S", 2, minimum=1)  # re-look at a waiting action
# Beat with two or more replicas (deploy/beat.yaml): the one leading this namespace's Lease sends the
# schedule (agents/leadership.py); off, or with the simulated backend, one beat sends it unconditionally.
TESSERA_LEADER_ELECTION = env_bool("TESSERA_LEADER_ELECTION", False)
TESSERA_LEASE_NAME = env_kube_name("TESSERA_LEASE_NAME", "tessera-scheduler")
TESSERA_LEASE_NAMESPACE = env_kube_name("TESSERA_LEASE_NAMESPACE", "tessera-system", "label")
CELERY_BEAT_SCHEDULER = "agents.leadership:LeaderScheduler"
CELERY_BEAT_SCHEDULE = {
    "poll-agents": {"task": "agents.poll_agents", "schedule": float(TESSERA_POLL_INTERVAL_S)},
    "run-cycle": {"task": "agents.run_cycle", "schedule": float(TESSERA_CYCLE_INTERVAL_S)},
    "reconcile": {"task": "agents.reconcile", "schedule": float(TESSERA_CYCLE_INTERVAL_S)},
    "checkpoint-due": {"task": "agents.checkpoint_due", "schedule": float(TESSERA_CYCLE_INTERVAL_S)},
    # The safety net for a worker killed mid-flow: every unfinished action is taken up again.
    "resume-actions": {"task": "agents.resume_actions", "schedule": float(TESSERA_POLL_INTERVAL_S)},
    "sync-ledger": {"task": "billing.sync_ledger", "schedule": 60.0},
    "check-budgets": {"task": "billing.check_budgets", "schedule": 900.0},  # budget alerts (billing/budgets.py)
    # Jobs waiting too long, and notices whose task was lost (notifications/tasks.py).
    "notifications-sweep": {"task": "notifications.sweep", "schedule": 60.0},
}
# Notifications (notifications/): mail through this server; a job waiting this long is told about, once.
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "tessera@localhost")
EMAIL_TIMEOUT = 10  # seconds: a hung mail server fails the attempt, which is retried
if DEBUG:  # the embedded demo keeps its mail in files instead of looking for a server
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = str(VAR_DIR / "mail")
TESSERA_NOTIFY_WAITING_S = env_int("TESSERA_NOTIFY_WAITING_S", 3600, minimum=60)
# Webhooks chosen by team leads may post inside the network (loopback, private, link-local) only if allowed.
TESSERA_WEBHOOKS_TO_PRIVATE = env_bool("TESSERA_WEBHOOKS_TO_PRIVATE", False)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "ui.api.auth.ApiTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # What every endpoint accepts beyond its own fields (JSON depth, times in UTC): portal/api_input.py.
    "DEFAULT_PARSER_CLASSES": ["portal.api_input.JSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_FILTER_BACKENDS": ["portal.api_input.FilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["portal.api_input.RequestRate"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tessera API",
    "DESCRIPTION": "GPU cluster portal, scheduler and chargeback.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # One name for the one catalogue of waiting reasons (scheduling/engine/reasons.py), wherever it shows.
    "ENUM_NAME_OVERRIDES": {"WaitingReasonEnum": "scheduling.engine.reasons.WaitingReason.choices"},
}

# One line per event on stderr: JSON in production (one object a line, the extra fields of a
# record as keys: what a log shipper indexes), readable text in the demo.
LOG_FORMAT = env_choice("LOG_FORMAT", "text" if DEBUG else "json", ("json", "text"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "pythonjsonlogger.json.JsonFormatter", "fmt": "%(levelname)s %(name)s %(message)s",
                 "rename_fields": {"levelname": "level", "name": "logger"}, "timestamp": "time"},
        "text": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "filters": {"client_error_without_traceback": {"()": "tessera.logfilters.ClientErrorWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT,
                             "filters": ["client_error_without_traceback"]}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
}
# Celery workers log through the configuration above instead of installing their own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
