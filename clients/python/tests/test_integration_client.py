"""Client and AsyncClient against a real server: every family of calls,
typed errors, listings' positions, the resuming watch and the lock
keep-alive. Needs ESKV_URL and ESKV_TOKEN (a token on ``tenant/``)."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import unittest
from typing import Any

from integration import server, tenant

import eskv


class TestClient(unittest.TestCase):
    """The sync client."""

    def setUp(self) -> None:
        url, self.token = server()
        self.url = url
        self.c = eskv.Client(url, self.token)
        self.p = f"tenant/{tenant(self.id())}/project/p/"

    def tearDown(self) -> None:
        self.c.close()

    def test_put_get_delete(self) -> None:
        put = self.c.put(self.p + "user:alice", {"n": 1}, semantics={"purpose": "config"})
        got = self.c.get(self.p + "user:alice")
        self.assertEqual((got["value"], got["version"], got["semantics"]["purpose"]), ({"n": 1}, put["version"], "config"))
        self.assertRegex(got.position or "", r"^p\d+\.o\d+$")
        self.assertFalse(put.replayed)
        self.assertEqual(self.c.get(self.p + "user:alice", field="n")["value"], 1)
        self.assertTrue(self.c.delete(self.p + "user:alice")["deleted"])
        with self.assertRaises(eskv.NotFound) as cm:
            self.c.get(self.p + "user:alice")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(eskv.NotFound):
            self.c.delete(self.p + "user:alice")

    def test_null_value(self) -> None:
        self.c.put(self.p + "k", None)
        self.assertIsNone(self.c.get(self.p + "k")["value"])

    def test_cas(self) -> None:
        v1 = self.c.put(self.p + "k", 1, expected_version=0)["version"]
        with self.assertRaises(eskv.VersionConflict) as cm:
            self.c.put(self.p + "k", 2, expected_version=0)
        self.assertEqual((cm.exception.current_version, cm.exception.current_value), (v1, 1))
        self.assertTrue(cm.exception.correlation_id)
        v2 = self.c.put(self.p + "k", 2, expected_version=v1)["version"]
        with self.assertRaises(eskv.VersionConflict):
            self.c.delete(self.p + "k", expected_version=v1)
        self.assertTrue(self.c.delete(self.p + "k", expected_version=v2)["deleted"])

    def test_request_id_replay_and_reuse(self) -> None:
        a = self.c.put(self.p + "k", {"n": 1}, request_id="sync-1")
        b = self.c.put(self.p + "k", {"n": 1}, request_id="sync-1")
        self.assertEqual((b.replayed, b["version"]), (True, a["version"]))
        with self.assertRaises(eskv.VersionConflict) as cm:
            self.c.put(self.p + "k", {"n": 2}, request_id="sync-1")
        self.assertEqual(cm.exception.field, "requestId")

    def test_patch_and_field_cas(self) -> None:
        self.c.put(self.p + "job", {"state": "pending"})
        got = self.c.patch(self.p + "job", set={"state": "claimed", "worker": "w-1"}, if_field="state",
                           if_equals="pending")
        self.assertEqual(got["value"], {"state": "claimed", "worker": "w-1"})
        with self.assertRaises(eskv.FieldMismatch):
            self.c.patch(self.p + "job", set={"state": "claimed"}, if_field="state", if_equals="pending")
        self.assertEqual(self.c.patch(self.p + "job", unset=["worker"])["value"], {"state": "claimed"})

    def test_increment_counter_bounds(self) -> None:
        self.assertEqual(self.c.increment(self.p + "quota", 2, create=True)["value"], 2)
        self.assertEqual(self.c.increment(self.p + "quota", -2, min=0)["value"], 0)
        with self.assertRaises(eskv.OutOfRange) as cm:
            self.c.increment(self.p + "quota", -1, min=0)
        self.assertEqual(cm.exception.field, "min")
        self.assertEqual(self.c.counter(self.p + "quota")["value"], 0)
        self.c.put(self.p + "text", "x")
        with self.assertRaises(eskv.WrongType):
            self.c.increment(self.p + "text")

    def test_touch_and_ttl(self) -> None:
        self.c.put(self.p + "s", {"u": 1}, ttl=60)
        got = self.c.touch(self.p + "s", persist=True)
        self.assertNotIn("expiresAt", got)
        self.assertEqual(got["value"], {"u": 1})

    def test_history(self) -> None:
        for n in range(3):
            self.c.put(self.p + "k", n)
        self.c.delete(self.p + "k")
        h = self.c.history(self.p + "k")
        self.assertEqual([v["version"] for v in h["versions"]], [1, 2, 3, 4])
        self.assertEqual(h["versions"][-1]["kind"], "delete")
        self.assertEqual(len(self.c.history(self.p + "k", from_version=3)["versions"]), 2)

    def test_listing_pages_are_one_snapshot(self) -> None:
        for i in range(5):
            self.c.put(self.p + f"k{i}", i)
        first = self.c.list(self.p, limit=2)
        self.assertEqual([e["key"][len(self.p):] for e in first["items"]], ["k0", "k1"])
        self.assertTrue(first["truncated"])
        self.c.put(self.p + "k3", "changed")
        self.c.put(self.p + "k9", "new")
        rest = self.c.list(self.p, limit=10, cursor=first["nextCursor"])
        self.assertEqual(rest.position, first.position)
        self.assertEqual([(e["key"][len(self.p):], e["value"]) for e in rest["items"]],
                         [("k2", 2), ("k3", 3), ("k4", 4)])
        keys = self.c.list_keys(self.p)
        self.assertEqual(keys["count"], 6)
        self.assertEqual(set(keys["items"][0]), {"key", "version", "purpose"})
        self.assertEqual(len(list(self.c.list_all(self.p, limit=2))), 6)
        self.assertEqual(len(list(self.c.list_all(self.p, limit=2, keys_only=True))), 6)

    def test_filtered_scan(self) -> None:
        for i in range(4):
            self.c.put(self.p + f"j{i}", {"n": i})
        got = self.c.list(self.p, filter=("n", "gte", 2))
        self.assertEqual([e["value"]["n"] for e in got["items"]], [2, 3])

    def test_field_indexes(self) -> None:
        scope = self.p.rstrip("/")
        with self.assertRaises(eskv.NotFound):
            self.c.field_indexes(scope)
        v1 = self.c.set_field_indexes(scope, ["n"], expected_version=0)["version"]
        with self.assertRaises(eskv.VersionConflict):
            self.c.set_field_indexes(scope, ["state"], expected_version=0)
        self.c.set_field_indexes(scope, ["n", "state"], expected_version=v1)
        self.assertEqual(self.c.field_indexes(scope)["value"], {"fields": ["n", "state"]})
        st = self.c.field_index_status(scope)
        self.assertEqual((st["scope"], st["version"]), (scope, 2))
        self.assertEqual([f["field"] for f in st["fields"]], ["n", "state"])
        self.assertTrue(all(f["state"] in ("ready", "building") for f in st["fields"]))
        for i in range(4):
            self.c.put(self.p + f"j{i}", {"n": i})
        got = self.c.list(self.p, filter=("n", "gte", 2))
        self.assertEqual([e["value"]["n"] for e in got["items"]], [2, 3])

    def follow(self, w: eskv.Watch) -> "queue.Queue[Any]":
        """The watch's changes, read by a thread, in a queue."""
        q: "queue.Queue[Any]" = queue.Queue()

        def run() -> None:
            try:
                for ch in w:
                    q.put(ch)
            except BaseException as e:
                q.put(e)
        threading.Thread(target=run, daemon=True).start()
        return q

    def test_watch_from_listing_position_resumes_after_a_drop(self) -> None:
        self.c.put(self.p + "k0", 0)
        listing = self.c.list(self.p)
        reconnects: list[str] = []
        self.c.policy.on_retry = lambda e, n, w: reconnects.append(e.code)
        w = self.c.watch(self.p, after=listing.position or "")
        q = self.follow(w)
        try:
            self.c.put(self.p + "k1", 1)
            self.assertEqual(q.get(timeout=10)["key"], self.p + "k1")
            stream = w._stream
            assert stream is not None
            stream.close()  # the connection drops under the watch
            self.c.put(self.p + "k2", 2)
            self.c.put(self.p + "k3", 3)
            got = [q.get(timeout=10)["key"] for _ in range(2)]
            self.assertEqual(got, [self.p + "k2", self.p + "k3"])
            time.sleep(0.5)
            self.assertTrue(q.empty(), "a change came twice")
            self.assertEqual(reconnects[:1], ["transport"])
        finally:
            w.close()

    def test_watch_key_from_version(self) -> None:
        for n in range(3):
            self.c.put(self.p + "k", n)
        w = self.c.watch(key=self.p + "k", from_version=2)
        try:
            self.assertEqual([next(w)["version"] for _ in range(2)], [2, 3])
        finally:
            w.close()

    def test_watch_fatal_error(self) -> None:
        with self.assertRaises(eskv.Invalid):
            next(self.c.watch(self.p, after="p0.o-5x"))

    def test_txn(self) -> None:
        got = self.c.txn([{"op": "put", "key": self.p + "a", "value": 1},
                          {"op": "increment", "key": self.p + "n", "by": 2, "create": True}])
        self.assertEqual([r["version"] for r in got["results"]], [1, 1])
        with self.assertRaises(eskv.VersionConflict) as cm:
            self.c.txn([{"op": "put", "key": self.p + "b", "value": 1},
                        {"op": "put", "key": self.p + "a", "value": 2, "condition": {"version": 7}}])
        self.assertEqual(cm.exception.failed_op, 1)
        with self.assertRaises(eskv.NotFound):
            self.c.get(self.p + "b")

    def test_lock_keep_alive(self) -> None:
        key = self.p + "lock"
        with self.c.lock(key, "a", ttl=1) as lease:
            time.sleep(2.5)
            self.assertFalse(lease.lost.is_set())
            with self.assertRaises(eskv.LockHeld):
                self.c.acquire(key, "b", ttl=5)
            self.assertEqual(self.c.lock_info(key)["holder"], "a")
        got = self.c.acquire(key, "b", ttl=5)
        self.assertGreater(got["token"], lease.token)
        with self.assertRaises(eskv.NotLockHolder):
            self.c.release(key, "a")
        self.c.release(key, "b")

    def test_lock_loss_raises_at_the_end(self) -> None:
        key = self.p + "lock"
        with self.assertRaises(eskv.LeaseLost):
            with self.c.lock(key, "a", ttl=3) as lease:
                self.c.delete(key, expected_version=self.c.get(key)["version"])
                self.assertTrue(lease.lost.wait(6))
                with self.assertRaises(eskv.LeaseLost):
                    lease.check()

    def test_leadership(self) -> None:
        key = self.p + "pool"
        with self.c.leadership(key, "n1", ttl=5) as lease:
            self.assertEqual(self.c.leader(key)["holder"], "n1")
            with self.assertRaises(eskv.NotLeader):
                self.c.elect(key, "n2", ttl=5)
        self.assertGreater(self.c.elect(key, "n2", ttl=5)["token"], lease.token)

    def test_queue(self) -> None:
        q = self.p + "q"
        self.c.qpush(q, {"task": 2}, priority=5)
        self.c.qpush(q, {"task": 1}, priority=1)
        self.assertEqual([i["data"] for i in self.c.qpeek(q, 2)["items"]], [{"task": 1}, {"task": 2}])
        item = self.c.qpop(q, visibility_timeout=30)
        self.assertEqual((item["data"], item["deliveries"]), ({"task": 1}, 1))
        self.assertEqual(self.c.qsize(q)["inFlight"], 1)
        self.assertTrue(self.c.qack(q, item["receipt"])["acked"])
        with self.assertRaises(eskv.StaleReceipt):
            self.c.qack(q, item["receipt"])
        self.c.qpop(q)
        with self.assertRaises(eskv.QueueEmpty):
            self.c.qpop(q)

    def test_blocking_waits(self) -> None:
        q, key = self.p + "q", self.p + "lock"
        threading.Timer(1.0, lambda: self.c.qpush(q, "late")).start()
        start = time.monotonic()
        self.assertEqual(self.c.qpop(q, wait=10)["data"], "late")
        self.assertLess(time.monotonic() - start, 8)
        with self.assertRaises(eskv.QueueEmpty):
            self.c.qpop(q, wait=0.5)
        self.c.acquire(key, "a", ttl=1)
        got = self.c.acquire(key, "b", ttl=5, wait=5)  # granted when a's lease runs out
        self.assertEqual(got["holder"], "b")

    def test_sets_and_lists(self) -> None:
        s, lst = self.p + "agents", self.p + "logs"
        self.assertTrue(self.c.sadd(s, "a")["added"])
        self.assertFalse(self.c.sadd(s, "a")["added"])
        self.c.sadd(s, "b")
        self.assertTrue(self.c.sismember(s, "b")["isMember"])
        self.assertEqual(sorted(self.c.smembers(s)["members"]), ["a", "b"])
        self.assertTrue(self.c.srem(s, "a")["removed"])
        self.assertEqual(self.c.scard(s)["size"], 1)
        self.c.rpush(lst, 1)
        self.c.rpush(lst, {"x": 2})
        self.c.lpush(lst, 0)
        self.assertEqual(self.c.lrange(lst)["values"], [0, 1, {"x": 2}])
        self.assertEqual(self.c.lpop(lst)["value"], 0)
        self.assertEqual(self.c.rpop(lst)["value"], {"x": 2})
        self.c.ltrim(lst, 0, 0)
        self.assertEqual(self.c.llen(lst)["length"], 1)
        with self.assertRaises(eskv.WrongType):
            self.c.put(s, 1)

    def test_session(self) -> None:
        sess = self.p + "sess"
        self.c.session(sess, 30)
        self.c.keepalive(sess)
        self.c.put(self.p + "member", 1, session=sess)
        self.c.revoke(sess)
        with self.assertRaises(eskv.NotFound):
            self.c.get(self.p + "member")

    def test_update_under_contention(self) -> None:
        key = self.p + "n"
        policy = eskv.RetryPolicy(conflict_base=0.05, conflict_cap=1.0, conflict_jitter=True)

        def worker() -> None:
            with eskv.Client(self.url, self.token, policy=policy) as c:
                for _ in range(5):
                    c.update(key, lambda v: (v or 0) + 1)
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(self.c.get(key)["value"], 20)

    def test_projects_batch_get_ranges(self) -> None:
        self.c.put(self.p + "a", 1)
        # The counts are the projection's as it is (not awaited): ask again
        # for a few seconds; page through every project the token sees.
        mine: list[Any] = []
        for _ in range(20):
            cursor, mine = None, []
            while True:
                page = self.c.projects(limit=1000, cursor=cursor)
                mine += [p for p in page["items"] if p["tenant"] == tenant(self.id())]
                cursor = page.get("nextCursor")
                if not page["truncated"] or not cursor:
                    break
            if mine:
                break
            time.sleep(0.25)
        self.assertEqual(mine, [{"tenant": tenant(self.id()), "project": "p", "keys": 1}])
        got = self.c.batch_get([self.p + "a", self.p + "zz"])
        self.assertEqual(got["items"][0]["entry"]["value"], 1)
        self.assertEqual(got["items"][1]["error"]["code"], "not_found")
        self.assertEqual(self.c.delete_range(self.p)["count"], 1)
        self.assertEqual(self.c.expire_due(self.p)["count"], 0)
        self.assertIn("version", self.c.version())

    def test_auth_and_invalid(self) -> None:
        with eskv.Client(self.url, "wrong-token") as bad, self.assertRaises(eskv.Unauthenticated):
            bad.get(self.p + "k")
        with self.assertRaises(eskv.Invalid) as cm:
            self.c.put("tenant/UPPER/project/p/k", 1)
        self.assertEqual(cm.exception.field, "key")
        with self.assertRaises(eskv.Invalid) as cm:
            self.c.put(self.p + "k", 1, ttl=0)
        self.assertEqual(cm.exception.field, "ttlSeconds")
        # A body far over the server's limit is refused from its head
        # (413), and the client asked first: the answer, not a broken pipe.
        with self.assertRaises(eskv.ValueTooLarge) as cm:
            self.c.put(self.p + "big", "x" * (20 << 20))
        self.assertEqual(cm.exception.field, "value")


class TestAsyncClient(unittest.IsolatedAsyncioTestCase):
    """The async client against the same server."""

    async def asyncSetUp(self) -> None:
        url, token = server()
        self.c = eskv.AsyncClient(url, token)
        self.p = f"tenant/{tenant(self.id())}/project/p/"

    async def asyncTearDown(self) -> None:
        await self.c.close()

    async def test_crud_and_errors(self) -> None:
        put = await self.c.put(self.p + "k", {"n": 1})
        self.assertEqual((await self.c.get(self.p + "k"))["version"], put["version"])
        with self.assertRaises(eskv.VersionConflict) as cm:
            await self.c.put(self.p + "k", 2, expected_version=0)
        self.assertEqual(cm.exception.current_version, put["version"])
        await self.c.delete(self.p + "k")
        with self.assertRaises(eskv.NotFound):
            await self.c.get(self.p + "k")
        big = "x" * 70000
        with self.assertRaises(eskv.ValueTooLarge):
            await self.c.put(self.p + "big", big)
        with self.assertRaises(eskv.ValueTooLarge):  # refused from its head: asked first, not a reset
            await self.c.put(self.p + "big", "x" * (20 << 20))

    async def test_concurrent_calls(self) -> None:
        await asyncio.gather(*(self.c.put(self.p + f"k{i}", i) for i in range(20)))
        self.assertEqual((await self.c.list_keys(self.p))["count"], 20)
        got = [e async for e in self.c.list_all(self.p, limit=7)]
        self.assertEqual([e["value"] for e in got], sorted(range(20), key=lambda i: f"k{i}"))

    async def test_watch_resumes_after_a_drop(self) -> None:
        pos = (await self.c.list_keys(self.p)).position or ""
        w = self.c.watch(self.p, after=pos)
        await self.c.put(self.p + "k1", 1)
        self.assertEqual((await asyncio.wait_for(w.__anext__(), 10))["key"], self.p + "k1")
        assert w._stream is not None
        w._stream.close()  # the connection drops under the watch
        await self.c.put(self.p + "k2", 2)
        self.assertEqual((await asyncio.wait_for(w.__anext__(), 10))["key"], self.p + "k2")
        await w.aclose()

    async def test_lock_and_queue(self) -> None:
        key = self.p + "lock"
        async with self.c.lock(key, "a", ttl=1) as lease:
            await asyncio.sleep(2.2)
            self.assertFalse(lease.lost.is_set())
            with self.assertRaises(eskv.LockHeld):
                await self.c.acquire(key, "b")
        with self.assertRaises(eskv.LeaseLost):
            async with self.c.lock(key, "a", ttl=3) as lease:
                await self.c.delete(key, expected_version=(await self.c.get(key))["version"])
                await asyncio.wait_for(lease.lost.wait(), 6)
        q = self.p + "q"
        await self.c.qpush(q, "job")
        item = await self.c.qpop(q, visibility_timeout=10)
        self.assertTrue((await self.c.qack(q, item["receipt"]))["acked"])
        self.assertEqual((await self.c.qsize(q))["size"], 0)

    async def test_txn_and_update(self) -> None:
        await self.c.txn([{"op": "put", "key": self.p + "a", "value": 1}])
        got = await self.c.update(self.p + "a", lambda v: v + 1)
        self.assertEqual(got["value"], 2)


if __name__ == "__main__":
    unittest.main()
