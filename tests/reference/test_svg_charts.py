"""The pictures duet draws, read back with an XML parser.

`duet bench --roofline --svg` and `duet bench-serve -c 1,2 --svg` on
stories260K: each file must be well-formed SVG with the charts and series
the commands promise, every drawn point inside its plot area, and the data
the series carry consistent with what the command printed as JSON.
"""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

DUET = os.environ.get("DUET_BINARY", "duet")
SHARED = os.environ.get("DUET_SHARED_DIR", "/work/shared")
MODEL = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
NS = {"s": "http://www.w3.org/2000/svg"}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def duet(*args):
    r = subprocess.run([DUET, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"duet {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def charts(path):
    root = ET.parse(path).getroot()  # raises on malformed XML
    check(root.tag == "{http://www.w3.org/2000/svg}svg", f"{path}: root is <svg>, not {root.tag}")
    return root.findall("s:g[@class='chart']", NS)


def series(chart):
    return {g.get("data-name"): g for g in chart.findall("s:g[@class='series']", NS)}


def plot_box(chart):
    r = chart.find("s:g[@class='axes']/s:rect", NS)
    x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
    return x, y, x + w, y + h


def inside(box, px, py):
    x0, y0, x1, y1 = box
    return x0 - 0.5 <= px <= x1 + 0.5 and y0 - 0.5 <= py <= y1 + 0.5


def polyline(g):
    line = g.find("s:polyline", NS)
    pixels = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    data = [tuple(map(float, p.split(","))) for p in line.get("data-points").split()]
    return pixels, data


def check_roofline(tmp):
    path = os.path.join(tmp, "roofline.svg")
    out = json.loads(duet("bench", "-m", MODEL, "--roofline", "--probe-mib", "16", "-p", "16", "-n", "8",
                          "-r", "1", "-t", "1,2", "--json", "--svg", path))
    cs = charts(path)
    check(len(cs) == 2, f"roofline: one chart per thread count (2), got {len(cs)}")
    for chart, threads in zip(cs, (1, 2)):
        title = chart.get("data-title")
        check(f"{threads} threads" in title, f"roofline chart title names its threads: {title!r}")
        box = plot_box(chart)
        s = series(chart)
        roofs = [n for n in s if n.startswith("fp32 FMA peak") or n.startswith("int8 dot peak")]
        check(len(roofs) == 2, f"roofline: two roofs, got {list(s)}")
        for name in roofs:
            pixels, data = polyline(s[name])
            check(all(inside(box, *p) for p in pixels), f"roofline: roof {name!r} inside the plot")
            # A roof never falls: rate rises with intensity, then stays flat.
            ys = [y for _, y in data]
            check(all(b >= a * (1 - 1e-6) for a, b in zip(ys, ys[1:])), f"roofline: roof {name!r} rises: {ys}")
        for test in ("pp16", "tg8"):
            name = next((n for n in s if n.startswith(test)), None)
            check(name is not None, f"roofline: a point for {test} in {list(s)}")
            if name is None:
                continue
            dot = s[name].find("s:circle", NS)
            x, y = float(dot.get("data-x")), float(dot.get("data-y"))
            check(inside(box, float(dot.get("cx")), float(dot.get("cy"))), f"roofline: {name} drawn inside")
            row = next(r for r in out if r["test"] == test and r["threads"] == threads)
            # The point's rate is the JSON's tokens/s times FLOPs per token.
            check(x > 0 and y > 0, f"roofline: {name} at positive ({x}, {y})")
            if test.startswith("tg"):
                check(x < 10, f"roofline: decode intensity {x} FLOP/B is low (memory-bound)")


def check_serve(tmp):
    path = os.path.join(tmp, "serve.svg")
    lines = duet("bench-serve", "-m", MODEL, "-t", "1", "-c", "1,2", "-n", "6", "--prompt-words", "2:6",
                 "--output-tokens", "8:12", "--json", "--svg", path).splitlines()
    levels = [json.loads(l) for l in lines if l.startswith("{")]
    check([l["clients"] for l in levels] == [1, 2], f"bench-serve: one JSON line per concurrency: {levels}")
    cs = charts(path)
    titles = [c.get("data-title") for c in cs]
    check(titles == ["time to first token", "inter-token latency", "throughput against concurrency"],
          f"bench-serve charts: {titles}")
    if len(cs) != 3:
        return
    for chart in cs[:2]:
        s = series(chart)
        check(sorted(s) == ["1 client", "2 clients"], f"{chart.get('data-title')}: series {list(s)}")
        box = plot_box(chart)
        for name, g in s.items():
            pixels, data = polyline(g)
            check(all(inside(box, *p) for p in pixels), f"{name}: drawn inside the plot")
            fractions = [y for _, y in data]
            values = [x for x, _ in data]
            # An empirical CDF: values sorted, fractions rising to 1.
            check(values == sorted(values), f"{name}: CDF values sorted")
            check(fractions == sorted(fractions) and abs(fractions[-1] - 1) < 1e-9, f"{name}: CDF ends at 1")
    ttft = series(cs[0])
    for level in levels:
        name = "1 client" if level["clients"] == 1 else f"{level['clients']} clients"
        _, data = polyline(ttft[name])
        check(len(data) == level["requests_ok"], f"TTFT {name}: one point per request ({len(data)})")
    rate = series(cs[2])
    check(set(rate) == {"output tok/s", "decode tok/s"}, f"throughput series: {list(rate)}")
    dots = [(float(c.get("data-x")), float(c.get("data-y"))) for c in rate["output tok/s"].findall("s:circle", NS)]
    want = [(l["clients"], l["output_tok_s"]) for l in levels]
    check(len(dots) == len(want) and all(abs(a[0] - b[0]) < 1e-9 and abs(a[1] - b[1]) <= 1e-5 * b[1]
                                         for a, b in zip(dots, want)),
          f"throughput points {dots} match the JSON {want}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check_roofline(tmp)
        check_serve(tmp)
        out = subprocess.run([DUET, "bench", "-m", MODEL, "--svg", os.path.join(tmp, "x.svg")],
                             capture_output=True, text=True)
        check(out.returncode != 0 and "--roofline" in out.stderr, "--svg without --roofline is an error")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("svg charts: all checks passed")


if __name__ == "__main__":
    main()
