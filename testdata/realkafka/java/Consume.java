// Consume: a Java reference-client group member for the gateway's interop
// tests, on the cached kafka-clients jars. The tests compile it once with
// javac and cache the classes (internal/e2e/realkafka_java_process_test.go); it also
// runs from source:
//
//   java -cp '<cache>/clients/*' Consume.java BOOTSTRAP GROUP TOPIC \
//       ASSIGNORS CLIENT_ID RACK INSTANCE_ID IDLE_MS [KEY=VALUE ...]
//
// ASSIGNORS is a comma-separated list of assignor class names (short names
// such as RangeAssignor are taken from org.apache.kafka.clients.consumer).
// RACK and INSTANCE_ID may be "-" for none; IDLE_MS 0 means run until
// SIGTERM, otherwise exit after that long without records or rebalances.
// Any KEY=VALUE arguments are consumer properties that override the
// defaults below (e.g. session.timeout.ms=30000 for a static member that
// must restart within its session).
//
// It prints, one per line and flushed at once, so the test can follow it:
//   ready                                  once subscribed
//   assigned|revoked|lost gen=G t=MICROS [topic/p ...]
//                                          from the rebalance listener: the
//                                          group generation the consumer is
//                                          in, and the wall clock in
//                                          microseconds since the epoch, so
//                                          that the callbacks of several
//                                          processes can be put in one order
//   topic/partition@offset                 for every record
//   closing                                when it starts shutting down
// It commits synchronously in onPartitionsRevoked and before closing (after
// polling through a rebalance under way), and never automatically, so
// every commit the test sees was made knowingly.
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Consume {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String list(KafkaConsumer<?, ?> consumer, String kind, Collection<TopicPartition> tps) {
        // The time is taken before the line is built: a revocation is
        // stamped after its commit, an assignment before anything is read.
        Instant now = Instant.now();
        int gen = -1;
        try {
            gen = consumer.groupMetadata().generationId();
        } catch (RuntimeException e) {
            // Closed or fenced: the generation is unknown.
        }
        StringBuilder sb = new StringBuilder(kind);
        sb.append(" gen=").append(gen);
        sb.append(" t=").append(now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000);
        for (TopicPartition tp : tps) {
            sb.append(' ').append(tp.topic()).append('/').append(tp.partition());
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 8) {
            System.err.println("usage: Consume BOOTSTRAP GROUP TOPIC ASSIGNORS CLIENT_ID RACK INSTANCE_ID IDLE_MS [KEY=VALUE ...]");
            System.exit(2);
        }
        List<String> assignors = new ArrayList<>();
        for (String a : args[3].split(",")) {
            assignors.add(a.contains(".") ? a : "org.apache.kafka.clients.consumer." + a);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[4]);
        props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", assignors));
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "2000");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (!args[5].equals("-")) {
            props.put(ConsumerConfig.CLIENT_RACK_CONFIG, args[5]);
        }
        if (!args[6].equals("-")) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[6]);
        }
        for (int i = 8; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv.length != 2) {
                System.err.println("not a KEY=VALUE property: " + args[i]);
                System.exit(2);
            }
            props.put(kv[0], kv[1]);
        }
        long idleMs = Long.parseLong(args[7]);

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        Thread main = Thread.currentThread();
        CountDownLatch done = new CountDownLatch(1);
        // SIGTERM runs shutdown hooks; wake the poll loop and wait until it
        // has committed and left the group, so the JVM exits cleanly.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));

        long[] lastActivity = {System.nanoTime()};
        consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                lastActivity[0] = System.nanoTime();
                // Commit what was read before anyone else may read it.
                consumer.commitSync();
                say(list(consumer, "revoked", partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                lastActivity[0] = System.nanoTime();
                say(list(consumer, "assigned", partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                lastActivity[0] = System.nanoTime();
                say(list(consumer, "lost", partitions));
            }
        });
        say("ready");
        try {
            while (idleMs <= 0 || System.nanoTime() - lastActivity[0] < idleMs * 1_000_000L) {
                ConsumerRecords<String, String> recs = consumer.poll(Duration.ofMillis(100));
                if (!recs.isEmpty()) {
                    lastActivity[0] = System.nanoTime();
                }
                for (ConsumerRecord<String, String> r : recs) {
                    say(r.topic() + "/" + r.partition() + "@" + r.offset());
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: fall through to the clean shutdown.
        } finally {
            say("closing");
            finalCommit(consumer);
            consumer.close();
            done.countDown();
        }
    }

    // finalCommit commits what was read before the consumer closes. A
    // member that is mid-rebalance (another member left just before) cannot
    // commit: as the client advises, it polls until the rebalance is done,
    // printing what it reads as ever, and tries again, for up to 15 s.
    static void finalCommit(KafkaConsumer<String, String> consumer) {
        long until = System.nanoTime() + 15_000_000_000L;
        while (true) {
            try {
                consumer.commitSync();
                return;
            } catch (RebalanceInProgressException e) {
                if (System.nanoTime() > until) {
                    System.err.println("final commit: " + e);
                    return;
                }
                try {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                        say(r.topic() + "/" + r.partition() + "@" + r.offset());
                    }
                } catch (Exception pe) {
                    System.err.println("final commit: polling through a rebalance: " + pe);
                    return;
                }
            } catch (Exception e) {
                System.err.println("final commit: " + e);
                return;
            }
        }
    }
}
