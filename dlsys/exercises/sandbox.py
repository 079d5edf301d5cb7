"""Run pytest under an address-space limit (the grader's child process):

    python -m dlsys.exercises.sandbox LIMIT_BYTES PYTEST_ARGS...

RLIMIT_AS makes a memory bomb raise MemoryError in this process only.
"""

import resource
import sys


def main(argv: list[str]) -> int:
    limit_bytes = int(argv[0])
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    import pytest
    return pytest.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
