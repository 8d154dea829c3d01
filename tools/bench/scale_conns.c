/* Many mostly idle TCP connections, and connection storms: the one load generator of
 * tools/bench/scale (built in its work directory), tools/bench/scale-guest (built static into
 * the guest's initramfs, which has no python) and tests/lab/storm.rs (built by the test). C so the
 * same program runs in all three; there was a python twin for the host rig, removed so the host
 * and guest numbers come from one client and server.
 *
 *   scale_conns server PORT             accepts every connection and reads (discards)
 *                                       whatever comes, with one epoll
 *   scale_conns client ADDR PORT N ACTIVE [BYTES PERIOD_MS]
 *                                       opens N connections to ADDR:PORT, prints
 *                                       "ready N" once all are established, then every
 *                                       PERIOD_MS (default 1000) writes BYTES (default 8:
 *                                       trickling; 1024 and 10: busy) on ACTIVE of them
 *                                       until killed
 *   scale_conns storm ADDR PORT N CYCLES PAUSE_MS
 *                                       a connection storm to a server on each of
 *                                       PORT .. PORT + ceil(N / 15000) - 1 (one
 *                                       process each): CYCLES times, opens N
 *                                       connections as fast as they connect, writes
 *                                       100 bytes on each, closes them all at once and
 *                                       waits PAUSE_MS; a JSON line per worker and
 *                                       cycle on stdout
 *
 * Each raises its own RLIMIT_NOFILE to what N needs (root: up to fs.nr_open).
 *
 *   gcc -O2 -static -o scale_conns tools/bench/scale_conns.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* At least n descriptors if root may raise the limit so far; else as many as the hard
 * limit allows (then the client's connect or the server's accept says so). */
static void want_fds(long n) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || (long)r.rlim_cur >= n)
        return;
    struct rlimit up = {(rlim_t)n, (rlim_t)n};
    if (setrlimit(RLIMIT_NOFILE, &up) == 0)
        return;
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
}

static void sleep_ns(long ns) {
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static _Noreturn void server(int port) {
    want_fds(1 << 20);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    if (l < 0)
        die("socket");
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0)
        die("bind");
    /* A storm's connects outrun accept(): the kernel caps this at somaxconn,
     * which the storm's caller raises. */
    if (listen(l, 65535) != 0)
        die("listen");
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) != 0)
        die("epoll");
    static struct epoll_event evs[256];
    static char buf[65536];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == l) {
                int c;
                while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) != 0)
                        die("epoll_ctl");
                }
                if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
                    die("accept");
                continue;
            }
            ssize_t got;
            while ((got = read(fd, buf, sizeof buf)) > 0) {
            }
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                close(fd); /* closing drops it from the epoll set */
        }
    }
}

static _Noreturn void client(const char *addr, int port, long n, long active, long bytes,
                             long period_ms) {
    want_fds(n + 64);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        die("inet_pton");
    int *socks = calloc(n, sizeof *socks);
    if (!socks)
        die("calloc");
    for (long i = 0; i < n; i++) {
        socks[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (socks[i] < 0)
            die("socket");
        if (connect(socks[i], (struct sockaddr *)&a, sizeof a) != 0)
            die("connect");
        /* Paced so the listener's backlog never overflows (SYN retries take seconds). */
        if (i % 500 == 499)
            sleep_ns(50000000L);
    }
    printf("ready %ld\n", n);
    fflush(stdout);
    static char payload[65536];
    if (bytes < 1 || bytes > (long)sizeof payload || period_ms < 1) {
        fprintf(stderr, "scale_conns: BYTES must be 1 to %zu and PERIOD_MS at least 1\n",
                sizeof payload);
        exit(2);
    }
    memset(payload, 't', sizeof payload);
    for (;;) {
        long t0 = now_ns();
        for (long i = 0; i < active && i < n; i++)
            if (send(socks[i], payload, bytes, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
                die("send");
        long left = period_ms * 1000000L - (now_ns() - t0);
        if (left > 0)
            sleep_ns(left);
    }
}

/* One storm worker: CYCLES times, opens n connections (blocking connects, one
 * after another: over veth each takes tens of microseconds), writes 100 bytes
 * on each, waits for the others (so that every worker's sockets are open at
 * once), closes all of its own in a row and waits pause_ms. The closes are
 * what a storm is about: tens of thousands of sockets destroyed within a few
 * hundred ms. */
static void storm_worker(const struct sockaddr_in *a, long n, long cycles, long pause_ms,
                         int worker, int ready_w, int go_r) {
    int *socks = calloc(n, sizeof *socks);
    if (!socks)
        die("calloc");
    static char payload[100];
    memset(payload, 's', sizeof payload);
    for (long c = 0; c < cycles; c++) {
        long t0 = now_ns(), failed = 0, opened = 0;
        for (long i = 0; i < n; i++) {
            socks[i] = socket(AF_INET, SOCK_STREAM, 0);
            if (socks[i] < 0)
                die("socket");
            if (connect(socks[i], (const struct sockaddr *)a, sizeof *a) != 0) {
                failed++;
                close(socks[i]);
                socks[i] = -1;
                continue;
            }
            opened++;
            if (send(socks[i], payload, sizeof payload, MSG_NOSIGNAL) != (ssize_t)sizeof payload)
                die("send");
        }
        long t1 = now_ns();
        char b = 0;
        if (write(ready_w, &b, 1) != 1 || read(go_r, &b, 1) != 1)
            die("storm barrier");
        long t2 = now_ns();
        for (long i = 0; i < n; i++)
            if (socks[i] >= 0)
                close(socks[i]);
        long t3 = now_ns();
        printf("{\"worker\": %d, \"cycle\": %ld, \"opened\": %ld, \"failed\": %ld, "
               "\"open_ms\": %ld, \"close_ms\": %ld, \"bytes_each\": %zu}\n",
               worker, c, opened, failed, (t1 - t0) / 1000000L, (t3 - t2) / 1000000L,
               sizeof payload);
        fflush(stdout);
        sleep_ns(pause_ms * 1000000L);
    }
    exit(0);
}

/* A storm of n connections from enough processes that none needs more than
 * STORM_PER_WORKER descriptors (hosts cap RLIMIT_NOFILE below 50,000, even for
 * root); the parent releases their closes together each cycle. */
#define STORM_PER_WORKER 15000L
static _Noreturn void storm(const char *addr, int port, long n, long cycles, long pause_ms) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        die("inet_pton");
    int workers = (int)((n + STORM_PER_WORKER - 1) / STORM_PER_WORKER);
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0)
        die("pipe");
    for (int w = 0; w < workers; w++) {
        long share = n / workers + (w < n % workers);
        /* Worker w connects to PORT + w: with one destination every
         * connect() has to find a local port no other socket uses, a search
         * that grows with the sockets open (minutes for 50,000); with one
         * destination per worker a local port serves several. */
        a.sin_port = htons(port + w);
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            want_fds(share + 64);
            storm_worker(&a, share, cycles, pause_ms, w, ready[1], go[0]);
        }
    }
    for (long c = 0; c < cycles; c++) {
        char b;
        for (int w = 0; w < workers; w++)
            if (read(ready[0], &b, 1) != 1)
                die("storm barrier");
        for (int w = 0; w < workers; w++)
            if (write(go[1], &b, 1) != 1)
                die("storm barrier");
    }
    int status, failed = 0;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    exit(failed);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "server") == 0)
        server(atoi(argv[2]));
    if (argc == 6 && strcmp(argv[1], "client") == 0)
        client(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]), 8, 1000);
    if (argc == 8 && strcmp(argv[1], "client") == 0)
        client(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]), atol(argv[6]),
               atol(argv[7]));
    if (argc == 7 && strcmp(argv[1], "storm") == 0)
        storm(argv[2], atoi(argv[3]), atol(argv[4]), atol(argv[5]), atol(argv[6]));
    fprintf(stderr, "usage: scale_conns server PORT | client ADDR PORT N ACTIVE [BYTES PERIOD_MS]\n"
                    "       | storm ADDR PORT N CYCLES PAUSE_MS\n");
    return 2;
}
