// GroupAdmin: the consumer-group calls kafka-consumer-groups.sh makes,
// through the Java Admin client of the Kafka cache (clients/), so a test can
// run them through the gateway and straight against the broker and compare.
//
//   java -cp '<cache>/clients/*' GroupAdmin.java BOOTSTRAP GROUP TOPIC PARTITIONS CALL,...
//
// It makes the calls named, in this order, and prints one line per call,
// "<call> ok ..." or "<call> error <Exception>":
//
//   describe ok state=STATE assignor=NAME members=N partitions=P0,P1,...
//   list ok state=STATE count=N      (GROUP as listed: N times)
//   reset ok | reset error E         (offsets set to partition+1, as --reset-offsets --execute)
//   offsets ok P0=O0,P1=O1,...       (the committed offsets, as --describe --offsets)
//   delete-offsets ok | error E      (partition 0's offset, as --delete-offsets)
//   delete ok | delete error E       (the group, as --delete)
//
// The tool itself refuses to reset or delete an active group before asking
// the broker; these calls skip that check, so the answers are the broker's
// (or the gateway's) own.
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

public class GroupAdmin {
    interface Call {
        String run() throws Exception;
    }

    // report prints the call's outcome: the cause of a failed future names
    // the Kafka error (UnknownMemberIdException, GroupNotEmptyException...).
    static void report(Set<String> wanted, String name, Call call) {
        if (!wanted.contains(name)) {
            return;
        }
        try {
            String detail = call.run();
            System.out.println(name + " ok" + (detail.isEmpty() ? "" : " " + detail));
        } catch (ExecutionException e) {
            System.out.println(name + " error " + e.getCause().getClass().getSimpleName());
        } catch (Exception e) {
            System.out.println(name + " error " + e.getClass().getSimpleName());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: GroupAdmin BOOTSTRAP GROUP TOPIC PARTITIONS CALL,...");
            System.exit(2);
        }
        Set<String> wanted = Set.of(args[4].split(","));
        String group = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            report(wanted, "describe", () -> {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS).get(group);
                List<Integer> held = new ArrayList<>();
                for (MemberDescription m : d.members()) {
                    for (TopicPartition tp : m.assignment().topicPartitions()) {
                        held.add(tp.partition());
                    }
                }
                Collections.sort(held);
                StringBuilder ps = new StringBuilder();
                for (int p : held) {
                    ps.append(ps.length() == 0 ? "" : ",").append(p);
                }
                return "state=" + d.groupState() + " assignor=" + d.partitionAssignor()
                    + " members=" + d.members().size() + " partitions=" + ps;
            });
            report(wanted, "list", () -> {
                int n = 0;
                String state = "-";
                for (GroupListing g : admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get(30, TimeUnit.SECONDS)) {
                    if (g.groupId().equals(group)) {
                        n++;
                        state = g.groupState().map(Object::toString).orElse("-");
                    }
                }
                return "state=" + state + " count=" + n;
            });
            report(wanted, "reset", () -> {
                Map<TopicPartition, OffsetAndMetadata> to = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    to.put(new TopicPartition(topic, p), new OffsetAndMetadata(p + 1));
                }
                admin.alterConsumerGroupOffsets(group, to).all().get(30, TimeUnit.SECONDS);
                return "";
            });
            report(wanted, "offsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> got = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                Map<Integer, Long> byPartition = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : got.entrySet()) {
                    if (e.getKey().topic().equals(topic) && e.getValue() != null) {
                        byPartition.put(e.getKey().partition(), e.getValue().offset());
                    }
                }
                StringBuilder s = new StringBuilder();
                for (Map.Entry<Integer, Long> e : byPartition.entrySet()) {
                    s.append(s.length() == 0 ? "" : ",").append(e.getKey()).append('=').append(e.getValue());
                }
                return s.toString();
            });
            report(wanted, "delete-offsets", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 0))).all().get(30, TimeUnit.SECONDS);
                return "";
            });
            report(wanted, "delete", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
                return "";
            });
        }
    }
}
