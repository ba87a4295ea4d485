"""pytest hooks of the python suite: the closing line every test suite prints and .ci/setup
sums, "N passed, N failed, N skipped" (errors count as failed, xfailed and xpassed as passed)."""


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats

    def count(*keys):
        return sum(len(stats.get(k, [])) for k in keys)

    terminalreporter.write_line(f"{count('passed', 'xfailed', 'xpassed')} passed, "
                                f"{count('failed', 'error')} failed, {count('skipped')} skipped")
