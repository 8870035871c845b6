"""Typed readers for settings taken from the environment.

Each helper rejects a malformed value with an ImproperlyConfigured error that names the
variable, so a bad deployment stops at start-up instead of misbehaving later.
"""

import os
import re

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _bad(name: str, value: str, expected: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"Environment variable {name}={value!r} is invalid: expected {expected}.")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise _bad(name, raw, "one of 1/0, true/false, yes/no, on/off")


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name, default)
    if raw not in choices:
        raise _bad(name, raw, "one of " + ", ".join(choices))
    return raw


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, "a whole number") from None
    if minimum is not None and value < minimum:
        raise _bad(name, raw, f"a whole number >= {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items:
        raise _bad(name, raw, "a comma-separated list with at least one item")
    return items


def env_origins(name: str, default: list[str]) -> list[str]:
    """Origins such as https://tessera.example.org (scheme and host, a port at most, no path)."""
    if os.environ.get(name) is None:
        return default
    origins = env_list(name, default)
    for origin in origins:
        scheme, _sep, host = origin.partition("://")
        if scheme not in ("http", "https") or not _ORIGIN_HOST.fullmatch(host):
            raise _bad(name, origin, "comma-separated origins such as https://tessera.example.org "
                                     "(scheme and host, optionally a port, no path)")
    return origins


# A host name (a leading "*." allowed, as Django's CSRF check understands it) and an optional port.
_ORIGIN_HOST = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?",
                          re.IGNORECASE)


# Kubernetes names (apimachinery's validation): a DNS-1123 label (namespaces), a DNS-1123 subdomain
# (ConfigMaps, scheduler names), a label key (an optional subdomain prefix and "/", then a name).
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = rf"({_DNS_SUBDOMAIN}/)?{_LABEL_NAME}"
_KUBE_NAMES = {"label": re.compile(_DNS_LABEL), "subdomain": re.compile(_DNS_SUBDOMAIN)}
# An equality-based label selector term: key, !key, key=value, key==value, key!=value.
_SELECTOR_TERM = re.compile(rf"!{_LABEL_KEY}|{_LABEL_KEY}((!=|==|=)({_LABEL_NAME})?)?")


def env_kube_name(name: str, default: str, kind: str = "subdomain") -> str:
    """A Kubernetes object name: kind "label" (a namespace) or "subdomain" (most other objects)."""
    raw = os.environ.get(name, default)
    if len(raw) > 253 or not _KUBE_NAMES[kind].fullmatch(raw):
        raise _bad(name, raw, f"a Kubernetes name (DNS-1123 {kind}: lower-case letters, digits and '-'"
                              + (", '.'" if kind == "subdomain" else "") + ")")
    return raw


def env_kube_names(name: str, default: list[str]) -> list[str]:
    """Comma-separated namespace names."""
    names = env_list(name, default)
    for item in names:
        if not _KUBE_NAMES["label"].fullmatch(item):
            raise _bad(name, item, "comma-separated namespace names (lower-case letters, digits and '-')")
    return names


def env_label_key(name: str, default: str) -> str:
    """A node label's key, such as tessera.io/leaf-switch."""
    raw = os.environ.get(name, default)
    if len(raw) > 317 or not re.fullmatch(_LABEL_KEY, raw):
        raise _bad(name, raw, "a label key such as example.org/name (a DNS prefix and '/', optional)")
    return raw


def env_label_selector(name: str, default: str) -> str:
    """An equality-based label selector, such as nvidia.com/gpu.present=true,!example.org/excluded."""
    raw = os.environ.get(name, default)
    terms = raw.split(",")
    if not raw.strip() or not all(_SELECTOR_TERM.fullmatch(term.strip()) for term in terms):
        raise _bad(name, raw, "a label selector: comma-separated key, !key, key=value or key!=value")
    return ",".join(term.strip() for term in terms)


GROUP_ROLES = ("lead", "member", "viewer")
GROUP_PLATFORM_ROLES = ("staff", "finance")


def env_group_map(name: str) -> dict[str, str]:
    """Identity-provider group -> what it grants: `team:role` (lead, member, viewer), `staff` or `finance`.

    Written `group=team:role,group=staff`; a group is named once.
    """
    raw = os.environ.get(name, "")
    mapping: dict[str, str] = {}
    expected = "comma-separated group=team:role (role lead, member or viewer), group=staff or group=finance"
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        group, sep, grant = (part.strip() for part in entry.partition("="))
        team, colon, role = grant.partition(":")
        good_grant = grant in GROUP_PLATFORM_ROLES or (colon and team and role in GROUP_ROLES)
        if not sep or not group or not good_grant or group in mapping:
            raise _bad(name, entry, expected + ", each group once")
        mapping[group] = grant
    return mapping


def env_database(name: str, default: str) -> dict:
    raw = os.environ.get(name, default)
    if "://" not in raw:
        raise _bad(name, raw, "a URL such as postgres://user@host:5432/db or sqlite:///path")
    try:
        config = dj_database_url.parse(raw, conn_max_age=60)
    except ValueError as error:
        raise _bad(name, raw, f"a supported database URL ({error})") from None
    if not config.get("NAME"):
        raise _bad(name, raw, "a URL that names the database")
    return config


def env_redis_url(name: str, default: str) -> str:
    raw = os.environ.get(name, default)
    if not raw.startswith(("redis://", "rediss://", "memory://")):
        raise _bad(name, raw, "a URL starting with redis:// or rediss://")
    return raw


def env_http_url(name: str, default: str) -> str:
    raw = os.environ.get(name, default)
    scheme, _sep, rest = raw.partition("://")
    if scheme not in ("http", "https") or not rest or " " in raw:
        raise _bad(name, raw, "a URL starting with http:// or https://")
    return raw


def env_secret_key(name: str, *, debug: bool, demo_key_file) -> str:
    """The secret key; only a DEBUG (demo) instance may fall back to a generated one."""
    raw = os.environ.get(name, "")
    if raw:
        if len(raw) < 32:
            raise _bad(name, "<hidden>", "at least 32 characters")
        return raw
    if not debug:
        raise ImproperlyConfigured(
            f"Environment variable {name} is not set. It is required when DEBUG is off; "
            "set DEBUG=1 only for the embedded demo."
        )
    return _demo_secret_key(demo_key_file)


def env_token(name: str, *, minimum_length: int = 32) -> str:
    """An optional bearer token: empty when unset, refused when too short to be guessed."""
    raw = os.environ.get(name, "")
    if raw and len(raw.strip()) < minimum_length:
        raise _bad(name, "<hidden>", f"at least {minimum_length} characters")
    return raw.strip()


def _demo_secret_key(path) -> str:
    from django.core.management.utils import get_random_secret_key

    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = get_random_secret_key()
    path.write_text(key)
    return key
