#!/usr/bin/env python3
"""Seed inputs for the extension-codec fuzz target (tests/fuzz/corpus/ofx_stream/).

Usage: /usr/bin/python3 tests/fuzz/ofx_seeds.py

The seeds are the bytes of the shared vectors (tests/vectors/ofx_frames.txt: every gateway
frame and every bad frame; ofl_frames.txt: the OFL1 frames), one file each, and streams of them
back to back. The committed corpus is these seeds grown by libFuzzer (make fuzz; then
-merge=1 to keep it small)."""
import os

ROOT = os.path.dirname(os.path.abspath(__file__))
VEC = os.path.join(ROOT, '..', 'vectors')


def lines(name):
    with open(os.path.join(VEC, name)) as f:
        for line in f:
            t = line.split()
            if t and t[0] in ('frame', 'error'):
                yield t[0], t[1], bytes.fromhex(t[-1])


def write(name, data):
    d = os.path.join(ROOT, 'corpus', 'ofx_stream')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'seed_' + name), 'wb') as f:
        f.write(data)


def main():
    gw = list(lines('ofx_frames.txt'))
    ofl = [x for x in lines('ofl_frames.txt') if x[0] == 'frame']
    for i, (t, what, raw) in enumerate(gw):
        write(f'{t}_{i:02d}_{what.lstrip("-")}', raw)
    frames = [raw for t, _, raw in gw if t == 'frame']
    write('stream_gateway', b''.join(frames))
    mixed = []
    for i in range(max(len(frames), len(ofl))):
        mixed.append(frames[i % len(frames)])
        mixed.append(ofl[i % len(ofl)][2])
    write('stream_mixed', b''.join(mixed))
    write('stream_truncated', b''.join(frames)[:-7])


if __name__ == '__main__':
    main()
