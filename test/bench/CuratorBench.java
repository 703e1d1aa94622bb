/*
 * CuratorBench.java
 *     InterProcessMutex acquire+release cycles through one CuratorFramework
 *     (one ZooKeeper session per JVM, as applications use it).
 *
 * Usage:
 *     java CuratorBench host:port seconds warmup_seconds mode...
 * where a mode is THREADS:distinct (each thread locks its own path) or
 * THREADS:shared (all threads lock one path).  Each mode runs for a fixed
 * duration; a cycle counts when it ends inside the window.  Prints one
 * line per mode:
 *     RESULT threads=N shape=S cycles=C secs=T cps=X p50=U p99=U avg=U
 * with latencies of one acquire+release in microseconds.
 *
 * test/bench/CuratorBench.java
 */

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench
{
    /* Latency samples of one thread, in microseconds */
    static final class Samples
    {
        long[] v = new long[1 << 14];
        int n = 0;

        void add(long us)
        {
            if (n == v.length)
                v = Arrays.copyOf(v, v.length * 2);
            v[n++] = us;
        }
    }

    /* Outcome of one mode */
    static final class Result
    {
        long cycles;
        double secs;
        long p50;
        long p99;
        double avg;
    }

    /*
     * Run THREADS threads doing acquire+release for SECONDS on distinct
     * paths or one shared path under BASE; return counts and percentiles.
     */
    static Result runMode(CuratorFramework client, String base, int threads,
                          boolean shared, double seconds) throws Exception
    {
        final Samples[] samples = new Samples[threads];
        final Thread[] workers = new Thread[threads];
        final CountDownLatch ready = new CountDownLatch(threads);
        final CountDownLatch go = new CountDownLatch(1);
        final AtomicReference<Throwable> error = new AtomicReference<>();
        final long[] window = new long[2];

        for (int i = 0; i < threads; i++)
        {
            final int idx = i;
            final String path = shared ? base + "/shared" : base + "/t" + i;
            final InterProcessMutex mutex = new InterProcessMutex(client, path);

            samples[i] = new Samples();
            workers[i] = new Thread(() -> {
                Samples s = samples[idx];

                try
                {
                    ready.countDown();
                    go.await();
                    long start = window[0];
                    long end = window[1];

                    while (System.nanoTime() < end && error.get() == null)
                    {
                        long t0 = System.nanoTime();

                        mutex.acquire();
                        mutex.release();

                        long t1 = System.nanoTime();

                        if (t1 >= start && t1 <= end)
                            s.add((t1 - t0) / 1000);
                    }
                }
                catch (Throwable t)
                {
                    error.compareAndSet(null, t);
                }
            }, "bench-" + i);
            workers[i].setDaemon(true);
            workers[i].start();
        }
        ready.await();
        window[0] = System.nanoTime();
        window[1] = window[0] + (long) (seconds * 1e9);
        go.countDown();
        for (Thread w : workers)
        {
            w.join(TimeUnit.SECONDS.toMillis(60) + (long) (seconds * 1000));
            if (w.isAlive())
                throw new IllegalStateException("worker did not finish: " + w.getName());
        }
        if (error.get() != null)
            throw new RuntimeException("worker failed", error.get());

        int total = 0;
        for (Samples s : samples)
            total += s.n;

        long[] all = new long[total];
        int off = 0;
        double sum = 0;

        for (Samples s : samples)
        {
            System.arraycopy(s.v, 0, all, off, s.n);
            off += s.n;
        }
        Arrays.sort(all);
        for (long x : all)
            sum += x;

        Result r = new Result();

        r.cycles = total;
        r.secs = seconds;
        r.p50 = percentile(all, 50);
        r.p99 = percentile(all, 99);
        r.avg = total > 0 ? sum / total : 0;
        return r;
    }

    /* Nearest-rank percentile of sorted samples */
    static long percentile(long[] sorted, double p)
    {
        if (sorted.length == 0)
            return 0;
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);

        rank = Math.max(1, Math.min(rank, sorted.length));
        return sorted[rank - 1];
    }

    public static void main(String[] args) throws Exception
    {
        if (args.length < 4)
        {
            System.err.println("usage: CuratorBench host:port seconds warmup_seconds THREADS:distinct|shared...");
            System.exit(2);
        }
        String hosts = args[0];
        double seconds = Double.parseDouble(args[1]);
        double warmup = Double.parseDouble(args[2]);
        List<String> modes = new ArrayList<>(Arrays.asList(args).subList(3, args.length));
        String base = "/bench/curator/" + ProcessHandle.current().pid();

        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(hosts)
            .sessionTimeoutMs(60000)
            .connectionTimeoutMs(15000)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();

        client.start();
        try
        {
            if (!client.blockUntilConnected(15, TimeUnit.SECONDS))
            {
                System.err.println("CuratorBench: could not connect to " + hosts);
                System.exit(1);
            }

            /* JIT and connection warm-up, excluded from every number */
            if (warmup > 0)
            {
                runMode(client, base + "/warmup-d", 8, false, warmup * 0.6);
                runMode(client, base + "/warmup-s", 8, true, warmup * 0.2);
                runMode(client, base + "/warmup-1", 1, false, warmup * 0.2);
            }

            for (String mode : modes)
            {
                String[] parts = mode.split(":");
                int threads = Integer.parseInt(parts[0]);
                boolean shared = parts.length > 1 && parts[1].equals("shared");
                String shape = shared ? "shared" : "distinct";
                Result r = runMode(client, base + "/" + threads + "-" + shape,
                                   threads, shared, seconds);

                System.out.printf("RESULT threads=%d shape=%s cycles=%d secs=%.3f cps=%.0f p50=%d p99=%d avg=%.0f%n",
                                  threads, shape, r.cycles, r.secs,
                                  r.cycles / r.secs, r.p50, r.p99, r.avg);
                System.out.flush();
            }
        }
        finally
        {
            client.close();
        }
    }
}
