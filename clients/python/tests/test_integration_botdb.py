"""The plugin key-value store's test list (kv_set, kv_get, kv_delete,
kv_list, kv_cleanup_expired) through eskv.botdb.BotDatabase over
AsyncClient against a real server. Each test has a tenant of its own
(its "database"); its plugins are that tenant's projects.

Needs ESKV_URL and ESKV_TOKEN (a token on ``tenant/``); fails without.
"""

from __future__ import annotations

import asyncio
import time
import unittest
from typing import Callable

from integration import server, tenant

import eskv
from eskv.botdb import BotDatabase


class TestBotDatabaseKV(unittest.IsolatedAsyncioTestCase):
    """The seed's tests, their names, keys and values as written."""

    async def asyncSetUp(self) -> None:
        url, token = server()
        self.client = eskv.AsyncClient(url, token)
        self.db = BotDatabase(self.client, tenant(self.id()))

    async def asyncTearDown(self) -> None:
        await self.client.close()

    def timed(self, what: str, target: float, bound: float, start: float) -> None:
        """Print how long it took against the target; fail past bound (the
        targets are a dedicated machine's, the bound tolerates a loaded one)."""
        took = time.monotonic() - start
        print(f"\n  {what} took {took * 1000:.0f} ms (target {target * 1000:.0f} ms)", end=" ")
        self.assertLess(took, bound, f"{what} took {took:.2f} s")

    async def test_kv_set_and_get_basic(self) -> None:
        await self.db.kv_set("test-plugin", "config", {"theme": "dark"})
        self.assertEqual(await self.db.kv_get("test-plugin", "config"), {"exists": True, "value": {"theme": "dark"}})

    async def test_kv_set_all_json_types(self) -> None:
        cases = [("dict", {"key": "value"}), ("list", [1, 2, 3]), ("string", "hello world"), ("int", 42),
                 ("float", 3.14), ("bool_true", True), ("bool_false", False), ("null", None),
                 ("nested", {"users": [{"name": "Alice", "score": 95}]})]
        for key, value in cases:
            await self.db.kv_set("test", key, value)
            got = await self.db.kv_get("test", key)
            self.assertEqual(got, {"exists": True, "value": value}, key)
            self.assertIs(type(got["value"]), type(value), key)

    async def test_kv_get_nonexistent_key(self) -> None:
        self.assertEqual(await self.db.kv_get("test", "nonexistent"), {"exists": False})

    async def test_kv_set_with_ttl(self) -> None:
        await self.db.kv_set("test", "expires", "data", ttl_seconds=1)
        self.assertTrue((await self.db.kv_get("test", "expires"))["exists"])
        await asyncio.sleep(2)
        self.assertEqual(await self.db.kv_get("test", "expires"), {"exists": False})

    async def test_kv_set_upsert(self) -> None:
        for n in (1, 2):
            await self.db.kv_set("test", "counter", n)
            self.assertEqual((await self.db.kv_get("test", "counter"))["value"], n)

    async def test_kv_set_value_size_limit(self) -> None:
        await self.db.kv_set("test", "small", "x" * 65000)
        with self.assertRaisesRegex(ValueError, "exceeds 64KB limit") as cm:
            await self.db.kv_set("test", "large", "x" * 70000)
        e = cm.exception
        assert isinstance(e, eskv.ValueTooLarge)
        self.assertEqual((e.code, e.status, e.field), ("value_too_large", 413, "value"))
        self.assertFalse((await self.db.kv_get("test", "large"))["exists"])

    async def test_kv_set_non_serializable(self) -> None:
        class NotSerializable:
            pass
        with self.assertRaisesRegex(TypeError, "not JSON-serializable"):
            await self.db.kv_set("test", "bad", NotSerializable())
        self.assertFalse((await self.db.kv_get("test", "bad"))["exists"])

    async def test_kv_delete(self) -> None:
        await self.db.kv_set("test", "temp", "data")
        self.assertIs(await self.db.kv_delete("test", "temp"), True)
        self.assertEqual(await self.db.kv_get("test", "temp"), {"exists": False})
        self.assertIs(await self.db.kv_delete("test", "temp"), False)

    async def test_kv_list_basic(self) -> None:
        for i, k in enumerate(("key1", "key2", "key3")):
            await self.db.kv_set("test", k, i + 1)
        self.assertEqual(await self.db.kv_list("test"),
                         {"keys": ["key1", "key2", "key3"], "count": 3, "truncated": False})

    async def test_kv_list_with_prefix(self) -> None:
        await self.db.kv_set("test", "user:alice", {"name": "Alice"})
        await self.db.kv_set("test", "user:bob", {"name": "Bob"})
        await self.db.kv_set("test", "config:theme", "dark")
        result = await self.db.kv_list("test", prefix="user:")
        self.assertEqual(result["count"], 2)
        self.assertIn("user:alice", result["keys"])
        self.assertIn("user:bob", result["keys"])
        self.assertNotIn("config:theme", result["keys"])

    async def test_kv_list_excludes_expired(self) -> None:
        await self.db.kv_set("test", "expires1", 1, ttl_seconds=1)
        await self.db.kv_set("test", "expires2", 2, ttl_seconds=1)
        await self.db.kv_set("test", "permanent", 3)
        await asyncio.sleep(2)
        result = await self.db.kv_list("test")
        self.assertEqual((result["count"], result["keys"]), (1, ["permanent"]))

    async def test_kv_list_truncation(self) -> None:
        for i in range(15):
            await self.db.kv_set("test", f"key{i:02d}", i)
        result = await self.db.kv_list("test", limit=10)
        self.assertEqual((result["count"], result["truncated"]), (10, True))
        result = await self.db.kv_list("test", limit=20)
        self.assertEqual((result["count"], result["truncated"]), (15, False))

    async def test_kv_list_sorted(self) -> None:
        for key in ("zebra", "apple", "mango", "banana"):
            await self.db.kv_set("test", key, 1)
        self.assertEqual((await self.db.kv_list("test"))["keys"], ["apple", "banana", "mango", "zebra"])

    async def test_kv_cleanup_expired(self) -> None:
        for i in range(5):
            await self.db.kv_set("test", f"expires{i}", i, ttl_seconds=1)
        for i in range(3):
            await self.db.kv_set("test", f"keep{i}", i)
        await asyncio.sleep(2)
        deleted = await self.db.kv_cleanup_expired()
        # The writer's sweeper (ESKV_SWEEP_INTERVAL, 1 s) may have expired
        # some first: each of the 5 was expired exactly once, by the cleanup
        # (our principal) or by the sweeper, and the cleanup counts its own.
        me = (await self.client.get(self.db.scope("test", "keep0")))["lastWriter"]
        by_me = 0
        for i in range(5):
            last = (await self.client.history(self.db.scope("test", f"expires{i}")))["versions"][-1]
            self.assertEqual(last["kind"], "expire", f"expires{i}")
            by_me += last["principal"] == me
        print(f"\n  kv_cleanup_expired: {deleted} (the sweeper took {5 - by_me})", end=" ")
        self.assertEqual(deleted, by_me)
        self.assertEqual(await self.db.kv_cleanup_expired(), 0)
        result = await self.db.kv_list("test")
        self.assertEqual(result["count"], 3)
        self.assertTrue(all("keep" in key for key in result["keys"]))

    async def test_plugin_isolation(self) -> None:
        await self.db.kv_set("plugin-a", "secret", "data-a")
        await self.db.kv_set("plugin-b", "secret", "data-b")
        self.assertEqual((await self.db.kv_get("plugin-a", "secret"))["value"], "data-a")
        self.assertEqual((await self.db.kv_get("plugin-b", "secret"))["value"], "data-b")
        await self.db.kv_set("plugin-a", "key1", 1)
        await self.db.kv_set("plugin-b", "key2", 2)
        list_a = await self.db.kv_list("plugin-a")
        self.assertIn("key1", list_a["keys"])
        self.assertNotIn("key2", list_a["keys"])

    async def test_kv_performance_bulk_set(self) -> None:
        start = time.monotonic()
        for i in range(100):
            await self.db.kv_set("test", f"key{i}", {"index": i})
        self.timed("100 kv_set", 1.0, 60.0, start)

    async def test_kv_performance_bulk_get(self) -> None:
        for i in range(100):
            await self.db.kv_set("test", f"key{i}", {"index": i})
        start = time.monotonic()
        for i in range(100):
            self.assertEqual(await self.db.kv_get("test", f"key{i}"), {"exists": True, "value": {"index": i}})
        self.timed("100 kv_get", 1.0, 60.0, start)

    async def test_kv_performance_list_1000(self) -> None:
        await self.set_many(1000, lambda i: f"key{i:04d}", None)
        start = time.monotonic()
        result = await self.db.kv_list("test", limit=1000)
        self.timed("kv_list of 1000 keys", 0.05, 30.0, start)
        self.assertEqual((result["count"], result["truncated"]), (1000, False))

    async def test_kv_performance_cleanup_10k(self) -> None:
        # Rows cannot be written already expired: they get the shortest TTL,
        # 1 s, and the cleanup waits until it passed. The sweeper may take
        # some first; every one of them is gone either way.
        await self.set_many(10000, lambda i: f"key{i}", 1)
        await asyncio.sleep(2)
        start = time.monotonic()
        deleted = await self.db.kv_cleanup_expired("test")
        self.timed(f"kv_cleanup_expired of 10000 keys ({deleted} by the cleanup)", 1.0, 120.0, start)
        self.assertLessEqual(deleted, 10000)
        self.assertEqual((await self.db.kv_list("test", limit=10))["count"], 0)
        self.assertEqual(await self.db.kv_cleanup_expired("test"), 0)

    async def set_many(self, n: int, key: Callable[[int], str], ttl: int | None) -> None:
        """Put n keys of plugin "test" in transactions of 100 puts (setup, untimed)."""
        for start in range(0, n, 100):
            ops = [{"op": "put", "key": self.db.scope("test", key(i)), "value": i}
                   | ({"ttlSeconds": ttl} if ttl else {}) for i in range(start, min(n, start + 100))]
            await self.client.txn(ops)


if __name__ == "__main__":
    unittest.main()
