#!/usr/bin/env python3
"""Prints a Markdown table of the figures in a results.json of make bench:
bench/table.py bench/reference-run.json [--short]. --short keeps the
figures that have a target."""
import json, sys

def num(v):
    if v is None:
        return ""
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"

d = json.load(open(sys.argv[1]))
short = "--short" in sys.argv
print("| Figure | Value | Reference | Ratio | Target | |")
print("|---|---|---|---|---|---|")
for f in d["figures"]:
    target = f.get("target") or ""
    if short and target in ("", "-"):
        continue
    ref = f.get("reference")
    ref_s = f"{num(ref)} {f['unit']}" if ref else ""
    if f.get("reference_label") and ref:
        ref_s += f" ({f['reference_label']})"
    ratio = f"{f['ratio']:.3g}×" if f.get("ratio") else ""
    result = "" if target in ("", "-") else ("✓" if f.get("pass") else "miss")
    print(f"| {f['section']}: {f['name']} | {num(f['value'])} {f['unit']} | {ref_s} | {ratio} | {target} | {result} |")
print()
print(f"{d['passed']} passed, {d['missed']} missed; {d['num_cpu']} CPUs, {d['go_version']}, started {d['started']}.")
