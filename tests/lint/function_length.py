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
import os
import re
import sys

CPP_EXT = ('.hpp', '.h', '.cpp', '.cu', '.cuh')
CONTROL = {'if', 'for', 'while', 'switch', 'catch', 'return', 'sizeof', 'alignof', 'decltype',
           'noexcept', 'requires', 'static_assert', 'constexpr'}


def blank_code(text):
    """Comments and literals replaced by spaces (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)

    def blank(s):
        return ''.join(c if c == '\n' else ' ' for c in s)

    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif c == '"' or (c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')) ) \
                or (c in 'uUL8' and re.match(r'(u8|u|U|L)R?"', text[i:i + 4]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            m = re.match(r'(u8|u|U|L)?(R)?"', text[i:i + 4])
            start = i
            i += m.end()
            if m.group(2):  # raw string: R"delim( ... )delim"
                k = text.find('(', i)
                delim = text[i:k]
                end = text.find(')' + delim + '"', k)
                i = n if end < 0 else end + len(delim) + 2
            else:
                while i < n and text[i] != '"':
                    i += 2 if text[i] == '\\' else 1
                i += 1
            out.append('"' + blank(text[start + 1:i - 1]) + '"' if i - start >= 2 else blank(text[start:i]))
        elif c == "'":
            # digit separator (1'000) or a character literal
            if i > 0 and text[i - 1].isalnum() and re.match(r"[0-9a-fA-F]", text[i + 1:i + 2] or ' ') \
                    and re.search(r'[0-9]', text[max(0, i - 1)]):
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == '\\' else 1
            out.append("'" + blank(text[i + 1:j]) + "'")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


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


def header_paren(code, brace):
    """For a `{` at `brace`, the index of the `)` closing the function's parameter list, or -1."""
    head = code[:brace]
    for _ in range(16):  # strip qualifiers, a trailing return type and a requires clause
        s = head.rstrip()
        m = re.search(r'(\b(const|volatile|noexcept|override|final|mutable|try)|&&|&)$', s)
        if m:
            head = s[:m.start()]
            continue
        m = re.search(r'\brequires\b[^;{}]*$', s)
        if m:
            head = s[:m.start()]
            continue
        m = re.search(r'->\s*[A-Za-z_0-9:<>,\s*&]*$', s)
        if m:
            head = s[:m.start()]
            continue
        if s.endswith(')') or s.endswith('}'):
            close = len(s) - 1
            open_k = match_back(s, close, '(', ')') if s.endswith(')') else match_back(s, close, '{', '}')
            if open_k < 0:
                return -1
            before = s[:open_k].rstrip()
            m = re.search(r'\b(noexcept|decltype)$', before)
            if m and s.endswith(')'):
                head = before[:m.start()]
                continue
            m = IDENT_BEFORE.search(before)
            if not m:
                return -1
            pre = before[:m.start()].rstrip()
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
    m = IDENT_BEFORE.search(before)
    if not m:
        return None
    name = re.sub(r'\s+', '', m.group(1))
    if name.split('::')[-1] in CONTROL:
        return None
    return name, m.start()


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
        p = header_paren(code, k)
        if p < 0:
            continue
        fun = is_function(code, p)
        if not fun:
            continue
        name, start = fun
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


def scan(root, dirs=('include', 'runtime')):
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs.sort()
            for f in sorted(files):
                path = os.path.join(base, f)
                if f.endswith(CPP_EXT):
                    funs = cpp_functions(open(path, encoding='utf-8').read())
                elif f.endswith('.py'):
                    funs = py_functions(open(path, encoding='utf-8').read())
                else:
                    continue
                for name, a, b in funs:
                    yield os.path.relpath(path, root), name, a, b - a + 1


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
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
