#!/usr/bin/env bash
# fetch-kafka.sh: lay out Apache Kafka's broker and Java client jars, resolved
# from Maven Central with Maven, in the cache that the Makefile owns.
#
#   internal/testutil/realkafka/fetch-kafka.sh [CACHE_DIR]
#   internal/testutil/realkafka/fetch-kafka.sh --stamp     print the STAMP a complete cache has
#
# CACHE_DIR defaults to $KAFKA_CACHE, else <repo>/.cache/kafka/$KAFKA_VERSION.
# It ends up holding
#   libs/      the broker's runtime classpath (kafka_2.13 + deps, slf4j-simple)
#   clients/   kafka-clients + deps, for the Java client programs
#   VERSION    the Kafka version
#   STAMP      "<version> <sha256 of the two poms>", written last: a cache is
#              complete when its STAMP matches, so editing a pom refetches.
# A run that finds STAMP matching does nothing, so repeated runs never fetch
# again. Concurrent runs (parallel test packages) serialise on a lock file.
# internal/testutil/realkafka computes the same stamp (cache.go).
set -euo pipefail

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
poms="$repo/testdata/realkafka"
stamp="$KAFKA_VERSION $(cat "$poms/broker/pom.xml" "$poms/clients/pom.xml" | sha256sum | cut -d' ' -f1)"
if [[ "${1:-}" == --stamp ]]; then echo "$stamp"; exit 0; fi
cache="${1:-${KAFKA_CACHE:-$repo/.cache/kafka/$KAFKA_VERSION}}"

complete() { [[ -f "$cache/STAMP" && "$(cat "$cache/STAMP")" == "$stamp" ]]; }

if complete; then exit 0; fi

for tool in mvn java flock; do
  command -v "$tool" >/dev/null || { echo "fetch-kafka: $tool not found on PATH" >&2; exit 1; }
done

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
# Another run may have finished while this one waited for the lock.
if complete; then exit 0; fi

stage="$(mktemp -d "$cache/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

copy() { # pom-dir out-dir
  # Runtime scope is what the broker's own distribution ships (no test or
  # provided jars). Maven's output is shown only when it fails: even -q -B
  # prints stray terminal escapes.
  local log="$stage/mvn-$1.log"
  if ! mvn -B -q -Dstyle.color=never -f "$poms/$1/pom.xml" \
    -Dkafka.version="$KAFKA_VERSION" \
    dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$2" >"$log" 2>&1; then
    cat "$log" >&2
    echo "fetch-kafka: Maven could not resolve $1 (Kafka $KAFKA_VERSION); is Maven Central reachable?" >&2
    return 1
  fi
}

echo "fetch-kafka: resolving Kafka $KAFKA_VERSION with Maven into $cache" >&2
copy broker "$stage/libs"
copy clients "$stage/clients"
ls "$stage/libs/kafka_2.13-$KAFKA_VERSION.jar" "$stage/clients/kafka-clients-$KAFKA_VERSION.jar" >/dev/null

rm -rf "$cache/libs" "$cache/clients" "$cache/STAMP"
mv "$stage/libs" "$cache/libs"
mv "$stage/clients" "$cache/clients"
echo "$KAFKA_VERSION" >"$cache/VERSION"
echo "$stamp" >"$cache/STAMP"
echo "fetch-kafka: done ($(ls "$cache/libs" | wc -l) broker jars, $(ls "$cache/clients" | wc -l) client jars)" >&2
