"""A confluent-kafka (librdkafka) group member for the gateway's interop tests.

    python consume_confluent.py BOOTSTRAP GROUP TOPIC STRATEGIES CLIENT_ID RACK INSTANCE_ID [KEY=VALUE ...]
    python consume_confluent.py --version

STRATEGIES is librdkafka's partition.assignment.strategy, e.g. "range" or
"cooperative-sticky" (comma-separated for several). RACK (client.rack, which
librdkafka 2.3+ sends in its subscription) and INSTANCE_ID
(group.instance.id) may be "-" for none. Any KEY=VALUE arguments are
librdkafka properties that override the defaults below (e.g.
session.timeout.ms=30000 for a member that must outlast a failover).

It prints one line per event, flushed at once, so the test can follow it:
    client confluent-kafka VERSION librdkafka VERSION   (--version only)
    ready                                    once subscribed
    assigned|revoked|lost [topic/p ...]      from the rebalance callbacks
    topic/partition@offset                   for every record
    closing                                  when it starts shutting down
It commits synchronously in the revoke callback and before closing, and never
automatically, so every commit the test sees was made knowingly. SIGTERM
makes it commit, leave the group and exit 0.
"""

import signal
import sys

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException


def say(line):
    print(line, flush=True)


def listing(kind, partitions):
    return " ".join([kind] + ["%s/%d" % (tp.topic, tp.partition) for tp in partitions])


def main(argv):
    if argv[1:] == ["--version"]:
        # version() is a bare string in 2.16 but a (string, int) pair like
        # libversion() in older releases; take the string either way.
        version = confluent_kafka.version()
        if isinstance(version, tuple):
            version = version[0]
        say("client confluent-kafka %s librdkafka %s" % (version, confluent_kafka.libversion()[0]))
        return 0
    if len(argv) < 8 or any("=" not in a for a in argv[8:]):
        print(__doc__, file=sys.stderr)
        return 2
    bootstrap, group, topic, strategies, client_id, rack, instance_id = argv[1:8]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "partition.assignment.strategy": strategies,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if rack != "-":
        conf["client.rack"] = rack
    if instance_id != "-":
        conf["group.instance.id"] = instance_id
    for kv in argv[8:]:
        key, value = kv.split("=", 1)
        conf[key] = value

    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))

    consumer = Consumer(conf)

    def commit():
        # With no offsets given, librdkafka commits what poll has returned
        # for the current assignment; in the revoke callback that still
        # includes the partitions being revoked.
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                print("commit: %s" % e, file=sys.stderr, flush=True)

    def on_assign(_, partitions):
        # Returning without assign() lets confluent-kafka apply the
        # assignment itself: assign() for eager strategies,
        # incremental_assign() for cooperative ones.
        say(listing("assigned", partitions))

    def on_revoke(_, partitions):
        commit()
        say(listing("revoked", partitions))

    def on_lost(_, partitions):
        say(listing("lost", partitions))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    say("ready")
    try:
        while not stopping:
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                print("poll: %s" % msg.error(), file=sys.stderr, flush=True)
                continue
            say("%s/%d@%d" % (msg.topic(), msg.partition(), msg.offset()))
    finally:
        say("closing")
        commit()
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
