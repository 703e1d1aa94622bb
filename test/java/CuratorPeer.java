/*
 * CuratorPeer — a real Apache Curator 5.x client driven by line commands, for
 * zklock's integration tests (the "Java service on another machine" that SQL
 * sessions must exclude and be excluded by).
 *
 * Build:  javac -cp /usr/share/java/curator-recipes.jar -d BUILD test/java/CuratorPeer.java
 * Run:    java -cp BUILD:/usr/share/java/curator-recipes.jar CuratorPeer <connectString>
 *
 * Protocol: one command per line on stdin, one reply line per command on
 * stdout (flushed). Prints "ready" once the ZooKeeper session is connected.
 * IDs are arbitrary tokens chosen by the test.
 *
 *   acquire ID PATH TIMEOUT_MS  InterProcessMutex(PATH).acquire on the thread of
 *                               ID (created on first use; -1 = no timeout).
 *                               An ID is bound to the PATH of its first acquire;
 *                               acquiring again on it is reentrant (Curator's).
 *                               Replies later: "acquired ID" | "timeout ID" |
 *                               "error ID <msg>". The command loop does not
 *                               block: other commands are served meanwhile.
 *   release ID [KIND]           release on ID's thread the most recent hold of ID
 *                               (of KIND when given: mutex, read, write, semmutex,
 *                               lease) -> "released ID" | "error ID <msg>".
 *                               Leases are returned with returnAll.
 *   read ID PATH TIMEOUT_MS [revocable|revocable-notify]
 *   write ID PATH TIMEOUT_MS [revocable|revocable-notify]
 *                               InterProcessReadWriteLock(PATH).readLock() /
 *                               writeLock() acquire on ID's thread (one rw lock
 *                               object per ID, so reentrancy and downgrade are
 *                               Curator's) -> "acquired ID" | "timeout ID" |
 *                               "error ID <msg>". With revocable(-notify) the
 *                               lock is made revocable first (node data empty);
 *                               a revocation request prints "revoked ID", and
 *                               with "revocable" the hold is then released on
 *                               ID's thread and "released ID" printed.
 *   mutex ID PATH TIMEOUT_MS [revocable|revocable-notify]
 *                               InterProcessMutex, possibly revocable (as above).
 *   semmutex ID PATH TIMEOUT_MS InterProcessSemaphoreMutex(PATH).acquire
 *                               -> "acquired ID" | "timeout ID" | "error ID <msg>"
 *   lease ID PATH MAX QTY TIMEOUT_MS
 *                               InterProcessSemaphoreV2(PATH, MAX).acquire(QTY, ..)
 *                               -> "leased ID name1 name2 ..." | "timeout ID" | "error ID <msg>"
 *   multi ID PATH1,PATH2,... TIMEOUT_MS
 *                               InterProcessMultiLock over a mutex per PATH (all
 *                               or none, in the order given) on ID's thread
 *                               -> "acquired ID" | "timeout ID" | "error ID <msg>";
 *                               "release ID" gives all of them back
 *   revoke NODEPATH             Revoker.attemptRevoke -> "revoke NODEPATH ok"
 *   barrier_set PATH            DistributedBarrier.setBarrier -> "barrier_set PATH"
 *   barrier_remove PATH         DistributedBarrier.removeBarrier -> "barrier_removed PATH"
 *   barrier_wait ID PATH TIMEOUT_MS
 *                               waitOnBarrier on ID's thread -> "barrier ID true|false"
 *   denter ID PATH QTY TIMEOUT_MS
 *                               DistributedDoubleBarrier(PATH, QTY).enter on ID's
 *                               thread -> "entered ID true|false"; "entered ID
 *                               false curator-GH-1290:..." when Curator's
 *                               timed enter hung in an untimed wait (see GH1290)
 *   dleave ID TIMEOUT_MS        leave of ID's double barrier -> "left ID true|false"
 *   tcas ID PATH NEW            on ID's thread: DistributedAtomicLong(PATH).get,
 *                               then compareAndSet(the value read, NEW)
 *                               -> "tcasread ID READ", then "tcas ID READ
 *                               true|false" | "error ID <msg>"
 *   tcount ID PATH NEW          on ID's thread: SharedCount(PATH) started, its
 *                               value and version read, then trySetCount(NEW)
 *                               -> "tcountread ID READ", then "tcount ID READ
 *                               VERSION true|false" | "error ID <msg>"
 *   stat PATH                   -> "stat PATH <czxid>" | "nonode PATH"
 *   rwparticipants PATH         -> "rwparticipants PATH full1 full2 ..." read and
 *                                  write lock participants merged in queue order
 *   rwloop ID PATH N SEED HOLD_MS
 *                               N read/write lock operations on ID's thread with a
 *                               fresh InterProcessReadWriteLock(PATH); op i is a
 *                               write iff (7*i + SEED) % 10 == 0; each holds
 *                               HOLD_MS. Prints one "rwev ID i read|write ENTER_US
 *                               EXIT_US" per op (epoch microseconds taken right
 *                               after the acquire and right before the release),
 *                               then "rwloop ID done N" | "error ID <msg>".
 *   mxloop ID PATH DURATION_MS HOLD_MS [PAUSE_MS]
 *                               mutual exclusion loop on ID's thread with one
 *                               InterProcessMutex(PATH), until DURATION_MS passed or
 *                               "stoploop ID": acquire (2 s timeout), take ENTER_US
 *                               right after it returned, read the czxid of the
 *                               holder's own lock node (the fencing token; -1 when
 *                               that read failed), hold HOLD_MS, take EXIT_US, then
 *                               release, then pause PAUSE_MS (default 0) before the
 *                               next round. Failed rounds (timeouts, exceptions) are
 *                               counted, not fatal. At the end prints one "mxev ID
 *                               TOKEN ENTER_US EXIT_US SUSP" per completed section
 *                               (epoch microseconds, Instant.now(); SUSP = how many
 *                               SUSPENDED/LOST connection states Curator reported
 *                               during the section), then "mxloop ID done N
 *                               [KIND=COUNT ...]" with the failed rounds by kind
 *                               (timeout, the exception's class, release:<class>,
 *                               token:<class>, token:nonode) and suspended=S lost=L
 *                               (connection states seen during the whole loop).
 *   semloop ID PATH MAX DURATION_MS HOLD_MS
 *                               the same with one InterProcessSemaphoreV2(PATH, MAX),
 *                               one lease per round: prints "semev ID ENTER_US
 *                               EXIT_US SUSP" per completed section, then "semloop
 *                               ID done N [KIND=COUNT ...]".
 *   stoploop ID                 ask the mxloop/semloop of ID to end after its
 *                               current round -> "stopping ID" (its events and done
 *                               line follow when it ends)
 *   cancel ID                   interrupt ID's thread (a waiting acquire ends with
 *                               "error ID interrupted ...") -> "cancelled ID"
 *   children PATH               -> "children PATH n1 n2 ..." sorted as strings,
 *                                  "nonode PATH" when PATH does not exist
 *   participants PATH           -> "participants PATH full1 full2 ..." in
 *                                  InterProcessMutex.getParticipantNodes order
 *   exists PATH                 -> "exists PATH true|false"
 *   ephemeral PATH              create PATH as an EPHEMERAL node of this peer's
 *                               session (parents as containers), with no data
 *                               -> "ephemeral PATH"
 *   delete PATH                 guaranteed delete, NoNode ok -> "deleted PATH"
 *   delete_waiter PATH...       (on a thread of its own, trying for up to
 *                               10 s) delete one lock node of a zklock
 *                               session (JSON data; for the first 5 s one
 *                               right behind a node of its own cluster)
 *                               that is not the lowest under a PATH, in one
 *                               transaction with a check that the lowest
 *                               is still there, so never a holder's by the
 *                               queue -> "deleted_waiter PATH/NODE", or
 *                               "nowaiter PATH [why]"
 *   get PATH                    -> "data PATH <text>" | "nonode PATH"
 *   set PATH TEXT               -> "set PATH" | "nonode PATH"
 *   latch_start ID PATH LID     LeaderLatch(PATH, LID).start() under the name ID
 *                               -> "latch ID started"; later, from its listener,
 *                               "isleader ID" / "notleader ID", each after
 *                               "leadership ID on|off US" (epoch microseconds
 *                               when the listener was called)
 *   latch_has ID                -> "latchhas ID true|false" (hasLeadership)
 *   latch_leader ID             -> "latchleader ID <id>" (getLeader().getId())
 *   latch_parts ID              -> "latchparts ID id:leader ..." (getParticipants,
 *                                  in order; an empty id is shown as "")
 *   latch_close ID              close the latch -> "leadership ID closed US" (when close was asked), "latch ID closed"
 *   selector_start ID PATH SID  LeaderSelector(PATH) with id SID (no id when SID
 *                               is "-"), started once; takeLeadership prints
 *                               "selected ID" and keeps leadership until
 *                               "selector_yield ID" -> "yielded ID"
 *   selector_parts ID           -> "selectorparts ID id:leader ..."
 *   selector_close ID           -> "selector ID closed"
 *   ping                        -> "pong"
 *   expire SESSION_HEX PASSWD_HEX
 *                               close that session from outside, as ZkTool's
 *                               expire does (compiled with it), without the
 *                               start of a JVM: -> "expired 0x<id> attempts=<n>"
 *   states                      from now on print "state NAME US SID" (epoch
 *                               microseconds; SID the client's session id then)
 *                               on every connection state Curator reports
 *                               (SUSPENDED, RECONNECTED, LOST, ...): a lock
 *                               Curator holds is uncertain from SUSPENDED and
 *                               certainly gone at LOST -> "states on SID"
 *   quit                        close Curator, exit 0
 *
 * Anything that fails outside an ID replies "error <command> <msg>".
 *
 * Curator mutexes are owned by the acquiring thread, so every ID has its own
 * single-thread executor: acquire and release of one ID run on the same thread.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorPeer {

    /** One lock owner: a dedicated thread and the mutex it acquires. */
    private static final class Owner {
        final String id;
        final ExecutorService thread;
        InterProcessMutex mutex;   // touched only from 'thread'
        String path;               // the lock path this ID is bound to
        Future<?> current;         // last task submitted (for cancel)
        InterProcessReadWriteLock rw;  // read/write lock this ID is bound to
        String rwPath;
        InterProcessMutex rmutex;  // the "mutex" command's mutex
        String rmutexPath;
        DistributedDoubleBarrier dbarrier;
        final Deque<Held> held = new ArrayDeque<>();   // touched only from 'thread'

        Owner(String id) {
            this.id = id;
            this.thread = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "owner-" + id);
                t.setDaemon(true);
                return t;
            });
        }
    }

    interface Releaser { void release() throws Exception; }

    /** One hold of an owner: what it is and how to give it back. */
    private static final class Held {
        final String kind;
        final Object lock;         // the recipe object (to find a revoked hold)
        final Releaser rel;
        Held(String kind, Object lock, Releaser rel) { this.kind = kind; this.lock = lock; this.rel = rel; }
    }

    private static final Object OUT_LOCK = new Object();
    private static final Map<String, Owner> owners = new ConcurrentHashMap<>();
    private static CuratorFramework client;
    private static String connectString;

    /** Print one reply line and flush; replies from several threads never interleave. */
    static void reply(String line) {
        synchronized (OUT_LOCK) {
            System.out.println(line);
            System.out.flush();
        }
    }

    /**
     * delete_waiter: a zklock session's lock node that is not the lowest,
     * deleted only while the lowest is still there (one transaction).
     */
    static void deleteWaiter(String[] paths) {
        // up to 10 s for a moment when a SQL session waits on one of them
        long until = System.nanoTime() + 10_000_000_000L;
        String why = "";
        while (System.nanoTime() < until) {
            // the worst moment first: a waiter right behind a node of its
            // own cluster (a local handover gives it the lock); after 5 s any
            boolean behindOwn = System.nanoTime() < until - 5_000_000_000L;
            for (String path : paths) {
                String r = tryDeleteWaiter(path, behindOwn);
                if (r == null)
                    return;
                if (!r.isEmpty())
                    why = r;
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                break;
            }
        }
        reply(("nowaiter " + String.join(",", paths) + " " + why).trim());
    }

    /** One try of delete_waiter: null when a node was deleted, else why not. */
    static String tryDeleteWaiter(String path, boolean behindOwn) {
        try {
            List<String> kids = new ArrayList<>(client.getChildren().forPath(path));
            kids.sort((a, b) -> a.substring(a.lastIndexOf('-') + 1).compareTo(b.substring(b.lastIndexOf('-') + 1)));
            List<String> sql = new ArrayList<>();
            String prevCluster = null;
            for (int i = 0; i < kids.size(); i++) {
                String cluster = null;
                try {
                    byte[] d = client.getData().forPath(path + "/" + kids.get(i));
                    String data = d == null ? "" : new String(d, StandardCharsets.UTF_8);
                    java.util.regex.Matcher m = java.util.regex.Pattern
                        .compile("\\{\"cluster_name\":\"([^\"]*)\"").matcher(data);
                    if (m.lookingAt())
                        cluster = m.group(1);
                } catch (KeeperException.NoNodeException e) {
                    // gone meanwhile
                }
                if (i > 0 && cluster != null && (!behindOwn || cluster.equals(prevCluster)))
                    sql.add(kids.get(i));
                prevCluster = cluster;
            }
            if (sql.isEmpty())
                return "";
            String victim = sql.get((int) (Math.random() * sql.size()));
            client.transaction().forOperations(
                client.transactionOp().check().forPath(path + "/" + kids.get(0)),
                client.transactionOp().delete().forPath(path + "/" + victim));
            reply("deleted_waiter " + path + "/" + victim);
            return null;
        } catch (Exception e) {
            return msg(e);
        }
    }

    /** A one-line description of an exception. */
    static String msg(Throwable e) {
        String m = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        return m.replace('\n', ' ').replace('\r', ' ');
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: CuratorPeer <connectString>");
            System.exit(2);
        }
        connectString = args[0];
        client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(10_000)
                .connectionTimeoutMs(5_000)
                .retryPolicy(new ExponentialBackoffRetry(200, 10, 2_000))
                .build();
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            reply("error connect not connected to " + args[0] + " after 30 s");
            client.close();
            System.exit(1);
        }
        reply("ready");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty())
                continue;
            String[] w = line.split("\\s+", 4);
            try {
                if (!dispatch(w, line))
                    break;   // quit
            } catch (Exception e) {
                reply("error " + w[0] + " " + msg(e));
            }
        }
        // quit or end of input: give up our session so our nodes go at once.
        for (Owner o : owners.values())
            o.thread.shutdownNow();
        client.close();
        System.exit(0);
    }

    /** Run one command; false means quit. */
    static boolean dispatch(String[] w, String line) throws Exception {
        switch (w[0]) {
        case "ping":
            reply("pong");
            return true;
        case "expire":
            ZkTool.expire(connectString, w[1], w[2]);
            return true;
        case "states":
            client.getConnectionStateListenable().addListener((c, st) ->
                    reply("state " + st.name() + " " + nowMicros() + " " + sessionHex()));
            reply("states on " + sessionHex());
            return true;
        case "latch_start": {
            need(w, 4, "latch_start ID PATH LID");
            String id = w[1];
            LeaderLatch l = new LeaderLatch(client, w[2], w[3]);
            l.addListener(new LeaderLatchListener() {
                /* "leadership ID on|off US": when Curator said so, on its clock */
                public void isLeader() { reply("leadership " + id + " on " + nowMicros()); reply("isleader " + id); }
                public void notLeader() { reply("leadership " + id + " off " + nowMicros()); reply("notleader " + id); }
            });
            latches.put(id, l);
            l.start();
            reply("latch " + id + " started");
            return true;
        }
        case "latch_has":
            need(w, 2, "latch_has ID");
            reply("latchhas " + w[1] + " " + latches.get(w[1]).hasLeadership());
            return true;
        case "latch_leader":
            need(w, 2, "latch_leader ID");
            reply("latchleader " + w[1] + " " + latches.get(w[1]).getLeader().getId());
            return true;
        case "latch_parts":
            need(w, 2, "latch_parts ID");
            reply("latchparts " + w[1] + partsText(latches.get(w[1]).getParticipants()));
            return true;
        case "latch_close":
            need(w, 2, "latch_close ID");
            {
                /* a latch closed in the default mode tells its listeners nothing */
                long t = nowMicros();
                latches.remove(w[1]).close();
                reply("leadership " + w[1] + " closed " + t);
            }
            reply("latch " + w[1] + " closed");
            return true;
        case "selector_start": {
            need(w, 4, "selector_start ID PATH SID");
            String id = w[1];
            java.util.concurrent.Semaphore yield = new java.util.concurrent.Semaphore(0);
            LeaderSelector s = new LeaderSelector(client, w[2], new LeaderSelectorListenerAdapter() {
                public void takeLeadership(CuratorFramework c) throws Exception {
                    reply("selected " + id);
                    yield.acquire();
                    reply("yielded " + id);
                }
            });
            if (!w[3].equals("-"))
                s.setId(w[3]);
            selectors.put(id, s);
            selectorYields.put(id, yield);
            s.start();
            reply("selector " + id + " started");
            return true;
        }
        case "selector_yield":
            need(w, 2, "selector_yield ID");
            selectorYields.get(w[1]).release();
            return true;
        case "selector_parts":
            need(w, 2, "selector_parts ID");
            reply("selectorparts " + w[1] + partsText(selectors.get(w[1]).getParticipants()));
            return true;
        case "selector_close":
            need(w, 2, "selector_close ID");
            selectors.remove(w[1]).close();
            reply("selector " + w[1] + " closed");
            return true;
        case "quit":
            return false;
        case "acquire": {
            need(w, 4, "acquire ID PATH TIMEOUT_MS");
            acquire(w[1], w[2], Long.parseLong(w[3]));
            return true;
        }
        case "release": {
            need(w, 2, "release ID [KIND]");
            String[] p = line.split("\\s+");
            release(w[1], p.length > 2 ? p[2] : null);
            return true;
        }
        case "read":
        case "write":
        case "mutex":
        case "semmutex": {
            String[] p = line.split("\\s+");
            if (p.length < 4)
                throw new IllegalArgumentException("usage: " + p[0] + " ID PATH TIMEOUT_MS [revocable|revocable-notify]");
            String rev = p.length > 4 ? p[4] : null;
            if (rev != null && !rev.equals("revocable") && !rev.equals("revocable-notify"))
                throw new IllegalArgumentException("bad revocable flag " + rev);
            if (rev != null && p[0].equals("semmutex"))
                throw new IllegalArgumentException("a semaphore mutex is not revocable");
            lockCommand(p[0], p[1], p[2], Long.parseLong(p[3]), rev);
            return true;
        }
        case "lease": {
            String[] p = line.split("\\s+");
            if (p.length < 6)
                throw new IllegalArgumentException("usage: lease ID PATH MAX_LEASES QTY TIMEOUT_MS");
            lease(p[1], p[2], Integer.parseInt(p[3]), Integer.parseInt(p[4]), Long.parseLong(p[5]));
            return true;
        }
        case "multi": {
            need(w, 4, "multi ID PATH1,PATH2,... TIMEOUT_MS");
            String id = w[1];
            List<String> paths = List.of(w[2].split(","));
            long ms = Long.parseLong(w[3].trim());
            onThread(id, o -> {
                InterProcessMultiLock m = new InterProcessMultiLock(client, paths);
                boolean ok = timedAcquire(m, ms);
                if (ok)
                    o.held.push(new Held("multi", m, m::release));
                reply((ok ? "acquired " : "timeout ") + id);
            });
            return true;
        }
        case "tcas": {
            need(w, 4, "tcas ID PATH NEW");
            String id = w[1], path = w[2];
            long newv = Long.parseLong(w[3].trim());
            onThread(id, o -> {
                DistributedAtomicLong l = new DistributedAtomicLong(client, path, new RetryNTimes(0, 10));
                AtomicValue<Long> v = l.get();
                if (!v.succeeded())
                    throw new IllegalStateException("get did not succeed");
                reply("tcasread " + id + " " + v.postValue());
                reply("tcas " + id + " " + v.postValue() + " " + l.compareAndSet(v.postValue(), newv).succeeded());
            });
            return true;
        }
        case "tcount": {
            need(w, 4, "tcount ID PATH NEW");
            String id = w[1], path = w[2];
            int newv = Integer.parseInt(w[3].trim());
            onThread(id, o -> {
                try (SharedCount c = new SharedCount(client, path, 0)) {
                    c.start();
                    VersionedValue<Integer> v = c.getVersionedValue();
                    reply("tcountread " + id + " " + v.getValue());
                    reply("tcount " + id + " " + v.getValue() + " " + v.getVersion() + " " + c.trySetCount(v, newv));
                }
            });
            return true;
        }
        case "revoke":
            need(w, 2, "revoke NODEPATH");
            Revoker.attemptRevoke(client, w[1]);
            reply("revoke " + w[1] + " ok");
            return true;
        case "barrier_set":
            need(w, 2, "barrier_set PATH");
            new DistributedBarrier(client, w[1]).setBarrier();
            reply("barrier_set " + w[1]);
            return true;
        case "barrier_remove":
            need(w, 2, "barrier_remove PATH");
            new DistributedBarrier(client, w[1]).removeBarrier();
            reply("barrier_removed " + w[1]);
            return true;
        case "barrier_wait": {
            need(w, 4, "barrier_wait ID PATH TIMEOUT_MS");
            String id = w[1], path = w[2];
            long ms = Long.parseLong(w[3]);
            onThread(id, o -> {
                DistributedBarrier b = new DistributedBarrier(client, path);
                boolean ok;
                if (ms < 0) {
                    b.waitOnBarrier();
                    ok = true;
                } else {
                    ok = b.waitOnBarrier(ms, TimeUnit.MILLISECONDS);
                }
                reply("barrier " + id + " " + ok);
            });
            return true;
        }
        case "denter": {
            String[] p = line.split("\\s+");
            if (p.length < 5)
                throw new IllegalArgumentException("usage: denter ID PATH QTY TIMEOUT_MS");
            String id = p[1], path = p[2];
            int qty = Integer.parseInt(p[3]);
            long ms = Long.parseLong(p[4]);
            onThread(id, o -> {
                o.dbarrier = new DistributedDoubleBarrier(client, path, qty);
                boolean ok;
                if (ms < 0) {
                    o.dbarrier.enter();
                    ok = true;
                } else {
                    AtomicBoolean hung = new AtomicBoolean();
                    Thread self = Thread.currentThread();
                    java.util.concurrent.ScheduledFuture<?> dog = WATCHDOG.schedule(() -> {
                        if (untimedWaitIn(self, "DistributedDoubleBarrier", "internalEnter")) {
                            hung.set(true);
                            self.interrupt();
                        }
                    }, ms + 3000, TimeUnit.MILLISECONDS);
                    try {
                        ok = o.dbarrier.enter(ms, TimeUnit.MILLISECONDS);
                    } catch (InterruptedException e) {
                        if (!hung.get())
                            throw e;
                        /* the member node stays, as after a timed-out enter */
                        reply("entered " + id + " false " + GH1290);
                        return;
                    } finally {
                        dog.cancel(false);
                    }
                }
                reply("entered " + id + " " + ok);
            });
            return true;
        }
        case "dleave": {
            need(w, 3, "dleave ID TIMEOUT_MS");
            String id = w[1];
            long ms = Long.parseLong(w[2]);
            onThread(id, o -> {
                if (o.dbarrier == null)
                    throw new IllegalStateException("no double barrier entered");
                boolean ok;
                if (ms < 0) {
                    o.dbarrier.leave();
                    ok = true;
                } else {
                    ok = o.dbarrier.leave(ms, TimeUnit.MILLISECONDS);
                }
                reply("left " + id + " " + ok);
            });
            return true;
        }
        case "stat": {
            need(w, 2, "stat PATH");
            Stat st = client.checkExists().forPath(w[1]);
            reply(st == null ? "nonode " + w[1] : "stat " + w[1] + " " + st.getCzxid());
            return true;
        }
        case "rwparticipants": {
            need(w, 2, "rwparticipants PATH");
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, w[1]);
            List<String> all = new ArrayList<>(rw.readLock().getParticipantNodes());
            all.addAll(rw.writeLock().getParticipantNodes());
            all.sort((a, b) -> rwSortKey(a).compareTo(rwSortKey(b)));
            reply(("rwparticipants " + w[1] + " " + String.join(" ", all)).trim());
            return true;
        }
        case "rwloop": {
            String[] p = line.split("\\s+");
            if (p.length < 6)
                throw new IllegalArgumentException("usage: rwloop ID PATH N SEED HOLD_MS");
            rwloop(p[1], p[2], Integer.parseInt(p[3]), Integer.parseInt(p[4]), Long.parseLong(p[5]));
            return true;
        }
        case "mxloop": {
            String[] p = line.split("\\s+");
            if (p.length < 5)
                throw new IllegalArgumentException("usage: mxloop ID PATH DURATION_MS HOLD_MS [PAUSE_MS]");
            mxloop(p[1], p[2], Long.parseLong(p[3]), Long.parseLong(p[4]),
                   p.length > 5 ? Long.parseLong(p[5]) : 0);
            return true;
        }
        case "semloop": {
            String[] p = line.split("\\s+");
            if (p.length < 6)
                throw new IllegalArgumentException("usage: semloop ID PATH MAX DURATION_MS HOLD_MS");
            semloop(p[1], p[2], Integer.parseInt(p[3]), Long.parseLong(p[4]), Long.parseLong(p[5]));
            return true;
        }
        case "stoploop": {
            need(w, 2, "stoploop ID");
            loopStops.computeIfAbsent(w[1], k -> new AtomicBoolean()).set(true);
            reply("stopping " + w[1]);
            return true;
        }
        case "cancel": {
            need(w, 2, "cancel ID");
            Owner o = owners.get(w[1]);
            if (o != null && o.current != null)
                o.current.cancel(true);   // interrupts the owner thread
            reply("cancelled " + w[1]);
            return true;
        }
        case "children": {
            need(w, 2, "children PATH");
            String path = w[1];
            try {
                List<String> kids = new ArrayList<>(client.getChildren().forPath(path));
                Collections.sort(kids);
                reply(("children " + path + " " + String.join(" ", kids)).trim());
            } catch (KeeperException.NoNodeException e) {
                reply("nonode " + path);
            }
            return true;
        }
        case "participants": {
            need(w, 2, "participants PATH");
            Collection<String> nodes = new InterProcessMutex(client, w[1]).getParticipantNodes();
            reply(("participants " + w[1] + " " + String.join(" ", nodes)).trim());
            return true;
        }
        case "ephemeral":
            need(w, 2, "ephemeral PATH");
            client.create().creatingParentContainersIfNeeded()
                .withMode(CreateMode.EPHEMERAL).forPath(w[1], new byte[0]);
            reply("ephemeral " + w[1]);
            return true;
        case "exists":
            need(w, 2, "exists PATH");
            reply("exists " + w[1] + " " + (client.checkExists().forPath(w[1]) != null));
            return true;
        case "delete":
            need(w, 2, "delete PATH");
            try {
                client.delete().guaranteed().forPath(w[1]);
            } catch (KeeperException.NoNodeException e) {
                // already gone: that is what was asked
            }
            reply("deleted " + w[1]);
            return true;
        case "delete_waiter": {
            need(w, 2, "delete_waiter PATH...");
            final String[] paths = java.util.Arrays.copyOfRange(w, 1, w.length);
            Thread t = new Thread(() -> deleteWaiter(paths));
            t.setDaemon(true);
            t.start();
            return true;
        }
        case "get":
            need(w, 2, "get PATH");
            try {
                byte[] data = client.getData().forPath(w[1]);
                String text = data == null ? "" : new String(data, StandardCharsets.UTF_8);
                reply("data " + w[1] + " " + text.replace('\n', ' '));
            } catch (KeeperException.NoNodeException e) {
                reply("nonode " + w[1]);
            }
            return true;
        case "set": {
            need(w, 2, "set PATH TEXT");
            // TEXT is the rest of the line after PATH (may contain spaces).
            String[] p = line.split("\\s+", 3);
            String text = p.length > 2 ? p[2] : "";
            try {
                client.setData().forPath(w[1], text.getBytes(StandardCharsets.UTF_8));
                reply("set " + w[1]);
            } catch (KeeperException.NoNodeException e) {
                reply("nonode " + w[1]);
            }
            return true;
        }
        case "count_get": {
            need(w, 3, "count_get PATH SEED");
            try (SharedCount c = new SharedCount(client, w[1], Integer.parseInt(w[2]))) {
                c.start();
                VersionedValue<Integer> v = c.getVersionedValue();
                reply("count " + w[1] + " " + v.getValue() + " " + v.getVersion());
            }
            return true;
        }
        case "count_set": {
            need(w, 3, "count_set PATH VALUE");
            try (SharedCount c = new SharedCount(client, w[1], 0)) {
                c.start();
                c.setCount(Integer.parseInt(w[2]));
                reply("countset " + w[1]);
            }
            return true;
        }
        case "count_tryset": {
            need(w, 4, "count_tryset PATH VALUE VERSION");
            String[] p = line.split("\\s+");
            try (SharedCount c = new SharedCount(client, w[1], 0)) {
                c.start();
                VersionedValue<Integer> v = c.getVersionedValue();
                boolean ok = v.getVersion() == Integer.parseInt(p[3])
                    && c.trySetCount(v, Integer.parseInt(w[2]));
                reply("counttry " + w[1] + " " + ok);
            }
            return true;
        }
        case "long_get": {
            need(w, 2, "long_get PATH");
            AtomicValue<Long> v = new DistributedAtomicLong(client, w[1], new RetryNTimes(50, 10)).get();
            reply("long " + w[1] + " " + v.succeeded() + " " + v.postValue());
            return true;
        }
        case "long_add": {
            need(w, 3, "long_add PATH DELTA");
            AtomicValue<Long> v = new DistributedAtomicLong(client, w[1], new RetryNTimes(50, 10))
                .add(Long.parseLong(w[2]));
            reply("longadd " + w[1] + " " + v.succeeded() + " " + v.postValue());
            return true;
        }
        case "long_cas": {
            need(w, 4, "long_cas PATH EXPECTED NEW");
            String[] p = line.split("\\s+");
            AtomicValue<Long> v = new DistributedAtomicLong(client, w[1], new RetryNTimes(50, 10))
                .compareAndSet(Long.parseLong(w[2]), Long.parseLong(p[3]));
            reply("longcas " + w[1] + " " + v.succeeded());
            return true;
        }
        case "long_addloop": {
            // N adds of 1, each retried until it succeeds; replies the count
            need(w, 3, "long_addloop PATH N");
            DistributedAtomicLong l = new DistributedAtomicLong(client, w[1], new RetryNTimes(50, 10));
            int n = Integer.parseInt(w[2]);
            int done = 0;
            for (int i = 0; i < n; i++) {
                while (!l.add(1L).succeeded())
                    ;
                done++;
            }
            reply("longloop " + w[1] + " " + done);
            return true;
        }
        case "long_addlog": {
            // N adds of 1, each retried until it succeeds; replies the
            // value after each add, in order
            need(w, 3, "long_addlog PATH N");
            DistributedAtomicLong l = new DistributedAtomicLong(client, w[1], new RetryNTimes(50, 10));
            int n = Integer.parseInt(w[2]);
            StringBuilder got = new StringBuilder("longlog " + w[1]);
            for (int i = 0; i < n; i++) {
                AtomicValue<Long> v;
                while (!(v = l.add(1L)).succeeded())
                    ;
                got.append(' ').append(v.postValue());
            }
            reply(got.toString());
            return true;
        }
        default:
            reply("error " + w[0] + " unknown command");
            return true;
        }
    }

    static final Map<String, LeaderLatch> latches = new ConcurrentHashMap<>();
    static final Map<String, LeaderSelector> selectors = new ConcurrentHashMap<>();
    static final Map<String, java.util.concurrent.Semaphore> selectorYields = new ConcurrentHashMap<>();

    /** " id:leader ..." of participants, in their order; an empty id as "". */
    static String partsText(Collection<Participant> parts) {
        StringBuilder b = new StringBuilder();
        for (Participant p : parts)
            b.append(' ').append(p.getId().isEmpty() ? "\"\"" : p.getId().replace(' ', '_'))
             .append(':').append(p.isLeader());
        return b.toString();
    }

    static void need(String[] w, int n, String usage) {
        if (w.length < n)
            throw new IllegalArgumentException("usage: " + usage);
    }

    interface Task { void run(Owner o) throws Exception; }

    /*
     * Curator before GH-1290 (5.4, 5.7: Debian's) has a timed
     * DistributedDoubleBarrier.enter that can wait for ever: when the watch on
     * P/ready fired before internalEnter's check (another member saw enough
     * members, created P/ready, and left again) and it then counts fewer
     * members than its quantity, it calls wait() without a timeout.  The
     * watchdog below names exactly that state (the thread WAITING, untimed,
     * inside internalEnter, past the enter's timeout), interrupts it and
     * answers what the fixed Curator answers: false, the member node kept.
     */
    static final String GH1290 = "curator-GH-1290:untimed-wait-in-internalEnter";
    private static final java.util.concurrent.ScheduledExecutorService WATCHDOG =
        Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "watchdog");
            t.setDaemon(true);
            return t;
        });

    /**
     * Is thread t in an Object.wait() without a timeout called by cls.method
     * itself (not in a ZooKeeper request made from it)?
     */
    static boolean untimedWaitIn(Thread t, String cls, String method) {
        if (t.getState() != Thread.State.WAITING)
            return false;
        StackTraceElement[] st = t.getStackTrace();
        int i = 0;
        while (i < st.length && st[i].getClassName().equals("java.lang.Object"))
            i++;
        return i > 0 && i < st.length
            && st[i].getClassName().endsWith("." + cls) && st[i].getMethodName().equals(method);
    }

    /**
     * Run a task on ID's own thread (created on first use). Exceptions become
     * "error ID <msg>" ("error ID interrupted ..." after a cancel).
     */
    static void onThread(String id, Task task) {
        Owner o = owners.computeIfAbsent(id, Owner::new);
        o.current = o.thread.submit(() -> {
            try {
                task.run(o);
            } catch (InterruptedException e) {
                reply("error " + id + " interrupted " + msg(e));
            } catch (Throwable e) {
                if (Thread.currentThread().isInterrupted())
                    reply("error " + id + " interrupted " + msg(e));
                else
                    reply("error " + id + " " + msg(e));
            }
        });
    }

    /** Start an acquire on ID's own thread; the reply comes from that thread. */
    static void acquire(String id, String path, long timeoutMs) {
        onThread(id, o -> {
            if (o.mutex == null) {
                o.mutex = new InterProcessMutex(client, path);
                o.path = path;
            } else if (!o.path.equals(path)) {
                throw new IllegalArgumentException("ID " + id + " is bound to " + o.path);
            }
            InterProcessMutex m = o.mutex;
            boolean ok = timedAcquire(m, timeoutMs);
            if (ok)
                o.held.push(new Held("mutex", m, m::release));
            reply((ok ? "acquired " : "timeout ") + id);
        });
    }

    static boolean timedAcquire(org.apache.curator.framework.recipes.locks.InterProcessLock l, long timeoutMs)
            throws Exception {
        if (timeoutMs < 0) {
            l.acquire();
            return true;
        }
        return l.acquire(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** read / write / mutex / semmutex on ID's thread. */
    static void lockCommand(String kind, String id, String path, long timeoutMs, String rev) {
        onThread(id, o -> {
            org.apache.curator.framework.recipes.locks.InterProcessLock lock;
            InterProcessMutex revocable = null;
            switch (kind) {
            case "read":
            case "write":
                if (o.rw == null) {
                    o.rw = new InterProcessReadWriteLock(client, path);
                    o.rwPath = path;
                } else if (!o.rwPath.equals(path)) {
                    throw new IllegalArgumentException("ID " + id + " is bound to " + o.rwPath);
                }
                revocable = kind.equals("read") ? o.rw.readLock() : o.rw.writeLock();
                lock = revocable;
                break;
            case "mutex":
                if (o.rmutex == null) {
                    o.rmutex = new InterProcessMutex(client, path);
                    o.rmutexPath = path;
                } else if (!o.rmutexPath.equals(path)) {
                    throw new IllegalArgumentException("ID " + id + " is bound to " + o.rmutexPath);
                }
                revocable = o.rmutex;
                lock = revocable;
                break;
            default: // semmutex: not reentrant, a fresh object per acquire
                lock = new InterProcessSemaphoreMutex(client, path);
                break;
            }
            if (rev != null) {
                final boolean autoRelease = rev.equals("revocable");
                final Object target = lock;
                revocable.makeRevocable(m -> {
                    reply("revoked " + id);
                    if (autoRelease)
                        o.thread.submit(() -> {
                            try {
                                releaseHeld(o, target, null);
                                reply("released " + id);
                            } catch (Throwable e) {
                                reply("error " + id + " " + msg(e));
                            }
                        });
                });
            }
            boolean ok = timedAcquire(lock, timeoutMs);
            if (ok) {
                final org.apache.curator.framework.recipes.locks.InterProcessLock l = lock;
                o.held.push(new Held(kind, lock, l::release));
            }
            reply((ok ? "acquired " : "timeout ") + id);
        });
    }

    /** Semaphore leases on ID's thread. */
    static void lease(String id, String path, int max, int qty, long timeoutMs) {
        onThread(id, o -> {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, max);
            Collection<Lease> leases = timeoutMs < 0 ? sem.acquire(qty)
                    : sem.acquire(qty, timeoutMs, TimeUnit.MILLISECONDS);
            if (leases == null) {
                reply("timeout " + id);
                return;
            }
            List<String> names = new ArrayList<>();
            for (Lease l : leases)
                names.add(l.getNodeName());
            o.held.push(new Held("lease", sem, () -> sem.returnAll(leases)));
            reply("leased " + id + " " + String.join(" ", names));
        });
    }

    /** Give back the most recent hold of O (of KIND, or the one on LOCK). */
    static void releaseHeld(Owner o, Object lock, String kind) throws Exception {
        for (Iterator<Held> it = o.held.iterator(); it.hasNext();) {   // most recent first
            Held h = it.next();
            if ((lock == null || h.lock == lock) && (kind == null || h.kind.equals(kind))) {
                it.remove();
                h.rel.release();
                return;
            }
        }
        throw new IllegalStateException("nothing acquired" + (kind == null ? "" : " of kind " + kind));
    }

    /** Release ID's most recent hold (of KIND) on ID's thread. */
    static void release(String id, String kind) {
        Owner o = owners.get(id);
        if (o == null) {
            reply("error " + id + " unknown id");
            return;
        }
        o.current = o.thread.submit(() -> {
            try {
                releaseHeld(o, null, kind);
                reply("released " + id);
            } catch (Throwable e) {
                reply("error " + id + " " + msg(e));
            }
        });
    }

    /** Curator's read/write lock sort key (strip through __READ__, then __WRIT__). */
    static String rwSortKey(String s) {
        for (String name : new String[] { "__READ__", "__WRIT__" }) {
            int i = s.lastIndexOf(name);
            if (i >= 0)
                s = s.substring(i + name.length());
        }
        return s;
    }

    /** The client's ZooKeeper session id now, as zklock prints one (0x and 16 hex digits). */
    static String sessionHex() {
        try {
            return String.format("0x%016x", client.getZookeeperClient().getZooKeeper().getSessionId());
        } catch (Exception e) {
            return "none";
        }
    }

    static long nowMicros() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000L + t.getNano() / 1_000;
    }

    /** The read/write stress loop (see the header). */
    static void rwloop(String id, String path, int n, int seed, long holdMs) {
        onThread(id, o -> {
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
            List<String> events = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                boolean write = (7 * i + seed) % 10 == 0;
                InterProcessMutex l = write ? rw.writeLock() : rw.readLock();
                if (!l.acquire(30, TimeUnit.SECONDS))
                    throw new IllegalStateException("op " + i + " not granted in 30 s");
                long enter = nowMicros();
                try {
                    if (holdMs > 0)
                        Thread.sleep(holdMs);   // the critical section's work
                } finally {
                    long exit = nowMicros();
                    l.release();
                    events.add("rwev " + id + " " + i + " " + (write ? "write" : "read") + " " + enter + " " + exit);
                }
            }
            synchronized (OUT_LOCK) {
                for (String e : events)
                    System.out.println(e);
                System.out.println("rwloop " + id + " done " + n);
                System.out.flush();
            }
        });
    }

    /* ---- mxloop / semloop: checker loops (see the header) ---- */

    /** Stop flags of the running loops, by ID. */
    private static final Map<String, AtomicBoolean> loopStops = new ConcurrentHashMap<>();

    /** SUSPENDED and LOST connection states seen since the first loop started. */
    private static final AtomicLong suspendedSeen = new AtomicLong(), lostSeen = new AtomicLong();
    private static final AtomicBoolean stateListening = new AtomicBoolean();

    static void listenStates() {
        if (stateListening.compareAndSet(false, true))
            client.getConnectionStateListenable().addListener((c, st) -> {
                if (st == ConnectionState.SUSPENDED)
                    suspendedSeen.incrementAndGet();
                else if (st == ConnectionState.LOST)
                    lostSeen.incrementAndGet();
            });
    }

    static long statesSeen() {
        return suspendedSeen.get() + lostSeen.get();
    }

    static void countFail(Map<String, Integer> fails, String kind) {
        fails.merge(kind, 1, Integer::sum);
    }

    /** An InterProcessMutex that tells the path of its holder's own node. */
    static final class NodeMutex extends InterProcessMutex {
        NodeMutex(String path) { super(client, path); }
        String ownNode() { return getLockPath(); }   // protected in Curator 5.4 and 5.7
    }

    interface Round {
        /** One acquire/hold/release round; returns the event line, null when not acquired. */
        String run(Map<String, Integer> fails) throws InterruptedException;
    }

    /** Run rounds on ID's thread until DURATION_MS passed or stoploop; then print. */
    static void loop(String cmd, String id, long durationMs, Round round) {
        AtomicBoolean stop = new AtomicBoolean();
        loopStops.put(id, stop);
        listenStates();
        onThread(id, o -> {
            long end = System.nanoTime() + durationMs * 1_000_000L;
            long susp0 = suspendedSeen.get(), lost0 = lostSeen.get();
            List<String> events = new ArrayList<>();
            Map<String, Integer> fails = new TreeMap<>();
            while (!stop.get() && System.nanoTime() - end < 0) {
                String ev = round.run(fails);
                if (ev != null)
                    events.add(ev);
            }
            StringBuilder done = new StringBuilder(cmd + " " + id + " done " + events.size());
            for (Map.Entry<String, Integer> e : fails.entrySet())
                done.append(' ').append(e.getKey()).append('=').append(e.getValue());
            done.append(" suspended=").append(suspendedSeen.get() - susp0)
                .append(" lost=").append(lostSeen.get() - lost0);
            synchronized (OUT_LOCK) {
                for (String e : events)
                    System.out.println(e);
                System.out.println(done);
                System.out.flush();
            }
        });
    }

    /** The mutex checker loop (see the header). */
    static void mxloop(String id, String path, long durationMs, long holdMs, long pauseMs) {
        NodeMutex m = new NodeMutex(path);
        loop("mxloop", id, durationMs, fails -> {
            try {
                if (!m.acquire(2, TimeUnit.SECONDS)) {
                    countFail(fails, "timeout");
                    return null;
                }
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                countFail(fails, e.getClass().getSimpleName());
                Thread.sleep(50);
                return null;
            }
            long enter = nowMicros();
            long states0 = statesSeen();
            long token = -1;
            try {
                Stat st = client.checkExists().forPath(m.ownNode());
                if (st != null)
                    token = st.getCzxid();
                else
                    countFail(fails, "token:nonode");
            } catch (Exception e) {
                countFail(fails, "token:" + e.getClass().getSimpleName());
            }
            long exit;
            try {
                if (holdMs > 0)
                    Thread.sleep(holdMs);   // the critical section's work
            } finally {
                exit = nowMicros();
                try {
                    m.release();
                } catch (Exception e) {
                    countFail(fails, "release:" + e.getClass().getSimpleName());
                }
            }
            if (pauseMs > 0)
                Thread.sleep(pauseMs);   // time between rounds, lock not held
            return "mxev " + id + " " + token + " " + enter + " " + exit + " " + (statesSeen() - states0);
        });
    }

    /** The semaphore checker loop (see the header). */
    static void semloop(String id, String path, int max, long durationMs, long holdMs) {
        InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, max);
        loop("semloop", id, durationMs, fails -> {
            Lease lease;
            try {
                lease = sem.acquire(2, TimeUnit.SECONDS);
                if (lease == null) {
                    countFail(fails, "timeout");
                    return null;
                }
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                countFail(fails, e.getClass().getSimpleName());
                Thread.sleep(50);
                return null;
            }
            long enter = nowMicros();
            long states0 = statesSeen();
            long exit;
            try {
                if (holdMs > 0)
                    Thread.sleep(holdMs);
            } finally {
                exit = nowMicros();
                sem.returnLease(lease);   // logs, does not throw, when the delete fails
            }
            return "semev " + id + " " + enter + " " + exit + " " + (statesSeen() - states0);
        });
    }
}
