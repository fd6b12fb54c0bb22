"""What the Kafka integration tests share: Kafka's primitive encodings for
hand-made requests, and a NodeTestCase whose tests run kcat against the
node's Kafka port. Every wait is bounded."""
import struct
import subprocess

from magnetar_harness import NodeTestCase

KCAT_TIMEOUT_S = 30


def kstr(s):
    """A Kafka STRING (int16 length; -1 for null)."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kbytes(b):
    """Kafka BYTES (int32 length)."""
    return struct.pack(">i", len(b)) + b


class KafkaNodeTestCase(NodeTestCase):
    """A shared node; `self.bootstrap` is its Kafka address."""

    def setUp(self):
        self.bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"

    def kcat(self, *args, stdin=None):
        """kcat's stdout; the test fails when kcat does."""
        r = subprocess.run(["kcat", "-b", self.bootstrap, *args], input=stdin, capture_output=True,
                           timeout=KCAT_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode()
