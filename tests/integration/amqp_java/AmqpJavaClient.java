// The RabbitMQ Java client (Debian's librabbitmq-client-java) against the
// real binary: declares, publisher confirms, properties and headers, get,
// a topic exchange with a consumer and manual acks under a prefetch limit,
// and a channel error (404) that leaves the connection serving. Exits 0
// when every check held; prints what failed otherwise.
//
//   java -cp <amqp-client.jar>:<slf4j-api.jar>:<dir> AmqpJavaClient <amqp port>
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.ShutdownSignalException;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public class AmqpJavaClient {
  static void check(boolean ok, String what) {
    if (!ok) {
      System.out.println("FAILED: " + what);
      System.exit(1);
    }
    System.out.println("ok: " + what);
  }

  public static void main(String[] args) throws Exception {
    ConnectionFactory factory = new ConnectionFactory();
    factory.setHost("127.0.0.1");
    factory.setPort(Integer.parseInt(args[0]));
    factory.setConnectionTimeout(10000);
    try (Connection conn = factory.newConnection()) {
      Channel ch = conn.createChannel();
      ch.queueDeclare("java-q", true, false, false, null);
      ch.confirmSelect();
      Map<String, Object> headers = new HashMap<>();
      headers.put("attempt", 3);
      headers.put("source", "java");
      AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
          .contentType("text/plain").deliveryMode(2).messageId("j-1").headers(headers).build();
      ch.basicPublish("", "java-q", props, "hello from java".getBytes(StandardCharsets.UTF_8));
      ch.waitForConfirmsOrDie(10000);
      check(true, "publish confirmed");

      GetResponse got = ch.basicGet("java-q", false);
      check(got != null && new String(got.getBody(), StandardCharsets.UTF_8).equals("hello from java"), "basic.get body");
      check("text/plain".equals(got.getProps().getContentType()) && "j-1".equals(got.getProps().getMessageId())
          && got.getProps().getDeliveryMode() == 2, "properties intact");
      check(Integer.valueOf(3).equals(got.getProps().getHeaders().get("attempt"))
          && "java".equals(got.getProps().getHeaders().get("source").toString()), "headers intact");
      ch.basicAck(got.getEnvelope().getDeliveryTag(), false);

      ch.exchangeDeclare("java-topic", "topic", true);
      String queue = ch.queueDeclare().getQueue();
      ch.queueBind(queue, "java-topic", "audit.#");
      for (int i = 0; i < 5; i++) {
        ch.basicPublish("java-topic", "audit.event." + i, null, ("e" + i).getBytes(StandardCharsets.UTF_8));
      }
      ch.basicPublish("java-topic", "metrics.cpu", null, "not routed".getBytes(StandardCharsets.UTF_8));
      ch.waitForConfirmsOrDie(10000);
      Channel consumerChannel = conn.createChannel();
      consumerChannel.basicQos(2);
      List<String> bodies = new ArrayList<>();
      CountDownLatch five = new CountDownLatch(5);
      consumerChannel.basicConsume(queue, false, new DefaultConsumer(consumerChannel) {
        @Override
        public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties p, byte[] body) throws IOException {
          synchronized (bodies) {
            bodies.add(new String(body, StandardCharsets.UTF_8));
          }
          getChannel().basicAck(env.getDeliveryTag(), false);
          five.countDown();
        }
      });
      check(five.await(10, TimeUnit.SECONDS), "five deliveries through the topic exchange");
      synchronized (bodies) {
        check(bodies.equals(List.of("e0", "e1", "e2", "e3", "e4")), "in order: " + bodies);
      }

      Channel bad = conn.createChannel();
      try {
        bad.queueDeclarePassive("java-missing");
        check(false, "passive declare of a missing queue fails");
      } catch (IOException e) {
        ShutdownSignalException cause = (ShutdownSignalException) e.getCause();
        AMQP.Channel.Close close = (AMQP.Channel.Close) cause.getReason();
        check(close.getReplyCode() == 404, "404 for a missing queue");
      }
      check(conn.isOpen(), "the connection stays open");
      check(ch.queueDeclarePassive("java-q").getMessageCount() == 0, "the first channel still serves");
    }
    System.out.println("done");
  }
}
