"""Django's Redis cache, confined to its own keys.

Django's RedisCache.clear() empties the whole Redis database (FLUSHDB). Tessera keeps the cache,
Celery's queues and Celery's results in one Redis database, and several installations or test
runs may share a server: clearing the cache deletes the keys under the cache's prefix and nothing
else, so it never drops queued tasks or another installation's entries.
"""

import re

from django.core.cache.backends.redis import RedisCache

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


class PrefixedRedisCache(RedisCache):
    def clear(self) -> bool:
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
