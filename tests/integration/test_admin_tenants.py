"""REST admin API over real HTTP: first-start defaults, clusters and tenants,
their error codes, bad input (400 with nothing changed) and restart."""
import unittest

from magnetar_harness import call_json as call, Node, NodeTestCase




class AdminTenantsTest(NodeTestCase):
    def call(self, method, path, body=None):
        return call(self.node, method, path, body)

    def assert_error(self, expected_status, method, path, body=None):
        status, reply = self.call(method, path, body)
        self.assertEqual(status, expected_status, (method, path, reply))
        self.assertIsInstance(reply, dict, reply)
        self.assertIsInstance(reply.get("reason"), str)
        self.assertTrue(reply["reason"])
        return reply["reason"]

    def test_first_start_defaults(self):
        self.assertEqual(self.call("GET", "/admin/v2/clusters"), (200, ["standalone"]))
        status, tenants = self.call("GET", "/admin/v2/tenants")
        self.assertEqual(status, 200)
        self.assertTrue({"public", "pulsar"} <= set(tenants))
        self.assertEqual(self.call("GET", "/admin/v2/tenants/public"),
                         (200, {"adminRoles": [], "allowedClusters": ["standalone"]}))
        self.assertEqual(self.call("GET", "/admin/v2/namespaces/public"), (200, ["public/default"]))
        self.assertEqual(self.call("GET", "/admin/v2/namespaces/pulsar"), (200, ["pulsar/system"]))
        status, cluster = self.call("GET", "/admin/v2/clusters/standalone")
        self.assertEqual(status, 200)
        for field in ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls"):
            self.assertIsInstance(cluster[field], str)
        # The harness starts on port 0 everywhere: no stable address to record.
        self.assertEqual((cluster["serviceUrl"], cluster["brokerServiceUrl"]), ("", ""))

    def test_cluster_lifecycle(self):
        body = {"serviceUrl": "http://east:8080", "brokerServiceUrl": "pulsar://east:6650"}
        self.assertEqual(self.call("PUT", "/admin/v2/clusters/east", body), (204, None))
        self.assert_error(409, "PUT", "/admin/v2/clusters/east", body)
        status, info = self.call("GET", "/admin/v2/clusters/east")
        self.assertEqual((status, info["serviceUrl"], info["brokerServiceUrl"]),
                         (200, "http://east:8080", "pulsar://east:6650"))
        self.assertEqual(self.call("POST", "/admin/v2/clusters/east", {"serviceUrl": "http://east2:8080"}),
                         (204, None))
        self.assertEqual(self.call("GET", "/admin/v2/clusters/east")[1]["serviceUrl"], "http://east2:8080")
        self.assertIn("east", self.call("GET", "/admin/v2/clusters")[1])

        # In use by a tenant, or the local cluster: 412 and still there.
        self.assertEqual(self.call("PUT", "/admin/v2/tenants/east-user", {"allowedClusters": ["east"]}), (204, None))
        self.assert_error(412, "DELETE", "/admin/v2/clusters/east")
        self.assert_error(412, "DELETE", "/admin/v2/clusters/standalone")
        self.assertEqual(self.call("GET", "/admin/v2/clusters/east")[0], 200)
        self.assertEqual(self.call("DELETE", "/admin/v2/tenants/east-user"), (204, None))

        self.assertEqual(self.call("DELETE", "/admin/v2/clusters/east"), (204, None))
        self.assert_error(404, "DELETE", "/admin/v2/clusters/east")
        self.assert_error(404, "GET", "/admin/v2/clusters/east")
        self.assert_error(404, "POST", "/admin/v2/clusters/east", body)
        # A name Pulsar does not allow: 412, as Pulsar answers it.
        self.assert_error(412, "PUT", "/admin/v2/clusters/bad%20name", body)
        self.assert_error(400, "PUT", "/admin/v2/clusters/west", "{not json")
        self.assert_error(400, "PUT", "/admin/v2/clusters/west", {"serviceUrl": 8080})
        self.assertNotIn("west", self.call("GET", "/admin/v2/clusters")[1])

    def test_tenant_lifecycle(self):
        info = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
        self.assertEqual(self.call("PUT", "/admin/v2/tenants/acme", info), (204, None))
        self.assertEqual(self.call("GET", "/admin/v2/tenants/acme"), (200, info))
        # Creating again is a conflict and changes nothing.
        reason = self.assert_error(409, "PUT", "/admin/v2/tenants/acme", {"adminRoles": ["x"]})
        self.assertIn("acme", reason)
        self.assertEqual(self.call("GET", "/admin/v2/tenants/acme"), (200, info))

        updated = {"adminRoles": ["ops", "dev"], "allowedClusters": ["standalone"]}
        self.assertEqual(self.call("POST", "/admin/v2/tenants/acme", updated), (204, None))
        self.assertEqual(self.call("GET", "/admin/v2/tenants/acme"),
                         (200, {"adminRoles": ["dev", "ops"], "allowedClusters": ["standalone"]}))
        self.assert_error(404, "POST", "/admin/v2/tenants/nobody", updated)

        # A tenant with namespaces cannot go.
        self.assertEqual(self.call("PUT", "/admin/v2/namespaces/acme/app"), (204, None))
        self.assert_error(412, "DELETE", "/admin/v2/tenants/acme")
        self.assertEqual(self.call("GET", "/admin/v2/tenants/acme")[0], 200)
        self.assertEqual(self.call("DELETE", "/admin/v2/namespaces/acme/app"), (204, None))

        self.assertEqual(self.call("DELETE", "/admin/v2/tenants/acme"), (204, None))
        self.assert_error(404, "DELETE", "/admin/v2/tenants/acme")
        self.assert_error(404, "GET", "/admin/v2/tenants/acme")
        self.assertNotIn("acme", self.call("GET", "/admin/v2/tenants")[1])

    def test_create_without_clusters_allows_local_cluster(self):
        self.assertEqual(self.call("PUT", "/admin/v2/tenants/quick"), (204, None))
        self.assertEqual(self.call("GET", "/admin/v2/tenants/quick"),
                         (200, {"adminRoles": [], "allowedClusters": ["standalone"]}))
        self.assertEqual(self.call("DELETE", "/admin/v2/tenants/quick"), (204, None))

    def test_bad_input_changes_nothing(self):
        before = self.call("GET", "/admin/v2/tenants")[1]
        # A name Pulsar does not allow: 412 ("Tenant name is not valid" in Pulsar).
        for name in ("bad%20name", "semi%3Bcolon", "star*", "%C3%BCml", "a" * 256):
            self.assert_error(412, "PUT", f"/admin/v2/tenants/{name}", {"allowedClusters": ["standalone"]})
        self.assert_error(400, "PUT", "/admin/v2/tenants/t1", "{\"adminRoles\": [")
        self.assert_error(400, "PUT", "/admin/v2/tenants/t1", "not json at all")
        self.assert_error(400, "PUT", "/admin/v2/tenants/t1", {"allowedClusters": "standalone"})
        self.assert_error(400, "PUT", "/admin/v2/tenants/t1", {"adminRoles": [1, 2]})
        self.assert_error(400, "PUT", "/admin/v2/tenants/t1", [1, 2])
        self.assert_error(412, "PUT", "/admin/v2/tenants/t1", {"allowedClusters": ["no-such-cluster"]})
        self.assertEqual(self.call("GET", "/admin/v2/tenants")[1], before)
        self.assert_error(404, "GET", "/admin/v2/tenants/t1")

    def test_wrong_method_is_405(self):
        status, reply = self.call("PATCH", "/admin/v2/tenants/public")
        self.assertEqual(status, 405, reply)


class AdminRestartTest(unittest.TestCase):
    def test_records_survive_restart(self):
        node = Node(keep_data=True).start()
        data_dir = node.data_dir
        try:
            self.assertEqual(call(node, "PUT", "/admin/v2/clusters/east", {"serviceUrl": "http://e:1"})[0], 204)
            info = {"adminRoles": ["r"], "allowedClusters": ["east", "standalone"]}
            self.assertEqual(call(node, "PUT", "/admin/v2/tenants/keep", info)[0], 204)
            self.assertEqual(call(node, "PUT", "/admin/v2/namespaces/keep/ns")[0], 204)
            self.assertEqual(call(node, "DELETE", "/admin/v2/namespaces/public/default")[0], 204)
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()

        again = Node(data_dir=data_dir).start()
        try:
            # Allowing another cluster too, it has its home where it was made.
            self.assertEqual(call(again, "GET", "/admin/v2/tenants/keep"), (200, {**info, "homeCluster": "standalone"}))
            self.assertEqual(call(again, "GET", "/admin/v2/namespaces/keep"), (200, ["keep/ns"]))
            self.assertEqual(call(again, "GET", "/admin/v2/clusters/east")[1]["serviceUrl"], "http://e:1")
            # Defaults are made on the first start only: a deleted default stays deleted.
            self.assertEqual(call(again, "GET", "/admin/v2/namespaces/public"), (200, []))
            self.assertEqual(again.stop(), 0)
        finally:
            again.close()
            import shutil
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
