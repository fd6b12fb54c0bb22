"""Helpers for tests that drive the real binary with pika (python3-pika)."""
import contextlib
import re
import time

import pika

from magnetar_harness import Node, NodeTestCase

TIMEOUT_S = 10.0


def connect(node, **params):
    """A pika BlockingConnection to `node`'s AMQP port, every wait bounded."""
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", node.ports["amqp"], socket_timeout=TIMEOUT_S, blocked_connection_timeout=TIMEOUT_S,
        **params))


class PikaTestCase(NodeTestCase):
    """Tests sharing one node, each with its own pika connection and channel
    (self.conn, self.ch)."""

    def setUp(self):
        self.conn = connect(self.node)
        self.ch = self.conn.channel()

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()


def wait_for(check, what, timeout=TIMEOUT_S):
    """Polls `check` until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def channel_refusal(conn, action):
    """The ChannelClosedByBroker that `action(channel)` on a new channel of
    `conn` ends in; None when it went through. Closes `conn`."""
    try:
        action(conn.channel())
        return None
    except pika.exceptions.ChannelClosedByBroker as e:
        return e
    finally:
        if conn.is_open:
            conn.close()


def publish_confirmed(conn, queue, body):
    """Declares `queue` and publishes `body` to it with a confirm, then
    closes `conn`."""
    try:
        ch = conn.channel()
        ch.queue_declare(queue)
        ch.confirm_delivery()
        ch.basic_publish("", queue, body)
    finally:
        conn.close()


def open_refusal(open_connection):
    """(reply code, text) of the connection.close refusing a connection
    while it opens, from `open_connection()` (which opens a pika
    BlockingConnection); None when it opened (it is closed again). pika
    reports a close during the open as ProbableAccessDeniedError, carrying
    the broker's close as text."""
    try:
        open_connection().close()
        return None
    except pika.exceptions.ConnectionClosedByBroker as e:
        return e.reply_code, e.reply_text
    except pika.exceptions.ProbableAccessDeniedError as e:
        found = re.search(r'\((\d+)\) "?(.*?)"?$', str(e.args[0]) if e.args else "")
        if found is None:
            raise
        return int(found.group(1)), found.group(2)


def queue_exists(conn, name):
    """Whether queue `name` exists (a passive declare on a channel of its own)."""
    ch = conn.channel()
    try:
        ch.queue_declare(name, passive=True)
        ch.close()
        return True
    except pika.exceptions.ChannelClosedByBroker as e:
        if e.reply_code != 404:
            raise
        return False


@contextlib.contextmanager
def restartable_node():
    """A node whose data directory survives stop() and start(), removed at the end."""
    node = Node(keep_data=True).start()
    try:
        yield node
    finally:
        node.keep_data = False
        node.close()
