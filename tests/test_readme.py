"""The README's example runs as printed and says what its comments say."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)
    result = namespace["result"]
    assert np.array_equal(result.values[0][:3], np.full(3, 28.0, np.float32))
    assert result.virtual_time_s > 0 and (tmp_path / "ring.json").is_file()
