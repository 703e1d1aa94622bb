/*
 * ZkTool — one-shot ZooKeeper operations for zklock's fault-injection and
 * security tests (test/t/2xx-9xx), next to the interactive CuratorPeer.
 *
 * Build:  javac -cp /usr/share/java/curator-recipes.jar -d BUILD test/java/ZkTool.java
 * Run:    java -cp BUILD:/usr/share/java/curator-recipes.jar ZkTool <command> <connect> ...
 *
 * Every command prints its result on stdout and exits 0; a failure prints
 * "error <msg>" and exits 1. Every wait inside is bounded.
 *
 *   expire CONNECT SESSION_HEX PASSWD_HEX
 *       Open a second handle on an existing session (id and password as in
 *       $PGDATA/zklock.session) and close it: the server ends the session, so
 *       its ephemeral nodes go and its owner gets SESSION_EXPIRED.
 *       The close is verified by attaching again (Expired expected).
 *       -> "expired 0x<id> attempts=<n>"
 *   tree CONNECT PATH
 *       Every node under PATH (PATH included), one per line, depth first,
 *       "/zookeeper" skipped. -> lines, then "end N"
 *   stat CONNECT PATH
 *       -> "stat PATH czxid=<dec> ephemeralOwner=0x<hex> numChildren=<n>" | "nonode PATH"
 *   acl CONNECT PATH [USER:PASSWORD]
 *       -> "acl PATH <scheme>:<id>:<perms> ..." | "nonode PATH" | "noauth PATH"
 *   delete CONNECT PATH [USER:PASSWORD]
 *       Delete PATH (as an unauthenticated client unless USER:PASSWORD is
 *       given, then with that digest auth).
 *       -> "deleted PATH" | "noauth PATH" | "nonode PATH" | "notempty PATH"
 *   create CONNECT PATH [USER:PASSWORD]
 *       Create PATH as an EPHEMERAL node with an open ACL (gone when the tool exits).
 *       -> "created PATH" | "noauth PATH" | "nonode PATH" | "exists PATH"
 *   setdata CONNECT PATH TEXT [USER:PASSWORD]
 *       -> "set PATH" | "noauth PATH" | "nonode PATH"
 *   createnode CONNECT PATH MODE ACL [USER:PASSWORD]
 *       Create PATH (parent must exist) as MODE: persistent,
 *       persistent_sequential or container, with ACL "creator" (all rights
 *       for the digest identity USER:PASSWORD only, which is then required)
 *       or PERMS letters of rwcda for world:anyone. The node outlives the
 *       tool: the caller deletes it.
 *       -> "created <actual path>" | "noauth PATH" | "nonode PATH" | "exists PATH"
 *   setacl CONNECT PATH PERMS [USER:PASSWORD]
 *       Replace the ACL of PATH by world:anyone:PERMS (PERMS: letters of
 *       rwcda, as the acl command prints them; any version).
 *       -> "setacl PATH" | "noauth PATH" | "nonode PATH"
 *   hammer CONNECT mutex|semaphore PATH THREADS DURATION_MS HOLD_MS MAX_LEASES OUTFILE
 *       Curator InterProcessMutex / InterProcessSemaphoreV2(PATH, MAX_LEASES)
 *       on THREADS threads for DURATION_MS: acquire (2 s timeout), record,
 *       hold HOLD_MS, release. Writes one line per hold to OUTFILE:
 *       "curator-T<i> <token> <start_us> <end_us>" where token is the czxid
 *       of the lock/lease node, start_us is taken after the acquire returned
 *       and end_us before the release is called (epoch microseconds).
 *       Errors of single rounds (connection loss during a leader election)
 *       are counted, not fatal. -> "hammer done holds=<n> errors=<n>"
 *   sessions QUORUM DATADIR...
 *       ZooKeeper's own record of when sessions began and ended: the
 *       createSession and closeSession transactions of the transaction logs
 *       under each DATADIR (a server's dataDir or dataLogDir), with the
 *       leader's wall-clock time (ms) the transaction was proposed at.  An
 *       expiry and a close by a client are both a closeSession; an expiry's
 *       cxid is 0.  A transaction counts when at least QUORUM of the logs
 *       hold it (1 for a standalone server, 2 of an ensemble of 3: a
 *       transaction a majority logged is committed; one logged by a leader
 *       that died before a majority did may never have been).  Reads logs
 *       that are still being written.
 *       -> "create 0x<id> <time_ms> <zxid hex> <timeout_ms>" and
 *          "close 0x<id> <time_ms> <zxid hex> <cxid>", by zxid, then "end N"
 */

import java.io.FileWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;

public class ZkTool {

    static final int CONNECT_WAIT_S = 20;

    static void out(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static long parseHex(String s) {
        if (s.startsWith("0x") || s.startsWith("0X"))
            s = s.substring(2);
        return Long.parseUnsignedLong(s, 16);
    }

    static byte[] hexBytes(String s) {
        if (s.length() % 2 != 0)
            throw new IllegalArgumentException("odd hex length");
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    /** A plain ZooKeeper handle, connected (bounded wait), optionally authenticated. */
    static ZooKeeper connect(String connect, String auth) throws Exception {
        CountDownLatch up = new CountDownLatch(1);
        Watcher w = ev -> {
            if (ev.getState() == Watcher.Event.KeeperState.SyncConnected)
                up.countDown();
        };
        ZooKeeper zk = new ZooKeeper(connect, 10_000, w);
        if (!up.await(CONNECT_WAIT_S, TimeUnit.SECONDS)) {
            zk.close();
            throw new IllegalStateException("could not connect to " + connect);
        }
        if (auth != null)
            zk.addAuthInfo("digest", auth.getBytes(StandardCharsets.UTF_8));
        return zk;
    }

    /*
     * Attach to the session and close it. The session's owner may reconnect
     * at the same moment and take the session back (the server then drops
     * our connection and our close never arrives), so attach again
     * afterwards: only an Expired answer proves the session is over.
     */
    static void expire(String connect, String sid, String pw) throws Exception {
        long id = parseHex(sid);
        byte[] passwd = hexBytes(pw);
        for (int attempt = 1; attempt <= 10; attempt++) {
            CountDownLatch up = new CountDownLatch(1);
            final boolean[] expired = {false};
            ZooKeeper zk = new ZooKeeper(connect, 10_000, ev -> {
                if (ev.getState() == Watcher.Event.KeeperState.SyncConnected)
                    up.countDown();
                if (ev.getState() == Watcher.Event.KeeperState.Expired) {
                    expired[0] = true;
                    up.countDown();
                }
            }, id, passwd);
            if (!up.await(CONNECT_WAIT_S, TimeUnit.SECONDS)) {
                zk.close();
                throw new IllegalStateException("could not attach to session 0x" + Long.toHexString(id));
            }
            if (expired[0]) {
                zk.close();
                if (attempt == 1)
                    throw new IllegalStateException("session 0x" + Long.toHexString(id) + " had already expired");
                out("expired 0x" + String.format("%016x", id) + " attempts=" + (attempt - 1));
                return;
            }
            zk.close();   // closes the session on the server, unless it was taken back
        }
        throw new IllegalStateException("session 0x" + Long.toHexString(id) + " survived 10 close attempts");
    }

    static void tree(ZooKeeper zk, String path, List<String> acc) throws Exception {
        if (path.equals("/zookeeper"))
            return;
        acc.add(path);
        List<String> kids;
        try {
            kids = zk.getChildren(path, false);
        } catch (KeeperException.NoNodeException e) {
            return;
        }
        java.util.Collections.sort(kids);
        for (String k : kids)
            tree(zk, ZKPaths.makePath(path, k), acc);
    }

    static String perms(int p) {
        StringBuilder sb = new StringBuilder();
        if ((p & 1) != 0) sb.append('r');
        if ((p & 2) != 0) sb.append('w');
        if ((p & 4) != 0) sb.append('c');
        if ((p & 8) != 0) sb.append('d');
        if ((p & 16) != 0) sb.append('a');
        return sb.toString();
    }

    /** The inverse of perms(): "rwcda" letters to ZooDefs.Perms bits. */
    static int permBits(String s) {
        int p = 0;
        for (char c : s.toCharArray()) {
            switch (c) {
                case 'r': p |= 1; break;
                case 'w': p |= 2; break;
                case 'c': p |= 4; break;
                case 'd': p |= 8; break;
                case 'a': p |= 16; break;
                default: throw new IllegalArgumentException("bad permission letter '" + c + "'");
            }
        }
        return p;
    }

    static void hammer(String connect, String kind, String path, int threads, long durationMs,
                       long holdMs, int maxLeases, String outFile) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(15_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new ExponentialBackoffRetry(100, 20, 1_000))
                .build();
        client.start();
        if (!client.blockUntilConnected(CONNECT_WAIT_S, TimeUnit.SECONDS))
            throw new IllegalStateException("Curator could not connect to " + connect);
        final long end = System.currentTimeMillis() + durationMs;
        final AtomicInteger holds = new AtomicInteger(), errors = new AtomicInteger();
        final List<String> lines = java.util.Collections.synchronizedList(new ArrayList<>());
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final String who = "curator-T" + t;
            Thread th = new Thread(() -> {
                /* exposes the node of the hold, for its czxid */
                class Mutex extends InterProcessMutex {
                    Mutex() { super(client, path); }
                    String node() { return getLockPath(); }
                }
                Mutex mutex = kind.equals("mutex") ? new Mutex() : null;
                InterProcessSemaphoreV2 sem = kind.equals("semaphore")
                        ? new InterProcessSemaphoreV2(client, path, maxLeases) : null;
                while (System.currentTimeMillis() < end) {
                    try {
                        String node;
                        Lease lease = null;
                        if (mutex != null) {
                            if (!mutex.acquire(2, TimeUnit.SECONDS))
                                continue;
                            node = mutex.node();
                        } else {
                            lease = sem.acquire(2, TimeUnit.SECONDS);
                            if (lease == null)
                                continue;
                            node = ZKPaths.makePath(path, "leases", lease.getNodeName());
                        }
                        long start = nowUs();
                        long token = -1;
                        try {
                            Stat st = client.checkExists().forPath(node);
                            if (st != null)
                                token = st.getCzxid();
                        } catch (Exception e) {
                            /* token unknown (connection loss): recorded as -1 */
                        }
                        Thread.sleep(holdMs);
                        long stop = nowUs();
                        lines.add(who + " " + token + " " + start + " " + stop);
                        holds.incrementAndGet();
                        if (mutex != null)
                            mutex.release();
                        else
                            sem.returnLease(lease);
                    } catch (InterruptedException e) {
                        return;
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        System.err.println(who + ": " + e);
                    }
                }
            }, who);
            th.setDaemon(true);
            ts.add(th);
            th.start();
        }
        for (Thread th : ts)
            th.join(durationMs + 60_000);
        try (PrintWriter pw = new PrintWriter(new FileWriter(outFile))) {
            synchronized (lines) {
                for (String l : lines)
                    pw.println(l);
            }
        }
        client.close();
        out("hammer done holds=" + holds.get() + " errors=" + errors.get());
    }

    static long nowUs() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1_000;
    }

    static void sessions(int quorum, String[] dirs) throws Exception {
        java.util.TreeMap<Long, String> line = new java.util.TreeMap<>();
        java.util.HashMap<Long, Integer> seen = new java.util.HashMap<>();
        for (String d : dirs) {
            java.io.File v2 = new java.io.File(d, "version-2");
            java.io.File dir = v2.isDirectory() ? v2 : new java.io.File(d);
            java.util.HashSet<Long> here = new java.util.HashSet<>();
            org.apache.zookeeper.server.persistence.FileTxnLog log =
                new org.apache.zookeeper.server.persistence.FileTxnLog(dir);
            org.apache.zookeeper.server.persistence.TxnLog.TxnIterator it = log.read(0);
            try {
                while (it.getHeader() != null) {
                    org.apache.zookeeper.txn.TxnHeader h = it.getHeader();
                    String l = null;
                    if (h.getType() == org.apache.zookeeper.ZooDefs.OpCode.createSession) {
                        int to = it.getTxn() instanceof org.apache.zookeeper.txn.CreateSessionTxn
                            ? ((org.apache.zookeeper.txn.CreateSessionTxn) it.getTxn()).getTimeOut() : -1;
                        l = String.format("create 0x%016x %d %x %d", h.getClientId(), h.getTime(), h.getZxid(), to);
                    } else if (h.getType() == org.apache.zookeeper.ZooDefs.OpCode.closeSession) {
                        l = String.format("close 0x%016x %d %x %d", h.getClientId(), h.getTime(), h.getZxid(), h.getCxid());
                    }
                    if (l != null && here.add(h.getZxid())) {
                        line.put(h.getZxid(), l);
                        seen.merge(h.getZxid(), 1, Integer::sum);
                    }
                    if (!it.next())
                        break;
                }
            } finally {
                it.close();
                log.close();
            }
        }
        int n = 0;
        for (java.util.Map.Entry<Long, String> e : line.entrySet())
            if (seen.get(e.getKey()) >= quorum) {
                out(e.getValue());
                n++;
            }
        out("end " + n);
    }

    public static void main(String[] a) {
        int rc = 0;
        try {
            if (a.length < 2)
                throw new IllegalArgumentException("usage: ZkTool COMMAND CONNECT ...");
            String cmd = a[0], connect = a[1];
            switch (cmd) {
                case "expire":
                    expire(connect, a[2], a[3]);
                    break;
                case "sessions":
                    sessions(Integer.parseInt(connect), java.util.Arrays.copyOfRange(a, 2, a.length));
                    break;
                case "tree": {
                    ZooKeeper zk = connect(connect, null);
                    List<String> acc = new ArrayList<>();
                    tree(zk, a[2], acc);
                    for (String p : acc)
                        out(p);
                    out("end " + acc.size());
                    zk.close();
                    break;
                }
                case "stat": {
                    ZooKeeper zk = connect(connect, null);
                    Stat st = zk.exists(a[2], false);
                    if (st == null)
                        out("nonode " + a[2]);
                    else
                        out("stat " + a[2] + " czxid=" + st.getCzxid() + " ephemeralOwner=0x"
                            + String.format("%016x", st.getEphemeralOwner())
                            + " numChildren=" + st.getNumChildren());
                    zk.close();
                    break;
                }
                case "acl": {
                    ZooKeeper zk = connect(connect, a.length > 3 ? a[3] : null);
                    try {
                        List<ACL> acl = zk.getACL(a[2], new Stat());
                        StringBuilder sb = new StringBuilder("acl " + a[2]);
                        for (ACL x : acl)
                            sb.append(' ').append(x.getId().getScheme()).append(':')
                              .append(x.getId().getId()).append(':').append(perms(x.getPerms()));
                        out(sb.toString());
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "delete": {
                    ZooKeeper zk = connect(connect, a.length > 3 ? a[3] : null);
                    try {
                        zk.delete(a[2], -1);
                        out("deleted " + a[2]);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    } catch (KeeperException.NotEmptyException e) {
                        out("notempty " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "create": {
                    ZooKeeper zk = connect(connect, a.length > 3 ? a[3] : null);
                    try {
                        zk.create(a[2], new byte[0], org.apache.zookeeper.ZooDefs.Ids.OPEN_ACL_UNSAFE,
                                  org.apache.zookeeper.CreateMode.EPHEMERAL);
                        out("created " + a[2]);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    } catch (KeeperException.NodeExistsException e) {
                        out("exists " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "setdata": {
                    ZooKeeper zk = connect(connect, a.length > 4 ? a[4] : null);
                    try {
                        zk.setData(a[2], a[3].getBytes(StandardCharsets.UTF_8), -1);
                        out("set " + a[2]);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "createnode": {
                    String auth = a.length > 5 ? a[5] : null;
                    ZooKeeper zk = connect(connect, auth);
                    org.apache.zookeeper.CreateMode mode;
                    switch (a[3]) {
                        case "persistent": mode = org.apache.zookeeper.CreateMode.PERSISTENT; break;
                        case "persistent_sequential": mode = org.apache.zookeeper.CreateMode.PERSISTENT_SEQUENTIAL; break;
                        case "container": mode = org.apache.zookeeper.CreateMode.CONTAINER; break;
                        default: throw new IllegalArgumentException("bad mode " + a[3]);
                    }
                    List<ACL> acl;
                    if (a[4].equals("creator")) {
                        if (auth == null)
                            throw new IllegalArgumentException("ACL creator needs USER:PASSWORD");
                        acl = org.apache.zookeeper.ZooDefs.Ids.CREATOR_ALL_ACL;
                    } else {
                        acl = new ArrayList<>();
                        acl.add(new ACL(permBits(a[4]), org.apache.zookeeper.ZooDefs.Ids.ANYONE_ID_UNSAFE));
                    }
                    try {
                        String made = zk.create(a[2], new byte[0], acl, mode);
                        out("created " + made);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    } catch (KeeperException.NodeExistsException e) {
                        out("exists " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "setacl": {
                    ZooKeeper zk = connect(connect, a.length > 4 ? a[4] : null);
                    try {
                        List<ACL> acl = new ArrayList<>();
                        acl.add(new ACL(permBits(a[3]), org.apache.zookeeper.ZooDefs.Ids.ANYONE_ID_UNSAFE));
                        zk.setACL(a[2], acl, -1);
                        out("setacl " + a[2]);
                    } catch (KeeperException.NoAuthException e) {
                        out("noauth " + a[2]);
                    } catch (KeeperException.NoNodeException e) {
                        out("nonode " + a[2]);
                    }
                    zk.close();
                    break;
                }
                case "hammer":
                    hammer(connect, a[2], a[3], Integer.parseInt(a[4]), Long.parseLong(a[5]),
                           Long.parseLong(a[6]), Integer.parseInt(a[7]), a[8]);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + cmd);
            }
        } catch (Throwable e) {
            out("error " + e.toString().replace('\n', ' '));
            rc = 1;
        }
        System.exit(rc);
    }
}
