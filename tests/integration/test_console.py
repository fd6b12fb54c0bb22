"""The web console served by the real binary: its files with their content
types and caching headers, index.html for the console's pages, 404 for
anything else; the overview endpoint it reads; and every route its API
client (web-ui/src/api.ts) calls exists on the server."""
import gzip
import json
import os
import re
import subprocess
import unittest

from magnetar_harness import BIN, NodeTestCase, call_json

API_TS = os.path.join(os.path.dirname(__file__), "..", "..", "web-ui", "src", "api.ts")


def header(headers, name):
    for k, v in headers.items():
        if k.lower() == name.lower():
            return v
    return None


class ConsoleFilesTest(NodeTestCase):
    def index(self):
        status, body, headers = self.node.get("/")
        self.assertEqual(status, 200)
        return body.decode(), headers

    def assets(self):
        html, _ = self.index()
        found = re.findall(r'(?:src|href)="(/assets/[^"]+)"', html)
        self.assertTrue(found, f"index.html names no /assets/ file: {html[:400]}")
        return found

    def test_index_is_html_and_never_cached_stale(self):
        html, headers = self.index()
        self.assertEqual(header(headers, "Content-Type"), "text/html; charset=utf-8")
        self.assertEqual(header(headers, "Cache-Control"), "no-cache")
        self.assertTrue(header(headers, "ETag"))
        self.assertIn('<div id="app">', html)
        # Everything is embedded: no script, style or font from another host.
        self.assertNotRegex(html, r'(?:src|href)="(?:https?:)?//')

    def test_assets_have_types_and_long_lived_caching(self):
        types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
        kinds = set()
        for path in self.assets():
            status, body, headers = self.node.get(path)
            self.assertEqual(status, 200, path)
            ext = os.path.splitext(path)[1]
            kinds.add(ext)
            self.assertEqual(header(headers, "Content-Type"), types[ext], path)
            self.assertEqual(header(headers, "Cache-Control"), "public, max-age=31536000, immutable")
            self.assertEqual(header(headers, "Content-Length"), str(len(body)))
            self.assertNotIn(b"//fonts.googleapis.com", body)
        self.assertEqual(kinds, {".js", ".css"})

    def test_gzip_when_accepted(self):
        for path in self.assets():
            _, plain, plain_headers = self.node.get(path)
            status, zipped, headers = self.node.get(path, headers={"Accept-Encoding": "gzip"})
            self.assertEqual(status, 200)
            self.assertIsNone(header(plain_headers, "Content-Encoding"))
            self.assertEqual(header(headers, "Content-Encoding"), "gzip", path)
            self.assertLess(len(zipped), len(plain))
            self.assertEqual(gzip.decompress(zipped), plain)

    def test_etag_revalidation_answers_304(self):
        _, _, headers = self.node.get("/")
        status, body, _ = self.node.get("/", headers={"If-None-Match": header(headers, "ETag")})
        self.assertEqual(status, 304)
        self.assertEqual(body, b"")

    def test_head_answers_headers_only(self):
        status, body, headers = self.node.http("HEAD", "/")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertEqual(header(headers, "Content-Type"), "text/html; charset=utf-8")

    def test_console_pages_fall_back_to_index(self):
        html, _ = self.index()
        for path in ("/tenants", "/tenants/public", "/tenants/public/default?tab=policies",
                     "/tenants/public/default/persistent/orders", "/monitoring"):
            status, body, headers = self.node.get(path)
            self.assertEqual(status, 200, path)
            self.assertEqual(body.decode(), html, path)
            self.assertEqual(header(headers, "Content-Type"), "text/html; charset=utf-8")

    def test_missing_files_and_unknown_paths_are_404(self):
        for path in ("/assets/missing-0000.js", "/favicon.ico", "/no/such/thing", "/admin/v2/nothing",
                     "/tenantsx"):
            status, body = call_json(self.node, "GET", path)
            self.assertEqual(status, 404, path)
            self.assertIn("reason", body, path)

    def test_other_methods_on_console_paths(self):
        self.assertEqual(self.node.http("POST", "/")[0], 405)
        self.assertEqual(self.node.http("DELETE", "/tenants")[0], 404)

    def test_api_routes_still_answer(self):
        status, tenants = call_json(self.node, "GET", "/admin/v2/tenants")
        self.assertEqual(status, 200)
        self.assertIn("public", tenants)
        self.assertEqual(self.node.get("/metrics")[0], 200)


class ConsoleApiClientTest(NodeTestCase):
    """Each route in api.ts's ROUTES reaches a handler: the answer is never
    the router's own 404 ("no such resource") or 405."""

    SAMPLE = {"tenant": "route-check", "namespace": "ns", "domain": "persistent", "topic": "t",
              "subscription": "s", "policy": "messageTTL", "timestamp": "0", "seconds": "1", "n": "1"}

    def test_every_route_the_console_calls_exists(self):
        with open(API_TS) as f:
            source = f.read()
        block = re.search(r"export const ROUTES = \[(.*?)\] as const", source, re.S)
        self.assertIsNotNone(block)
        routes = re.findall(r"'([A-Z]+) (/[^']*)'", block.group(1))
        self.assertGreater(len(routes), 20)
        for method, pattern in routes:
            path = re.sub(r"\{(\w+)\}", lambda m: self.SAMPLE[m.group(1)], pattern)
            body = "60" if method in ("POST", "PUT") else None
            status, raw, _ = self.node.http(method, path, body)
            text = raw.decode(errors="replace")
            self.assertNotEqual(status, 405, f"{method} {pattern}: {text}")
            self.assertFalse(status == 404 and "no such resource" in text, f"{method} {pattern}: {text}")


class OverviewTest(NodeTestCase):
    def overview(self):
        status, body = call_json(self.node, "GET", "/admin/v2/overview")
        self.assertEqual(status, 200)
        return body

    def test_counts_and_totals_follow_what_happens(self):
        before = self.overview()
        self.assertEqual(before["cluster"], "standalone")
        self.assertRegex(before["version"], r"^\d+\.\d+\.\d+")
        self.assertGreaterEqual(before["uptimeSeconds"], 0)
        for key in ("tenants", "namespaces", "topics", "producers", "consumers", "msgRateIn", "msgRateOut",
                    "msgThroughputIn", "msgThroughputOut", "msgBacklog", "storageSize"):
            self.assertIn(key, before)
        self.assertEqual(before["largestBacklogs"], [])

        self.assertEqual(call_json(self.node, "PUT", "/admin/v2/tenants/acme", {})[0], 204)
        self.assertEqual(call_json(self.node, "PUT", "/admin/v2/namespaces/acme/shop")[0], 204)
        topic = "/admin/v2/persistent/acme/shop/orders"
        self.assertEqual(call_json(self.node, "PUT", topic)[0], 204)
        self.assertEqual(call_json(self.node, "PUT", topic + "/subscription/audit?messageId=earliest")[0], 204)
        subprocess.run([BIN, "produce", "persistent://acme/shop/orders", "-m", "hello", "-n", "5",
                        "--url", f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"],
                       check=True, capture_output=True, timeout=30)

        after = self.overview()
        self.assertEqual(after["tenants"], before["tenants"] + 1)
        self.assertEqual(after["namespaces"], before["namespaces"] + 1)
        self.assertEqual(after["topics"], before["topics"] + 1)
        self.assertEqual(after["msgInCounter"], 5)
        self.assertEqual(after["msgBacklog"], 5)
        self.assertGreater(after["storageSize"], 0)
        self.assertEqual(after["largestBacklogs"][0]["topic"], "persistent://acme/shop/orders")
        self.assertEqual(after["largestBacklogs"][0]["msgBacklog"], 5)


class RestProducerTest(NodeTestCase):
    """POST /topics/...: Pulsar's REST producer, which the console's
    "Produce message" form uses."""

    def setUp(self):
        self.name = self.id().rsplit(".", 1)[-1]
        self.admin = f"/admin/v2/persistent/public/default/{self.name}"
        self.assertEqual(call_json(self.node, "PUT", self.admin)[0], 204)
        self.assertEqual(call_json(self.node, "PUT", self.admin + "/subscription/s?messageId=earliest")[0], 204)

    def produce(self, body, path=None):
        return call_json(self.node, "POST", path or f"/topics/persistent/public/default/{self.name}", body)

    def test_messages_are_stored_in_order_with_key_and_properties(self):
        status, answer = self.produce({"producerName": "web", "messages": [
            {"payload": "hello", "key": "k1", "properties": {"a": "b"}},
            {"payload": '{"x": 1}', "sequenceId": 7}]})
        self.assertEqual(status, 200, answer)
        ids = [r["messageId"] for r in answer["messagePublishResults"]]
        self.assertEqual([r["errorCode"] for r in answer["messagePublishResults"]], [0, 0])
        self.assertRegex(ids[0], r"^\d+:\d+:-1$")
        self.assertNotEqual(ids[0], ids[1])

        status, body, headers = self.node.get(self.admin + "/subscription/s/position/1")
        self.assertEqual((status, body), (200, b"hello"))
        self.assertEqual(headers["X-Pulsar-Key"], "k1")
        self.assertEqual(json.loads(headers["X-Pulsar-PROPERTY"]), {"a": "b"})
        self.assertEqual(headers["X-Pulsar-producer-name"], "web")
        self.assertEqual(headers["X-Pulsar-Message-ID"] + ":-1", ids[0])
        status, body, headers = self.node.get(self.admin + "/subscription/s/position/2")
        self.assertEqual((status, body, headers["X-Pulsar-sequence-id"]), (200, b'{"x": 1}', "7"))

        # A Pulsar consumer gets them, and the REST producer is gone again.
        out = subprocess.run([BIN, "consume", f"persistent://public/default/{self.name}", "-s", "s", "-n", "2",
                              "--url", f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"],
                             check=True, capture_output=True, timeout=30, text=True).stdout
        self.assertIn("hello", out)
        self.assertIn('{"x": 1}', out)
        stats = call_json(self.node, "GET", self.admin + "/stats")[1]
        self.assertEqual(stats["msgInCounter"], 2)
        self.assertEqual(stats["publishers"], [])

    def test_partitions_take_messages_by_number(self):
        path = f"/admin/v2/persistent/public/default/{self.name}-p/partitions"
        self.assertEqual(call_json(self.node, "PUT", path, 2)[0], 204)
        status, answer = self.produce({"messages": [{"payload": "to one"}]},
                                      f"/topics/persistent/public/default/{self.name}-p/partitions/1")
        self.assertEqual(status, 200, answer)
        stats = call_json(self.node, "GET", f"/admin/v2/persistent/public/default/{self.name}-p-partition-1/stats")[1]
        self.assertEqual(stats["msgInCounter"], 1)

    def test_bad_requests_say_why(self):
        for body, reason in (({"messages": []}, "non-empty array"),
                             ({"messages": [{"key": "k"}]}, "payload"),
                             ({"messages": [{"payload": "x", "properties": {"a": 1}}]}, "property 'a'"),
                             ({"messages": [{"payload": "x", "sequenceId": -1}]}, "sequenceId"),
                             ("not json", "")):
            status, answer = self.produce(body)
            self.assertEqual(status, 400, body)
            self.assertIn(reason, answer["reason"])
        status, answer = self.produce({"messages": [{"payload": "x"}]}, "/topics/persistent/public/default/nope")
        self.assertEqual(status, 404)
        status, _ = self.produce({"messages": [{"payload": "x"}]},
                                 f"/topics/persistent/public/default/{self.name}/partitions/x")
        self.assertEqual(status, 400)
        stats = call_json(self.node, "GET", self.admin + "/stats")[1]
        self.assertEqual(stats["msgInCounter"], 0)


if __name__ == "__main__":
    unittest.main()
