// The lab's Kafka load (tools/lab traffic --kafka), run in the client namespace against the
// broker in the broker namespace. One JVM for every client, so N consumers cost N threads,
// not N JVM starts on a 2-core machine.
//
//   preload BOOTSTRAP TOPIC PARTITIONS MBYTES
//       creates TOPIC (PARTITIONS partitions, replication 1) if missing and produces MBYTES
//       MiB of 1,000-byte records into it (acks=1, no compression), then prints one line.
//   create BOOTSTRAP TOPIC PARTITIONS BROKERS
//       creates TOPIC on a cluster of brokers 1..BROKERS (the three-broker lab): PARTITIONS
//       partitions, every one on every broker (replication factor BROKERS), partition i led by
//       broker 1 + i mod BROKERS (its first replica, the preferred leader), min.insync.replicas 2.
//   consume BOOTSTRAP TOPIC CONSUMERS PRODUCERS SECS RATE_MBIT OUT_JSON
//       CONSUMERS threads, each its own KafkaConsumer assigned every partition (no group,
//       no commits), read TOPIC from the beginning to the end offsets taken at the start
//       of the pass, then seek to the beginning again, until SECS have passed: the broker
//       sends bulk data to them, the direction the hypervisor shapes. PRODUCERS threads
//       each add a light load (1,000 records of 1,000 bytes a second; -Dlab.produce.mbit=M:
//       M Mbit/s of records each; -Dlab.acks=all: acks=all, as the cluster's producers). RATE_MBIT > 0 paces
//       the consumers to that many Mbit/s of records in all (0: as fast as they can). Writes
//       totals and per-second consumed Mbit/s to OUT_JSON.
//
// Compiled by tools/lab with javac against the broker's kafka-clients (no build tool).

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class LabLoad {
    static final int RECORD_BYTES = 1000;

    public static void main(String[] args) throws Exception {
        if (args.length == 5 && args[0].equals("preload")) {
            preload(args[1], args[2], Integer.parseInt(args[3]), Long.parseLong(args[4]));
        } else if (args.length == 5 && args[0].equals("create")) {
            create(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
        } else if (args.length == 2 && args[0].equals("groups")) {
            groups(args[1]);
        } else if (args.length == 8 && args[0].equals("consume")) {
            consume(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                    Double.parseDouble(args[5]), Double.parseDouble(args[6]), Path.of(args[7]));
        } else {
            System.err.println("usage: LabLoad preload BOOTSTRAP TOPIC PARTITIONS MBYTES\n"
                    + "       LabLoad create BOOTSTRAP TOPIC PARTITIONS BROKERS\n"
                    + "       LabLoad consume BOOTSTRAP TOPIC CONSUMERS PRODUCERS SECS RATE_MBIT OUT_JSON");
            System.exit(2);
        }
    }

    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, System.getProperty("lab.acks", "1"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "10");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        return p;
    }

    static void preload(String bootstrap, String topic, int partitions, long mbytes) throws Exception {
        long t0 = System.nanoTime();
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) throw e;
        }
        long records = mbytes * 1024 * 1024 / RECORD_BYTES;
        byte[] value = new byte[RECORD_BYTES];
        for (int i = 0; i < value.length; i++) value[i] = (byte) ('a' + i % 26);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            for (long i = 0; i < records; i++) {
                // Round robin over the partitions, so each holds an equal share.
                producer.send(new ProducerRecord<>(topic, (int) (i % partitions), null, value));
            }
            producer.flush();
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("preloaded %d records (%d MiB) into %s (%d partitions) in %.1f s%n",
                records, mbytes, topic, partitions, secs);
    }

    static void create(String bootstrap, String topic, int partitions, int brokers) throws Exception {
        Map<Integer, List<Integer>> assignment = new java.util.HashMap<>();
        for (int i = 0; i < partitions; i++) {
            List<Integer> replicas = new ArrayList<>();
            for (int r = 0; r < brokers; r++) replicas.add(1 + (i + r) % brokers);
            assignment.put(i, replicas);
        }
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            NewTopic t = new NewTopic(topic, assignment).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(t)).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) throw e;
        }
        System.out.printf("topic %s: %d partitions, replicas %s%n", topic, partitions, assignment);
    }

    static void consume(String bootstrap, String topic, int consumers, int producers, double secs,
            double rateMbit, Path out) throws Exception {
        long deadline = System.nanoTime() + (long) (secs * 1e9);
        AtomicLong bytes = new AtomicLong();
        AtomicLong records = new AtomicLong();
        AtomicLong passes = new AtomicLong();
        AtomicLong produced = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        // Bytes a second for each consumer; 0: unpaced.
        double paceBps = rateMbit > 0 ? rateMbit * 1e6 / 8 / consumers : 0;
        // Consumer groups (-Dlab.groups=a,b): consumer i joins group i mod n, with the
        // client id GROUP-client; without, consumers assign the partitions themselves.
        String[] groups = System.getProperty("lab.groups", "").isEmpty()
                ? new String[0] : System.getProperty("lab.groups").split(",");
        for (int i = 0; i < consumers; i++) {
            String group = groups.length == 0 ? null : groups[i % groups.length];
            Thread t = new Thread(() -> consumeLoop(bootstrap, topic, deadline, paceBps, bytes, records, passes, group),
                    "lab-consumer-" + i);
            threads.add(t);
        }
        for (int i = 0; i < producers; i++) {
            Thread t = new Thread(() -> produceLoop(bootstrap, topic, deadline, produced), "lab-producer-" + i);
            threads.add(t);
        }
        long t0 = System.nanoTime();
        threads.forEach(Thread::start);
        List<Double> perSecond = new ArrayList<>();
        long last = 0;
        long next = t0 + 1_000_000_000L;
        while (System.nanoTime() < deadline) {
            long sleep = Math.min(next, deadline) - System.nanoTime();
            if (sleep > 0) Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
            if (System.nanoTime() >= next) {
                long now = bytes.get();
                perSecond.add((now - last) * 8 / 1e6);
                last = now;
                next += 1_000_000_000L;
            }
        }
        for (Thread t : threads) t.join(10_000);
        double elapsed = (System.nanoTime() - t0) / 1e9;
        StringBuilder ps = new StringBuilder();
        for (Double v : perSecond) ps.append(ps.length() == 0 ? "" : ", ").append(String.format("%.1f", v));
        String json = String.format(
                "{\"seconds\": %.2f, \"consumers\": %d, \"producers\": %d, \"rate_mbit\": %.0f, \"consumed_bytes\": %d, "
                        + "\"consumed_records\": %d, \"passes\": %d, \"consumed_mbit_per_s\": %.1f, "
                        + "\"produced_bytes\": %d, \"per_second_mbit\": [%s]}%n",
                elapsed, consumers, producers, rateMbit, bytes.get(), records.get(), passes.get(),
                bytes.get() * 8 / 1e6 / elapsed, produced.get(), ps);
        Files.writeString(out, json, StandardCharsets.UTF_8);
    }

    static void consumeLoop(String bootstrap, String topic, long deadline, double paceBps,
            AtomicLong bytes, AtomicLong records, AtomicLong passes, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        // The client's CPU is shared with the broker on this machine: skip the CRC pass.
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "false");
        if (paceBps > 0) {
            // Paced: smaller fetches (256 KiB a partition), so the pace is not a train of
            // 6 MiB bursts at line rate.
            p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "262144");
        }
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-client");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            groupLoop(p, topic, deadline, paceBps, bytes, records, passes);
            return;
        }
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            c.assign(tps);
            long start = System.nanoTime();
            long mine = 0;
            while (System.nanoTime() < deadline) {
                c.seekToBeginning(tps);
                Map<TopicPartition, Long> end = c.endOffsets(tps);
                while (System.nanoTime() < deadline && !reached(c, end)) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                    long b = 0;
                    for (ConsumerRecord<byte[], byte[]> r : rs) b += r.serializedValueSize() + Math.max(0, r.serializedKeySize());
                    bytes.addAndGet(b);
                    records.addAndGet(rs.count());
                    mine += b;
                    if (paceBps > 0) {
                        // Wait until this consumer's bytes so far are due at its pace. Credit
                        // from a slow stretch (the first fetches) is kept for 100 ms at most,
                        // so it is not spent later as a burst over the pace.
                        long now = System.nanoTime();
                        long due = start + (long) (mine / paceBps * 1e9);
                        if (due < now - 100_000_000L) {
                            start += now - 100_000_000L - due;
                            due = now - 100_000_000L;
                        }
                        long sleep = Math.min(deadline, due) - now;
                        if (sleep > 0) Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
                    }
                }
                passes.incrementAndGet();
            }
        } catch (InterruptedException | RuntimeException e) {
            if (System.nanoTime() < deadline) e.printStackTrace();
        }
    }

    /** A group member: subscribes, reads what it is assigned to its end, then again. */
    static void groupLoop(Properties p, String topic, long deadline, double paceBps,
            AtomicLong bytes, AtomicLong records, AtomicLong passes) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            long start = System.nanoTime();
            long mine = 0;
            long checked = 0;
            while (System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                long b = 0;
                for (ConsumerRecord<byte[], byte[]> r : rs) b += r.serializedValueSize() + Math.max(0, r.serializedKeySize());
                bytes.addAndGet(b);
                records.addAndGet(rs.count());
                mine += b;
                long now = System.nanoTime();
                if (now - checked > 1_000_000_000L && !c.assignment().isEmpty()) {
                    checked = now;
                    if (reached(c, c.endOffsets(c.assignment()))) {
                        c.seekToBeginning(c.assignment());
                        passes.incrementAndGet();
                    }
                }
                if (paceBps > 0) {
                    long due = start + (long) (mine / paceBps * 1e9);
                    if (due < now - 100_000_000L) {
                        start += now - 100_000_000L - due;
                        due = now - 100_000_000L;
                    }
                    long sleep = Math.min(deadline, due) - now;
                    if (sleep > 0) Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
                }
            }
        } catch (InterruptedException | RuntimeException e) {
            if (System.nanoTime() < deadline) e.printStackTrace();
        }
    }

    /** Every consumer group's members as Kafka's admin client describes them (what
     *  kafka-consumer-groups.sh --describe --members prints): "group client_id host" lines. */
    static void groups(String bootstrap) throws Exception {
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            List<String> ids = new ArrayList<>();
            admin.listGroups().all().get().forEach(g -> ids.add(g.groupId()));
            for (var e : admin.describeConsumerGroups(ids).all().get().entrySet()) {
                for (var m : e.getValue().members()) {
                    System.out.println(e.getKey() + " " + m.clientId() + " " + m.host());
                }
            }
        }
    }

    static boolean reached(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) return false;
        }
        return true;
    }

    static void produceLoop(String bootstrap, String topic, long deadline, AtomicLong produced) {
        byte[] value = new byte[RECORD_BYTES];
        // Records every 100 ms: 100 (1 MB/s) unless -Dlab.produce.mbit says otherwise.
        double mbit = Double.parseDouble(System.getProperty("lab.produce.mbit", "8"));
        int batch = Math.max(1, (int) Math.round(mbit * 1e6 / 8 / RECORD_BYTES / 10));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            long next = System.nanoTime();
            while (System.nanoTime() < deadline) {
                for (int i = 0; i < batch; i++) producer.send(new ProducerRecord<>(topic, value));
                produced.addAndGet((long) batch * RECORD_BYTES);
                next += 100_000_000L;
                long now = System.nanoTime();
                // Behind (send blocked while the brokers held the batches back): no catch-up
                // burst of more than 100 ms of records.
                if (next < now - 100_000_000L) next = now - 100_000_000L;
                long sleep = next - now;
                if (sleep > 0) Thread.sleep(sleep / 1_000_000);
            }
        } catch (InterruptedException | RuntimeException e) {
            if (System.nanoTime() < deadline) e.printStackTrace();
        }
    }
}
