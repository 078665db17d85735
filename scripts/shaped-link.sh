# SPDX-License-Identifier: Apache-2.0
# A link of known speed on this machine, for the download benchmark and
# the encoding-choice tests (sourced; needs root). Servers run in a network
# namespace behind a veth pair; the client stays outside. Only the
# server->client direction is shaped (tc tbf on the namespace's end), as a
# download sees it. Addresses are private to this machine.
#
#   link_up TAG OCTET    namespace envd-link-TAG, 10.213.OCTET.1 (outside,
#                        LINK_CLIENT) and 10.213.OCTET.2 (inside, LINK_SERVER)
#   link_shape RATE      tbf at RATE (tc syntax: 1gbit, 100mbit, 20mbit), or
#                        "none" for the bare veth
#   link_exec CMD... &   CMD inside the namespace, in the background only: it
#                        replaces the background subshell, so $! is CMD's own
#                        pid and a kill of $! stops CMD itself
#   link_down            stop what still runs in the namespace, remove it all
#                        (also done on a second link_up)

link_up() {
	LINK_NS=envd-link-$1
	LINK_HOST=el$1h
	LINK_PEER=el$1n
	LINK_CLIENT=10.213.$2.1
	LINK_SERVER=10.213.$2.2
	link_down
	ip netns add "$LINK_NS" || return 1
	ip link add "$LINK_HOST" type veth peer name "$LINK_PEER" || { link_down; return 1; }
	ip link set "$LINK_PEER" netns "$LINK_NS" &&
		ip addr add "$LINK_CLIENT/30" dev "$LINK_HOST" &&
		ip link set "$LINK_HOST" up &&
		ip netns exec "$LINK_NS" ip addr add "$LINK_SERVER/30" dev "$LINK_PEER" &&
		ip netns exec "$LINK_NS" ip link set "$LINK_PEER" up &&
		ip netns exec "$LINK_NS" ip link set lo up || { link_down; return 1; }
}

link_shape() {
	ip netns exec "$LINK_NS" tc qdisc del dev "$LINK_PEER" root 2>/dev/null
	[ "$1" = none ] && return 0
	# The bucket holds about 1 ms at the rate (at least 16 KiB: one GSO
	# packet must fit), the queue 50 ms; what does not fit is dropped and
	# TCP backs off, as on a real bottleneck.
	local bits
	case $1 in
	*gbit) bits=$((${1%gbit} * 1000000000)) ;;
	*mbit) bits=$((${1%mbit} * 1000000)) ;;
	*) echo "link_shape: rate as Ngbit or Nmbit" >&2; return 2 ;;
	esac
	local burst=$((bits / 8 / 1000))
	[ "$burst" -lt 65536 ] && burst=65536
	ip netns exec "$LINK_NS" tc qdisc add dev "$LINK_PEER" root tbf rate "$1" burst "$burst" latency 50ms
}

# Without the exec, $! would be the subshell that runs the function: killing
# it left the server running, orphaned, in the namespace.
link_exec() { exec ip netns exec "$LINK_NS" "$@"; }

link_down() {
	[ -n "${LINK_NS:-}" ] || return 0
	local p
	for p in $(ip netns pids "$LINK_NS" 2>/dev/null); do kill "$p" 2>/dev/null; done
	ip netns del "$LINK_NS" 2>/dev/null
	ip link del "${LINK_HOST:-}" 2>/dev/null
	return 0
}
