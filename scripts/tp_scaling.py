#!/usr/bin/env python3
"""The scaling model of docs/scaling.md, measured and checked on this machine.

Measures, in alternating rounds (the machine is shared, so each round runs
every configuration back to back, in reversed order every other round):
  - `duet bench` decode and prefill of a model and of the same shape with
    fewer layers, at 1 and 2 threads: the per-layer time is the difference
    over the layers between them, the rest (embedding, output head) what
    remains;
  - `mpirun -np 2 duet bench -t 1` of the full model;
  - `mpirun -np 2 duet_allreduce --json`: allreduce latency and bandwidth.
Then predicts -np 2 from the per-layer times and the allreduce, prints it
beside the measurement, and predicts a Llama-2-70B shape (Q8_0) on N nodes
(this machine's kind and a server socket) over 25 and 100 GbE.

Usage: tp_scaling.py DUET ALLREDUCE MODEL SHORT_MODEL [--rounds 4] [--json out.json]
MODEL and SHORT_MODEL: `duet synth` of one shape with L and L_short layers,
quantized alike (their layer counts are read from the files' metadata).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


def bench(cmd: list[str], prompt: int, gen: int, reps: int, field: str = "tok_s") -> dict[str, float]:
    out = subprocess.run(cmd + ["-p", str(prompt), "-n", str(gen), "-r", str(reps), "--json"], check=True,
                         capture_output=True, text=True).stdout
    rows = json.loads(out[out.index("["):])
    return {("decode" if r["test"].startswith("tg") else "prefill"): r[field] for r in rows}


def layers_of(duet: str, model: str) -> int:
    out = subprocess.run([duet, "inspect", model], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "block_count" in line:
            return int(line.split()[-1])
    raise SystemExit(f"no block_count in `duet inspect {model}`")


def loadavg() -> float:
    return os.getloadavg()[0]


def ring_or_doubling(n: int, nbytes: float, latency_s: float, bandwidth: float) -> float:
    """One allreduce on n nodes: recursive doubling (log2 n exchanges of the
    whole message) or a ring (2(n-1) steps of 1/n of it), whichever is less,
    as MPI picks by message size."""
    if n == 1:
        return 0.0
    steps = math.ceil(math.log2(n))
    doubling = steps * (latency_s + nbytes / bandwidth)
    ring = 2 * (n - 1) * latency_s + 2 * (n - 1) / n * nbytes / bandwidth
    return min(doubling, ring)


# Llama-2-70B: dim 8192, 80 layers, 64 heads / 8 KV heads of 128, FFN 28672, vocab 32000.
BIG = {"dim": 8192, "layers": 80, "heads": 64, "kv_heads": 8, "ffn": 28672, "vocab": 32000}
# Assumed links (TCP, as duet's MPI runs over Open MPI's tcp BTL): payload
# bandwidth ~93 % of the line rate; a message's latency the kernel's TCP
# path at both ends (what TCP loopback measures here) plus ~5 µs of NIC and switch.
LINKS = {"25 GbE": 25e9 / 8 * 0.93, "100 GbE": 100e9 / 8 * 0.93}
# Nodes: read GB/s and int8 G op/s. This machine idle (/work/shared/PEERS.md:
# 2 threads read 39-47 GB/s, vpdpbusd 1048 G op/s) and a server socket
# (12 channels of DDR5: ~300 GB/s read; 64 cores at ~500 G op/s each).
NODES = [("this machine", 40.0, 1048.0), ("server socket", 300.0, 32000.0)]


def layer_params(s: dict) -> float:
    head_dim = s["dim"] // s["heads"]
    attn = 2 * s["dim"] * s["dim"] + 2 * s["dim"] * s["kv_heads"] * head_dim
    return attn + 3 * s["dim"] * s["ffn"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("duet")
    ap.add_argument("allreduce")
    ap.add_argument("model")
    ap.add_argument("short")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    L, Ls = layers_of(a.duet, a.model), layers_of(a.duet, a.short)
    configs = {
        "1 process x 2 threads": [a.duet, "bench", "-m", a.model, "-t", "2"],
        "-np 2 x 1 thread": MPI + [a.duet, "bench", "-m", a.model, "-t", "1"],
        "1 process x 1 thread": [a.duet, "bench", "-m", a.model, "-t", "1"],
        "short x 2 threads": [a.duet, "bench", "-m", a.short, "-t", "2"],
        "short x 1 thread": [a.duet, "bench", "-m", a.short, "-t", "1"],
    }
    runs: dict[str, list[dict]] = {k: [] for k in configs}
    allreduces, loads = [], []
    for r in range(a.rounds):
        order = list(configs) if r % 2 == 0 else list(reversed(configs))
        loads.append(loadavg())
        for name in order:
            runs[name].append(bench(configs[name], a.prompt, a.gen, a.reps))
        out = subprocess.run(MPI + [a.allreduce, "--json"], check=True, capture_output=True, text=True).stdout
        allreduces.append(json.loads(out.strip().splitlines()[-1]))
        loads.append(loadavg())
        print(f"round {r + 1}: load {loads[-2]:.1f}-{loads[-1]:.1f}; " +
              "; ".join(f"{k} tg {v[-1]['decode']:.1f} pp {v[-1]['prefill']:.1f}" for k, v in runs.items()),
              file=sys.stderr)

    def mean(name: str, phase: str) -> float:
        return statistics.mean(x[phase] for x in runs[name])

    # Seconds per token (decode) or per prompt token (prefill), by threads.
    def split(phase: str, threads: str) -> tuple[float, float]:
        full = 1 / mean(f"1 process x {threads}", phase)
        short = 1 / mean(f"short x {threads}", phase)
        layer = (full - short) / (L - Ls)
        return layer, short - Ls * layer

    def allreduce_us(what: str) -> float:
        return statistics.median(next(x["us"] for x in ar["allreduce"] if x["what"] == what) for ar in allreduces)

    dim_name = "decode dim 2048"
    prefill_name = "prefill 512 x 2048"
    ar_decode = allreduce_us(dim_name) * 1e-6
    prefill_bytes = next(x["bytes"] for x in allreduces[0]["allreduce"] if x["what"] == prefill_name)
    ar_prefill_per_token = allreduce_us(prefill_name) * 1e-6 * (a.prompt * 2048 * 4 / prefill_bytes) / a.prompt
    result = {"layers": L, "short_layers": Ls, "loadavg": loads, "rounds": runs, "allreduce": allreduces}
    print("| phase | per layer, 1 thread | per layer, 2 threads | rest, 1 thread | allreduce per layer | "
          "predicted -np 2 | measured -np 2 | predicted / measured | 1 process x 2 threads | -np 2 / 1 process |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for phase, ar in (("decode", ar_decode), ("prefill", ar_prefill_per_token)):
        l1, rest1 = split(phase, "1 thread")
        l2, rest2 = split(phase, "2 threads")
        # Each rank does half a layer on its own core, but the two share the
        # memory bus: a layer takes the longer of half the one-thread time
        # and the two-thread time (the bus full). The rest is almost all the
        # output head, split by vocabulary rows: the same.
        layer = max(l1 / 2, l2)
        predicted = 1 / (L * (layer + 2 * ar) + max(rest1 / 2, rest2))
        measured = mean("-np 2 x 1 thread", phase)
        one = mean("1 process x 2 threads", phase)
        ratios = [x[phase] / y[phase] for x, y in zip(runs["-np 2 x 1 thread"], runs["1 process x 2 threads"])]
        result[phase] = {"layer_1t_ms": l1 * 1e3, "layer_2t_ms": l2 * 1e3, "rest_1t_ms": rest1 * 1e3,
                         "rest_2t_ms": rest2 * 1e3,
                         "allreduce_ms": ar * 1e3, "predicted_tok_s": predicted, "measured_tok_s": measured,
                         "one_process_tok_s": one, "ratio_per_round": ratios}
        print(f"| {phase} | {l1 * 1e3:.3f} ms | {l2 * 1e3:.3f} ms | {rest1 * 1e3:.2f} ms | 2 x {ar * 1e3:.3f} ms | "
              f"{predicted:.1f} tok/s | {measured:.1f} tok/s | {predicted / measured:.2f} | {one:.1f} tok/s | "
              f"{measured / one:.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")

    # The 70B shape on N nodes: decode reads every weight once per token at
    # the node's read ceiling times the fraction of it duet reaches, prefill
    # computes at the int8 ceiling times its fraction (both fractions
    # measured here against probes run beside each repetition, so that load
    # on this machine cancels out); the output head is split by vocabulary
    # rows too, and its logits gathered onto rank 0 (once per decode step,
    # once per prefill chunk).
    roof = bench([a.duet, "bench", "-m", a.model, "-t", "2", "--roofline", "--probe-mib", "256"], a.prompt, a.gen,
                 a.reps, "percent_of_ceiling")
    latency = statistics.median(ar["latency_us"] for ar in allreduces) * 1e-6
    tcp = subprocess.run(MPI + ["--mca", "btl", "self,tcp", a.allreduce, "--json"], check=True, capture_output=True,
                         text=True).stdout
    tcp_latency = json.loads(tcp.strip().splitlines()[-1])["latency_us"] * 1e-6 + 5e-6
    weights = layer_params(BIG) * 8.5 / 8  # Q8_0 bytes
    head = BIG["dim"] * BIG["vocab"] * 8.5 / 8
    chunk = 512
    result["model70b"] = {"percent_of_ceiling": roof, "tcp_latency_us": tcp_latency * 1e6, "rows": []}
    print(f"\nduet's fraction of the ceilings here: decode {roof['decode']:.0f} % of read, prefill "
          f"{roof['prefill']:.0f} % of int8; allreduce latency over TCP {tcp_latency * 1e6:.0f} µs")
    print("| node | N | link | decode tok/s | decode comm % | prefill tok/s | prefill comm % |")
    print("|---|---|---|---|---|---|---|")
    for node, read_gb_s, int8_gop_s in NODES:
        bw_eff = read_gb_s * 1e9 * roof["decode"] / 100
        op_eff = int8_gop_s * 1e9 * roof["prefill"] / 100
        for n in (1, 2, 4, 8):
            for link, bw in LINKS.items():
                if n == 1 and link != "25 GbE":
                    continue
                gather = tcp_latency + (n - 1) / n * BIG["vocab"] * 4 / bw if n > 1 else 0.0
                d_comm = BIG["layers"] * 2 * ring_or_doubling(n, BIG["dim"] * 4, tcp_latency, bw) + gather
                d_comp = (BIG["layers"] * weights + head) / n / bw_eff
                p_comm = (BIG["layers"] * 2 * ring_or_doubling(n, chunk * BIG["dim"] * 4, tcp_latency, bw) + gather) / chunk
                p_comp = BIG["layers"] * 2 * layer_params(BIG) / n / op_eff + 2 * head / n / chunk / op_eff
                row = {"node": node, "n": n, "link": link if n > 1 else "-", "decode_tok_s": 1 / (d_comp + d_comm),
                       "decode_comm": d_comm / (d_comp + d_comm), "prefill_tok_s": 1 / (p_comp + p_comm),
                       "prefill_comm": p_comm / (p_comp + p_comm)}
                result["model70b"]["rows"].append(row)
                print(f"| {node} | {n} | {row['link']} | {row['decode_tok_s']:.2f} | {100 * row['decode_comm']:.1f} | "
                      f"{row['prefill_tok_s']:.1f} | {100 * row['prefill_comm']:.1f} |")
    print(f"\nload average during the runs: {min(loads):.1f}-{max(loads):.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
