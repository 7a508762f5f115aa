#!/usr/bin/env python3
"""The size check (issue 32): no production file over 500 lines, no function
over 100 (the house rules' hard limits; they want files mostly 100-400
lines and functions mostly under 60).

Production code is what SOURCES lists: the runtime, the operator, the Python
package and its extension, the examples, the benchmarks and the scripts
(tests are exempt: a table of cases may be long). Python functions are
measured with the ast module (first line of the def, decorators excluded,
to the last line of its body). C++ functions are found by a brace scanner
that skips comments, string and character literals (raw strings included):
a block opened at namespace, class or extern level whose head holds a '('
and is not an initializer ('=' before the first '(') is a function body,
measured from the head's first line to its closing brace. Lambdas and
local classes count towards the function that holds them.

Exit 0 when clean; prints "sizes: N files, M functions checked: OK", else
one "FAIL: sizes: ..." line per breach.
Usage: check_sizes.py [REPO_ROOT]
"""

import ast
import os
import re
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 100
SOURCES = ["runtime", "operator", "python/src", "python/khorovod", "examples", "bench", "scripts"]
CPP = (".h", ".cc", ".cu")
CONTAINER = re.compile(
    r"^(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern\s+\"C\")\b"
)


def production_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "--", *SOURCES],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the folders
        out = [
            os.path.relpath(os.path.join(d, f), root)
            for top in SOURCES
            for d, _, files in os.walk(os.path.join(root, top))
            for f in files
        ]
    return sorted(
        p for p in out if p.endswith(CPP + (".py", ".sh")) and os.path.isfile(os.path.join(root, p))
    )


def strip_cpp(text):
    """The text with comments and literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif (
            c == "R"
            and text.startswith('R"', i)
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cpp_functions(text):
    """Yields (name, first line, line count) of every function body."""
    code = strip_cpp(text)
    code = re.sub(r"^\s*#.*$", "", code, flags=re.M)  # preprocessor lines
    stack, head_start, line = [], 0, 1  # stack: True for a container block
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[head_start:i].strip()
            in_container = all(stack)
            if in_container and CONTAINER.match(head):
                stack.append(True)
            elif in_container and "(" in head and "=" not in head.split("(", 1)[0]:
                first = line - head.count("\n") if head else line
                name = re.findall(r"([~\w:]+)\s*\(", head)
                stack.append((name[0] if name else "?", first))
            else:
                stack.append(False)
            head_start = i + 1
        elif c == "}":
            top = stack.pop() if stack else False
            if isinstance(top, tuple):
                yield top[0], top[1], line - top[1] + 1
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
        elif (
            c == ":"
            and all(stack)
            and re.search(r"\b(public|private|protected)\s*$", code[head_start:i])
        ):
            head_start = i + 1


def py_functions(text):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def main():
    root = os.path.abspath(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    )
    errors, functions = [], 0
    files = production_files(root)
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            text = fh.read()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            errors.append(f"{rel}: {lines} lines (limit {MAX_FILE_LINES})")
        found = (
            cpp_functions(text)
            if rel.endswith(CPP)
            else py_functions(text)
            if rel.endswith(".py")
            else ()
        )
        for name, first, count in found:
            functions += 1
            if count > MAX_FUNCTION_LINES:
                errors.append(
                    f"{rel}:{first}: function {name} has {count} lines (limit {MAX_FUNCTION_LINES})"
                )
    for e in errors:
        print("FAIL: sizes: " + e)
    print(
        f"sizes: {len(files)} files, {functions} functions checked: "
        + ("OK" if not errors else f"{len(errors)} errors")
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
