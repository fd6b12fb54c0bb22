"""GET .../ledger/{ledgerId}/entry/{entryId}: one message by its id over
REST (Pulsar's getMessageById), as the console's message browser uses it."""
import json
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import NodeTestCase
from pulsar_wire import PulsarWire

BASE = "/admin/v2/persistent/public/default"


class MessageByIdTest(NodeTestCase):
    def test_a_message_by_its_id(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            w.create_producer("persistent://public/default/by-id", 1)
            ids = []
            for i in range(3):
                md = pb.KeyValue(key="n", value=str(i))
                r = w.send(1, b"payload-%d" % i, partition_key="k%d" % i, properties=[md])
                ids.append(r.cmd.send_receipt.message_id)
        mid = ids[1]
        status, body, headers = self.node.get(f"{BASE}/by-id/ledger/{mid.ledgerId}/entry/{mid.entryId}")
        self.assertEqual(status, 200, body)
        self.assertEqual(body, b"payload-1")
        self.assertEqual(headers["X-Pulsar-Message-ID"], f"{mid.ledgerId}:{mid.entryId}")
        self.assertEqual(headers["X-Pulsar-Key"], "k1")
        self.assertEqual(json.loads(headers["X-Pulsar-PROPERTY"]), {"n": "1"})
        self.assertIn("X-Pulsar-publish-time", headers)

    def test_missing_and_bad_ids(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            w.create_producer("persistent://public/default/by-id-2", 1)
            mid = w.send(1, b"only").cmd.send_receipt.message_id
        for path, want in [(f"by-id-2/ledger/{mid.ledgerId}/entry/{mid.entryId + 5}", 404),
                           (f"by-id-2/ledger/{mid.ledgerId + 1000}/entry/0", 404),
                           ("by-id-2/ledger/x/entry/0", 400),
                           ("by-id-2/ledger/1/entry/-3", 400),
                           ("no-such-topic/ledger/1/entry/0", 404)]:
            status, body, _ = self.node.get(f"{BASE}/{path}")
            self.assertEqual(status, want, (path, body))
        # Still serving, the message intact.
        status, body, _ = self.node.get(f"{BASE}/by-id-2/ledger/{mid.ledgerId}/entry/{mid.entryId}")
        self.assertEqual((status, body), (200, b"only"))


if __name__ == "__main__":
    unittest.main()
