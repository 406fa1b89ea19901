/* The shared-memory wait/wake path on its own (src/wire/shm_ring.c): two threads play client and
 * server over rings in one mapping. A futex wake reaches every waiter blocked in the kernel;
 * ping-pong rounds with every spin budget lose no wake-up (each futex sleep may last until the
 * test deadline, so only a lost wake-up can end one with no data: a timeout, counted); a waiter
 * that shares its CPU with a busy task notices the contention (include/tollfree/shm.h,
 * "Waiting"). Nothing here measures how long anything took: the deadline guards against hangs. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/shm.h"
#include "wire/wire_internal.h"

#define RING ((uint64_t)64 << 10)

/* ---- helpers ---- */

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* 1 once thread `tid` is blocked in futex(2) (its /proc syscall line starts with the number). */
static int in_futex(pid_t tid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return atol(buf) == SYS_futex && buf[0] != '-';
}

/* ---- a futex wake reaches every waiter ---- */

typedef struct fx_waiter {
    uint32_t *word;
    pid_t tid; /* atomic */
    int rc;
} fx_waiter;

static void *fx_wait(void *arg)
{
    fx_waiter *w = arg;
    __atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    int rc;
    do
        rc = tf_futex_wait(w->word, 0, (int64_t)T_DEADLINE_MS * 1000000);
    while (rc == -EINTR || (rc == 0 && __atomic_load_n(w->word, __ATOMIC_ACQUIRE) == 0));
    w->rc = rc;
    return NULL;
}

static void test_wake_all(void)
{
    static uint32_t word;
    fx_waiter w[2] = {{.word = &word}, {.word = &word}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, fx_wait, &w[i]);
    /* Both blocked in the kernel (a deadline guards against a hang only). */
    int64_t end = tfw_now_ns() + (int64_t)T_DEADLINE_MS * 1000000;
    for (int i = 0; i < 2; i++) {
        pid_t tid;
        while (!(tid = __atomic_load_n(&w[i].tid, __ATOMIC_ACQUIRE)) || !in_futex(tid)) {
            if (tfw_now_ns() > end)
                break;
            sleep_us(200);
        }
    }
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    /* One call wakes both (docs/protocol.md: the producer wakes every waiter). */
    CHECK_EQ(tf_futex_wake(&word), 2);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK_RC(w[i].rc, 0);
    }
}

/* ---- ping-pong over the rings ---- */

typedef struct side {
    tfw_ring_prod prod;
    tfw_ring_cons cons;
    tfw_shm_waiter wait;
    uint64_t alive_calls;
    int cpu; /* pin to this CPU, or -1 */
} side;

typedef struct game {
    uint8_t *map;
    side cli, srv;
    int rounds;
    int server_rc;
    int bad; /* replies with the wrong value */
} game;

/* Set when the client gave up: the server's next liveness check ends its wait. */
static int game_over;

/* Called before every futex sleep: once per wait that sleeps, plus once per futex return that
 * brought no data (a late wake, or a timeout). */
static int alive_fn(void *arg)
{
    side *s = arg;
    s->alive_calls++;
    return __atomic_load_n(&game_over, __ATOMIC_ACQUIRE) ? -EPIPE : 0;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int recv_u64(side *s, uint64_t *v)
{
    for (;;) {
        const uint8_t *f;
        uint32_t len;
        int rc = tfw_ring_peek(&s->cons, 64, &f, &len);
        if (rc == 1) {
            if (len != 8)
                return TF_E_PROTOCOL;
            memcpy(v, f + 4, 8);
            tfw_ring_consume(&s->cons, len);
            return 0;
        }
        if (rc < 0)
            return rc;
        tfw_deadline dl = tfw_deadline_in((int64_t)T_DEADLINE_MS * 1000000);
        rc = tfw_ring_wait_data(&s->cons, &s->wait, alive_fn, s, &dl);
        if (rc)
            return rc;
    }
}

static int send_u64(side *s, uint64_t v)
{
    uint8_t *dst;
    tfw_deadline dl = tfw_deadline_in((int64_t)T_DEADLINE_MS * 1000000);
    int rc = tfw_ring_wait_room(&s->prod, TF_SHM_FRAME_SPAN(8), &s->wait, alive_fn, s, &dl, &dst);
    if (rc)
        return rc;
    uint32_t len = 8;
    memcpy(dst, &len, 4);
    memcpy(dst + 4, &v, 8);
    tfw_ring_publish(&s->prod, TF_SHM_FRAME_SPAN(8));
    return 0;
}

static void *server_main(void *arg)
{
    game *g = arg;
    pin(g->srv.cpu);
    for (int i = 0; i < g->rounds; i++) {
        uint64_t v;
        int rc = recv_u64(&g->srv, &v);
        if (!rc)
            rc = send_u64(&g->srv, v * 3 + 1);
        if (rc) {
            g->server_rc = rc;
            break;
        }
    }
    return NULL;
}

static void game_init(game *g, int rounds, int cli_spin, int srv_spin, int cpu)
{
    memset(g, 0, sizeof *g);
    g->map = aligned_alloc(4096, TF_SHM_TOTAL_BYTES(RING));
    memset(g->map, 0, TF_SHM_TOTAL_BYTES(RING));
    tfw_ring_setup(g->map, RING, 0, &g->cli.prod, &g->cli.cons);
    tfw_ring_setup(g->map, RING, 1, &g->srv.prod, &g->srv.cons);
    tfw_shm_waiter_init(&g->cli.wait, cli_spin);
    tfw_shm_waiter_init(&g->srv.wait, srv_spin);
    /* A sleep ends by a wake or the deadline, never by the 100 ms step: a timeout is then a
     * lost wake-up, however slowly this loaded machine runs the other side. */
    g->cli.wait.sleep_ns = g->srv.wait.sleep_ns = (int64_t)T_DEADLINE_MS * 1000000;
    g->cli.cpu = g->srv.cpu = cpu;
    game_over = 0;
    g->rounds = rounds;
}

/* Plays g->rounds request/reply rounds; returns the client's first error (0: none). */
static int game_play(game *g)
{
    pthread_t th;
    pthread_create(&th, NULL, server_main, g);
    pin(g->cli.cpu);
    int rc = 0;
    for (int i = 0; i < g->rounds && !rc; i++) {
        uint64_t v = 0;
        rc = send_u64(&g->cli, (uint64_t)i);
        if (!rc)
            rc = recv_u64(&g->cli, &v);
        if (!rc && v != (uint64_t)i * 3 + 1)
            g->bad++;
    }
    if (rc) {
        /* Unblock the server as a departing client does; its liveness check then says gone. */
        __atomic_store_n(&game_over, 1, __ATOMIC_RELEASE);
        __atomic_fetch_add((uint32_t *)(g->map + TF_SHM_OFF_REQ_SEQ), 1, __ATOMIC_SEQ_CST);
        tf_futex_wake((uint32_t *)(g->map + TF_SHM_OFF_REQ_SEQ));
    }
    pthread_join(th, NULL);
    free(g->map);
    return rc;
}

static void test_no_lost_wakeups(void)
{
    /* spin 0: every wait sleeps in the futex at once (the wake path every round); 64: short
     * spins that often just miss; the default. The budgets of the two sides differ too. */
    const int spins[][2] = {{0, 0}, {64, 0}, {0, 64}, {64, 64}, {-1, -1}, {-1, 0}};
    for (size_t k = 0; k < sizeof spins / sizeof spins[0]; k++) {
        game g;
        game_init(&g, 3000, spins[k][0], spins[k][1], -1);
        CHECK_RC(game_play(&g), 0);
        CHECK_RC(g.server_rc, 0);
        CHECK_EQ(g.bad, 0);
        /* No sleep ran out: every one was ended by its wake (sleeps last up to the deadline,
         * so a slow peer cannot cause a timeout; only a lost wake-up can). Wakes with no data
         * are not counted: a wake meant for the previous frame may arrive late (its producer
         * descheduled between its check of the sleeping flag and the syscall). */
        CHECK_EQ(g.cli.wait.timeouts, 0);
        CHECK_EQ(g.srv.wait.timeouts, 0);
        CHECK(g.cli.alive_calls >= g.cli.wait.sleeps); /* before every sleep */
        if (spins[k][0] == 0) {
            /* spin 0: never spins, never yields, so never finds contention */
            CHECK(g.cli.wait.sleeps > 0);
            CHECK_EQ(g.cli.wait.yields_won, 0);
            CHECK_EQ(g.cli.wait.contentions, 0);
        }
    }
}

/* ---- contention ---- */

static int hog_stop;
static void *hog_main(void *arg)
{
    pin(*(int *)arg);
    while (!__atomic_load_n(&hog_stop, __ATOMIC_RELAXED))
        tfw_cpu_relax();
    return NULL;
}

typedef struct late_producer {
    game *g;
    int rc;
} late_producer;

/* Publishes one reply once the client has gone to sleep on it. */
static void *publish_when_asleep(void *arg)
{
    late_producer *lp = arg;
    game *g = lp->g;
    pin(g->srv.cpu);
    const uint32_t *sleeping = (const uint32_t *)(g->map + TF_SHM_OFF_CLIENT_SLEEPING);
    int64_t end = tfw_now_ns() + (int64_t)T_DEADLINE_MS * 1000000;
    while (!__atomic_load_n(sleeping, __ATOMIC_SEQ_CST) && tfw_now_ns() < end)
        sleep_us(100);
    lp->rc = send_u64(&g->srv, 42);
    return NULL;
}

/* One wait of the client for a reply that comes only once it sleeps. */
static void late_round(game *g, uint64_t want)
{
    late_producer lp = {.g = g};
    pthread_t prod;
    pthread_create(&prod, NULL, publish_when_asleep, &lp);
    uint64_t v = 0;
    CHECK_RC(recv_u64(&g->cli, &v), 0);
    CHECK_EQ(v, want);
    pthread_join(prod, NULL);
    CHECK_RC(lp.rc, 0);
}

/* Found again: the rule of include/tollfree/shm.h ("Waiting"): contention found within
 * TF_SHM_CALM_NS of the last is load (a calm window of TF_SHM_CALM_NS begins, the budget is 0),
 * later it is chance again (the budget halves). The budget stays in the seconds, so only a
 * preemption ends each spin: every round finds contention once. Each round is checked against
 * the rule by the waiter's own clock readings (last_contention), so how long a round took on a
 * loaded machine decides which outcome is right, never whether the check passes. */
static void contention_rounds(game *g)
{
    tfw_shm_waiter *w = &g->cli.wait;
    int calm = 0, i = 0;
    for (; i < 8 && !calm; i++) {
        tfw_shm_waiter was = *w;
        late_round(g, 42);
        CHECK_EQ(w->contentions, was.contentions + 1);
        CHECK_EQ(w->preempted, was.preempted + 1);
        CHECK_EQ(w->yields_lost, 0);
        calm = w->last_contention - was.last_contention < TF_SHM_CALM_NS;
        if (calm) {
            CHECK_EQ(w->calm_until, w->last_contention + TF_SHM_CALM_NS);
            CHECK_EQ(w->spin, 0);
        } else {
            CHECK_EQ(w->calm_until, 0);
            CHECK_EQ(w->spin, was.spin / 2);
        }
    }
    printf("# contention found again within the calm window: %s (round %d)\n", calm ? "yes" : "no",
           i);
}

/* In a calm window a wait neither spins nor yields: it sleeps at once, finds no contention and
 * keeps its budget. The window is the test's (it ends long after the round), so the outcome
 * does not depend on how long the round takes. */
static void calm_round(game *g)
{
    tfw_shm_waiter *w = &g->cli.wait;
    w->calm_until = tfw_now_ns() + (int64_t)T_DEADLINE_MS * 1000000 * 4;
    w->spin = w->max_spin; /* would spin for seconds outside the window */
    tfw_shm_waiter was = *w;
    late_round(g, 42);
    CHECK_EQ(w->sleeps, was.sleeps + 1);
    CHECK_EQ(w->contentions, was.contentions);
    CHECK_EQ(w->preempted, was.preempted);
    CHECK_EQ(w->yields_won + w->yields_lost, was.yields_won + was.yields_lost);
    CHECK_EQ(w->stalls, was.stalls);
    CHECK_EQ(w->spin, was.spin); /* no adapting after a calm wait */
}

static void test_preempted_spin_noticed(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set))
        cpu++;
    /* The client waits with a budget of INT_MAX PAUSEs (seconds: no budget runs out first) on
     * a CPU it shares with a busy thread, for a reply that comes only once it sleeps. Only a
     * preemption can end that spin: it must see the gap (no answer since), stop and sleep. */
    pthread_t hog;
    hog_stop = 0;
    pthread_create(&hog, NULL, hog_main, &cpu);
    game g;
    game_init(&g, 0, INT_MAX, 0, cpu);
    pin(cpu);
    late_round(&g, 42);
    CHECK_EQ(g.cli.wait.preempted, 1);
    CHECK_EQ(g.cli.wait.contentions, 1);
    CHECK_EQ(g.cli.wait.yields_lost, 0); /* a preempted spin sleeps without a yield */
    CHECK_EQ(g.cli.wait.sleeps, 1);
    CHECK_EQ(g.cli.wait.spin, INT_MAX / 2); /* once is chance: the budget halves, no calm yet */
    CHECK_EQ(g.cli.wait.calm_until, 0);
    contention_rounds(&g);
    calm_round(&g);
    __atomic_store_n(&hog_stop, 1, __ATOMIC_RELAXED);
    pthread_join(hog, NULL);
    free(g.map);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* A stall is not contention. A signal handler that busy-waits 200 us in the spinning thread
 * stands for the hypervisor holding the vCPU: the spin sees the gap, but no other task took its
 * CPU. The spin's budget is INT_MAX, so that only the reply (or a preemption) ends it; the
 * sender stalls the spinner until the spin has counted a stall, and only then replies, so the
 * trial never depends on how fast anything ran. A trial is conclusive when the thread was not
 * switched out involuntarily at all while it ran (getrusage before and after): then the waiter
 * must have counted the stall, found no contention, and caught the reply spinning. On a loaded
 * machine trials may be preempted (the hog test above covers those); up to 20 are run until one
 * is conclusive. */
static tfw_shm_waiter *stall_waiter;
static pthread_t stall_target;
static int stall_handled;  /* atomic: handlers run to their end */
static int stalls_counted; /* atomic: the waiter's stalls, as the last handler found them */

static void stall_handler(int sig)
{
    (void)sig;
    /* The spinner's own thread: reading its waiter here races with nothing. */
    __atomic_store_n(&stalls_counted, (int)stall_waiter->stalls, __ATOMIC_RELEASE);
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    stall_waiter->nivcsw = ru.ru_nivcsw;
    int64_t end = tfw_now_ns() + 200000;
    while (tfw_now_ns() < end)
        tfw_cpu_relax();
    __atomic_fetch_add(&stall_handled, 1, __ATOMIC_RELEASE);
}

/* Stalls the spinning client (SIGUSR1, one handler at a time) until its spin has counted a
 * stall, or it went to sleep (preempted: an inconclusive trial), then answers it. A signal that
 * lands before the spin began is no gap of it; the next one is. Started on its own CPU, so that
 * it never takes the spinner's. */
static void *stall_sender(void *arg)
{
    late_producer *lp = arg;
    const uint32_t *sleeping = (const uint32_t *)(lp->g->map + TF_SHM_OFF_CLIENT_SLEEPING);
    int64_t end = tfw_now_ns() + (int64_t)T_DEADLINE_MS * 1000000;
    while (!__atomic_load_n(&stalls_counted, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(sleeping, __ATOMIC_SEQ_CST) && tfw_now_ns() < end) {
        int before = __atomic_load_n(&stall_handled, __ATOMIC_ACQUIRE);
        pthread_kill(stall_target, SIGUSR1);
        while (__atomic_load_n(&stall_handled, __ATOMIC_ACQUIRE) == before && tfw_now_ns() < end)
            sleep_us(50);
        sleep_us(200); /* pacing only: lets the spin reach its next clock read */
    }
    lp->rc = send_u64(&lp->g->srv, 42);
    return NULL;
}

static int stall_trial(int cpu_spin, int cpu_other)
{
    game g;
    game_init(&g, 0, INT_MAX, 0, -1);
    pin(cpu_spin);
    stall_waiter = &g.cli.wait;
    stall_target = pthread_self();
    __atomic_store_n(&stalls_counted, 0, __ATOMIC_RELEASE);
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    g.cli.wait.nivcsw = ru.ru_nivcsw; /* as a waiter in use has it (its first gap has none) */
    late_producer lp = {.g = &g};
    cpu_set_t other;
    CPU_ZERO(&other);
    CPU_SET(cpu_other, &other);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof other, &other);
    pthread_t sender;
    pthread_create(&sender, &attr, stall_sender, &lp);
    pthread_attr_destroy(&attr);
    long before = ru.ru_nivcsw;
    uint64_t v = 0;
    CHECK_RC(recv_u64(&g.cli, &v), 0);
    CHECK_EQ(v, 42);
    getrusage(RUSAGE_THREAD, &ru);
    pthread_join(sender, NULL);
    CHECK_RC(lp.rc, 0);
    int conclusive = ru.ru_nivcsw == before;
    if (conclusive) {
        CHECK(g.cli.wait.stalls >= 1);
        CHECK_EQ(g.cli.wait.contentions, 0);
        CHECK_EQ(g.cli.wait.preempted, 0); /* the spin went on through the stall */
        CHECK_EQ(g.cli.wait.sleeps, 0);    /* and caught the reply */
    }
    free(g.map);
    return conclusive;
}

static void test_stall_not_contention(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) {
        printf("# skipped: a stall trial needs two CPUs\n");
        return;
    }
    int cpus[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    struct sigaction sa = {.sa_handler = stall_handler}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    int conclusive = 0, i = 0;
    while (i < 20 && !conclusive) {
        conclusive = stall_trial(cpus[0], cpus[1]);
        i++;
    }
    if (!conclusive)
        printf("# stall trial inconclusive: the spinner was preempted in all 20 trials\n");
    else
        printf("# stall trial conclusive (trial %d)\n", i);
    sigaction(SIGUSR1, &old, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void test_waiter_init(void)
{
    tfw_shm_waiter w;
    tfw_shm_waiter_init(&w, -1);
    CHECK_EQ(w.max_spin, TF_SHM_DEFAULT_SPIN);
    CHECK_EQ(w.spin, TF_SHM_DEFAULT_SPIN);
    CHECK_EQ(w.calm_until, 0);
    CHECK_EQ(w.nivcsw, -1); /* no baseline yet: the first gap counts as contention */
    tfw_shm_waiter_init(&w, 0);
    CHECK_EQ(w.max_spin, 0);
    CHECK_EQ(w.spin, 0);
    tfw_shm_waiter_init(&w, 123);
    CHECK_EQ(w.spin, 123);
}

int main(void)
{
    test_waiter_init();
    test_wake_all();
    test_no_lost_wakeups();
    test_preempted_spin_noticed();
    test_stall_not_contention();
    return tf_test_report();
}
