"""A tenant's storage quota (tenants set-limits --storage-quota): once the
bytes stored over all its namespaces and topics, loaded or not, reach the
quota, publishing is refused on all its topics and every protocol
(Pulsar ProducerBlockedQuotaExceededException, Kafka delivery failure, AMQP
nack), other tenants are untouched, nothing stored is lost, and publishing
resumes when the quota grows."""
import json
import time
import unittest

import confluent_kafka as ck
import pika

import pulsar_api_pb2 as pb
from amqp_pika import connect
from magnetar_harness import NodeTestCase, admin, expect_call
from pulsar_wire import PulsarWire

TIMEOUT_S = 15.0
PAYLOAD = b"q" * 8192
QUOTA = "64K"


class StorageQuotaTest(NodeTestCase):
    node_args = ("--storage-quota-check-secs", "1")

    def expect(self, method, path, body=None, status=204):
        return expect_call(self, self.node, method, path, body, status)

    def test_publishing_stops_at_the_quota_and_resumes_when_it_grows(self):
        self.expect("PUT", "/admin/v2/tenants/full", {})
        self.expect("PUT", "/admin/v2/namespaces/full/a")
        self.expect("PUT", "/admin/v2/namespaces/full/b")
        code, _, err = admin(self.node, "tenants", "set-limits", "full", "--storage-quota", QUOTA)
        self.assertEqual(code, 0, err)
        stored = 0
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer("persistent://full/a/t1", 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            # Past 64 KiB the next pass (every second) refuses: send until it does.
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                r = w.send(1, PAYLOAD)
                if r.type == pb.BaseCommand.SEND_ERROR:
                    break
                stored += 1
                self.assertLess(time.monotonic(), deadline, "publishing was never refused")
                time.sleep(0.02 if stored * len(PAYLOAD) < 64 * 1024 else 0.2)
            self.assertGreaterEqual(stored * len(PAYLOAD), 64 * 1024)
            self.assertEqual(r.cmd.send_error.error, pb.ProducerBlockedQuotaExceededException)
            self.assertIn("Tenant full reached its storage quota", r.cmd.send_error.message)
            usage = self.expect("GET", "/admin/v2/tenants/full/usage", status=200)
            self.assertGreaterEqual(usage["storageSize"], stored * len(PAYLOAD))
            self.assertTrue(usage["storageQuotaExceeded"])
            self.assertEqual((usage["topics"], usage["subscriptions"], usage["producers"]), (1, 0, 1))

            # Every topic of the tenant, whatever namespace or protocol.
            r = w.create_producer("persistent://full/b/t2", 2)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ProducerBlockedQuotaExceededException)
            p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "full/b", "sasl.password": "x", "message.timeout.ms": 3000})
            reports = []
            p.produce("k", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            self.assertEqual(len(reports), 1)
            self.assertIsNotNone(reports[0])
            conn = connect(self.node, virtual_host="full/b")
            try:
                ch = conn.channel()
                ch.queue_declare("q", durable=True)
                ch.confirm_delivery()
                with self.assertRaises(pika.exceptions.NackError):
                    ch.basic_publish("", "q", b"refused", mandatory=True)
            finally:
                if conn.is_open:
                    conn.close()

            # Another tenant publishes as before.
            self.assertEqual(w.create_producer("persistent://public/default/elsewhere", 3).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(3, PAYLOAD).type, pb.BaseCommand.SEND_RECEIPT)

        # A topic nobody has loaded still counts: unloaded, the tenant stays
        # over its quota through the next passes.
        self.expect("PUT", "/admin/v2/persistent/full/a/t1/unload")
        time.sleep(2.5)
        code, out, err = admin(self.node, "--json", "tenants", "usage", "full")
        self.assertEqual(code, 0, err)
        self.assertGreaterEqual(json.loads(out)["storageSize"], stored * len(PAYLOAD))
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = w.create_producer("persistent://full/b/t3", 1)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ProducerBlockedQuotaExceededException)

            code, _, err = admin(self.node, "tenants", "set-limits", "full", "--storage-quota", "10M")
            self.assertEqual(code, 0, err)
            deadline = time.monotonic() + TIMEOUT_S
            producer_id = 10
            while True:
                r = w.create_producer("persistent://full/a/t1", producer_id)
                if r.type == pb.BaseCommand.PRODUCER_SUCCESS:
                    break
                self.assertLess(time.monotonic(), deadline, "publishing never resumed")
                producer_id += 1
                time.sleep(0.1)
            self.assertEqual(w.send(producer_id, b"after").type, pb.BaseCommand.SEND_RECEIPT)

        # Nothing stored was lost.
        internal = self.expect("GET", "/admin/v2/persistent/full/a/t1/internalStats", status=200)
        self.assertEqual(internal["numberOfEntries"], stored + 1)


if __name__ == "__main__":
    unittest.main()
