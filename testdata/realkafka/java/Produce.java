// Produce: the smallest program on the Java client's classpath from the
// Kafka cache (internal/testutil/realkafka/fetch-kafka.sh, clients/). It proves that the cached
// kafka-clients jars run on the installed JDK against the harness's broker;
// the gateway's interop tests build their Java clients the same way.
//
//   java -cp '<cache>/clients/*' Produce.java BOOTSTRAP TOPIC COUNT
//
// It sends COUNT records with values "java-0" .. "java-(COUNT-1)" to
// partition 0 of TOPIC, in order, and prints "produced COUNT".
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class Produce {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Produce BOOTSTRAP TOPIC COUNT");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int count = Integer.parseInt(args[2]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                // get() per record: the test checks order, so no batching races.
                producer.send(new ProducerRecord<>(args[1], 0, null, "java-" + i)).get();
            }
        }
        System.out.println("produced " + count);
    }
}
