/* The connection layer (src/net/) through its first user, `tollfree serve`, over real sockets:
 * a client that sends a request and half-closes (its FIN often in the same epoll edge as its
 * data) gets its reply and is then seen to leave; no connection is left behind (the server's
 * open fds return to their baseline); an out-of-range TCP port is refused. */
#include <dirent.h>

#include "harness.h"
#include "test_server_util.h"

static int count_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Waits until the server holds at most `want` fds; returns the last count. */
static int wait_fds(pid_t pid, int want)
{
    int n = count_fds(pid);
    for (int64_t end = t_now_ms() + T_DEADLINE_MS; n > want && t_now_ms() < end;) {
        t_sleep_ms(10);
        n = count_fds(pid);
    }
    if (n > want)
        tf_test_deadline_note("server fds back to baseline", T_DEADLINE_MS);
    return n;
}

static int echo_ok(int fd, uint64_t id)
{
    uint8_t fr[64], rb[64];
    size_t n = t_v2_frame(fr, TF_OP_ECHO, id, "ping", 4);
    if (t_send_all(fd, fr, n))
        return 0;
    long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
    return bl == 16 && rb[0] == TF_OP_ECHO && tf_le64(rb + 4) == id && !memcmp(rb + 12, "ping", 4);
}

/* Many clients send one request each and shut down their sending side at once: each gets its
 * reply, then the server's end of the connection closes (read returns 0). */
static void test_half_close(tserver *ts, int n_clients)
{
    int base = count_fds(ts->pid);
    CHECK(base > 0);
    int *fds = calloc((size_t)n_clients, sizeof(int));
    for (int i = 0; i < n_clients; i++) {
        fds[i] = i % 2 ? t_connect_tcp(ts->tcp_port) : t_connect_unix(ts->unix_path);
        CHECK(fds[i] >= 0);
        if (fds[i] < 0)
            continue;
        uint8_t fr[64];
        size_t n = t_v2_frame(fr, TF_OP_ECHO, (uint64_t)i, "half", 4);
        CHECK_RC(t_send_all(fds[i], fr, n), 0);
        CHECK_RC(shutdown(fds[i], SHUT_WR), 0);
    }
    int replies = 0, closed = 0;
    for (int i = 0; i < n_clients; i++) {
        if (fds[i] < 0)
            continue;
        uint8_t rb[64];
        long bl = t_recv_frame(fds[i], rb, sizeof rb, T_DEADLINE_MS);
        replies += bl == 16 && tf_le64(rb + 4) == (uint64_t)i && !memcmp(rb + 12, "half", 4);
        closed += t_peer_closed(fds[i], T_DEADLINE_MS);
        close(fds[i]);
    }
    CHECK_EQ(replies, n_clients);
    CHECK_EQ(closed, n_clients);
    CHECK(wait_fds(ts->pid, base) <= base);
    free(fds);
}

/* A half-closed client that pipelines several requests gets every reply before the close. */
static void test_half_close_pipelined(tserver *ts)
{
    int fd = t_connect_unix(ts->unix_path);
    CHECK(fd >= 0);
    uint8_t buf[64 * 32];
    size_t n = 0;
    for (int i = 0; i < 32; i++)
        n += t_v2_frame(buf + n, TF_OP_ECHO, 1000 + (uint64_t)i, "pipe", 4);
    CHECK_RC(t_send_all(fd, buf, n), 0);
    CHECK_RC(shutdown(fd, SHUT_WR), 0);
    int ok = 0;
    for (int i = 0; i < 32; i++) {
        uint8_t rb[64];
        long bl = t_recv_frame(fd, rb, sizeof rb, T_DEADLINE_MS);
        ok += bl == 16 && tf_le64(rb + 4) == 1000 + (uint64_t)i;
    }
    CHECK_EQ(ok, 32);
    CHECK(t_peer_closed(fd, T_DEADLINE_MS));
    close(fd);
}

/* `--tcp 127.0.0.1:99999` is refused (it used to wrap to port 34463). */
static void test_bad_port(void)
{
    tserver t2;
    const char *extra[] = {"--tcp", "127.0.0.1:99999", NULL};
    CHECK_RC(t_start_ex(&t2, extra, 0), 0);
    CHECK_EQ(t_wait_exit(t2.pid, T_DEADLINE_MS), 1);
    t2.pid = 0;
    char log[4096];
    t_read_file(t2.log, log, sizeof log);
    CHECK(strstr(log, "65535") != NULL);
    t_cleanup(&t2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    tserver ts;
    const char *extra[] = {"--quiet", NULL};
    CHECK_RC(t_start(&ts, extra), 0);
    if (ts.pid) {
        int warm = t_connect_unix(ts.unix_path);
        CHECK(echo_ok(warm, 1));
        close(warm);
        for (int round = 0; round < 5; round++)
            test_half_close(&ts, 200);
        test_half_close_pipelined(&ts);
        int good = t_connect_tcp(ts.tcp_port);
        CHECK(echo_ok(good, 7));
        close(good);
        CHECK_EQ(t_stop(&ts), 0);
    }
    t_cleanup(&ts);
    test_bad_port();
    return tf_test_report();
}
