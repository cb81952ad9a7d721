#!/usr/bin/env python3
"""Checks of otter's source tree outside tests/ (docs/architecture.md, "Layers" and "Size"): each
layer includes only the layers its row allows, no source file is over 600 lines, no function over
80. A function is a brace block opened at namespace or class
scope after a header with parentheses; its length runs from the header's first line to the
closing brace. Exits 1 naming every file or function over."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRS = ["graph", "passes", "kernels", "runtime", "tools", "python", "fuzz"]
# The otter folders each layer may include (docs/architecture.md, "Layers").
ALLOWED = {
    "graph": {"graph"},
    "passes": {"graph", "passes"},
    "kernels": {"graph", "kernels"},
    "runtime": {"graph", "passes", "kernels", "runtime"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
EXT = (".cc", ".cu", ".h", ".cuh", ".cpp")
MAX_FILE, MAX_FUNC = 600, 80
KEYWORDS = re.compile(r"^(template\s*<.*>\s*)?(namespace|class|struct|enum|union|extern)\b")


def strip(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out = re.sub(r'//[^\n]*|/\*.*?\*/|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'',
                 lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"^\s*#.*$", "", out, flags=re.M)  # preprocessor lines


def functions(text):
    """(header, first line, lines) of every function body at namespace or class scope."""
    text = strip(text)
    stack = []  # per open brace: True where it opens a scope holding declarations
    decl_start = 0
    line = 1
    opened = []
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c in ";}" and (not stack or stack[-1]):
            decl_start = i + 1
        if c == "{":
            head = text[decl_start:i].strip()
            scope = not stack or stack[-1]
            is_scope = scope and (not head or bool(KEYWORDS.match(head)))
            is_func = scope and not is_scope and "(" in head and not head.rstrip().endswith("=")
            stack.append(is_scope)
            first = line - head.count("\n") if head else line
            opened.append((is_func, " ".join(head.split()), first))
            if is_scope:
                decl_start = i + 1
        elif c == "}" and stack:
            stack.pop()
            is_func, head, first = opened.pop()
            if is_func:
                yield head, first, line - first + 1
            if not stack or stack[-1]:
                decl_start = i + 1


def main():
    bad = []
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if not f.endswith(EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                text = open(path, encoding="utf-8", errors="replace").read()
                n_lines = text.count("\n")
                if n_lines > MAX_FILE:
                    bad.append(f"{rel}: {n_lines} lines (limit {MAX_FILE})")
                layer = rel.split(os.sep)[0]
                for m in INCLUDE.finditer(text):
                    if layer in ALLOWED and m.group(1) in DIRS and m.group(1) not in ALLOWED[layer]:
                        line = text.count("\n", 0, m.start()) + 1
                        bad.append(f"{rel}:{line}: the {layer} layer includes {m.group(1)}/ (allowed: "
                                   f"{', '.join(sorted(ALLOWED[layer]))})")
                for head, line, n in functions(text):
                    if n > MAX_FUNC:
                        bad.append(f"{rel}:{line}: function of {n} lines (limit {MAX_FUNC}): {head[:90]}")
    for b in bad:
        print(b)
    print(f"check-tree: {len(bad)} problems" if bad else
          "check-tree: layers include only what they may; every file <= 600 lines, every function <= 80")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
