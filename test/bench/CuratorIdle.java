/*
 * CuratorIdle.java
 *     An idle Curator client: one CuratorFramework per connect string, with
 *     Curator's default session timeout (60 s, which the server may lower),
 *     holding nothing.  Such a client only sends the ZooKeeper Java client's
 *     pings (one when nothing was sent for a third of the negotiated
 *     session timeout); the benchmark counts what the server receives from
 *     each session while this runs.
 *
 * Usage:
 *     java CuratorIdle stop_file max_seconds name=host:port...
 * Prints, once every client is connected, one line per client
 *     SESSION name=NAME sid=0x... timeout=MS
 * then READY, and waits until stop_file exists (or max_seconds pass: then
 * it exits at once, with status 1), then closes the clients and exits.
 *
 * test/bench/CuratorIdle.java
 */

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorIdle
{
    public static void main(String[] args) throws Exception
    {
        if (args.length < 3)
        {
            System.err.println("usage: CuratorIdle stop_file max_seconds name=host:port...");
            System.exit(2);
        }
        final File stopFile = new File(args[0]);
        final long maxSeconds = Long.parseLong(args[1]);
        List<String> names = new ArrayList<>();
        List<CuratorFramework> clients = new ArrayList<>();

        /* a hard bound, whatever happens to stdin */
        Thread bound = new Thread(() -> {
            try
            {
                Thread.sleep(maxSeconds * 1000);
            }
            catch (InterruptedException e)
            {
                return;
            }
            System.err.println("CuratorIdle: " + maxSeconds + " s passed, exiting");
            Runtime.getRuntime().halt(1);
        });
        bound.setDaemon(true);
        bound.start();

        for (int i = 2; i < args.length; i++)
        {
            int eq = args[i].indexOf('=');
            String name = args[i].substring(0, eq);
            String hosts = args[i].substring(eq + 1);
            /* the builder's defaults: session 60 s, connection 15 s */
            CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(hosts)
                .retryPolicy(new ExponentialBackoffRetry(100, 3))
                .build();

            c.start();
            names.add(name);
            clients.add(c);
        }
        for (int i = 0; i < clients.size(); i++)
        {
            CuratorFramework c = clients.get(i);

            if (!c.blockUntilConnected(30, TimeUnit.SECONDS))
            {
                System.err.println("CuratorIdle: " + names.get(i) + " did not connect in 30 s");
                Runtime.getRuntime().halt(1);
            }
            /* a round trip, so the session is established and its timeout known */
            c.checkExists().forPath("/");
            System.out.println("SESSION name=" + names.get(i)
                               + " sid=0x" + Long.toHexString(c.getZookeeperClient().getZooKeeper().getSessionId())
                               + " timeout=" + c.getZookeeperClient().getZooKeeper().getSessionTimeout());
        }
        System.out.println("READY");
        System.out.flush();

        /* idle until told to stop */
        while (!stopFile.exists())
            Thread.sleep(100);
        for (CuratorFramework c : clients)
            c.close();
        System.exit(0);
    }
}
