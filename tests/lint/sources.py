"""The source files the lint scripts read: C++ and Python files under include/ and runtime/."""
import os

CPP_EXT = ('.hpp', '.h', '.cpp', '.cu', '.cuh')


def source_files(root, dirs=('include', 'runtime')):
    """(path relative to root, its text, 'cpp' or 'py') of every C++ and Python file under
    `dirs` of `root`, in sorted order."""
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs.sort()
            for f in sorted(files):
                kind = 'cpp' if f.endswith(CPP_EXT) else 'py' if f.endswith('.py') else None
                if kind:
                    path = os.path.join(base, f)
                    yield os.path.relpath(path, root), open(path, encoding='utf-8').read(), kind
