"""The schema REST API (/admin/v2/schemas/...) against the real binary, and
its agreement with the Pulsar protocol's GET_SCHEMA."""
import struct
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import NodeTestCase, call_json
from pulsar_wire import PulsarWire

BASE = "/admin/v2/schemas/public/default"


class AdminSchemasTest(NodeTestCase):
    def test_upload_get_versions_delete(self):
        path = f"{BASE}/people/schema"
        status, body = call_json(self.node, "GET", path)
        self.assertEqual(status, 404, body)
        status, body = call_json(self.node, "POST", path, {"type": "JSON", "schema": '{"name":"Person"}',
                                                          "properties": {"team": "crm"}})
        self.assertEqual((status, body), (200, {"version": 0}))
        status, body = call_json(self.node, "POST", path, {"type": "JSON", "schema": '{"name":"Person2"}'})
        self.assertEqual((status, body), (200, {"version": 1}))
        status, body = call_json(self.node, "GET", path)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["version"], 1)
        self.assertEqual(body["type"], "JSON")
        self.assertEqual(body["data"], '{"name":"Person2"}')
        self.assertGreater(body["timestamp"], 0)
        status, body = call_json(self.node, "GET", path + "/0")
        self.assertEqual(body["properties"], {"team": "crm"})
        status, body = call_json(self.node, "GET", f"{BASE}/people/versions")
        self.assertEqual([v["version"] for v in body["getSchemaResponses"]], [0, 1])

        # The Pulsar protocol sees what the REST API stored.
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"],
                          topic="persistent://public/default/people").cmd.getSchemaResponse
            self.assertEqual(struct.unpack(">q", r.schema_version)[0], 1)
            self.assertEqual(r.schema.type, pb.Schema.Json)

        status, body = call_json(self.node, "DELETE", path)
        self.assertEqual((status, body), (200, {"version": 2}))
        self.assertEqual(call_json(self.node, "GET", path)[0], 404)
        self.assertEqual(call_json(self.node, "GET", f"{BASE}/people/versions")[0], 404)
        self.assertEqual(call_json(self.node, "DELETE", path)[0], 404)

    def test_bad_input_is_refused_and_stores_nothing(self):
        path = f"{BASE}/bad/schema"
        for body in [{"type": "XML", "schema": "x"}, {"schema": "x"}, {"type": "AVRO", "schema": 5},
                     {"type": "AVRO", "properties": {"a": 1}}, [1, 2], "not json"]:
            status, answer = call_json(self.node, "POST", path, body)
            self.assertEqual(status, 400, (body, answer))
            self.assertIn("reason", answer)
        self.assertEqual(call_json(self.node, "GET", path + "/x")[0], 400)
        self.assertEqual(call_json(self.node, "GET", path + "/-1")[0], 400)
        self.assertEqual(call_json(self.node, "GET", path)[0], 404)
        self.assertEqual(call_json(self.node, "GET", "/admin/v2/schemas/public/nope/t/schema")[0], 404)
        self.assertEqual(call_json(self.node, "GET", "/admin/v2/schemas/no-tenant/default/t/schema")[0], 404)
        # Still serving.
        self.assertEqual(self.node.get("/admin/v2/brokers/health")[0], 200)


if __name__ == "__main__":
    unittest.main()
