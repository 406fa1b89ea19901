/* The server URL grammar of both C clients (tfc_parse_url, used by tf_client_open and
 * tf_orders_connect) against the vectors the Python clients also pass, tests/vectors/urls.txt;
 * and through the public calls: a URL the grammar refuses is TF_E_INVALID_ARG before anything is
 * dialed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_internal.h"
#include "harness.h"
#include "tollfree/client.h"
#include "tollfree/error.h"
#include "tollfree/orders.h"

static int scheme_of(const char *s)
{
    return !strcmp(s, "unix")  ? TFC_UNIX
           : !strcmp(s, "tcp") ? TFC_TCP
           : !strcmp(s, "shm") ? TFC_SHM
                               : -1;
}

int main(void)
{
    char line[1024];
    FILE *f = tf_test_open_vectors("urls.txt");
    int n_ok = 0, n_bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tok[6] = {0};
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < 6; p = strtok(NULL, " "))
            tok[nt++] = p;
        tfc_url u;
        int rc = tfc_parse_url(tok[1], &u);
        if (!strcmp(tok[0], "bad")) {
            n_bad++;
            if (rc != TF_E_INVALID_ARG)
                fprintf(stderr, "accepted %s\n", tok[1]);
            CHECK_RC(rc, TF_E_INVALID_ARG);
            /* The public calls refuse it the same way, without dialing. */
            tf_client *c = NULL;
            tf_orders *o = NULL;
            CHECK_RC(tf_client_open(&c, tok[1]), TF_E_INVALID_ARG);
            CHECK_RC(tf_orders_connect(&o, tok[1], NULL), TF_E_INVALID_ARG);
            CHECK(c == NULL && o == NULL);
            continue;
        }
        n_ok++;
        if (rc != 0)
            fprintf(stderr, "refused %s\n", tok[1]);
        CHECK_RC(rc, 0);
        CHECK_EQ(u.scheme, scheme_of(tok[2]));
        if (u.scheme == TFC_TCP) {
            CHECK(nt == 5 && !strcmp(u.host, tok[3]));
            CHECK_EQ(u.port, atoi(tok[4]));
        } else {
            CHECK(nt == 4 && !strcmp(u.path, tok[3]));
        }
    }
    if (f)
        fclose(f);
    /* The file is what it says: both kinds of vector, enough of each. */
    CHECK(n_ok >= 10);
    CHECK(n_bad >= 20);
    return tf_test_report();
}
