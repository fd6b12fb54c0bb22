"""The RabbitMQ Java client (Debian's librabbitmq-client-java) against the
real binary: tests/integration/amqp_java/AmqpJavaClient.java is compiled
with javac into a scratch directory and run against a fresh node."""
import os
import shutil
import subprocess
import tempfile
import unittest

from magnetar_harness import NodeTestCase

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSPATH = ["/usr/share/java/amqp-client.jar", "/usr/share/java/slf4j-api.jar"]
TIMEOUT_S = 120


class AmqpJavaClientTest(NodeTestCase):
    def test_java_client(self):
        out = tempfile.mkdtemp(prefix="magnetar-java-")
        self.addCleanup(shutil.rmtree, out, True)
        source = os.path.join(HERE, "amqp_java", "AmqpJavaClient.java")
        subprocess.run(["javac", "-cp", ":".join(CLASSPATH), "-d", out, source], check=True, timeout=TIMEOUT_S)
        run = subprocess.run(["java", "-cp", ":".join(CLASSPATH + [out]), "AmqpJavaClient",
                              str(self.node.ports["amqp"])], capture_output=True, timeout=TIMEOUT_S)
        output = run.stdout.decode() + run.stderr.decode()
        self.assertEqual(run.returncode, 0, output)
        self.assertIn("ok: headers intact", output)
        self.assertIn("ok: 404 for a missing queue", output)
        self.assertTrue(run.stdout.decode().rstrip().endswith("done"), output)


if __name__ == "__main__":
    unittest.main()
