"""Sweep service wire protocol layouts, opcodes and codes, in one place (docs/protocol.md).

Everything is little-endian. A frame is ``[u32 body_len][body]``. v1 bodies start with
``[u8 opcode][u32 n_bars][u32 n_combos]``; v2 bodies start with a 12-byte header
``[u8 opcode][u8 version=2][u16 reserved=0][u64 request_id]`` so a v2 payload sits at frame
offset 16 (8-byte aligned). The ``struct.Struct`` objects below include the 4-byte length prefix
where their name ends in ``_FRAME`` / ``HDR``; payload layouts do not.
"""
from __future__ import annotations

import struct

import numpy as np

# ---- frame and headers -------------------------------------------------------------------------
LEN = struct.Struct("<I")                    # the frame's length prefix
V1_HDR = struct.Struct("<IBII")              # [body_len][op][n_bars][n_combos]: 13 bytes
V1_BODY_FIXED = 9                            # body_len = 9 + 8*n_bars + 48*n_combos
HDR = struct.Struct("<IBBHQ")                # [body_len][op][version][reserved][request_id]: 16
V2_HDR_BODY = 12                             # v2 header bytes counted in body_len
VERSION = 2

# ---- opcodes -----------------------------------------------------------------------------------
V1_SWEEP = 0
V1_ECHO = 1
HELLO = 0x10
LOAD = 0x11
SWEEP_DS = 0x12
RUN_ONE = 0x13
SWEEP = 0x14
ECHO = 0x15
DROP = 0x16
STATS = 0x17
LOAD_FD = 0x18
SESSION_OPEN = 0x20
SESSION_BAR = 0x21
SESSION_QUERY = 0x22
SESSION_CLOSE = 0x23
ERROR = 0x7F

OPCODE_NAMES = {
    V1_SWEEP: "V1_SWEEP", V1_ECHO: "V1_ECHO", HELLO: "HELLO", LOAD: "LOAD",
    SWEEP_DS: "SWEEP_DS", RUN_ONE: "RUN_ONE", SWEEP: "SWEEP", ECHO: "ECHO", DROP: "DROP",
    STATS: "STATS", LOAD_FD: "LOAD_FD", SESSION_OPEN: "SESSION_OPEN",
    SESSION_BAR: "SESSION_BAR", SESSION_QUERY: "SESSION_QUERY", SESSION_CLOSE: "SESSION_CLOSE",
    ERROR: "ERROR",
}

# ---- payloads (after the v2 header) ------------------------------------------------------------
HELLO_REQ = struct.Struct("<II")             # max_version, reserved
HELLO_REP = struct.Struct("<IIQQII")         # version, caps, max_frame, max_memory, max_datasets, threads
CAP_DATASETS, CAP_SESSIONS, CAP_LOAD_FD = 1, 2, 4
LOAD_REQ = struct.Struct("<Q")               # n_bars, then n_bars x f64
LOAD_REP = struct.Struct("<QQII")            # handle, n_bars, created, reserved
SWEEP_DS_REQ = struct.Struct("<QII")         # handle, n_combos, flags, [f64 fee], then n x 6 x i64
SWEEP_REP_FLAGS = struct.Struct("<II")      # n_combos, flags (echoed: SWEEP_FLAG_STATS or 0)
F64 = struct.Struct("<d")
SWEEP_FLAG_STATS = 1  # the reply adds one statistics row (STATS_ROW bytes) per combo
SWEEP_FLAG_FEE = 2    # an f64 fee follows the flags
STATS_ROW = 88        # tf_stats: pnl, trades, wins, gross_win, ..., exposure_bars (11 x 8 bytes)
CAP_SWEEP_FLAGS = 8
SWEEP_REQ = struct.Struct("<II")             # n_bars, n_combos, then close, then params
SWEEP_REP = struct.Struct("<II")             # n_combos, reserved, then n x f64 pnl, n x i64 trades
RUN_ONE_REQ = struct.Struct("<Q6q")          # handle, six windows
RUN_ONE_REP = struct.Struct("<dq")           # pnl, trades
DROP_REQ = struct.Struct("<Q")
LOAD_FD_REQ = struct.Struct("<QQ")           # n_bars, reserved (+ one memfd via SCM_RIGHTS)
SESSION_OPEN_REQ = struct.Struct("<6q")
SESSION_OPEN_REP = struct.Struct("<Q")       # session_id
SESSION_ID = struct.Struct("<Q")             # QUERY / CLOSE request
SESSION_BAR_REQ = struct.Struct("<Qd")       # session_id, close
SESSION_BAR_REP = struct.Struct("<iIqd")     # position, reserved, trades, pnl: 24
SESSION_STATE_REP = struct.Struct("<iIqdq")  # position, reserved, trades, pnl, bars: 32
ERROR_REP = struct.Struct("<iI")             # code, msg_len, then the UTF-8 message
STATS_FIELDS = ("requests", "errors", "connections_total", "connections_open", "datasets",
                "dataset_bytes", "sessions_open", "bytes_in", "bytes_out", "uptime_ns",
                "sweeps", "combos")
STATS_REP = struct.Struct("<12Q")

# Whole frames of the per-call hot paths (length prefix + v2 header + payload), precompiled.
SESSION_BAR_FRAME = struct.Struct("<IBBHQQd")        # 32 bytes, body_len 28
SESSION_BAR_REPLY_FRAME = struct.Struct("<IBBHQiIqd")  # 40 bytes, body_len 36
ECHO_FRAME_HDR = HDR

# numpy views of the same layouts (for callers that prefer structured arrays)
HDR_DTYPE = np.dtype([("body_len", "<u4"), ("opcode", "u1"), ("version", "u1"),
                      ("reserved", "<u2"), ("request_id", "<u8")])
PARAMS_DTYPE = np.dtype("<i8")
CLOSE_DTYPE = np.dtype("<f8")
STATS_DTYPE = np.dtype([(n, "<u8") for n in STATS_FIELDS])

# ---- codes (include/tollfree/error.h) ----------------------------------------------------------
E_NULL_ARG = -1001
E_INVALID_ARG = -1002
E_NOMEM = -1003
E_UNSUPPORTED = -1004
E_LIMIT = -1005
E_BAD_INPUT = -1006
E_WINDOW_TOO_SHORT = -1100
E_WINDOW_TOO_LONG = -1101
E_TOO_MANY_BARS = -1102
E_TOO_MANY_COMBOS = -1103
E_STRATEGY = -1107
E_FRAME_TOO_LARGE = -1201
E_FRAME_TOO_SHORT = -1202
E_LENGTH_MISMATCH = -1203
E_UNKNOWN_OPCODE = -1204
E_BAD_HEADER = -1205
E_UNKNOWN_DATASET = -1206
E_UNKNOWN_SESSION = -1207
E_DATASET_LIMIT = -1208
E_SESSION_LIMIT = -1209
E_TRUNCATED = -1210
E_SHUTTING_DOWN = -1211
E_BAD_FD = -1212
E_PROTOCOL = -1213
E_SHM_HANDSHAKE = -1301
E_SHM_PEER_GONE = -1302
E_SHM_CORRUPT = -1303
E_SHM_TOO_BIG = -1304
E_SHM_LIMIT = -1305

CODE_NAMES = {
    E_NULL_ARG: "NULL_ARG", E_INVALID_ARG: "INVALID_ARG", E_NOMEM: "NOMEM",
    E_UNSUPPORTED: "UNSUPPORTED", E_LIMIT: "LIMIT", E_BAD_INPUT: "BAD_INPUT",
    E_WINDOW_TOO_SHORT: "WINDOW_TOO_SHORT", E_WINDOW_TOO_LONG: "WINDOW_TOO_LONG",
    E_TOO_MANY_BARS: "TOO_MANY_BARS", E_TOO_MANY_COMBOS: "TOO_MANY_COMBOS", E_STRATEGY: "STRATEGY",
    E_FRAME_TOO_LARGE: "FRAME_TOO_LARGE", E_FRAME_TOO_SHORT: "FRAME_TOO_SHORT",
    E_LENGTH_MISMATCH: "LENGTH_MISMATCH", E_UNKNOWN_OPCODE: "UNKNOWN_OPCODE",
    E_BAD_HEADER: "BAD_HEADER", E_UNKNOWN_DATASET: "UNKNOWN_DATASET",
    E_UNKNOWN_SESSION: "UNKNOWN_SESSION", E_DATASET_LIMIT: "DATASET_LIMIT",
    E_SESSION_LIMIT: "SESSION_LIMIT", E_TRUNCATED: "TRUNCATED",
    E_SHUTTING_DOWN: "SHUTTING_DOWN", E_BAD_FD: "BAD_FD", E_PROTOCOL: "PROTOCOL",
    E_SHM_HANDSHAKE: "SHM_HANDSHAKE", E_SHM_PEER_GONE: "SHM_PEER_GONE",
    E_SHM_CORRUPT: "SHM_CORRUPT", E_SHM_TOO_BIG: "SHM_TOO_BIG", E_SHM_LIMIT: "SHM_LIMIT",
}
CODE_TEXTS = {
    E_WINDOW_TOO_SHORT: "a window length < 1",
    E_WINDOW_TOO_LONG: "a window length above the maximum",
    E_FRAME_TOO_LARGE: "frame body larger than the maximum frame",
    E_FRAME_TOO_SHORT: "frame body shorter than the opcode requires",
    E_LENGTH_MISMATCH: "frame length disagrees with n_bars/n_combos",
    E_UNKNOWN_OPCODE: "unknown opcode",
    E_BAD_HEADER: "bad v2 header",
    E_UNKNOWN_DATASET: "unknown dataset handle",
    E_UNKNOWN_SESSION: "unknown session id",
    E_DATASET_LIMIT: "dataset count or memory limit reached",
    E_SESSION_LIMIT: "session limit reached",
    E_TRUNCATED: "peer closed in the middle of a frame",
    E_SHUTTING_DOWN: "server is shutting down",
    E_BAD_FD: "no usable sealed memfd",
    E_PROTOCOL: "protocol violation",
    E_UNSUPPORTED: "not supported by this transport",
    E_SHM_HANDSHAKE: "bad shared-memory handshake",
    E_SHM_PEER_GONE: "shared-memory peer closed or died",
    E_SHM_CORRUPT: "shared-memory peer wrote an invalid position, length or marker",
    E_SHM_TOO_BIG: "frame does not fit in the shared-memory ring",
    E_SHM_LIMIT: "too many shared-memory connections",
}

# Codes after which the server closes the connection (docs/protocol.md, error table).
CLOSING_CODES = frozenset({E_FRAME_TOO_LARGE, E_TRUNCATED, E_SHUTTING_DOWN})

DEFAULT_MAX_FRAME = 256 << 20
MAX_ERROR_MSG = 1024             # an error frame's msg_len; its body_len is 20 + msg_len


def v1_body_len(n_bars: int, n_combos: int) -> int:
    return V1_BODY_FIXED + 8 * n_bars + 48 * n_combos


def align8(n: int) -> int:
    return (n + 7) & ~7


# ---- shared-memory transport (docs/protocol.md, "Shared memory") -------------------------------
SHM_MAGIC = 0x4D534654           # "TFSM" little-endian
SHM_VERSION = 1
SHM_CTRL_BYTES = 4096
SHM_MIN_RING = 64 << 10
SHM_MAX_RING = 1 << 30
SHM_WRAP = 0xFFFFFFFF
SHM_HELLO = struct.Struct("<IIQQ")   # client -> server: magic, version, ring_bytes, total_bytes
SHM_HELLO_REP = struct.Struct("<iI")  # server -> client: status, server_pid

# Control page byte offsets; each group is written by one side only.
SHM_OFF_MAGIC = 0
SHM_OFF_VERSION = 4
SHM_OFF_RING_BYTES = 8
SHM_OFF_CLIENT_PID = 16
SHM_OFF_SERVER_PID = 20
SHM_OFF_REQ_HEAD = 128
SHM_OFF_REQ_SEQ = 136
SHM_OFF_REQ_TAIL = 256
SHM_OFF_RESP_HEAD = 384
SHM_OFF_RESP_SEQ = 392
SHM_OFF_RESP_TAIL = 512
SHM_OFF_SERVER_SLEEPING = 640
SHM_OFF_CLIENT_SLEEPING = 768
SHM_OFF_SERVER_CLOSED = 896
SHM_OFF_CLIENT_CLOSED = 1024
SHM_REQ_RING = SHM_CTRL_BYTES    # request ring offset; the response ring follows it
SHM_WAIT_NS = 100_000_000        # longest futex sleep before a peer liveness check
SHM_DEFAULT_SPIN = 20_000

SHM_CTRL_DTYPE = np.dtype({
    "names": ["magic", "version", "ring_bytes", "client_pid", "server_pid", "req_head",
              "req_seq", "req_tail", "resp_head", "resp_seq", "resp_tail", "server_sleeping",
              "client_sleeping", "server_closed", "client_closed"],
    "formats": ["<u4", "<u4", "<u8", "<u4", "<u4", "<u8", "<u4", "<u8", "<u8", "<u4", "<u8",
                "<u4", "<u4", "<u4", "<u4"],
    "offsets": [SHM_OFF_MAGIC, SHM_OFF_VERSION, SHM_OFF_RING_BYTES, SHM_OFF_CLIENT_PID,
                SHM_OFF_SERVER_PID, SHM_OFF_REQ_HEAD, SHM_OFF_REQ_SEQ, SHM_OFF_REQ_TAIL,
                SHM_OFF_RESP_HEAD, SHM_OFF_RESP_SEQ, SHM_OFF_RESP_TAIL, SHM_OFF_SERVER_SLEEPING,
                SHM_OFF_CLIENT_SLEEPING, SHM_OFF_SERVER_CLOSED, SHM_OFF_CLIENT_CLOSED],
    "itemsize": SHM_CTRL_BYTES,
})

# ---- strategies by name (docs/protocol.md, "Strategies"): HELLO caps bit 16 ------------------
STRATEGIES = 0x1A          # the strategies the server offers, with their parameter names
SWEEP_WITH = 0x1B          # a sweep of a named strategy: dataset or inline closes, f64 params
SESSION_OPEN_WITH = 0x25   # a live session of a named strategy
OPCODE_NAMES.update({STRATEGIES: "STRATEGIES", SWEEP_WITH: "SWEEP_WITH",
                     SESSION_OPEN_WITH: "SESSION_OPEN_WITH"})
CAP_STRATEGIES = 16
MAX_PARAMS = 64            # parameters per combo (TF_WIRE_MAX_PARAMS)
MAX_NAME = 128             # the longest strategy name a server looks up (TF_WIRE_MAX_NAME)
STRATEGIES_REP = struct.Struct("<II")      # count, text_len, then "name param ...\n" per strategy
# handle (0: the closes travel with the call), n_bars (0 with a handle), n_combos, flags
# (SWEEP_FLAG_*), n_params, name_len; then [f64 fee] if flags & FEE; the name, zero-padded to 8
# bytes; [n_bars x f64 closes]; n_combos x n_params x f64 params. Reply: as SWEEP_DS.
SWEEP_WITH_REQ = struct.Struct("<QQIIII")
SESSION_OPEN_WITH_REQ = struct.Struct("<II")  # n_params, name_len; the name padded; n_params x f64

# Every v2 reply payload's decoder (the structs above) with its field names, reserved fields
# None: what tests/vectors/v2_replies.txt pins against the C codecs (src/wire/reply.c).
REPLIES = {
    "hello": (HELLO_REP, ("version", "caps", "max_frame", "max_memory", "max_datasets", "threads")),
    "load": (LOAD_REP, ("handle", "n_bars", "created", None)),
    "sweep": (SWEEP_REP_FLAGS, ("n_combos", "flags")),
    "run_one": (RUN_ONE_REP, ("pnl", "trades")),
    "session_open": (SESSION_OPEN_REP, ("session",)),
    "session_bar": (SESSION_BAR_REP, ("position", None, "trades", "pnl")),
    "session_state": (SESSION_STATE_REP, ("position", None, "trades", "pnl", "bars")),
    "stats": (STATS_REP, STATS_FIELDS),
    "strategies": (STRATEGIES_REP, ("count", "text_len")),
    "error": (ERROR_REP, ("code", "msg_len")),
}


def decode_reply(name: str, payload) -> dict:
    """The fields of a v2 reply payload (the bytes after the v2 header, before any array)."""
    S, names = REPLIES[name]
    return {k: v for k, v in zip(names, S.unpack_from(payload)) if k is not None}


def encode_reply(name: str, fields: dict) -> bytes:
    """The payload of a v2 reply (reserved fields 0): the server's layout, for tests."""
    S, names = REPLIES[name]
    return S.pack(*(0 if k is None else fields[k] for k in names))
