"""A plugin key-value data layer over :class:`eskv.AsyncClient`.

:class:`BotDatabase` has the five async methods of a bot's plugin
storage — ``kv_set``, ``kv_get``, ``kv_delete``, ``kv_list``,
``kv_cleanup_expired`` — with their usual signatures and answers, each a
thin call of the client. A plugin is a project of one tenant
(``tenant/<tenant>/project/<plugin>/<key>``), so plugins are isolated by
the key space, each lies in one partition, and a token may be granted one
plugin alone. Expiry is eskv's: an expired key is hidden from reads and
listings at once, and removed by the writer's sweeper (or at once by
``kv_cleanup_expired``).

Example::

    async with AsyncClient(url, token) as c:
        db = BotDatabase(c, tenant="bot")
        await db.kv_set("weather", "config", {"units": "metric"}, ttl_seconds=3600)
        print(await db.kv_get("weather", "config"))  # {'exists': True, 'value': {...}}
"""

from __future__ import annotations

import json
from typing import Any

from .aio import AsyncClient
from .errors import NotFound, ValueTooLarge

#: The value limit of the API (compacted JSON), as the plugins' contract says it.
MAX_VALUE_BYTES = 64 * 1024


class BotDatabase:
    """The plugin key-value methods over one AsyncClient and one tenant."""

    def __init__(self, client: AsyncClient, tenant: str) -> None:
        self.client, self.tenant = client, tenant
        self._plugins: set[str] = set()

    def scope(self, plugin_name: str, prefix: str = "") -> str:
        """The key (or key prefix) of a plugin's key: its project's path."""
        return f"tenant/{self.tenant}/project/{plugin_name}/{prefix}"

    async def kv_set(self, plugin_name: str, key: str, value: Any, ttl_seconds: int | None = None) -> None:
        """Set (insert or update) a plugin's key to a JSON value, expiring
        ``ttl_seconds`` from now (None: never).

        Raises:
            TypeError: the value is not JSON-serializable.
            ValueError: (eskv.ValueTooLarge) the value exceeds 64KB.
        """
        try:
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode())
        except (TypeError, ValueError) as e:
            raise TypeError(f"Value is not JSON-serializable: {e}") from e
        try:
            await self.client.put(self.scope(plugin_name, key), value, ttl=ttl_seconds)
        except ValueTooLarge as e:
            raise ValueTooLarge(f"Value size ({size} bytes) exceeds 64KB limit ({MAX_VALUE_BYTES} bytes): {e.message}",
                                status=e.status, detail=e.detail) from e
        self._plugins.add(plugin_name)

    async def kv_get(self, plugin_name: str, key: str) -> dict[str, Any]:
        """``{'exists': True, 'value': value}``, or ``{'exists': False}`` when
        the key was never set, was deleted, or expired."""
        try:
            entry = await self.client.get(self.scope(plugin_name, key))
        except NotFound:
            return {"exists": False}
        return {"exists": True, "value": entry.get("value")}

    async def kv_delete(self, plugin_name: str, key: str) -> bool:
        """Delete a plugin's key: True when it was deleted, False when it did not exist."""
        try:
            got = await self.client.delete(self.scope(plugin_name, key))
        except NotFound:
            return False
        return bool(got.get("deleted"))

    async def kv_list(self, plugin_name: str, prefix: str = "", limit: int = 1000) -> dict[str, Any]:
        """The plugin's live keys under prefix, sorted, at most ``limit``
        (1..10000): ``{'keys': [...], 'count': n, 'truncated': more_follow}``."""
        scope = self.scope(plugin_name)
        page = await self.client.list_keys(scope + prefix, limit=limit)
        keys = [item["key"][len(scope):] for item in page.get("items") or []]
        return {"keys": keys, "count": len(keys), "truncated": bool(page.get("truncated"))}

    async def kv_cleanup_expired(self, *plugins: str) -> int:
        """Remove now the expired keys of the given plugins (default: every
        plugin this instance wrote to and every project of the tenant the
        token may list); the number of keys removed. Keys the sweeper removed
        already are not counted."""
        names = set(plugins) or (self._plugins | await self._listed_plugins())
        total = 0
        for name in sorted(names):
            cursor: str | None = None
            while True:
                got = await self.client.expire_due(self.scope(name), cursor=cursor)
                total += int(got.get("count") or 0)
                cursor = got.get("nextCursor")
                if not got.get("truncated") or not cursor:
                    break
        return total

    async def _listed_plugins(self) -> set[str]:
        """The tenant's projects the token may list."""
        out: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.client.projects(cursor=cursor)
            out.update(p["project"] for p in page.get("items") or [] if p.get("tenant") == self.tenant)
            cursor = page.get("nextCursor")
            if not page.get("truncated") or not cursor:
                return out
