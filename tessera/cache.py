"""Django's Redis cache, confined to its own keys, and a cache that never takes the portal down.

Django's RedisCache.clear() empties the whole Redis database (FLUSHDB). Tessera keeps the cache,
Celery's queues and Celery's results in one Redis database, and several installations or test
runs may share a server: clearing the cache deletes the keys under the cache's prefix and nothing
else, so it never drops queued tasks or another installation's entries.

Redis here is a cache: with it down, every read is a miss and every write is skipped (logged), so
pages, sign-in and submit keep working from the database and a worker's release still commits.
"""

import logging
import re

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
log = logging.getLogger(__name__)


def _unavailable(operation: str, error: RedisError) -> None:
    log.warning("cache %s skipped, Redis unavailable: %s", operation, error)


class PrefixedRedisCache(RedisCache):
    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except RedisError as error:
            _unavailable("get", error)
            return default

    def get_many(self, keys, version=None):
        try:
            return super().get_many(keys, version)
        except RedisError as error:
            _unavailable("get_many", error)
            return {}

    def has_key(self, key, version=None):
        try:
            return super().has_key(key, version)
        except RedisError as error:
            _unavailable("has_key", error)
            return False

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().add(key, value, timeout, version)
        except RedisError as error:
            _unavailable("add", error)
            return False

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            super().set(key, value, timeout, version)
        except RedisError as error:
            _unavailable("set", error)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().set_many(data, timeout, version)
        except RedisError as error:
            _unavailable("set_many", error)
            return list(data)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().touch(key, timeout, version)
        except RedisError as error:
            _unavailable("touch", error)
            return False

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except RedisError as error:
            _unavailable("delete", error)
            return False

    def delete_many(self, keys, version=None):
        try:
            super().delete_many(keys, version)
        except RedisError as error:
            _unavailable("delete_many", error)

    def incr(self, key, delta=1, version=None):
        try:
            return super().incr(key, delta, version)
        except RedisError as error:  # callers already handle a missing key
            _unavailable("incr", error)
            raise ValueError(f"Key '{key}' not found (cache unavailable)") from error

    def clear(self) -> bool:
        try:
            client = self._cache.get_client(None, write=True)
            pattern = _GLOB_SPECIAL.sub(r"\\\1", self.key_prefix) + ":*"
            deleted, batch = 0, []
            for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) == 1000:
                    deleted += client.delete(*batch)
                    batch = []
            if batch:
                deleted += client.delete(*batch)
            return deleted > 0
        except RedisError as error:
            _unavailable("clear", error)
            return False
