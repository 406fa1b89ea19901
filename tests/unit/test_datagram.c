/* Datagram ingress: the sequence tracker (in order, gap, late, duplicate, foreign, malformed,
 * heartbeats), then real UDP sockets on loopback. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/datagram.h"
#include "tollfree/orderflow.h"

#define SESSION 0xABCDull

static size_t dgram(uint8_t *b, uint64_t session, uint64_t seq, int kind)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = (uint8_t)kind;
    m.session_id = session;
    m.journal_seq = seq;
    if (kind == TF_OFL_CANCEL_BY_ORDER) {
        m.cancel_by_order.command_seq = seq + 1000;
        m.cancel_by_order.order_id = seq;
    }
    int n = tf_ofl_datagram_encode(b, TF_OFL_MAX_DATAGRAM, &m);
    return n > 0 ? (size_t)n : 0;
}

static int feed(tf_dgram_tracker *t, uint64_t session, uint64_t seq, int kind, tf_dgram_event *ev)
{
    uint8_t b[TF_OFL_MAX_DATAGRAM];
    size_t n = dgram(b, session, seq, kind);
    return tf_dgram_track(t, b, n, ev);
}

static void test_tracker(void)
{
    tf_dgram_tracker t;
    tf_dgram_event ev;
    tf_dgram_tracker_init(&t, SESSION, 0);
    const int C = TF_OFL_CANCEL_BY_ORDER;

    CHECK_EQ(feed(&t, SESSION, 0, C, &ev), TF_DGRAM_IN_ORDER);
    CHECK_EQ(ev.msg.cancel_by_order.order_id, 0);
    CHECK_EQ(feed(&t, SESSION, 1, C, &ev), TF_DGRAM_IN_ORDER);
    CHECK_EQ(t.next_seq, 2);

    /* gap: 2, 3, 4 missing */
    CHECK_EQ(feed(&t, SESSION, 5, C, &ev), TF_DGRAM_GAP);
    CHECK_EQ(ev.gap_first, 2);
    CHECK_EQ(ev.gap_count, 3);
    CHECK_EQ(ev.msg.journal_seq, 5);
    CHECK_EQ(t.next_seq, 6);
    CHECK_EQ(t.stats.missing, 3);

    /* 3 arrives late; again: duplicate; 5 again: duplicate */
    CHECK_EQ(feed(&t, SESSION, 3, C, &ev), TF_DGRAM_LATE);
    CHECK_EQ(t.stats.missing, 2);
    CHECK_EQ(feed(&t, SESSION, 3, C, &ev), TF_DGRAM_DUPLICATE);
    CHECK_EQ(feed(&t, SESSION, 5, C, &ev), TF_DGRAM_DUPLICATE);
    CHECK_EQ(feed(&t, SESSION, 0, C, &ev), TF_DGRAM_DUPLICATE);
    CHECK_EQ(t.next_seq, 6);

    /* foreign session and malformed datagrams change nothing */
    CHECK_EQ(feed(&t, SESSION + 1, 6, C, &ev), TF_DGRAM_FOREIGN);
    CHECK_EQ(t.next_seq, 6);
    uint8_t b[TF_OFL_MAX_DATAGRAM + 8];
    size_t n = dgram(b, SESSION, 6, C);
    b[16] = 0x40;
    CHECK_EQ(tf_dgram_track(&t, b, n, &ev), TF_DGRAM_MALFORMED);
    CHECK_RC(ev.error, TF_E_OFL_RESERVED_KIND);
    CHECK_EQ(tf_dgram_track(&t, b, 5, &ev), TF_DGRAM_MALFORMED);
    CHECK_RC(ev.error, TF_E_OFL_HEADER_TOO_SHORT);
    memset(b, 0, sizeof b);
    CHECK_EQ(tf_dgram_track(&t, b, TF_OFL_MAX_DATAGRAM + 1, &ev), TF_DGRAM_MALFORMED);
    CHECK_RC(ev.error, TF_E_OFL_DATAGRAM_TOO_LARGE);
    CHECK_EQ(t.next_seq, 6);

    /* heartbeats carry the last journal_seq sent */
    CHECK_EQ(feed(&t, SESSION, 5, TF_OFL_HEARTBEAT, &ev), TF_DGRAM_IN_ORDER); /* nothing lost */
    CHECK_EQ(feed(&t, SESSION, 8, TF_OFL_HEARTBEAT, &ev), TF_DGRAM_GAP);      /* 6, 7, 8 lost */
    CHECK_EQ(ev.gap_first, 6);
    CHECK_EQ(ev.gap_count, 3);
    CHECK_EQ(t.next_seq, 9);
    CHECK_EQ(feed(&t, SESSION, 8, C, &ev), TF_DGRAM_LATE); /* the tail message, late */
    CHECK_EQ(feed(&t, SESSION, TF_DGRAM_NO_SEQ, TF_OFL_HEARTBEAT, &ev), TF_DGRAM_IN_ORDER);
    CHECK_EQ(t.next_seq, 9);
    CHECK_EQ(feed(&t, SESSION, 9, C, &ev), TF_DGRAM_IN_ORDER);

    /* a jump beyond the 64-slot window: older ones count as duplicates (cannot tell) */
    CHECK_EQ(feed(&t, SESSION, 200, C, &ev), TF_DGRAM_GAP);
    CHECK_EQ(ev.gap_count, 190);
    CHECK_EQ(feed(&t, SESSION, 199, C, &ev), TF_DGRAM_LATE);
    CHECK_EQ(feed(&t, SESSION, 137, C, &ev), TF_DGRAM_LATE);
    CHECK_EQ(feed(&t, SESSION, 136, C, &ev), TF_DGRAM_DUPLICATE);
    CHECK_EQ(feed(&t, SESSION, 201, C, &ev), TF_DGRAM_IN_ORDER);

    CHECK_EQ(t.stats.in_order, 4);
    CHECK_EQ(t.stats.gaps, 3);
    CHECK_EQ(t.stats.late, 4);
    CHECK_EQ(t.stats.missing, 3 + 3 + 190 - 4);
    CHECK_EQ(t.stats.duplicates, 4);
    CHECK_EQ(t.stats.foreign, 1);
    CHECK_EQ(t.stats.malformed, 3);
    CHECK_EQ(t.stats.heartbeats, 3);

    /* journal_seq 2^64-1 is reserved for heartbeats: a data message with it is malformed */
    CHECK_EQ(feed(&t, SESSION, TF_DGRAM_NO_SEQ, C, &ev), TF_DGRAM_MALFORMED);
    CHECK_RC(ev.error, TF_E_OFL_SEQ_GAP);
    CHECK_EQ(t.next_seq, 202);

    /* a tracker that starts later: anything before first_seq is a duplicate */
    tf_dgram_tracker_init(&t, SESSION, 100);
    CHECK_EQ(feed(&t, SESSION, 99, C, &ev), TF_DGRAM_DUPLICATE);
    CHECK_EQ(feed(&t, SESSION, 100, C, &ev), TF_DGRAM_IN_ORDER);
}

/* Receives until `want` events arrived or `ms` of silence. */
static int recv_wait(tf_dgram_receiver *r, tf_dgram_event *ev, int want, int ms)
{
    int got = 0;
    while (got < want) {
        int n = tf_dgram_recv(r, ev + got, (size_t)(want - got), ms);
        if (n <= 0)
            break;
        got += n;
    }
    return got;
}

/* Events that were sent: waits up to the hang deadline for each. */
static int recv_n(tf_dgram_receiver *r, tf_dgram_event *ev, int want)
{
    int got = recv_wait(r, ev, want, T_DEADLINE_MS);
    if (got < want)
        tf_test_deadline_note("datagram receive", T_DEADLINE_MS);
    return got;
}

static void test_loopback(void)
{
    tf_dgram_receiver *r = NULL;
    tf_dgram_sender *s = NULL, *foreign = NULL;
    CHECK_RC(tf_dgram_receiver_open("127.0.0.1", 0, SESSION, 0, &r), 0);
    if (!r)
        return;
    uint16_t port = (uint16_t)tf_dgram_receiver_port(r);
    CHECK(port != 0);
    CHECK(tf_dgram_receiver_fd(r) >= 0);
    CHECK_RC(tf_dgram_sender_open("127.0.0.1", port, SESSION, &s), 0);
    CHECK_RC(tf_dgram_sender_open("127.0.0.1", port, SESSION + 7, &foreign), 0);
    if (!s || !foreign)
        return;
    CHECK(tf_dgram_sender_fd(s) >= 0);

    static tf_dgram_event ev[512];
    static tf_ofl_msg msgs[300];
    tf_ofl_gen g;
    tf_ofl_gen_init(&g, 8);
    for (int i = 0; i < 300; i++)
        tf_ofl_gen_next(&g, &msgs[i]); /* journal_seq 0..299 */

    /* nothing there yet: a non-blocking receive returns 0 */
    CHECK_RC(tf_dgram_recv(r, ev, 8, 0), 0);
    CHECK_RC(tf_dgram_send_heartbeat(s), 1); /* before anything: NO_SEQ */
    CHECK_EQ(recv_n(r, ev, 1), 1);
    CHECK_EQ(ev[0].status, TF_DGRAM_IN_ORDER);
    CHECK_EQ(ev[0].msg.kind, TF_OFL_HEARTBEAT);
    CHECK_EQ(ev[0].msg.journal_seq, TF_DGRAM_NO_SEQ);

    /* 0..99 in order (several sendmmsg batches), content intact */
    CHECK_RC(tf_dgram_send(s, msgs, 100), 100);
    CHECK_EQ(recv_n(r, ev, 100), 100);
    int in_order = 1, same = 1;
    for (int i = 0; i < 100; i++) {
        in_order &= ev[i].status == TF_DGRAM_IN_ORDER && ev[i].msg.journal_seq == (uint64_t)i;
        uint8_t a[TF_OFL_MAX_FRAME], b[TF_OFL_MAX_FRAME];
        tf_ofl_msg want = msgs[i];
        int na = tf_ofl_frame_encode(a, sizeof a, &want);
        int nb = tf_ofl_frame_encode(b, sizeof b, &ev[i].msg);
        same &= na == nb && !memcmp(a, b, (size_t)na) && ev[i].msg.session_id == SESSION;
    }
    CHECK(in_order);
    CHECK(same);

    /* a hole: 100..109 never sent, 110..119 arrive -> one gap of 10 */
    CHECK_RC(tf_dgram_send(s, msgs + 110, 10), 10);
    CHECK_EQ(recv_n(r, ev, 10), 10);
    CHECK_EQ(ev[0].status, TF_DGRAM_GAP);
    CHECK_EQ(ev[0].gap_first, 100);
    CHECK_EQ(ev[0].gap_count, 10);
    CHECK_EQ(ev[9].status, TF_DGRAM_IN_ORDER);

    /* a duplicate resend, a foreign session, a late fill */
    CHECK_RC(tf_dgram_send(s, msgs + 115, 1), 1);
    CHECK_RC(tf_dgram_send(foreign, msgs + 120, 1), 1);
    CHECK_RC(tf_dgram_send(s, msgs + 105, 1), 1);
    CHECK_EQ(recv_n(r, ev, 3), 3);
    CHECK_EQ(ev[0].status, TF_DGRAM_DUPLICATE);
    CHECK_EQ(ev[1].status, TF_DGRAM_FOREIGN);
    CHECK_EQ(ev[1].msg.session_id, SESSION + 7);
    CHECK_EQ(ev[2].status, TF_DGRAM_LATE);

    /* tail loss seen through a heartbeat: 120..124 were sent but lost; a heartbeat carrying
     * 124 (built by hand, as the sender would) reveals it */
    int hfd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    uint8_t hb[TF_OFL_MAX_DATAGRAM];
    size_t hn = dgram(hb, SESSION, 124, TF_OFL_HEARTBEAT);
    CHECK_EQ(sendto(hfd, hb, hn, 0, (struct sockaddr *)&to, sizeof to), (long)hn);
    close(hfd);
    CHECK_EQ(recv_n(r, ev, 1), 1);
    CHECK_EQ(ev[0].status, TF_DGRAM_GAP);
    CHECK_EQ(ev[0].msg.kind, TF_OFL_HEARTBEAT);
    CHECK_EQ(ev[0].gap_first, 120);
    CHECK_EQ(ev[0].gap_count, 5);
    /* the sender's own heartbeat carries the last journal_seq it sent */
    CHECK_RC(tf_dgram_send(s, msgs + 125, 1), 1);
    CHECK_RC(tf_dgram_send_heartbeat(s), 1);
    CHECK_EQ(recv_n(r, ev, 2), 2);
    CHECK_EQ(ev[0].status, TF_DGRAM_IN_ORDER);
    CHECK_EQ(ev[1].status, TF_DGRAM_IN_ORDER);
    CHECK_EQ(ev[1].msg.kind, TF_OFL_HEARTBEAT);
    CHECK_EQ(ev[1].msg.journal_seq, 125);

    /* hostile datagrams from a plain socket: garbage, oversize, empty. The receiver reports
     * them and keeps serving. */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    static uint8_t junk[2000];
    memset(junk, 0x41, sizeof junk);
    CHECK_EQ(sendto(fd, junk, 40, 0, (struct sockaddr *)&a, sizeof a), 40);
    CHECK_EQ(sendto(fd, junk, sizeof junk, 0, (struct sockaddr *)&a, sizeof a), (long)sizeof junk);
    CHECK_EQ(sendto(fd, junk, 0, 0, (struct sockaddr *)&a, sizeof a), 0);
    CHECK_EQ(sendto(fd, junk, 513, 0, (struct sockaddr *)&a, sizeof a), 513);
    close(fd);
    CHECK_EQ(recv_n(r, ev, 4), 4);
    CHECK_EQ(ev[0].status, TF_DGRAM_MALFORMED);
    CHECK_RC(ev[0].error, TF_E_OFL_UNKNOWN_KIND);
    CHECK_EQ(ev[1].status, TF_DGRAM_MALFORMED);
    CHECK_RC(ev[1].error, TF_E_OFL_DATAGRAM_TOO_LARGE);
    CHECK_RC(ev[2].error, TF_E_OFL_HEADER_TOO_SHORT);
    CHECK_RC(ev[3].error, TF_E_OFL_DATAGRAM_TOO_LARGE);
    CHECK_RC(tf_dgram_send(s, msgs + 126, 1), 1);
    CHECK_EQ(recv_n(r, ev, 1), 1);
    CHECK_EQ(ev[0].status, TF_DGRAM_IN_ORDER);

    const tf_dgram_tracker *t = tf_dgram_receiver_tracker(r);
    CHECK_EQ(t->next_seq, 127);
    CHECK_EQ(t->stats.foreign, 1);
    CHECK_EQ(t->stats.malformed, 4);
    CHECK_EQ(t->stats.missing, 10 - 1 + 5);

    /* sender codec errors: nothing of that message is sent */
    tf_ofl_msg bad = msgs[0];
    bad.kind = TF_OFL_NEW_LIMIT;
    bad.new_limit.side = 4;
    CHECK_RC(tf_dgram_send(s, &bad, 1), TF_E_OFL_INVALID_SIDE);
    tf_ofl_msg two[2] = {msgs[127], bad};
    CHECK_RC(tf_dgram_send(s, two, 2), 1);
    CHECK_EQ(recv_wait(r, ev, 2, 100), 1); /* the second was never sent */
    CHECK_RC(tf_dgram_send(s, NULL, 3), TF_E_NULL_ARG);
    CHECK_RC(tf_dgram_send(s, NULL, 0), 0);
    CHECK_RC(tf_dgram_recv(r, NULL, 3, 0), TF_E_NULL_ARG);

    tf_dgram_sender_close(s);
    tf_dgram_sender_close(foreign);
    tf_dgram_receiver_close(r);
    tf_dgram_sender_close(NULL);
    tf_dgram_receiver_close(NULL);
}

static void test_open_errors(void)
{
    tf_dgram_sender *s = (tf_dgram_sender *)1;
    tf_dgram_receiver *r = (tf_dgram_receiver *)1;
    CHECK_RC(tf_dgram_sender_open("localhost", 9, 1, &s), TF_E_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_RC(tf_dgram_sender_open(NULL, 9, 1, &s), TF_E_INVALID_ARG);
    CHECK_RC(tf_dgram_receiver_open("999.1.1.1", 0, 1, 0, &r), TF_E_INVALID_ARG);
    CHECK(r == NULL);
    CHECK_RC(tf_dgram_sender_open("127.0.0.1", 9, 1, NULL), TF_E_NULL_ARG);
    /* two receivers on one port */
    tf_dgram_receiver *a = NULL;
    CHECK_RC(tf_dgram_receiver_open("127.0.0.1", 0, 1, 0, &a), 0);
    if (a) {
        CHECK_RC(tf_dgram_receiver_open("127.0.0.1", (uint16_t)tf_dgram_receiver_port(a), 1, 0, &r),
                 -EADDRINUSE);
        tf_dgram_receiver_close(a);
    }
    /* IPv6 loopback, where the host has it */
    if (tf_dgram_receiver_open("::1", 0, 1, 0, &a) == 0) {
        CHECK(tf_dgram_receiver_port(a) > 0);
        tf_dgram_receiver_close(a);
    } else {
        printf("note: no IPv6 loopback here\n");
    }
}

int main(void)
{
    test_tracker();
    test_loopback();
    test_open_errors();
    return tf_test_report();
}
