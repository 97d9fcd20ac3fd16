#!/usr/bin/env python3
"""Checks the shape of the C tree: file and function sizes, and which folder
may include which.  Reads the git-tracked .c and .h files outside tests/ and
prints each violation as `path:line: rule: detail`, then a summary; exits 1 on any.

Rules:
  file-size      no file over MAX_FILE_LINES lines
  function-size  no function over MAX_FUNCTION_LINES lines, counted from the
                 first line of its signature to its closing brace.  The code
                 is clang-formatted (Linux braces), so a body runs from a
                 column-0 `{` to the next column-0 `}`.
  microhttpd     <microhttpd.h> only under server/http/
  http-header    server/http/http.h only from server/http/, server/api/,
                 server/compat/ (the front-ends) and server/main.c: the other
                 subsystems take typed arguments
  include        a quoted #include names a file of the tree
  layering       lower modules never include upward (LOWER_MODULES)
  folder-cycle   no two folders include each other, directly or through
                 others; every cycle is printed with the includes making it

Run from anywhere: `python3 scripts/check_structure.py` (or `make
check-structure`).  Standard library only.
"""

import os
import re
import subprocess
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 80

# For each lower module, the folders it may include from (besides system
# headers).  Anything else is an arrow pointing up.
LOWER_MODULES = {
    "common": {"common"},
    "input": {"input", "common"},
    "capture": {"capture", "input", "common"},
    "desktop-image": {"desktop-image", "common"},
    # The CLI is a client of the API: it never includes server code.
    "cli": {"cli", "common"},
}

# Files that may include server/http/http.h: those that speak HTTP.
HTTP_HEADER = "server/http/http.h"
# The compatibility front-ends (server/compat/) speak other engines' HTTP.
HTTP_HEADER_USERS = ("server/http/", "server/api/", "server/compat/", "server/main.c")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

def repo_root():
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        ["git", "-C", here, "rev-parse", "--show-toplevel"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def tracked_sources(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "*.c", "*.h"],
        check=True,
        capture_output=True,
        text=True,
    )
    return sorted(p for p in out.stdout.split() if not p.startswith("tests/"))


def folder_of(path):
    """The module a file belongs to: server/<x> for server subsystems, the
    top-level folder otherwise (server/main.c is in `server`)."""
    parts = path.split("/")
    if parts[0] == "server" and len(parts) > 2:
        return "server/" + parts[1]
    if len(parts) > 1:
        return parts[0]
    return "."


class Checker:
    def __init__(self, root, files):
        self.root = root
        self.files = files
        self.tracked = set(files)
        self.violations = []  # (path, line, rule, detail)
        self.lines = {}
        for f in files:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                self.lines[f] = fh.read().splitlines()

    def report(self, path, line, rule, detail):
        self.violations.append((path, line, rule, detail))

    # Rule: file-size
    def check_file_sizes(self):
        for f in self.files:
            n = len(self.lines[f])
            if n > MAX_FILE_LINES:
                self.report(f, 1, "file-size", "%d lines (max %d)" % (n, MAX_FILE_LINES))

    # Rule: function-size
    def functions(self, path):
        """Yields (name, first_line, last_line), 1-based, for each function
        definition: a column-0 `{` line, the signature lines above it, and
        the next column-0 `}`."""
        lines = self.lines[path]
        i = 0
        while i < len(lines):
            if not lines[i].startswith("{"):
                i += 1
                continue
            start = i
            j = i - 1
            while j >= 0 and not signature_stop(lines[j]):
                start = j
                j -= 1
            end = i + 1
            while end < len(lines) and not lines[end].startswith("}"):
                end += 1
            sig = " ".join(lines[start:i])
            m = re.search(r"(\w+)\s*\(", sig)
            name = m.group(1) if m else "?"
            yield name, start + 1, end + 1
            i = end + 1

    def check_function_sizes(self):
        for f in self.files:
            for name, first, last in self.functions(f):
                n = last - first + 1
                if n > MAX_FUNCTION_LINES:
                    self.report(
                        f,
                        first,
                        "function-size",
                        "%s() is %d lines (max %d)" % (name, n, MAX_FUNCTION_LINES),
                    )

    # Includes
    def includes(self, path):
        """Yields (line, kind, name, resolved) for each #include; resolved is
        the file a quoted include names (looked up next to the file, then
        from the root as -I. does), or None."""
        base = os.path.dirname(path)
        for n, text in enumerate(self.lines[path], 1):
            m = INCLUDE_RE.match(text)
            if not m:
                continue
            kind, name = m.group(1), m.group(2)
            resolved = None
            if kind == '"':
                for cand in (os.path.normpath(os.path.join(base, name)), os.path.normpath(name)):
                    # Files not yet added to git count too.
                    if cand in self.tracked or os.path.isfile(os.path.join(self.root, cand)):
                        resolved = cand
                        break
            yield n, kind, name, resolved

    def check_includes(self):
        for f in self.files:
            folder = folder_of(f)
            for line, kind, name, resolved in self.includes(f):
                if os.path.basename(name) == "microhttpd.h" and not f.startswith("server/http/"):
                    self.report(
                        f, line, "microhttpd", "includes %s outside server/http/" % name
                    )
                if resolved == HTTP_HEADER and not f.startswith(HTTP_HEADER_USERS):
                    self.report(
                        f,
                        line,
                        "http-header",
                        "includes %s (only server/http/, server/api/ and server/main.c may)"
                        % HTTP_HEADER,
                    )
                if kind == '"' and resolved is None:
                    self.report(f, line, "include", "cannot find \"%s\" in the tree" % name)
                if resolved and folder in LOWER_MODULES:
                    target = folder_of(resolved)
                    if target not in LOWER_MODULES[folder]:
                        self.report(
                            f,
                            line,
                            "layering",
                            "%s/ includes %s (%s/ may include only %s)"
                            % (
                                folder,
                                resolved,
                                folder,
                                ", ".join(sorted(m + "/" for m in LOWER_MODULES[folder])),
                            ),
                        )

    # Rule: folder-cycle
    def folder_graph(self):
        """folder -> {folder: [(file, line, included file), ...]}"""
        graph = {}
        for f in self.files:
            a = folder_of(f)
            for line, _kind, _name, resolved in self.includes(f):
                if not resolved:
                    continue
                b = folder_of(resolved)
                if a != b:
                    graph.setdefault(a, {}).setdefault(b, []).append((f, line, resolved))
        return graph

    def check_cycles(self):
        graph = self.folder_graph()
        for cycle in elementary_cycles({a: set(bs) for a, bs in graph.items()}):
            hops = list(zip(cycle, cycle[1:] + cycle[:1]))
            edges = [e for a, b in hops for e in graph[a][b]]
            first = graph[hops[0][0]][hops[0][1]][0]
            detail = " -> ".join(cycle + [cycle[0]])
            detail += "".join(
                "\n    %s:%d includes %s" % (f, line, inc) for f, line, inc in edges
            )
            self.report(first[0], first[1], "folder-cycle", detail)

    def run(self):
        self.check_file_sizes()
        self.check_function_sizes()
        self.check_includes()
        self.check_cycles()
        return self.violations


def signature_stop(text):
    """Whether a line above a column-0 `{` is no longer part of the
    function's signature: blank, the end of a previous declaration, a
    comment or a preprocessor line."""
    s = text.strip()
    return (
        not s
        or s.endswith((";", "}", "*/"))
        or s.startswith(("#", "/*", "*", "//"))
    )


def elementary_cycles(graph):
    """Every elementary cycle of a small directed graph, each once, as a list
    of nodes starting at its smallest node."""
    nodes = sorted(set(graph) | {b for bs in graph.values() for b in bs})
    cycles = []
    for start in nodes:
        # Only cycles whose smallest node is `start`: each is found once.
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ()), reverse=True):
                if nxt == start:
                    cycles.append(path)
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return sorted(cycles, key=lambda c: (len(c), c))


def main():
    root = repo_root()
    files = tracked_sources(root)
    violations = Checker(root, files).run()
    for path, line, rule, detail in sorted(violations):
        print("%s:%d: %s: %s" % (path, line, rule, detail))
    rules = sorted({v[2] for v in violations})
    if violations:
        print(
            "check_structure: %d violation(s) in %d files (%s)"
            % (len(violations), len({v[0] for v in violations}), ", ".join(rules))
        )
        return 1
    print("check_structure: %d files, no violations" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
