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
 *   release ID                  release on ID's thread -> "released ID" | "error ID <msg>"
 *   cancel ID                   interrupt ID's thread (a waiting acquire ends with
 *                               "error ID interrupted ...") -> "cancelled ID"
 *   children PATH               -> "children PATH n1 n2 ..." sorted as strings,
 *                                  "nonode PATH" when PATH does not exist
 *   participants PATH           -> "participants PATH full1 full2 ..." in
 *                                  InterProcessMutex.getParticipantNodes order
 *   exists PATH                 -> "exists PATH true|false"
 *   delete PATH                 guaranteed delete, NoNode ok -> "deleted PATH"
 *   get PATH                    -> "data PATH <text>" | "nonode PATH"
 *   set PATH TEXT               -> "set PATH" | "nonode PATH"
 *   ping                        -> "pong"
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
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public class CuratorPeer {

    /** One lock owner: a dedicated thread and the mutex it acquires. */
    private static final class Owner {
        final String id;
        final ExecutorService thread;
        InterProcessMutex mutex;   // touched only from 'thread'
        String path;               // the lock path this ID is bound to
        Future<?> current;         // last task submitted (for cancel)

        Owner(String id) {
            this.id = id;
            this.thread = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "owner-" + id);
                t.setDaemon(true);
                return t;
            });
        }
    }

    private static final Object OUT_LOCK = new Object();
    private static final Map<String, Owner> owners = new ConcurrentHashMap<>();
    private static CuratorFramework client;

    /** Print one reply line and flush; replies from several threads never interleave. */
    static void reply(String line) {
        synchronized (OUT_LOCK) {
            System.out.println(line);
            System.out.flush();
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
        case "quit":
            return false;
        case "acquire": {
            need(w, 4, "acquire ID PATH TIMEOUT_MS");
            acquire(w[1], w[2], Long.parseLong(w[3]));
            return true;
        }
        case "release":
            need(w, 2, "release ID");
            release(w[1]);
            return true;
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
        default:
            reply("error " + w[0] + " unknown command");
            return true;
        }
    }

    static void need(String[] w, int n, String usage) {
        if (w.length < n)
            throw new IllegalArgumentException("usage: " + usage);
    }

    /** Start an acquire on ID's own thread; the reply comes from that thread. */
    static void acquire(String id, String path, long timeoutMs) {
        Owner o = owners.computeIfAbsent(id, Owner::new);
        o.current = o.thread.submit(() -> {
            try {
                if (o.mutex == null) {
                    o.mutex = new InterProcessMutex(client, path);
                    o.path = path;
                } else if (!o.path.equals(path)) {
                    throw new IllegalArgumentException("ID " + id + " is bound to " + o.path);
                }
                boolean ok;
                if (timeoutMs < 0) {
                    o.mutex.acquire();
                    ok = true;
                } else {
                    ok = o.mutex.acquire(timeoutMs, TimeUnit.MILLISECONDS);
                }
                reply((ok ? "acquired " : "timeout ") + id);
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

    /** Release ID's mutex on ID's thread. */
    static void release(String id) {
        Owner o = owners.get(id);
        if (o == null) {
            reply("error " + id + " unknown id");
            return;
        }
        o.current = o.thread.submit(() -> {
            try {
                if (o.mutex == null)
                    throw new IllegalStateException("nothing acquired");
                o.mutex.release();
                reply("released " + id);
            } catch (Throwable e) {
                reply("error " + id + " " + msg(e));
            }
        });
    }
}
