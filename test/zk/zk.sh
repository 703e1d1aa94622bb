#!/bin/bash
# zk.sh — start / stop a throw-away standalone ZooKeeper 3.8 server for tests.
#
#   zk.sh start DIR [PORT]   start a server whose files live in DIR (config,
#                            data, log, pid, port); PORT is chosen among the
#                            free ports when omitted. Waits (bounded) until
#                            the server serves clients (its "srvr" answer
#                            names its mode), writes DIR/zk.pid and
#                            DIR/zk.port and prints the port.
#   zk.sh stop DIR           SIGTERM the server, wait (bounded), then SIGKILL.
#   zk.sh status DIR         exit 0 and print the port if the server serves.
#
# DIR/zoo-extra.cfg, when the caller wrote one, is added to the server's
# configuration (a secureClientPort, ssl.*, authProvider.*); a
# @SECURE_PORT@ in it becomes a free port, written to DIR/zk.secure_port
# (kept by restarts; picked again, with the client port, when the server
# died at its start), and the start then also waits until it listens.
#
# The server binds 127.0.0.1 only. Works as root and as an unprivileged user
# (everything is under DIR). Environment knobs:
#   ZK_JAR            default /usr/share/java/zookeeper.jar
#   ZK_START_TIMEOUT  seconds to wait until the server serves (default 30)
#   ZK_STOP_TIMEOUT   seconds to wait after SIGTERM before SIGKILL (default 10)
#   JAVA              java binary (default: java from PATH)
set -u

ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
# the manifest of Debian's zookeeper.jar leaves out netty-codec, which the
# Netty connection factory (a secure port's) needs
NETTY_CODEC_JAR=${NETTY_CODEC_JAR:-/usr/share/java/netty-codec.jar}
ZK_START_TIMEOUT=${ZK_START_TIMEOUT:-30}
ZK_STOP_TIMEOUT=${ZK_STOP_TIMEOUT:-10}
JAVA=${JAVA:-java}
# set by launch when it picked DIR/zk.secure_port itself (not kept from
# the caller or an earlier start)
SECURE_PORT_PICKED=0

die() { echo "zk.sh: $*" >&2; exit 1; }

# serving PORT: succeed when the server on PORT serves clients (2 s bound).
# "ruok" is not enough: the server answers "imok" as soon as it accepts
# connections, before it has loaded its data (and taken a snapshot), and
# closes every client connection until then, which under load lasts
# seconds; "srvr" names the server's mode only once it serves.
serving() {
    local port=$1 answer
    answer=$(timeout 2 bash -c '
        exec 3<>/dev/tcp/127.0.0.1/'"$port"' || exit 1
        printf srvr >&3
        cat <&3' 2>/dev/null) || return 1
    case $answer in
        *"Mode: "*) return 0 ;;
        *) return 1 ;;
    esac
}

# port_in_use PORT: succeed when something listens on PORT (any address).
port_in_use() {
    [ -n "$(ss -Htln "sport = :$1" 2>/dev/null)" ]
}

# pick_port: print a port nobody listens on. Ports 20000..29999 stay clear of
# the ephemeral range and of PostgreSQL::Test::Cluster's choices as far as
# possible; a lost race is handled by the caller retrying with another port.
pick_port() {
    local i p
    for i in $(seq 1 200); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 10000 ))
        port_in_use "$p" || { echo "$p"; return 0; }
    done
    return 1
}

# alive PID: the process exists (and is not a zombie).
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

# launch DIR PORT: write the config, start the server, wait until it serves.
# Returns 0 when it answers, 2 when the process died (e.g. port taken),
# 1 on timeout.
launch() {
    local dir=$1 port=$2 pid deadline
    mkdir -p "$dir/data" || die "cannot create $dir/data"
    cat > "$dir/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=1000
maxSessionTimeout=120000
maxClientCnxns=0
EOF
    if [ -f "$dir/zoo-extra.cfg" ]; then
        if grep -q @SECURE_PORT@ "$dir/zoo-extra.cfg"; then
            if [ ! -f "$dir/zk.secure_port" ]; then
                pick_port > "$dir/zk.secure_port" || die "no free port found"
                SECURE_PORT_PICKED=1
            fi
            sed "s/@SECURE_PORT@/$(cat "$dir/zk.secure_port")/g" "$dir/zoo-extra.cfg" >> "$dir/zoo.cfg"
        else
            cat "$dir/zoo-extra.cfg" >> "$dir/zoo.cfg"
        fi
    fi
    # setsid + all fds redirected: the server must not keep the caller's
    # pipes open (a TAP harness would otherwise wait for it forever).
    setsid "$JAVA" -Xmx256m -Dzookeeper.admin.enableServer=false \
        -Dzookeeper.jmx.log4j.disable=true \
        -cp "$ZK_JAR:$NETTY_CODEC_JAR" org.apache.zookeeper.server.ZooKeeperServerMain \
        "$dir/zoo.cfg" </dev/null >>"$dir/zk.log" 2>&1 &
    pid=$!
    echo "$pid" > "$dir/zk.pid"
    deadline=$(( $(date +%s) + ZK_START_TIMEOUT ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if ! alive "$pid"; then
            rm -f "$dir/zk.pid"
            return 2
        fi
        if serving "$port" && { [ ! -f "$dir/zk.secure_port" ] ||
            port_in_use "$(cat "$dir/zk.secure_port")"; }; then
            echo "$port" > "$dir/zk.port"
            return 0
        fi
        sleep 0.2   # polling interval of a bounded wait, not a race cover-up
    done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$dir/zk.pid"
    return 1
}

cmd_start() {
    local dir=${1:?usage: zk.sh start DIR [PORT]} port=${2:-} attempt rc
    command -v "$JAVA" >/dev/null || die "java not found"
    [ -r "$ZK_JAR" ] || die "cannot read $ZK_JAR"
    mkdir -p "$dir" || die "cannot create $dir"
    dir=$(cd "$dir" && pwd)
    if [ -f "$dir/zk.pid" ] && alive "$(cat "$dir/zk.pid")"; then
        die "a server from $dir is already running (pid $(cat "$dir/zk.pid"))"
    fi
    if [ -n "$port" ]; then
        launch "$dir" "$port"; rc=$?
        [ $rc -eq 0 ] || { tail -n 20 "$dir/zk.log" >&2; die "server on port $port did not start (rc $rc)"; }
    else
        for attempt in 1 2 3 4 5; do
            port=$(pick_port) || die "no free port found"
            launch "$dir" "$port"; rc=$?
            [ $rc -eq 0 ] && break
            [ $rc -eq 1 ] && { tail -n 20 "$dir/zk.log" >&2; die "server on port $port did not serve within ${ZK_START_TIMEOUT}s"; }
            # rc 2: the process died, most likely a lost race for a port:
            # the client port, or the secure port picked for it (servers
            # started at the same moment can pick the same free port), so
            # the next attempt picks both again; a secure port the caller
            # or an earlier start chose is kept
            if [ "$SECURE_PORT_PICKED" = 1 ]; then
                rm -f "$dir/zk.secure_port"
                SECURE_PORT_PICKED=0
            fi
        done
        [ $rc -eq 0 ] || { tail -n 20 "$dir/zk.log" >&2; die "server did not start after $attempt attempts"; }
    fi
    echo "$port"
}

cmd_stop() {
    local dir=${1:?usage: zk.sh stop DIR} pid deadline
    [ -f "$dir/zk.pid" ] || return 0          # not running: nothing to do
    pid=$(cat "$dir/zk.pid")
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null
        deadline=$(( $(date +%s) + ZK_STOP_TIMEOUT ))
        while alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do
            sleep 0.1
        done
        if alive "$pid"; then
            kill -KILL "$pid" 2>/dev/null
            deadline=$(( $(date +%s) + 5 ))
            while alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do
                sleep 0.1
            done
        fi
        alive "$pid" && die "server pid $pid survived SIGKILL"
    fi
    rm -f "$dir/zk.pid"
    return 0
}

cmd_status() {
    local dir=${1:?usage: zk.sh status DIR} port
    [ -f "$dir/zk.port" ] || return 1
    port=$(cat "$dir/zk.port")
    serving "$port" && echo "$port"
}

case "${1:-}" in
    start)  shift; cmd_start "$@" ;;
    stop)   shift; cmd_stop "$@" ;;
    status) shift; cmd_status "$@" ;;
    *) echo "usage: zk.sh start DIR [PORT] | stop DIR | status DIR" >&2; exit 2 ;;
esac
