#!/usr/bin/env python3
"""Fails when a message of the library names a command-line flag.

Usage: flags_in_library.py SOURCE_ROOT [--self-test]

The library (include/ and runtime/) speaks of its own options (`config.dp`, `fail_rank`); the
command-line tool (examples/cli) maps them to its flags. This scans every string literal of the
C++ sources (.hpp .h .cpp .cu .cuh) and of the Python package (string tokens that are not
docstrings: messages) under include/ and runtime/ for a flag, `--name`, and prints
`file:line: "...--name..."` for each one; exits 1 when any is found. Comments are not scanned.
"""
import io
import re
import sys
import tokenize

from sources import source_files

FLAG = re.compile(r'(?<![-\w])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*')
# A string literal (raw strings, prefixes, escapes) or a comment; comments are skipped.
CPP_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|(?:u8|u|U|L)?R"([^(\s]*)\((.*?)\)\1"|(?:u8|u|U|L)?"((?:[^"\\\n]|\\.)*)"'
                       r"|'(?:[^'\\\n]|\\.)+'", re.S)


def cpp_strings(text):
    """(line, literal text) of every string literal of C++ source `text`."""
    for m in CPP_TOKEN.finditer(text):
        body = m.group(2) if m.group(2) is not None else m.group(3)
        if body is not None:
            yield text.count('\n', 0, m.start()) + 1, body


def py_strings(text):
    """(line, literal text) of every string token of Python source `text` that is not a
    docstring (a string statement on its own)."""
    previous = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.STRING and previous not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
            yield tok.start[0], tok.string
        if tok.type not in (tokenize.COMMENT,):
            previous = tok.type


def scan(root):
    for path, text, kind in source_files(root):
        for line, s in cpp_strings(text) if kind == 'cpp' else py_strings(text):
            if FLAG.search(s):
                yield path, line, s


SELF_TEST_CPP = r'''
// a comment may name --flags
throw invalid_argument("x: give a smaller --dp");
auto ok = "dp must be >= 1 -- and --- rules are not flags";
auto raw = R"x(use --job to pick)x";
char c = '"';  /* "--not-a-string" */
'''
SELF_TEST_PY = '''
def f():
    """Docstrings may say `pipeplan plan --out` as usage."""
    raise ValueError("choose another --job")  # --comment
    return "a -- b"
'''


def self_test():
    cpp = [(line, s) for line, s in cpp_strings(SELF_TEST_CPP) if FLAG.search(s)]
    assert cpp == [(3, 'x: give a smaller --dp'), (5, 'use --job to pick')], cpp
    py = [(line, s) for line, s in py_strings(SELF_TEST_PY) if FLAG.search(s)]
    assert py == [(4, '"choose another --job"')], py
    print('flags_in_library.py self-test: ok')


def main(argv):
    self_test()
    if '--self-test' in argv:
        return 0
    root = argv[1]
    bad = list(scan(root))
    for path, line, s in bad:
        print(f'{path}:{line}: "{s}" names a command-line flag (the library names its own options; the CLI maps them)')
    print(f'{len(bad)} library messages name a command-line flag')
    print(f'{0 if bad else 1} passed, {1 if bad else 0} failed, 0 skipped')  # every suite's closing line
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
