"""Dequantizers of the GGUF block types in numpy, written from the documented
block layouts (ggml's block_* structs) and independent of duet's C++. Each
float32 operation is done in the order of ggml's reference dequantizers so the
results can be compared bit for bit.

Usage: quant_numpy.py TYPE IN OUT [TYPE IN OUT ...] -- reads blocks of TYPE
(q8_0, q4_0, q4_1, q8_k, q4_k, q5_k, q6_k) from IN, writes little-endian
float32 values to OUT.

Layouts (little-endian; f16 = IEEE half):
  q8_0  34 B / 32: f16 d, int8 qs[32]                   x = qs * d
  q4_0  18 B / 32: f16 d, u8 qs[16]                     x = (q - 8) * d
  q4_1  20 B / 32: f16 d, f16 m, u8 qs[16]              x = q * d + m
        nibbles: byte j low = element j, high = element j + 16
  q8_k 292 B / 256: f32 d, int8 qs[256], int16 bsums[16]  x = qs * d
  q4_k 144 B / 256: f16 d, f16 dmin, u8 scales[12], u8 qs[128]
        8 sub-blocks of 32, x = (d*sc) * q - (dmin*m), 6-bit sc and m packed
        in scales; qs: 32 bytes per 64 elements, low nibbles first
  q5_k 176 B / 256: as q4_k with u8 qh[32] before qs: bit 2c / 2c+1 of qh[l]
        is the fifth bit of element 64c + l / 64c + 32 + l
  q6_k 210 B / 256: u8 ql[128], u8 qh[64], int8 scales[16], f16 d
        x = (d * scale) * (q - 32), 16 sub-blocks of 16
"""

import sys

import numpy as np

F32 = np.float32


def _f16(raw):
    return raw.view(np.float16).astype(F32)


def _blocks(buf, nbytes):
    a = np.frombuffer(buf, dtype=np.uint8)
    if a.size % nbytes:
        raise ValueError(f"{a.size} bytes is not a whole number of {nbytes}-byte blocks")
    return a.reshape(-1, nbytes)


def _nibbles32(qs):
    """(n, 16) bytes -> (n, 32) values: low nibbles then high nibbles."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1)


def q8_0(buf):
    b = _blocks(buf, 34)
    d = _f16(b[:, 0:2].copy().view(np.uint16))
    return (b[:, 2:].view(np.int8).astype(F32) * d).reshape(-1)


def q4_0(buf):
    b = _blocks(buf, 18)
    d = _f16(b[:, 0:2].copy().view(np.uint16))
    q = _nibbles32(b[:, 2:]).astype(np.int32) - 8
    return (q.astype(F32) * d).reshape(-1)


def q4_1(buf):
    b = _blocks(buf, 20)
    d = _f16(b[:, 0:2].copy().view(np.uint16))
    m = _f16(b[:, 2:4].copy().view(np.uint16))
    q = _nibbles32(b[:, 4:]).astype(F32)
    return (q * d + m).reshape(-1)


def q8_k(buf):
    b = _blocks(buf, 292)
    d = b[:, 0:4].copy().view(F32)
    return (b[:, 4:260].view(np.int8).astype(F32) * d).reshape(-1)


def _k4_scales(s):
    """(n, 12) packed bytes -> (n, 8) scales and (n, 8) mins, 6 bits each."""
    s = s.astype(np.int32)
    sc = np.empty((s.shape[0], 8), np.int32)
    mn = np.empty((s.shape[0], 8), np.int32)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, mn


def _k4_apply(d, dmin, scales, q):
    """q: (n, 256) levels; per sub-block of 32: (d*sc) * q - (dmin*m)."""
    sc, mn = _k4_scales(scales)
    step = (d * sc.astype(F32))[:, :, None]
    off = (dmin * mn.astype(F32))[:, :, None]
    return (step * q.reshape(-1, 8, 32).astype(F32) - off).reshape(-1)


def _k4_levels(qs):
    """(n, 128) bytes -> (n, 256): per 32-byte run, low nibbles then high."""
    runs = qs.reshape(-1, 4, 32)
    return np.concatenate([runs & 0xF, runs >> 4], axis=2).reshape(-1, 256)


def q4_k(buf):
    b = _blocks(buf, 144)
    d = _f16(b[:, 0:2].copy().view(np.uint16))
    dmin = _f16(b[:, 2:4].copy().view(np.uint16))
    return _k4_apply(d, dmin, b[:, 4:16], _k4_levels(b[:, 16:144]))


def q5_k(buf):
    b = _blocks(buf, 176)
    d = _f16(b[:, 0:2].copy().view(np.uint16))
    dmin = _f16(b[:, 2:4].copy().view(np.uint16))
    qh = b[:, 16:48].astype(np.int32)
    q = _k4_levels(b[:, 48:176]).astype(np.int32).reshape(-1, 4, 2, 32)
    for c in range(4):
        for half in range(2):
            q[:, c, half, :] |= ((qh >> (2 * c + half)) & 1) << 4
    return _k4_apply(d, dmin, b[:, 4:16], q.reshape(-1, 256))


def q6_k(buf):
    b = _blocks(buf, 210)
    ql = b[:, 0:128].astype(np.int32).reshape(-1, 2, 64)
    qh = b[:, 128:192].astype(np.int32).reshape(-1, 2, 32)
    scales = b[:, 192:208].view(np.int8).astype(F32)
    d = _f16(b[:, 208:210].copy().view(np.uint16))
    q = np.empty((b.shape[0], 2, 4, 32), np.int32)
    q[:, :, 0] = (ql[:, :, 0:32] & 0xF) | (((qh >> 0) & 3) << 4)
    q[:, :, 1] = (ql[:, :, 32:64] & 0xF) | (((qh >> 2) & 3) << 4)
    q[:, :, 2] = (ql[:, :, 0:32] >> 4) | (((qh >> 4) & 3) << 4)
    q[:, :, 3] = (ql[:, :, 32:64] >> 4) | (((qh >> 6) & 3) << 4)
    step = (d * scales)[:, :, None]  # (n, 16, 1)
    return (step * (q.reshape(-1, 16, 16) - 32).astype(F32)).reshape(-1)


DEQUANTIZERS = {"q8_0": q8_0, "q4_0": q4_0, "q4_1": q4_1, "q8_k": q8_k,
                "q4_k": q4_k, "q5_k": q5_k, "q6_k": q6_k}


def main(argv):
    jobs = argv[1:]
    if not jobs or len(jobs) % 3 or any(t not in DEQUANTIZERS for t in jobs[0::3]):
        sys.stderr.write(__doc__)
        return 2
    for i in range(0, len(jobs), 3):
        kind, src, dst = jobs[i:i + 3]
        with open(src, "rb") as f:
            y = DEQUANTIZERS[kind](f.read())
        y.astype("<f4").tofile(dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
