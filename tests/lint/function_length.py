#!/usr/bin/env python3
"""Fails when a function in include/ or runtime/ is longer than the limit (design.md, "Size").

Usage: function_length.py SOURCE_ROOT [--limit N] [--list N] [--self-test]

C++ (.hpp .h .cpp .cu .cuh): comments, string and character literals (raw strings included)
are blanked first, then every `{` whose header ends in `)` (plus qualifiers such as const,
noexcept, override, a trailing return type or a requires clause) opens a function body, unless
the `(` belongs to if/for/while/switch/catch or a lambda (a lambda's lines count toward the
function around it). A function's length is its lines from the header's name to the closing
brace. Python (.py): ast's lineno..end_lineno of every def.
Prints `file:line: function is N lines (limit L)` for each one over the limit and exits 1;
`--list N` prints every function over N lines and exits 0.
"""
import ast
import re
import sys

from sources import source_files

WINDOW = 4000
CONTROL = {'if', 'for', 'while', 'switch', 'catch', 'return', 'sizeof', 'alignof', 'decltype',
           'noexcept', 'requires', 'static_assert', 'constexpr'}


START = re.compile(r"//|/\*|(?<![A-Za-z0-9_])(?:u8|u|U|L)?R?\"|'")


def blank(s):
    return re.sub(r'[^\n]', ' ', s)


def blank_code(text):
    """Comments and literals replaced by spaces (newlines kept, so line numbers hold)."""
    out, pos, n = [], 0, len(text)
    while True:
        m = START.search(text, pos)
        if not m:
            out.append(text[pos:])
            return ''.join(out)
        i, tok = m.start(), m.group(0)
        out.append(text[pos:i])
        if tok == '//':
            j = text.find('\n', i)
            j = n if j < 0 else j
        elif tok == '/*':
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif tok == "'":
            if i > 0 and text[i - 1].isdigit() and text[i + 1:i + 2].isalnum():
                out.append(' ')  # digit separator (1'000)
                pos = i + 1
                continue
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == '\\' else 1
            j += 1
        elif tok.endswith('R"'):  # raw string: R"delim( ... )delim"
            k = text.find('(', m.end())
            delim = text[m.end():k]
            end = text.find(')' + delim + '"', k)
            j = n if end < 0 else end + len(delim) + 2
        else:
            j = m.end()
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            j += 1
        out.append(blank(text[i:j]))
        pos = j


def match_back(code, close, open_c, close_c):
    """Index of the bracket opening the one at `close`, or -1."""
    depth = 0
    for k in range(close, -1, -1):
        if code[k] == close_c:
            depth += 1
        elif code[k] == open_c:
            depth -= 1
            if depth == 0:
                return k
    return -1


IDENT_BEFORE = re.compile(r'([A-Za-z_~][A-Za-z_0-9]*(?:\s*::\s*~?[A-Za-z_][A-Za-z_0-9]*)*|operator\s*[^\s(]+(?:\s*\(\s*\))?)\s*$')


def search_end(pattern, s, width=300):
    """re.search of an end-anchored pattern over s's last `width` characters (linear time)."""
    base = max(0, len(s) - width)
    m = re.search(pattern, s[base:])
    return (m.start() + base) if m else -1


def header_paren(code, brace):
    """For a `{` at `brace`, the index of the `)` closing the function's parameter list, or -1."""
    head = code[:brace]
    for _ in range(16):  # strip qualifiers, a trailing return type and a requires clause
        s = head.rstrip()
        k = search_end(r'(\b(const|volatile|noexcept|override|final|mutable|try)|&&|&)$', s)
        if k < 0:
            k = search_end(r'\brequires\b[^;{}]*$', s)
        if k < 0:
            k = search_end(r'->\s*[A-Za-z_0-9:<>,\s*&]*$', s)
        if k >= 0:
            head = s[:k]
            continue
        if s.endswith(')') or s.endswith('}'):
            close = len(s) - 1
            open_k = match_back(s, close, '(', ')') if s.endswith(')') else match_back(s, close, '{', '}')
            if open_k < 0:
                return -1
            before = s[:open_k].rstrip()
            k = search_end(r'\b(noexcept|decltype)$', before)
            if k >= 0 and s.endswith(')'):
                head = before[:k]
                continue
            k = search_end(IDENT_BEFORE, before)
            if k < 0:
                return -1
            pre = before[:k].rstrip()
            if pre.endswith(',') or (pre.endswith(':') and not pre.endswith('::')):
                head = pre[:-1]  # a member initialiser: continue with the one before it
                continue
            return close if s.endswith(')') else -1
        return -1
    return -1


def is_function(code, paren_close):
    """(name, index of the name) when the `)` at paren_close ends a function's parameters."""
    open_k = match_back(code, paren_close, '(', ')')
    if open_k < 0:
        return None
    before = code[:open_k].rstrip()
    if before.endswith(']') or re.search(r'\]\s*<[^<>]*>$', before):
        return None  # lambda
    k = search_end(IDENT_BEFORE, before)
    if k < 0:
        return None
    name = re.sub(r'\s+', '', IDENT_BEFORE.search(before[k:]).group(1))
    if name.split('::')[-1] in CONTROL:
        return None
    return name, k


def cpp_functions(text):
    """(name, first line, last line) of every function body in C++ source `text`."""
    code = blank_code(text)
    # matching braces
    stack, pairs = [], {}
    for k, c in enumerate(code):
        if c == '{':
            stack.append(k)
        elif c == '}' and stack:
            pairs[stack.pop()] = k
    found = []
    for k in sorted(pairs):
        lo = max(0, k - WINDOW)  # a function's header fits in the WINDOW characters before its `{`
        window = code[lo:k + 1]
        p = header_paren(window, k - lo)
        if p < 0:
            continue
        fun = is_function(window, p)
        if not fun:
            continue
        name, start = fun[0], fun[1] + lo
        found.append((name, code.count('\n', 0, start) + 1, code.count('\n', 0, pairs[k]) + 1, k, pairs[k]))
    # a function nested in another (a local class's member) is reported on its own
    return [(name, a, b) for name, a, b, _, _ in found]


def py_functions(text):
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out.append((node.name, first, node.end_lineno))
    return out


def scan(root):
    for path, text, kind in source_files(root):
        for name, a, b in cpp_functions(text) if kind == 'cpp' else py_functions(text):
            yield path, name, a, b - a + 1


SELF_TEST = r'''
struct s {
    s(int a) : a_(a), b_{a} {
        x();
    }
    int f(int x) const noexcept {
        if (x) { return 1; }
        auto g = [&](int y) { return y; };
        const char* t = "}{ // not a comment";
        char c = '{';
        /* } */ return R"raw(})raw"[0] + c;
    }
    template <class T> auto h(T t) -> decltype(t) requires true {
''' + '        t += 1;\n' * 101 + r'''        return t;
    }
};
'''


def self_test():
    funs = {name: (a, b) for name, a, b in cpp_functions(SELF_TEST)}
    assert set(funs) == {'s', 'f', 'h'}, funs
    assert funs['s'] == (3, 5), funs
    assert funs['f'] == (6, 12), funs
    assert funs['h'][1] - funs['h'][0] + 1 == 104, funs
    over = [n for n, a, b in cpp_functions(SELF_TEST) if b - a + 1 > 100]
    assert over == ['h'], over
    print('function_length.py self-test: ok')


def main(argv):
    if '--self-test' in argv:
        self_test()
        return 0
    root = argv[1]
    limit = int(argv[argv.index('--limit') + 1]) if '--limit' in argv else 100
    if '--list' in argv:
        n = int(argv[argv.index('--list') + 1])
        for path, name, line, length in sorted(scan(root), key=lambda r: -r[3]):
            if length > n:
                print(f'{path}:{line}: {name} is {length} lines')
        return 0
    self_test()
    bad = [(p, name, line, length) for p, name, line, length in scan(root) if length > limit]
    for path, name, line, length in bad:
        print(f'{path}:{line}: {name} is {length} lines (limit {limit}; split it where the parts have names)')
    print(f'{len(bad)} functions over {limit} lines in include/ and runtime/')
    print(f'{0 if bad else 1} passed, {1 if bad else 0} failed, 0 skipped')  # every suite's closing line
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
