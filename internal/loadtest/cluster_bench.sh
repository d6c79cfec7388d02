#!/usr/bin/env bash
# `make bench-loadtest-cluster`: a loadtest load on kfake, then on a cluster
# of two gateways in front of a kfake upstream in a process of its own.
# The load bootstraps from the first gateway; FindCoordinator sends each
# group's members to the gateway that owns it. The cluster is sampled as
# one target (both gateways are children of one shell), and each
# gateway's share of the CPU and of the groups is printed after.
#
# usage: cluster_bench.sh BIN WORKDIR [loadtest flags...]
set -euo pipefail
bin=$1 dir=$2
shift 2
mkdir -p "$dir"

# The upstream: kfake in its own process, which serves until its stdin ends.
mkfifo "$dir/kfake.in" 2>/dev/null || true
WASMASSIGN_LOADTEST_KFAKE='{"topics":[],"partitions":16}' "$bin" <"$dir/kfake.in" >"$dir/kfake.addr" 2>"$dir/kfake.log" &
kfake=$!
exec 3>"$dir/kfake.in" # held open: kfake serves while this script runs
cleanup() {
	local rc=$?
	# The gateways, not their shell: it exits once they have (SIGTERM hands
	# their groups over), and the script's status stays its own.
	pkill -TERM -f -- "--config $dir/gw-" 2>/dev/null || true
	[ -n "${gws:-}" ] && { wait "$gws" 2>/dev/null || true; }
	exec 3>&-
	wait "$kfake" 2>/dev/null || true
	exit "$rc"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -s "$dir/kfake.addr" ] && break; sleep 0.1; done
upstream=$(head -1 "$dir/kfake.addr")
[ -n "$upstream" ] || { echo "kfake did not start:"; cat "$dir/kfake.log"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
declare -a listen admin
for i in 1 2; do
	listen[$i]=127.0.0.1:$(free_port)
	admin[$i]=127.0.0.1:$(free_port)
	cat >"$dir/gw-$i.toml" <<EOF
[server]
listen = "${listen[$i]}"
advertised_host = "127.0.0.1"
broker_port_base = 0
admin_listen = "${admin[$i]}"
state_dir = ""
[upstream]
brokers = ["$upstream"]
[log]
level = "warn"
[cluster]
name = "bench"
id = "gw-$i"
[[groups]]
match = "*"
initial_rebalance_delay = "0s"
EOF
done

# Both gateways are children of one subshell, which the load samples.
(
	"$bin" serve --config "$dir/gw-1.toml" >"$dir/gw-1.log" 2>&1 &
	"$bin" serve --config "$dir/gw-2.toml" >"$dir/gw-2.log" 2>&1 &
	wait
) &
gws=$!
ready() { curl -sf "http://$1/readyz" >/dev/null; }
for _ in $(seq 300); do ready "${admin[1]}" && ready "${admin[2]}" && break; sleep 0.1; done
ready "${admin[1]}" && ready "${admin[2]}" || { echo "the gateways did not become ready:"; tail -5 "$dir"/gw-*.log; exit 1; }

cpu() { # CPU seconds of the gateway serving on admin address $1
	local pid
	pid=$(pgrep -f -- "--config $dir/gw-$1.toml" | head -1)
	awk '{print ($14+$15+$16+$17)/100}' "/proc/$pid/stat"
}
c1=$(cpu 1) c2=$(cpu 2)
"$bin" loadtest --target kfake --target cluster="${listen[1]}" --pid cluster="$gws" "$@"
d1=$(awk -v a="$c1" -v b="$(cpu 1)" 'BEGIN{print b-a}')
d2=$(awk -v a="$c2" -v b="$(cpu 2)" 'BEGIN{print b-a}')
groups() { curl -sf "http://$1/metrics" | awk '$1=="wasmassign_cluster_owned_groups"{print $2}'; }
echo
echo "per gateway: gw-1 ${d1}s CPU, $(groups "${admin[1]}") groups; gw-2 ${d2}s CPU, $(groups "${admin[2]}") groups (the whole run, join included)"
