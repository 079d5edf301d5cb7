"""The untrusted child's fresh interpreter: ``python -m dlsys.grading.child call.pickle``,
exec'd by ``untrusted._child`` in its private directory, contained, with the answer pipe as
descriptor 3.

It starts with none of the trusted test's memory (a fork would keep every exercise's
reference, which the test imported for its oracles: code walking ``gc.get_objects()`` could
call the graded exercise's). It imports the exercise's modules from ``student/``, every
other exercise's from ``reference/`` (the parent wrote both: ``untrusted.Submission``), the
module defining the observe function from ``observe/`` (or dlsys), then unpickles the
keyword arguments, calls ``observe(**kwargs)`` and writes the answer as JSON
(``untrusted.write_answer``).
"""

import importlib
import importlib.util
import os
import pickle
import sys
import warnings

from dlsys.grading.answer import encode
from dlsys.grading.testing import use_student_files
from dlsys.grading.untrusted import CALL, REFERENCE, STUDENT, write_answer


def main() -> None:
    """Never returns."""
    answer_fd, student = 3, os.path.realpath(STUDENT)
    try:
        sys.stdout.reconfigure(line_buffering=True), sys.stderr.reconfigure(line_buffering=True)  # kept if killed
        warnings.simplefilter("default")  # the student's warnings are printed, once each
        with open(sys.argv[1] if len(sys.argv) > 1 else CALL, "rb") as f:
            call = pickle.load(f)
        if call["exercise"] is not None:  # None: the playground (dlsys.grading.playground), no exercise
            use_student_files(student, [call["exercise"]], call["foreign"], REFERENCE)
        module, qualname, file = call["observe"]
        if file is None:
            found = importlib.import_module(module)
        else:
            spec = importlib.util.spec_from_file_location(module, os.path.abspath(file))
            found = sys.modules[module] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(found)
        observe = found
        for part in qualname.split("."):
            observe = getattr(observe, part)
        answer = {"value": encode(observe(**pickle.loads(call["kwargs"])))}
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: all are the student's
        answer = {"error": exc}
    write_answer(answer_fd, answer, student)


if __name__ == "__main__":
    main()
