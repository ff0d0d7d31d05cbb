"""``npu-dump-hook run`` refuses a blank flag value before the script starts (found by hand, issue #21).

``--golden-for "$BUNDLE"`` with an unset variable used to run the script as a plain emulated
NPU dump (the child reads an empty variable as unset) and exit 0 with a bundle, and
``--dump-path ''`` dumped into the current folder: now a usage error naming the flag.
"""
import os
import sys

import pytest

from helpers.runs import clean_env, run

CLI = [sys.executable, "-m", "npu_dump_hook"]


@pytest.mark.parametrize("flag", ["--golden-for", "--dump-path", "--output-dir", "--emulate-profile"])
@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_flag_value_is_a_usage_error_and_the_script_never_runs(tmp_path, flag, blank):
    marker = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text("open({!r}, 'w').close()\n".format(str(marker)))
    code, lines, err = run(CLI + ["run", flag, blank, "--", "python", str(script)], tmp_path, clean_env())
    assert code == 2, (lines, err)
    assert "npu-dump-hook: option {}={!r}: must not be blank".format(flag, blank) in err, err
    assert not marker.exists() and not os.path.exists(str(tmp_path / "npu_dump_hook_out"))
