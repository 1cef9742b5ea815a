"""Compares two `duet logits` outputs (raw float32): exits 1 when they differ
in length or any logit by more than the tolerance relative to the largest
magnitude, and prints the largest difference either way."""
import array
import sys


def load(path: str) -> array.array:
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def main() -> int:
    a, b = load(sys.argv[1]), load(sys.argv[2])
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    if len(a) != len(b) or not a:
        print(f"lengths differ or empty: {len(a)} vs {len(b)}")
        return 1
    scale = max(abs(x) for x in a)
    worst = max(abs(x - y) for x, y in zip(a, b))
    print(f"{len(a)} logits, max |diff| {worst:.3g}, max |logit| {scale:.3g}")
    return 0 if worst <= tol * max(scale, 1.0) else 1


if __name__ == "__main__":
    sys.exit(main())
