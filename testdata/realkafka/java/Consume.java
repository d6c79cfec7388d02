// Consume: a Java reference-client group member for the gateway's interop
// tests, run from source on the cached kafka-clients jars:
//
//   java -cp '<cache>/clients/*' Consume.java BOOTSTRAP GROUP TOPIC \
//       ASSIGNORS CLIENT_ID RACK INSTANCE_ID IDLE_MS
//
// ASSIGNORS is a comma-separated list of assignor class names (short names
// such as RangeAssignor are taken from org.apache.kafka.clients.consumer).
// RACK and INSTANCE_ID may be "-" for none; IDLE_MS 0 means run until
// SIGTERM, otherwise exit after that long without records or rebalances.
//
// It prints, one per line and flushed at once, so the test can follow it:
//   ready                                  once subscribed
//   assigned|revoked|lost [topic/p ...]    from the rebalance listener
//   topic/partition@offset                 for every record
//   closing                                when it starts shutting down
// It commits synchronously in onPartitionsRevoked and before closing, and
// never automatically, so every commit the test sees was made knowingly.
import java.time.Duration;
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
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Consume {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String list(String kind, Collection<TopicPartition> tps) {
        StringBuilder sb = new StringBuilder(kind);
        for (TopicPartition tp : tps) {
            sb.append(' ').append(tp.topic()).append('/').append(tp.partition());
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: Consume BOOTSTRAP GROUP TOPIC ASSIGNORS CLIENT_ID RACK INSTANCE_ID IDLE_MS");
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
                say(list("revoked", partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                lastActivity[0] = System.nanoTime();
                say(list("assigned", partitions));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                lastActivity[0] = System.nanoTime();
                say(list("lost", partitions));
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
            try {
                consumer.commitSync();
            } catch (Exception e) {
                System.err.println("final commit: " + e);
            }
            consumer.close();
            done.countDown();
        }
    }
}
