/* The C client against the v2 framing vectors the Python client also passes
 * (tests/vectors/wire_frames.txt): for each exchange, a fake server on a Unix socket checks that
 * the client's request is exactly the vector's bytes, answers with the vector's reply, and the
 * test checks what the client returns. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"
#include "test_server_util.h"
#include "tollfree/client.h"
#include "tollfree/error.h"

#define MAX_FRAME 512

typedef struct exchange {
    char call[32];
    char args[256];
    uint8_t req[MAX_FRAME], rep[MAX_FRAME];
    size_t req_len, rep_len;
    char result[256];
} exchange;

typedef struct fake {
    int lfd;
    const exchange *x;
    uint8_t got[MAX_FRAME];
    size_t got_len;
} fake;

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (; h[0] && h[1] && n < cap; h += 2) {
        char b[3] = {h[0], h[1], 0};
        out[n++] = (uint8_t)strtoul(b, NULL, 16);
    }
    return n;
}

/* Accepts one connection, reads exactly the vector's request length (or until the client stops
 * sending), replies, then waits for the client to close. */
static void *fake_main(void *arg)
{
    fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    struct pollfd pf = {fd, POLLIN, 0};
    while (f->got_len < f->x->req_len && poll(&pf, 1, T_DEADLINE_MS) > 0) {
        ssize_t k = recv(fd, f->got + f->got_len, f->x->req_len - f->got_len, 0);
        if (k <= 0)
            break;
        f->got_len += (size_t)k;
    }
    if (send(fd, f->x->rep, f->x->rep_len, MSG_NOSIGNAL) != (ssize_t)f->x->rep_len)
        fprintf(stderr, "fake: short send\n");
    uint8_t b[64];
    while (poll(&pf, 1, T_DEADLINE_MS) > 0 && recv(fd, b, sizeof b, 0) > 0)
        ;
    close(fd);
    return NULL;
}

/* name=value from a comma-separated list, or NULL. */
static const char *field(const char *list, const char *name, char *buf, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            size_t n = strcspn(p + nl + 1, ",");
            if (n >= cap)
                n = cap - 1;
            memcpy(buf, p + nl + 1, n);
            buf[n] = 0;
            return buf;
        }
    }
    return NULL;
}

static int64_t ival(const char *list, const char *name)
{
    char b[64];
    return field(list, name, b, sizeof b) ? strtoll(b, NULL, 0) : -999;
}

static double dval(const char *list, const char *name)
{
    char b[64];
    return field(list, name, b, sizeof b) ? strtod(b, NULL) : -999.0;
}

/* Makes the call of x on c and checks its result. */
static void run_call(tf_client *c, const exchange *x)
{
    const char *r = x->result;
    char want_err[64];
    int expect_err = field(r, "error", want_err, sizeof want_err) != NULL;
    int want_rc = expect_err ? atoi(want_err) : 0;
    int rc;
    if (!strcmp(x->call, "hello")) {
        tf_server_info info;
        rc = tf_client_hello(c, &info);
        if (!expect_err && rc == 0) {
            CHECK_EQ(info.version, ival(r, "version"));
            CHECK_EQ(info.caps, ival(r, "caps"));
            CHECK_EQ(info.max_frame, ival(r, "max_frame"));
            CHECK_EQ(info.max_memory, ival(r, "max_memory"));
            CHECK_EQ(info.max_datasets, ival(r, "max_datasets"));
            CHECK_EQ(info.threads, ival(r, "threads"));
        }
    } else if (!strcmp(x->call, "run_one")) {
        char pb[64];
        int64_t p[6] = {0};
        if (field(x->args, "params", pb, sizeof pb))
            sscanf(pb, "%" SCNd64 ":%" SCNd64 ":%" SCNd64 ":%" SCNd64 ":%" SCNd64 ":%" SCNd64,
                   &p[0], &p[1], &p[2], &p[3], &p[4], &p[5]);
        double pnl = 0;
        int64_t trades = 0;
        rc = tf_client_run_one(c, (uint64_t)ival(x->args, "handle"), p, &pnl, &trades);
        if (!expect_err && rc == 0) {
            CHECK(pnl == dval(r, "pnl"));
            CHECK_EQ(trades, ival(r, "trades"));
        }
    } else if (!strcmp(x->call, "session_bar") || !strcmp(x->call, "session_close")) {
        tf_session_state st;
        uint64_t sid = (uint64_t)ival(x->args, "session");
        rc = x->call[8] == 'b' ? tf_client_session_bar(c, sid, dval(x->args, "close"), &st)
                               : tf_client_session_close(c, sid, &st);
        if (!expect_err && rc == 0) {
            CHECK_EQ(st.position, ival(r, "position"));
            CHECK_EQ(st.trades, ival(r, "trades"));
            CHECK(st.pnl == dval(r, "pnl"));
            if (x->call[8] == 'c')
                CHECK_EQ(st.bars, ival(r, "bars"));
        }
    } else if (!strcmp(x->call, "drop")) {
        rc = tf_client_drop(c, (uint64_t)ival(x->args, "handle"));
    } else {
        fprintf(stderr, "unknown call %s in the vectors\n", x->call);
        CHECK(0);
        return;
    }
    CHECK_RC(rc, want_rc);
    if (expect_err) {
        char msg[256];
        field(r, "message", msg, sizeof msg);
        for (char *q = msg; *q; q++)
            if (*q == '_')
                *q = ' ';
        CHECK(!strcmp(tf_client_error_message(c), msg));
    }
}

static void run_exchange(const char *dir, const exchange *x)
{
    char url[160];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    /* dir is /tmp/tftest.XXXXXX: the path fits sun_path. */
    if (strlen(dir) + sizeof "/v.sock" > sizeof sa.sun_path) {
        CHECK(0);
        return;
    }
    memcpy(sa.sun_path, dir, strlen(dir));
    memcpy(sa.sun_path + strlen(dir), "/v.sock", sizeof "/v.sock");
    const char *path = sa.sun_path;
    unlink(path);
    fake f = {.x = x};
    f.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(f.lfd >= 0 && bind(f.lfd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          listen(f.lfd, 1) == 0);
    pthread_t th;
    CHECK_RC(pthread_create(&th, NULL, fake_main, &f), 0);
    snprintf(url, sizeof url, "unix:%s", path);
    tf_client *c = NULL;
    tf_client_opts o = {.timeout_ms = T_DEADLINE_MS};
    CHECK_RC(tf_client_open_opts(&c, url, &o), 0);
    if (c) {
        run_call(c, x);
        tf_client_close(c);
    } else {
        shutdown(f.lfd, SHUT_RDWR);
    }
    pthread_join(th, NULL);
    close(f.lfd);
    unlink(path);
    CHECK_EQ(f.got_len, x->req_len);
    if (f.got_len != x->req_len || memcmp(f.got, x->req, x->req_len) != 0) {
        fprintf(stderr, "%s %s: the request differs from the vector\n", x->call, x->args);
        CHECK(0);
    }
}

int main(void)
{
    char dir[256];
    static char line[8192];
    FILE *fp = tf_test_open_vectors("wire_frames.txt");
    CHECK_RC(t_mkdtemp(dir, sizeof dir), 0);
    int n = 0;
    static exchange x;
    while (fp && fgets(line, sizeof line, fp)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tok[5] = {0};
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < 5; p = strtok(NULL, " "))
            tok[nt++] = p;
        CHECK_EQ(nt, 5);
        if (nt != 5)
            continue;
        memset(&x, 0, sizeof x);
        snprintf(x.call, sizeof x.call, "%s", tok[0]);
        snprintf(x.args, sizeof x.args, "%s", tok[1]);
        x.req_len = unhex(tok[2], x.req, sizeof x.req);
        x.rep_len = unhex(tok[3], x.rep, sizeof x.rep);
        snprintf(x.result, sizeof x.result, "%s", tok[4]);
        run_exchange(dir, &x);
        n++;
    }
    if (fp)
        fclose(fp);
    rmdir(dir);
    CHECK(n >= 6);
    return tf_test_report();
}
