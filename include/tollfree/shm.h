/* tollfree shared-memory transport (docs/protocol.md, "Shared memory"): the handshake, the
 * control page layout and the futex helpers both sides use.
 *
 * The memfd holds a 4096-byte control page, then the request ring, then the response ring (each
 * ring_bytes, a power of two). Every control word is written by one side only; each group sits
 * on its own 128-byte line so the two sides never share a written cache line.
 */
#ifndef TOLLFREE_SHM_H
#define TOLLFREE_SHM_H

#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"

#define TF_SHM_MAGIC 0x4D534654u /* "TFSM" as little-endian bytes */
#define TF_SHM_VERSION 1u
#define TF_SHM_CTRL_BYTES 4096u
#define TF_SHM_MIN_RING ((uint64_t)64 << 10)
#define TF_SHM_MAX_RING ((uint64_t)1 << 30)
#define TF_SHM_WRAP 0xFFFFFFFFu /* a wrap marker where a frame length would be */
/* Longest futex sleep before a liveness check of the peer. */
#define TF_SHM_WAIT_NS 100000000ll
/* Waiting for the peer (docs/protocol.md, "Publishing and waiting"). A waiter spins (PAUSE,
 * ~37 ns an iteration on the reference machine) for a budget that adapts to what spinning has
 * recently bought, at most the configured spin (--spin / spin=; default ~0.75 ms), then yields
 * the CPU once (sched_yield), then sleeps on the futex. Spinning on a CPU that another task
 * wants starves that task (maybe the peer), so contention switches spinning and yielding off:
 * a gap of TF_SHM_PREEMPT_NS between two clock reads of a spin and no answer since (the spinner
 * was preempted and its peer did not answer either), or a yield that took TF_SHM_YIELD_SLOW_NS
 * (another task held our CPU; the peer would have answered sooner), each confirmed by this
 * thread's count of involuntary context switches (getrusage): a gap without a switch is the
 * hypervisor holding the vCPU (a stall), which happens to spinning guests on an idle host and is
 * not contention. Once is chance (the budget halves); found again within TF_SHM_CALM_NS, the
 * waiter sleeps at once for TF_SHM_CALM_NS, a window that doubles (up to TF_SHM_CALM_MAX_NS)
 * while contention is found again as soon as it ends. */
#define TF_SHM_DEFAULT_SPIN 20000
#define TF_SHM_PREEMPT_NS 50000ll
#define TF_SHM_YIELD_SLOW_NS 20000ll
#define TF_SHM_CALM_NS 20000000ll
#define TF_SHM_CALM_MAX_NS 250000000ll

/* Handshake messages on the Unix socket (the memfd rides on the first with SCM_RIGHTS). */
#define TF_SHM_HELLO_BYTES 24      /* [u32 magic][u32 version][u64 ring_bytes][u64 total_bytes] */
#define TF_SHM_HELLO_REPLY_BYTES 8 /* [i32 status][u32 server_pid] */

/* Control page offsets (bytes). */
#define TF_SHM_OFF_MAGIC 0
#define TF_SHM_OFF_VERSION 4
#define TF_SHM_OFF_RING_BYTES 8
#define TF_SHM_OFF_CLIENT_PID 16
#define TF_SHM_OFF_SERVER_PID 20
#define TF_SHM_OFF_REQ_HEAD 128
#define TF_SHM_OFF_REQ_SEQ 136
#define TF_SHM_OFF_REQ_TAIL 256
#define TF_SHM_OFF_RESP_HEAD 384
#define TF_SHM_OFF_RESP_SEQ 392
#define TF_SHM_OFF_RESP_TAIL 512
#define TF_SHM_OFF_SERVER_SLEEPING 640
#define TF_SHM_OFF_CLIENT_SLEEPING 768
#define TF_SHM_OFF_SERVER_CLOSED 896
#define TF_SHM_OFF_CLIENT_CLOSED 1024
#define TF_SHM_OFF_REQ_RING TF_SHM_CTRL_BYTES

/* Total memfd size for a ring size. */
#define TF_SHM_TOTAL_BYTES(ring_bytes) ((uint64_t)TF_SHM_CTRL_BYTES + 2 * (uint64_t)(ring_bytes))
/* Bytes a frame of body_len occupies in a ring; it can be sent iff this is <= ring_bytes - 8. */
#define TF_SHM_FRAME_SPAN(body_len) (((uint64_t)(body_len) + 4 + 7) & ~(uint64_t)7)

/* Waits on a shared (not process-private) futex word: returns 0 when woken or when *word !=
 * expected already, -ETIMEDOUT after timeout_ns (< 0: no timeout), -EINTR on a signal.
 * Used by the Python client through ctypes (ctypes releases the GIL around the call). */
TF_API int tf_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns);
/* Wakes every waiter on a shared futex word. Returns the number woken, or -errno. */
TF_API int tf_futex_wake(uint32_t *word);

#endif
