"""A kafka-python group member for the gateway's interop tests.

    python consume_kafka_python.py BOOTSTRAP GROUP TOPIC STRATEGIES CLIENT_ID RACK INSTANCE_ID
    python consume_kafka_python.py --version

STRATEGIES is a comma-separated list of kafka-python's assignor names:
range, roundrobin, sticky, cooperative-sticky. RACK (client_rack) and
INSTANCE_ID (group_instance_id) may be "-" for none. kafka-python sends its
rack only in fetches, not in its group subscription.

It prints the same lines as consume_confluent.py:
    client kafka-python VERSION              (--version only)
    ready                                    once subscribed
    assigned|revoked|lost [topic/p ...]      from the rebalance listener
    topic/partition@offset                   for every record
    closing                                  when it starts shutting down
It commits in the revoke callback and before closing, and never
automatically. SIGTERM makes it commit, leave the group and exit 0.
"""

import signal
import sys
import threading

import kafka
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def say(line):
    print(line, flush=True)


def listing(kind, partitions):
    return " ".join([kind] + ["%s/%d" % (tp.topic, tp.partition) for tp in sorted(partitions)])


class Member(AsyncConsumerRebalanceListener):
    """Tracks what it owns and has read, and commits on revocation.

    kafka-python 3.0 runs listeners on its IO thread, where the blocking
    commit() raises, so this is the async listener and awaits commit_async.
    It commits offsets it tracked itself: in cooperative mode kafka-python
    drops revoked partitions from its subscription state before calling
    on_partitions_revoked, so a commit of "everything consumed" made there
    would leave the revoked partitions out.
    """

    def __init__(self):
        self.consumer = None
        # lock keeps a batch of records and a rebalance callback apart: the
        # poll loop runs on the main thread, the callbacks on the IO thread.
        self.lock = threading.Lock()
        self.next_offset = {}  # TopicPartition -> offset after the last record read

    def offsets(self, partitions):
        return {tp: OffsetAndMetadata(self.next_offset[tp], "", -1)
                for tp in partitions if tp in self.next_offset}

    async def commit(self, partitions):
        with self.lock:
            offsets = self.offsets(partitions)
        if not offsets:
            return
        try:
            await self.consumer.commit_async(offsets)
        except Exception as e:  # report and go on, as Consume.java does
            print("commit: %r" % (e,), file=sys.stderr, flush=True)

    async def on_partitions_revoked(self, revoked):
        await self.commit(revoked)
        with self.lock:
            for tp in revoked:
                self.next_offset.pop(tp, None)
        say(listing("revoked", revoked))

    async def on_partitions_assigned(self, assigned):
        say(listing("assigned", assigned))

    async def on_partitions_lost(self, lost):
        with self.lock:
            for tp in lost:
                self.next_offset.pop(tp, None)
        say(listing("lost", lost))


def main(argv):
    if argv[1:] == ["--version"]:
        say("client kafka-python %s" % kafka.__version__)
        return 0
    if len(argv) != 8:
        print(__doc__, file=sys.stderr)
        return 2
    bootstrap, group, topic, strategies, client_id, rack, instance_id = argv[1:]
    try:
        assignors = [ASSIGNORS[s] for s in strategies.split(",")]
    except KeyError as e:
        print("unknown strategy %s; kafka-python has %s" % (e, sorted(ASSIGNORS)), file=sys.stderr)
        return 2
    conf = dict(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        client_id=client_id,
        partition_assignment_strategy=assignors,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        metadata_max_age_ms=2000,
    )
    if rack != "-":
        conf["client_rack"] = rack
    if instance_id != "-":
        conf["group_instance_id"] = instance_id

    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))

    member = Member()
    consumer = KafkaConsumer(**conf)
    member.consumer = consumer
    consumer.subscribe([topic], listener=member)
    say("ready")
    try:
        while not stopping:
            batches = consumer.poll(timeout_ms=100)
            with member.lock:
                for tp, records in batches.items():
                    for r in records:
                        say("%s/%d@%d" % (r.topic, r.partition, r.offset))
                        member.next_offset[tp] = r.offset + 1
    finally:
        say("closing")
        with member.lock:
            offsets = member.offsets(consumer.assignment())
        if offsets:
            try:
                consumer.commit(offsets)
            except Exception as e:
                print("final commit: %r" % (e,), file=sys.stderr, flush=True)
        consumer.close(autocommit=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
