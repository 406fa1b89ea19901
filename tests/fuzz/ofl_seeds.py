#!/usr/bin/env python3
"""Seed inputs for the OFL1 fuzz targets (tests/fuzz/corpus/{ofl_stream,ofl_datagram,journal}/).

Usage: /usr/bin/python3 tests/fuzz/ofl_seeds.py build/tollfree

Frames and datagrams are built here with struct from docs/orderflow.md (independently of the C
codec); journals come from `tollfree journal gen`. The committed corpora are these seeds grown
by libFuzzer (make fuzz; then -merge=1 to keep them small)."""
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__))


def q(v):
    return struct.pack('<QQ', v & (2**64 - 1), v >> 64)


KINDS = {
    0x00: b'',
    0x01: struct.pack('<QQQQBq', 1, 2, 3, 4, 1, -5) + q(1000),
    0x02: struct.pack('<QQQQB', 11, 12, 13, 14, 0) + q(2**64 + 5),
    0x03: struct.pack('<QQ', 21, 22),
    0x04: struct.pack('<QQQ', 31, 32, 33),
    0x05: struct.pack('<QQQq', 41, 42, 43, 123456789) + q(77),
    0x81: struct.pack('<QQQQQQ', 51, 52, 1700000000000000001, 54, 55, 56),
    0x82: struct.pack('<QQQQB', 61, 62, 63, 0, 4),
    0x83: struct.pack('<QQQQQ', 71, 72, 73, 74, 75),
    0x84: struct.pack('<QQQQ', 81, 82, 83, 84),
    0x85: struct.pack('<QQQQQQq', 91, 92, 93, 94, 95, 96, -100) + q(2**127 + 3),
}


def frame(kind, seq, payload):
    return struct.pack('<HBQ', 9 + len(payload), kind, seq) + payload


def dgram(session, seq, kind, payload):
    return struct.pack('<QQB', session, seq, kind) + payload


def write(sub, name, data):
    d = os.path.join(ROOT, 'corpus', sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed_' + name), 'wb') as f:
        f.write(data)


def main():
    tollfree = sys.argv[1] if len(sys.argv) > 1 else 'build/tollfree'
    for k, p in KINDS.items():
        write('ofl_stream', 'kind_%02x' % k, frame(k, 7, p))
        write('ofl_datagram', 'kind_%02x' % k, dgram(0xCAFE, 7, k, p))
    stream = b''.join(frame(k, i, p) for i, (k, p) in enumerate(KINDS.items()))
    write('ofl_stream', 'all_kinds', stream)
    write('ofl_stream', 'truncated', stream[:-5])
    write('ofl_stream', 'reserved', frame(0x06, 1, b'\0' * 16) + frame(0x40, 2, b''))
    write('ofl_stream', 'bad_side', frame(0x01, 1, KINDS[1][:32] + b'\x02' + KINDS[1][33:]))
    write('ofl_stream', 'len_small', struct.pack('<HBQ', 8, 1, 0))
    write('ofl_stream', 'len_large', struct.pack('<HBQ', 200, 1, 0) + b'\0' * 200)
    seqd = b''.join(bytes([len(d)]) + d for d in
                    (dgram(9, s, k, KINDS[k]) for s, k in
                     [(0, 3), (1, 4), (5, 3), (3, 3), (3, 3), (6, 0), (9, 0), (2**64 - 1, 0)]))
    write('ofl_datagram', 'sequence', seqd)
    write('ofl_datagram', 'oversize', dgram(1, 1, 0x03, b'\0' * 496))
    write('ofl_datagram', 'bad_reason', dgram(1, 1, 0x82, KINDS[0x82][:32] + b'\x05'))
    with tempfile.TemporaryDirectory() as tmp:
        for n in (0, 1, 5, 25):
            path = os.path.join(tmp, 'j%d.ofl' % n)
            subprocess.run([tollfree, 'journal', 'gen', '--count', str(n), '--seed', str(n + 1),
                            path], check=True, stdout=subprocess.DEVNULL)
            data = open(path, 'rb').read()
            write('journal', 'gen_%d' % n, data)
            if n == 25:
                write('journal', 'torn', data[:-7])
                flipped = bytearray(data)
                flipped[200] ^= 0x40
                write('journal', 'flipped', bytes(flipped))
                write('journal', 'zero_tail', data + b'\0' * 40)
                write('journal', 'bad_magic', b'OFL2' + data[4:])
                write('journal', 'old_header', data[:15] + data[23:])  # before the header CRC
                # records of the journal, without header and CRCs, as a frame stream
                # (23-byte header with its CRC block; 15 in journals written before it)
                off, frames = (23 if data[16:17] not in (b'', b'\0') else 15), b''
                while off < len(data):
                    flen = struct.unpack_from('<H', data, off)[0]
                    frames += data[off:off + 2 + flen]
                    off += 2 + flen + 4
                write('ofl_stream', 'gen_25', frames)


if __name__ == '__main__':
    main()
