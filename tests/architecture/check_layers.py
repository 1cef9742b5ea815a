"""Fails when an #include in src/ crosses the layer table of
docs/architecture.md: a module may include its own headers and those of the
modules its row names, nothing else of src/."""
import pathlib
import re
import sys

ROW = re.compile(r"^\|\s*`([a-z_]+)`\s*\|([^|]*)\|")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def layer_table(doc: str) -> dict[str, set[str]]:
    table = {}
    for line in doc.splitlines():
        m = ROW.match(line)
        if m:
            names = {n.strip(" `") for n in m.group(2).split(",")}
            table[m.group(1)] = {n for n in names if n and n != "—"}
    return table


def violations(src: pathlib.Path, table: dict[str, set[str]]) -> list[str]:
    found = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cc"):
            continue
        module = path.relative_to(src).parts[0]
        if module not in table:
            found.append(f"{path.relative_to(src)}: module '{module}' is not in the map")
            continue
        allowed = table[module] | {module}
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if (src / target).is_dir() and target not in allowed:
                found.append(f"{path.relative_to(src)}: includes {target}/, which {module}/ may not")
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    table = layer_table((root / "docs/architecture.md").read_text(encoding="utf-8"))
    if not table:
        print("docs/architecture.md has no layer table")
        return 1
    bad = violations(root / "src", table)
    for line in bad:
        print(line)
    print(f"{len(table)} modules, {len(bad)} include(s) crossing the map")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
