// The Kafka side of tools/bench/kafka-lookup (what throttlescope's Kafka lookup costs at N
// consumer groups). One JVM per step, compiled by the script with javac against the lab's
// cached Kafka jars (no build tool).
//
//   groups BOOTSTRAP TOPIC PREFIX FROM TO
//       creates TOPIC (1 partition) if missing, then the consumer groups PREFIX-FROM ..
//       PREFIX-(TO-1) (5 digits) by committing offset 0 of TOPIC's partition 0 for each
//       (Admin.alterConsumerGroupOffsets: an OffsetCommit of generation -1, which makes an
//       empty classic group, as kafka-consumer-groups.sh --reset-offsets does), 200 at a
//       time, then lists the groups and prints one line: "groups LISTED created NEW in S s".
//   members BOOTSTRAP TOPIC PREFIX M
//       M live members: one KafkaConsumer a thread, member i in group PREFIX-i, subscribed
//       to TOPIC; once assigned it pauses its partitions (no fetches, auto-commit off), so
//       it only heartbeats, and the listener carries little but the lookup. Prints
//       "members M joined" once all are assigned, then runs until it is killed.
//   metrics PID
//       attaches to the broker JVM PID (the JDK's attach API: its local management agent,
//       no JMX port) and prints one JSON object of Kafka's own counters: per request type
//       the requests it handled (RequestsPerSec's Count, every version, every listener) and
//       the request bytes (RequestBytes' Count x Mean), types with none left out; per
//       listener the bytes in and out, requests and connections made
//       (socket-server-metrics). Must run in the broker's network
//       namespace: the agent listens on the broker's loopback.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;
import com.sun.tools.attach.VirtualMachine;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class LookupBench {
    public static void main(String[] args) throws Exception {
        if (args.length == 6 && args[0].equals("groups")) {
            groups(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        } else if (args.length == 5 && args[0].equals("members")) {
            members(args[1], args[2], args[3], Integer.parseInt(args[4]));
        } else if (args.length == 2 && args[0].equals("metrics")) {
            metrics(args[1]);
        } else {
            System.err.println("usage: LookupBench groups BOOTSTRAP TOPIC PREFIX FROM TO\n"
                    + "       LookupBench members BOOTSTRAP TOPIC PREFIX M\n"
                    + "       LookupBench metrics PID");
            System.exit(2);
        }
    }

    static String group(String prefix, int i) {
        return String.format("%s-%05d", prefix, i);
    }

    static void groups(String bootstrap, String topic, String prefix, int from, int to) throws Exception {
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        a.put("client.id", prefix + "-setup");
        long t0 = System.nanoTime();
        try (Admin admin = Admin.create(a)) {
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            TopicPartition tp = new TopicPartition(topic, 0);
            for (int start = from; start < to; start += 200) {
                List<KafkaFuture<Void>> pending = new ArrayList<>();
                for (int i = start; i < Math.min(to, start + 200); i++) {
                    pending.add(admin.alterConsumerGroupOffsets(group(prefix, i),
                            Map.of(tp, new OffsetAndMetadata(0))).all());
                }
                KafkaFuture.allOf(pending.toArray(new KafkaFuture[0])).get(120, TimeUnit.SECONDS);
            }
            long listed = admin.listGroups().all().get().stream()
                    .filter(g -> g.groupId().startsWith(prefix + "-")).count();
            System.out.printf("groups %d created %d in %.1f s%n", listed, to - from,
                    (System.nanoTime() - t0) / 1e9);
        }
    }

    static void members(String bootstrap, String topic, String prefix, int m) throws Exception {
        CountDownLatch joined = new CountDownLatch(m);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < m; i++) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("group.id", group(prefix, i));
            p.put("client.id", group(prefix, i) + "-member");
            p.put("enable.auto.commit", "false");
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            Thread t = new Thread(() -> member(p, topic, joined), "member-" + i);
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        if (!joined.await(120, TimeUnit.SECONDS)) {
            System.err.printf("members: %d of %d not assigned in 120 s%n", joined.getCount(), m);
            System.exit(1);
        }
        System.out.printf("members %d joined%n", m);
        System.out.flush();
        // Until the script kills us.
        while (true) Thread.sleep(60_000);
    }

    static void member(Properties p, String topic, CountDownLatch joined) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            boolean[] counted = {false};
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(java.util.Collection<TopicPartition> parts) { }
                public void onPartitionsAssigned(java.util.Collection<TopicPartition> parts) {
                    c.pause(parts);
                    if (!counted[0]) {
                        counted[0] = true;
                        joined.countDown();
                    }
                }
            });
            while (true) c.poll(Duration.ofSeconds(1));
        } catch (RuntimeException e) {
            e.printStackTrace();
        }
    }

    static void metrics(String pid) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(pid);
        String addr;
        try {
            addr = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        try (JMXConnector jc = JMXConnectorFactory.connect(new JMXServiceURL(addr))) {
            MBeanServerConnection s = jc.getMBeanServerConnection();
            Map<String, Long> requests = new TreeMap<>();
            Map<String, Double> requestBytes = new TreeMap<>();
            for (ObjectName n : s.queryNames(new ObjectName(
                    "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"), null)) {
                requests.merge(n.getKeyProperty("request"),
                        ((Number) s.getAttribute(n, "Count")).longValue(), Long::sum);
            }
            for (ObjectName n : s.queryNames(new ObjectName(
                    "kafka.network:type=RequestMetrics,name=RequestBytes,*"), null)) {
                double count = ((Number) s.getAttribute(n, "Count")).doubleValue();
                double mean = ((Number) s.getAttribute(n, "Mean")).doubleValue();
                requestBytes.merge(n.getKeyProperty("request"), count * mean, Double::sum);
            }
            String[] attrs = {"incoming-byte-total", "outgoing-byte-total", "request-total",
                "response-total", "connection-creation-total"};
            Map<String, double[]> listeners = new TreeMap<>();
            for (ObjectName n : s.queryNames(new ObjectName(
                    "kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*"), null)) {
                double[] sum = listeners.computeIfAbsent(n.getKeyProperty("listener"),
                        k -> new double[attrs.length]);
                for (int i = 0; i < attrs.length; i++) {
                    sum[i] += ((Number) s.getAttribute(n, attrs[i])).doubleValue();
                }
            }
            StringBuilder o = new StringBuilder("{\"requests\":{");
            String sep = "";
            requests.values().removeIf(v -> v == 0);
            requestBytes.values().removeIf(v -> v == 0);
            for (var e : requests.entrySet()) {
                o.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue());
                sep = ",";
            }
            o.append("},\"request_bytes\":{");
            sep = "";
            for (var e : requestBytes.entrySet()) {
                o.append(sep).append('"').append(e.getKey()).append("\":").append(Math.round(e.getValue()));
                sep = ",";
            }
            o.append("},\"listeners\":{");
            sep = "";
            for (var e : listeners.entrySet()) {
                o.append(sep).append('"').append(e.getKey()).append("\":{");
                for (int i = 0; i < attrs.length; i++) {
                    o.append(i == 0 ? "" : ",").append('"').append(attrs[i].replace('-', '_'))
                            .append("\":").append(Math.round(e.getValue()[i]));
                }
                o.append('}');
                sep = ",";
            }
            o.append("}}");
            System.out.println(o);
        }
    }
}
