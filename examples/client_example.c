/* A small client of `tollfree serve`: connect, hello, load a series once, sweep two combos by
 * handle, print combo 0.
 *
 *   build/tollfree serve --unix /tmp/tf.sock &
 *   build/examples/example_client_example unix:/tmp/tf.sock
 *   (or tcp:127.0.0.1:PORT, or shm:PATH with `serve --shm PATH`)
 */
#include <math.h>
#include <stdio.h>

#include "tollfree/client.h"

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : "unix:/tmp/tf.sock";
    tf_client *c;
    int rc = tf_client_open(&c, url);
    if (rc) {
        fprintf(stderr, "connect %s: %s\n", url, tf_strerror(rc));
        return 1;
    }
    tf_server_info info;
    rc = tf_client_hello(c, &info);
    if (rc) {
        fprintf(stderr, "hello: %s\n", tf_strerror(rc));
        tf_client_close(c);
        return 1;
    }
    printf("server: protocol v%u, caps 0x%x, %u kernel threads\n", info.version, info.caps,
           info.threads);

    /* A toy random walk. */
    enum { N = 20000 };
    static double close[N];
    double px = 100.0;
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        px *= 1.0 + ((double)(s >> 16 & 0x7fff) / 32768.0 - 0.5) * 0.002;
        close[i] = px;
    }
    uint64_t handle;
    int created;
    rc = tf_client_load(c, close, N, &handle, &created);
    if (rc) {
        fprintf(stderr, "load: %s (%s)\n", tf_strerror(rc), tf_client_error_message(c));
        tf_client_close(c);
        return 1;
    }
    int64_t params[2][6] = {{6, 3, 2, 3, 1, 2}, {100, 50, 10, 50, 17, 25}};
    double pnl[2];
    int64_t trades[2];
    rc = tf_client_sweep(c, handle, &params[0][0], 2, pnl, trades);
    if (rc) {
        fprintf(stderr, "sweep: %s (%s)\n", tf_strerror(rc), tf_client_error_message(c));
        tf_client_close(c);
        return 1;
    }
    printf("dataset 0x%016llx (%s): combo 0 (6,3,2,3,1,2): pnl %.4f, trades %lld\n",
           (unsigned long long)handle, created ? "new" : "already loaded", pnl[0],
           (long long)trades[0]);
    tf_client_close(c);
    return isfinite(pnl[0]) ? 0 : 1;
}
