/* Limits and caps: the memory counter, connections per peer (Unix: the process; TCP: the
 * address or IPv6 /64), the reserve for new peers, the admission of an accepted socket and of a
 * shared-memory ring; it knows no frame, no timer and nothing of how bytes move. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_private.h"
#include "tollfree/error.h"

void tfn_mem_add(tfn_loop *lp, size_t n)
{
    if (lp->cfg.mem_used && n)
        __atomic_fetch_add(lp->cfg.mem_used, (uint64_t)n, __ATOMIC_RELAXED);
}

void tfn_mem_sub(tfn_loop *lp, size_t n)
{
    if (lp->cfg.mem_used && n)
        __atomic_fetch_sub(lp->cfg.mem_used, (uint64_t)n, __ATOMIC_RELAXED);
}

int tfn_mem_room(const tfn_loop *lp, uint64_t bytes)
{
    if (!lp->cfg.mem_used)
        return 1;
    uint64_t used = __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED);
    return bytes <= lp->cfg.mem_limit && used <= lp->cfg.mem_limit - bytes;
}

/* The defaults of a tfn_config's zero fields (net.h). */
void tfn_config_defaults(tfn_config *cfg)
{
    if (cfg->max_conns <= 0)
        cfg->max_conns = 4096;
    if (!cfg->out_high)
        cfg->out_high = (size_t)256 << 10;
    if (!cfg->out_max)
        cfg->out_max = (size_t)16 << 20;
    if (cfg->out_high > cfg->out_max / 4)
        cfg->out_high = cfg->out_max / 4; /* stop reading well before the limit */
    if (cfg->sockbuf_bytes <= 0)
        cfg->sockbuf_bytes = 4 << 20;
    if (cfg->frames_per_turn <= 0)
        cfg->frames_per_turn = 32;
    if (cfg->conn_reserve == 0)
        cfg->conn_reserve = cfg->max_conns / 16;
    if (cfg->conn_reserve < 0 || cfg->conn_reserve >= cfg->max_conns)
        cfg->conn_reserve = 0;
    if (cfg->max_conns_per_peer <= 0)
        cfg->max_conns_per_peer = cfg->max_conns - cfg->conn_reserve;
}

/* ---------------------------------------------------------------- peers */

/* The table holds at most max_conns keys in 2 x max_conns (or more) slots: never full. */
int tfn_peers_open(tfn_loop *lp)
{
    size_t pcap = 16;
    while (pcap < 2 * (size_t)lp->cfg.max_conns)
        pcap *= 2;
    lp->peers = calloc(pcap, sizeof *lp->peers);
    lp->peer_mask = pcap - 1;
    return lp->peers ? 0 : TF_E_NOMEM;
}

static size_t peer_hash(const uint8_t *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < TFN_PEER_KEY_BYTES; i++)
        h = (h ^ key[i]) * 0x100000001b3ull;
    return (size_t)(h ^ h >> 29);
}

/* The slot of key, or of the empty slot where it would go. */
static size_t peer_find(const tfn_loop *lp, const uint8_t *key)
{
    size_t i = peer_hash(key) & lp->peer_mask;
    while (lp->peers[i].count && memcmp(lp->peers[i].key, key, TFN_PEER_KEY_BYTES))
        i = (i + 1) & lp->peer_mask;
    return i;
}

static int peer_count(const tfn_loop *lp, const uint8_t *key)
{
    return lp->peers[peer_find(lp, key)].count;
}

void tfn_peer_inc(tfn_loop *lp, const uint8_t *key)
{
    peer_ent *e = &lp->peers[peer_find(lp, key)];
    if (!e->count)
        memcpy(e->key, key, TFN_PEER_KEY_BYTES);
    e->count++;
}

void tfn_peer_dec(tfn_loop *lp, const uint8_t *key)
{
    size_t m = lp->peer_mask, i = peer_find(lp, key);
    if (!lp->peers[i].count || --lp->peers[i].count)
        return;
    /* Backward-shift: move later entries of the cluster into the hole when their home allows. */
    for (size_t j = i;;) {
        j = (j + 1) & m;
        if (!lp->peers[j].count)
            break;
        size_t home = peer_hash(lp->peers[j].key) & m;
        if (((j - home) & m) >= ((j - i) & m)) {
            lp->peers[i] = lp->peers[j];
            lp->peers[j].count = 0;
            i = j;
        }
    }
}

/* The peer of an accepted socket: the process of a Unix peer (every client of one user shares
 * its UID, so a UID key would put them all behind one cap), the address of a TCP peer. */
void tfn_peer_key(int fd, int is_unix, uint8_t key[TFN_PEER_KEY_BYTES])
{
    memset(key, 0, TFN_PEER_KEY_BYTES);
    if (is_unix) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            key[0] = 1;
            memcpy(key + 1, &cr.uid, sizeof cr.uid);
            memcpy(key + 1 + sizeof cr.uid, &cr.pid, sizeof cr.pid);
        }
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        tfn_peer_key_of((const struct sockaddr *)&ss, key);
}

void tfn_peer_key_of(const struct sockaddr *sa, uint8_t key[TFN_PEER_KEY_BYTES])
{
    memset(key, 0, TFN_PEER_KEY_BYTES);
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            key[0] = 4;
            memcpy(key + 1, a->s6_addr + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a->s6_addr, 8); /* the /64 */
        }
    }
}

void tfn_peer_name(const uint8_t key[TFN_PEER_KEY_BYTES], char *buf, size_t cap)
{
    if (key[0] == 1) {
        uid_t uid;
        pid_t pid;
        memcpy(&uid, key + 1, sizeof uid);
        memcpy(&pid, key + 1 + sizeof uid, sizeof pid);
        snprintf(buf, cap, "pid %d (uid %u)", (int)pid, (unsigned)uid);
    } else if (key[0] == 4) {
        inet_ntop(AF_INET, key + 1, buf, (socklen_t)cap);
    } else if (key[0] == 6) {
        char a[INET6_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET6, key + 1, a, sizeof a);
        snprintf(buf, cap, "%s/64", a);
    } else {
        snprintf(buf, cap, "unknown peer");
    }
}

/* Whether a new connection of this peer, whose buffers (input, and TLS state) take bytes, may
 * be taken: 1, or 0 with why set (counted). */
int tfn_admit(tfn_loop *lp, const uint8_t key[TFN_PEER_KEY_BYTES], size_t bytes, const char **why)
{
    int n = lp->nconns + lp->nrings, max = lp->cfg.max_conns; /* a ring is a connection too */
    if (n >= max) {
        lp->ctr.refused_full++;
        *why = "the server is full (max-conns)";
        return 0;
    }
    int pc = key[0] ? peer_count(lp, key) : 0;
    if (key[0] && pc >= lp->cfg.max_conns_per_peer) {
        lp->ctr.refused_peer++;
        *why = "this peer holds its maximum (max-conns-per-peer)";
        return 0;
    }
    if (n >= max - lp->cfg.conn_reserve && pc >= TFN_RESERVE_PEER_CONNS) {
        lp->ctr.refused_reserve++;
        *why = "only the reserve is left, for peers with few connections";
        return 0;
    }
    if (!tfn_mem_room(lp, bytes)) {
        lp->ctr.refused_memory++;
        *why = "its buffers (input, TLS) would pass the memory limit (max-memory)";
        return 0;
    }
    return 1;
}

/* A ring is one more connection of its control socket's peer, whose mapping counts in the
 * memory counter; a thread serves each, so the rings have caps of their own: TFN_MAX_RINGS in
 * all, TFN_RINGS_PER_PEER for one process (one opening rings in a loop leaves room for others:
 * every client of the 0600 socket is its owner's or root's, so a UID would not separate them).
 * 1, or 0 with why set (counted). Loop thread. */
int tfn_ring_admit(tfn_loop *lp, const uint8_t key[TFN_PEER_KEY_BYTES], size_t bytes,
                   const char **why)
{
    int mine = 0;
    for (const tfn_ring *r = lp->rings; r; r = r->next)
        mine += !memcmp(r->peer, key, TFN_PEER_KEY_BYTES);
    if (lp->nrings >= TFN_MAX_RINGS || mine >= TFN_RINGS_PER_PEER) {
        lp->ctr.refused_rings++;
        *why = lp->nrings >= TFN_MAX_RINGS ? "every ring thread is taken"
                                           : "this process holds its share of the rings";
        return 0;
    }
    uint64_t by_memory = lp->ctr.refused_memory;
    int ok = tfn_admit(lp, key, bytes, why);
    if (!ok && lp->ctr.refused_memory != by_memory)
        *why = "its mapping would pass the memory limit (max-memory)";
    return ok;
}
