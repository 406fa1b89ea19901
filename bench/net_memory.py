"""Server memory of idle clients and of a 200,000-order sweep reply, two `tollfree` binaries side
by side (docs/benchmarks.md, "Connection layer: memory of idle clients and large replies").

    /usr/bin/python3 bench/net_memory.py sweep OLD/tollfree NEW/tollfree
    /usr/bin/python3 bench/net_memory.py engine OLD/tollfree NEW/tollfree

sweep: `tollfree serve`; 1,000 Unix clients each send one v1 sweep of 75,000 bars (a 600 KB
body) and stay connected without sending more; VmRSS of the server at start, right after the
last reply, and 3 s later. engine: `tollfree engine serve`; 1,000 clients each place one order
and stay idle (VmRSS likewise), then a maker rests 200,000 one-lot sells and a taker sends one
market buy for all of them, neither reading for 2 s; VmHWM before and after, and how many
Trades the taker received ("closed": its connection was dropped).
"""
import os, sys, socket, struct, subprocess, time, tempfile, resource, threading, random
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
def rss(pid, f="VmRSS"):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(f + ":"):
            return int(l.split()[1]) // 1024
def wait_listen(log):
    for _ in range(2000):
        t = open(log).read() if os.path.exists(log) else ""
        if "listening unix" in t: return
        time.sleep(0.01)
    raise SystemExit("no start: " + t)
def start(binp, args, d):
    log = d + "/log"
    p = subprocess.Popen([binp] + args, stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    wait_listen(log); return p
def recv_exact(s, n):
    b = bytearray()
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise EOFError
        b += c
    return bytes(b)
def sweep_idle(binp, nconn=1000, bars=75000):
    d = tempfile.mkdtemp(); sock = d + "/s.sock"
    p = start(binp, ["serve", "--unix", sock, "--quiet", "--max-conns", "2048"], d)
    time.sleep(0.5); r0 = rss(p.pid)
    random.seed(1); close = [100.0 + random.random() for _ in range(bars)]
    body = struct.pack("<BII", 0x00, bars, 1) + struct.pack(f"<{bars}d", *close) + struct.pack("<6q", 20, 10, 4, 10, 3, 5)
    fr = struct.pack("<I", len(body)) + body
    cs = []
    for i in range(nconn):
        s = socket.socket(socket.AF_UNIX); s.connect(sock); s.sendall(fr)
        n = struct.unpack("<I", recv_exact(s, 4))[0]; recv_exact(s, n); cs.append(s)
    r1 = rss(p.pid); time.sleep(3); r2 = rss(p.pid)
    for s in cs: s.close()
    p.terminate(); p.wait()
    return r0, r1, r2
def ofl_limit(acct, coid, px, side):
    pl = struct.pack("<QQQQBqQQ", 0, acct, coid, 1, side, px, 1, 0)
    return struct.pack("<HBQ", 1 + 8 + len(pl), 0x01, 0) + pl
def ofl_market(acct, coid, qty, side):
    pl = struct.pack("<QQQQBQQ", 0, acct, coid, 1, side, qty, 0)
    return struct.pack("<HBQ", 1 + 8 + len(pl), 0x02, 0) + pl
def read_until_hb(s, count_hb=1):
    hb = tr = 0; buf = b""
    while hb < count_hb:
        h = recv_exact(s, 2); n = struct.unpack("<H", h)[0]; f = recv_exact(s, n)
        if f[0] == 0: hb += 1
        if f[0] == 0x85: tr += 1
    return tr
def engine(binp, nconn=1000, norders=200000):
    d = tempfile.mkdtemp(); sock = d + "/e.sock"
    p = start(binp, ["engine", "serve", "--journal", d + "/j", "--unix", sock, "--max-orders", "250000"], d)
    time.sleep(0.5); r0 = rss(p.pid)
    cs = []
    for i in range(nconn):
        s = socket.socket(socket.AF_UNIX); s.connect(sock); s.sendall(ofl_limit(10 + i, 1, 5000 + i, 0)); read_until_hb(s); cs.append(s)
    r1 = rss(p.pid); time.sleep(3); r2 = rss(p.pid)
    for s in cs: s.close()
    mk = socket.socket(socket.AF_UNIX); mk.connect(sock)
    data = b"".join(ofl_limit(1, i + 1, 10000 + i % 7, 1) for i in range(norders))
    t = threading.Thread(target=mk.sendall, args=(data,)); t.start()
    read_until_hb(mk, norders); t.join()
    time.sleep(1.5); h0 = rss(p.pid, "VmHWM"); a0 = rss(p.pid)
    tk = socket.socket(socket.AF_UNIX); tk.connect(sock); tk.sendall(ofl_market(2, 1, norders, 0))
    time.sleep(2)  # neither peer reads for a while
    try:
        tr = read_until_hb(tk)
    except EOFError:
        tr = "closed"
    h1 = rss(p.pid, "VmHWM")
    p.terminate(); p.wait()
    return r0, r1, r2, h0, h1, tr
which = sys.argv[1]
for name, binp in (("old", sys.argv[2]), ("new", sys.argv[3])):
    if which == "sweep":
        print(name, "serve: RSS MB start %d, 1000 clients after their sweep %d, 3 s later %d" % sweep_idle(binp), flush=True)
    else:
        print(name, "engine: RSS MB start %d, 1000 clients %d, 3 s later %d; HWM before sweep %d, after %d; taker trades %s" % engine(binp), flush=True)
