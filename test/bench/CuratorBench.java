/*
 * CuratorBench.java
 *     Lock cycles of Curator's recipes through one CuratorFramework (one
 *     ZooKeeper session per JVM, as applications use it): InterProcessMutex,
 *     the read and the write lock of InterProcessReadWriteLock, and
 *     InterProcessSemaphoreV2; and adds of DistributedAtomicLong.
 *
 * Usage:
 *     java CuratorBench host:port seconds warmup_seconds mode...
 * where a mode is NAME:THREADS:KIND[:MAX_LEASES] and KIND one of
 *     distinct   mutex, each thread on its own path
 *     shared     mutex, all threads on one path
 *     read       read lock, all threads on one path
 *     write      write lock, all threads on one path
 *     semaphore  semaphore of MAX_LEASES leases, all threads on one path
 *     counter    DistributedAtomicLong.add(1), all threads on one path
 *     mixed      mutex, all threads on the absolute path MAX_LEASES stands
 *                for (e.g. mix8:4:mixed:/bench/mix/lock), which SQL
 *                sessions lock at the same time; the latency kept is the
 *                acquire's alone, and the window starts 1 s after the
 *                threads do (the SQL side's pgbench is connecting then)
 * A cycle is acquire + release (semaphore: acquire() + returnLease(); counter:
 * one add that succeeded, tried again at once while it reports failure,
 * with a retry policy that does not sleep, as zklock retries at once).
 * Each mode runs for a fixed duration; a cycle counts when it ends inside
 * the window.  Prints one line per mode:
 *     RESULT name=NAME threads=N shape=KIND cycles=C secs=T cps=X p50=U p99=U avg=U
 *            cpu_jiffies=J zk_jiffies=Z requests=R all_cycles=A
 * with latencies of one cycle in microseconds.  cpu_jiffies is the CPU
 * time of the whole machine (all CPUs, everything but idle and iowait,
 * from /proc/stat) during the window, zk_jiffies that of the ZooKeeper
 * server process whose pid is in the environment variable BENCH_ZK_PID
 * (utime + stime from /proc/<pid>/stat, -1 without it), in clock ticks.
 * requests is how many requests the server received (its four-letter
 * word mntr, zk_packets_received) from just before the threads start to
 * after the last one ended, all_cycles the cycles completed in that time
 * (in the window or not): their ratio is the requests of one cycle.
 * A RESULT line also says where its window was on the wall clock
 * (win_start_ms, win_end_ms: milliseconds since the epoch), so that what
 * others completed in the same window can be counted.
 *
 * BENCH_ZK_PID may name several servers' pids, comma-separated (an
 * ensemble): zk_jiffies is then their sum.  mntr goes to the first server
 * of the connect string, or to BENCH_ZK_MNTR (host:port) when set: a
 * client over TLS connects to the secure port, which does not answer a
 * four-letter word in plaintext.  With BENCH_GO_FILE set, the
 * JVM prints "READY" after its warm-up and waits (at most 300 s) for that
 * file to exist before it runs the modes, so that another client can start
 * at the same moment.
 *
 * test/bench/CuratorBench.java
 */

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBench
{
    /* Latency samples of one thread, in microseconds */
    static final class Samples
    {
        /* at most this many latencies are kept (a leader check is a field
         * read: tens of millions a second); past it the latest ones */
        static final int KEEP = 1 << 20;
        long[] v = new long[1 << 14];
        int n = 0;              /* latencies kept in v */
        long inWindow = 0;      /* cycles completed in the window */
        long all = 0;           /* cycles completed, in the window or not */

        void add(long us)
        {
            if (n == v.length && n < KEEP)
                v = Arrays.copyOf(v, Math.min(v.length * 2, KEEP));
            if (n < v.length)
                v[n++] = us;
            else
                v[(int) (inWindow % KEEP)] = us;
            inWindow++;
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
        long cpuTicks;      /* machine busy ticks in the window, -1 unknown */
        long zkTicks;       /* ZooKeeper server ticks in the window, -1 unknown */
        long requests;      /* requests the server received during the run, -1 unknown */
        long allCycles;     /* cycles completed during the run */
        long winStartMs;    /* the window on the wall clock, ms since the epoch */
        long winEndMs;
    }

    /* What one mode locks */
    enum Kind
    {
        DISTINCT, SHARED, READ, WRITE, SEMAPHORE, COUNTER, LEADER, MIXED
    }

    /* One acquire + release, on the recipe object of one thread */
    interface Cycle
    {
        void run() throws Exception;
    }

    /* pids of the ZooKeeper servers (BENCH_ZK_PID), none if not given */
    static long[] zkPids = new long[0];

    /* the server asked for its request count (host:port) */
    static String zkHostPort = null;

    /*
     * Requests the ZooKeeper server received so far (four-letter word mntr,
     * zk_packets_received); -1 if it cannot be asked.
     */
    static long packetsReceived()
    {
        try
        {
            int colon = zkHostPort.lastIndexOf(':');

            try (Socket sock = new Socket(zkHostPort.substring(0, colon),
                                          Integer.parseInt(zkHostPort.substring(colon + 1))))
            {
                sock.setSoTimeout(5000);
                OutputStream out = sock.getOutputStream();

                out.write("mntr".getBytes(StandardCharsets.US_ASCII));
                out.flush();
                InputStream in = sock.getInputStream();
                String text = new String(in.readAllBytes(), StandardCharsets.US_ASCII);

                for (String line : text.split("\n"))
                {
                    String[] f = line.trim().split("\\s+");

                    if (f.length == 2 && f[0].equals("zk_packets_received"))
                        return Long.parseLong(f[1]);
                }
            }
        }
        catch (Exception e)
        {
            /* unknown */
        }
        return -1;
    }

    /*
     * CPU time of the whole machine so far, in clock ticks: the "cpu" line
     * of /proc/stat summed over user, nice, system, irq, softirq and steal,
     * i.e. everything but idle and iowait (guest is already in user).
     * -1 if it cannot be read.
     */
    static long machineBusyTicks()
    {
        try
        {
            String line = Files.readAllLines(Paths.get("/proc/stat"),
                                             StandardCharsets.US_ASCII).get(0);
            String[] f = line.trim().split("\\s+");
            long sum = 0;

            if (!f[0].equals("cpu") || f.length < 8)
                return -1;
            /* f[1..8]: user nice system idle iowait irq softirq steal */
            for (int i = 1; i <= 8 && i < f.length; i++)
                if (i != 4 && i != 5)
                    sum += Long.parseLong(f[i]);
            return sum;
        }
        catch (Exception e)
        {
            return -1;
        }
    }

    /*
     * utime + stime of a process, in clock ticks, from /proc/<pid>/stat
     * (fields 14 and 15, counted after the parenthesised command name).
     * -1 if pid is 0 or the file cannot be read.
     */
    static long processTicks(long pid)
    {
        if (pid <= 0)
            return -1;
        try
        {
            String stat = new String(Files.readAllBytes(Paths.get("/proc/" + pid + "/stat")),
                                     StandardCharsets.US_ASCII);
            String[] f = stat.substring(stat.lastIndexOf(')') + 1).trim().split("\\s+");

            /* f[0] is field 3 (state): utime is f[11], stime f[12] */
            return Long.parseLong(f[11]) + Long.parseLong(f[12]);
        }
        catch (Exception e)
        {
            return -1;
        }
    }

    /* the one LeaderLatch of each path, started and leading */
    static final Map<String, LeaderLatch> latches = new HashMap<>();

    static synchronized LeaderLatch sharedLatch(CuratorFramework client, String path)
    {
        return latches.computeIfAbsent(path, p -> {
            LeaderLatch l = new LeaderLatch(client, p, "bench");

            try
            {
                l.start();
                if (!l.await(10, TimeUnit.SECONDS))
                    throw new IllegalStateException("the latch did not lead in 10 s");
            }
            catch (Exception e)
            {
                throw new RuntimeException(e);
            }
            return l;
        });
    }

    /* utime + stime of all the ZooKeeper servers; -1 if any is unknown */
    static long zkTicks()
    {
        long sum = 0;

        if (zkPids.length == 0)
            return -1;
        for (long pid : zkPids)
        {
            long t = processTicks(pid);

            if (t < 0)
                return -1;
            sum += t;
        }
        return sum;
    }

    /* Ticks between two readings of one counter; -1 if either is unknown */
    static long delta(long start, long end)
    {
        return (start < 0 || end < 0) ? -1 : end - start;
    }

    /*
     * The cycle of one thread: its own recipe object on PATH, as each
     * process of an application would hold one.
     */
    static Cycle makeCycle(CuratorFramework client, Kind kind, String path,
                           int maxLeases)
    {
        switch (kind)
        {
            case READ:
            case WRITE:
            {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
                InterProcessLock lock = kind == Kind.READ ? rw.readLock() : rw.writeLock();

                return () -> {
                    lock.acquire();
                    lock.release();
                };
            }
            case COUNTER:
            {
                DistributedAtomicLong counter =
                    new DistributedAtomicLong(client, path, new RetryNTimes(1000, 0));

                return () -> {
                    while (!counter.add(1L).succeeded())
                        ;
                };
            }
            case LEADER:
            {
                LeaderLatch latch = sharedLatch(client, path);

                return () -> {
                    if (!latch.hasLeadership())
                        throw new IllegalStateException("the latch does not lead");
                };
            }
            case SEMAPHORE:
            {
                InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, maxLeases);

                return () -> {
                    Lease lease = sem.acquire();

                    sem.returnLease(lease);
                };
            }
            default:
            {
                InterProcessMutex mutex = new InterProcessMutex(client, path);

                return () -> {
                    mutex.acquire();
                    mutex.release();
                };
            }
        }
    }

    /*
     * Run THREADS threads doing cycles of KIND for SECONDS under BASE (each
     * thread on its own path for DISTINCT, all on the path MIXPATH for
     * MIXED, else all on one path); return counts, percentiles and the CPU
     * time spent in the window.  The threads start PREROLL seconds before
     * the window does.
     */
    static Result runMode(CuratorFramework client, String base, int threads,
                          Kind kind, int maxLeases, String mixPath,
                          double preroll, double seconds) throws Exception
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
            final String path = kind == Kind.DISTINCT ? base + "/t" + i
                : kind == Kind.MIXED ? mixPath : base + "/shared";
            final Cycle cycle = kind == Kind.MIXED ? null : makeCycle(client, kind, path, maxLeases);
            final InterProcessMutex mixMutex = kind == Kind.MIXED ? new InterProcessMutex(client, path) : null;

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
                        long t1;

                        if (mixMutex != null)
                        {
                            /* the acquire's latency: the release is not waited for */
                            mixMutex.acquire();
                            t1 = System.nanoTime();
                            mixMutex.release();
                        }
                        else
                        {
                            cycle.run();
                            t1 = System.nanoTime();
                        }

                        long done = System.nanoTime();

                        s.all++;
                        if (done >= start && done <= end)
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

        /* the CPU counters are read where the window starts and ends */
        long rq0 = packetsReceived();

        window[0] = System.nanoTime() + (long) (preroll * 1e9);
        window[1] = window[0] + (long) (seconds * 1e9);
        go.countDown();
        sleepUntil(window[0]);

        long cpu0 = machineBusyTicks();
        long zk0 = zkTicks();
        long winStartMs = System.currentTimeMillis();

        sleepUntil(window[1]);

        long cpu1 = machineBusyTicks();
        long zk1 = zkTicks();
        long winEndMs = System.currentTimeMillis();

        for (Thread w : workers)
        {
            w.join(TimeUnit.SECONDS.toMillis(60) + (long) (seconds * 1000));
            if (w.isAlive())
                throw new IllegalStateException("worker did not finish: " + w.getName());
        }
        if (error.get() != null)
            throw new RuntimeException("worker failed", error.get());
        long rq1 = packetsReceived();

        int total = 0;
        long inWindow = 0;
        long allCycles = 0;
        for (Samples s : samples)
        {
            total += s.n;
            inWindow += s.inWindow;
            allCycles += s.all;
        }

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

        r.cycles = inWindow;
        r.secs = seconds;
        r.p50 = percentile(all, 50);
        r.p99 = percentile(all, 99);
        r.avg = total > 0 ? sum / total : 0;
        r.cpuTicks = delta(cpu0, cpu1);
        r.zkTicks = delta(zk0, zk1);
        r.requests = delta(rq0, rq1);
        r.allCycles = allCycles;
        r.winStartMs = winStartMs;
        r.winEndMs = winEndMs;
        return r;
    }

    /* Sleep until System.nanoTime() reaches DEADLINE */
    static void sleepUntil(long deadline) throws InterruptedException
    {
        for (long left = deadline - System.nanoTime(); left > 0;
             left = deadline - System.nanoTime())
            TimeUnit.NANOSECONDS.sleep(left);
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
            System.err.println("usage: CuratorBench host:port seconds warmup_seconds NAME:THREADS:distinct|shared|read|write|semaphore|counter|leader|mixed[:MAX|:PATH]...");
            System.exit(2);
        }
        String hosts = args[0];
        double seconds = Double.parseDouble(args[1]);
        double warmup = Double.parseDouble(args[2]);
        List<String> modes = new ArrayList<>(Arrays.asList(args).subList(3, args.length));
        String base = "/bench/curator/" + ProcessHandle.current().pid();
        String pidEnv = System.getenv("BENCH_ZK_PID");

        if (pidEnv != null && !pidEnv.isEmpty())
            zkPids = Arrays.stream(pidEnv.split(",")).mapToLong(Long::parseLong).toArray();
        String goFile = System.getenv("BENCH_GO_FILE");
        /* the first server of the connect string, or BENCH_ZK_MNTR */
        zkHostPort = hosts.split(",")[0];
        String mntrEnv = System.getenv("BENCH_ZK_MNTR");

        if (mntrEnv != null && !mntrEnv.isEmpty())
            zkHostPort = mntrEnv;

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
                runMode(client, base + "/warmup-d", 8, Kind.DISTINCT, 0, null, 0, warmup * 0.5);
                runMode(client, base + "/warmup-s", 8, Kind.SHARED, 0, null, 0, warmup * 0.2);
                runMode(client, base + "/warmup-1", 1, Kind.DISTINCT, 0, null, 0, warmup * 0.1);
                runMode(client, base + "/warmup-r", 4, Kind.READ, 0, null, 0, warmup * 0.1);
                runMode(client, base + "/warmup-m", 4, Kind.SEMAPHORE, 2, null, 0, warmup * 0.1);
            }

            /* another client starts with us: say so, wait for the word */
            if (goFile != null && !goFile.isEmpty())
            {
                long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);

                System.out.println("READY");
                System.out.flush();
                while (!Files.exists(Paths.get(goFile)))
                {
                    if (System.nanoTime() > giveUp)
                        throw new IllegalStateException("no " + goFile + " within 300 s");
                    TimeUnit.MILLISECONDS.sleep(5);
                }
            }

            for (String mode : modes)
            {
                String[] parts = mode.split(":");

                if (parts.length < 3)
                    throw new IllegalArgumentException("bad mode: " + mode);

                String name = parts[0];
                int threads = Integer.parseInt(parts[1]);
                Kind kind = Kind.valueOf(parts[2].toUpperCase());
                boolean mixed = kind == Kind.MIXED;
                int maxLeases = parts.length > 3 && !mixed ? Integer.parseInt(parts[3]) : 1;

                if (mixed && (parts.length < 4 || !parts[3].startsWith("/")))
                    throw new IllegalArgumentException("mixed needs an absolute path: " + mode);

                Result r = runMode(client, base + "/" + name, threads, kind,
                                   maxLeases, mixed ? parts[3] : null,
                                   mixed ? 1.0 : 0, seconds);

                System.out.printf("RESULT name=%s threads=%d shape=%s cycles=%d secs=%.3f cps=%.0f p50=%d p99=%d avg=%.0f cpu_jiffies=%d zk_jiffies=%d requests=%d all_cycles=%d win_start_ms=%d win_end_ms=%d%n",
                                  name, threads, parts[2], r.cycles, r.secs,
                                  r.cycles / r.secs, r.p50, r.p99, r.avg,
                                  r.cpuTicks, r.zkTicks, r.requests, r.allCycles,
                                  r.winStartMs, r.winEndMs);
                System.out.flush();
            }
        }
        finally
        {
            client.close();
        }
    }
}
