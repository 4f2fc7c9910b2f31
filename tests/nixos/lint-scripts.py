#!/usr/bin/env python3
"""Checks the VM tests' Python scripts as nixpkgs' test driver would before
running them: each must parse, and pyflakes must find nothing, with the
driver's symbols and the test's machine names as builtins (the driver lints
with PYFLAKES_BUILTINS the same way). Without pyflakes (Debian package
python3-pyflakes) only the parse check runs, and this says so.

Usage: lint-scripts.py SCRIPTS.json   (tests/nixos/eval/vm-tests.nix -A scripts)
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile

# test_driver.driver.Driver.test_symbols in nixpkgs.
DRIVER_SYMBOLS = [
    "start_all", "test_script", "machines", "machines_qemu", "machines_nspawn", "vlans",
    "driver", "log", "os", "create_machine", "subtest", "run_tests", "join_all", "retry",
    "serial_stdout_off", "serial_stdout_on", "polling_condition", "BaseMachine",
    "QemuMachine", "Machine",
]


def main(path):
    tests = json.load(open(path))
    failed = 0
    for name, t in sorted(tests.items()):
        try:
            ast.parse(t["script"], filename=name)
        except SyntaxError as e:
            print(f"lint-scripts: {name}: {e}", file=sys.stderr)
            failed += 1
    names = {n for t in tests.values() for n in t["nodes"]}
    env = dict(os.environ, PYFLAKES_BUILTINS=",".join(DRIVER_SYMBOLS + sorted(names) + ["machine"]))
    pyflakes = shutil.which("pyflakes3") or shutil.which("pyflakes")
    if pyflakes is None:
        print(f"lint-scripts: {len(tests)} test scripts parse; pyflakes is not installed (python3-pyflakes): NOT linted")
        return 1 if failed else 0
    with tempfile.TemporaryDirectory() as d:
        for name, t in sorted(tests.items()):
            f = os.path.join(d, name + ".py")
            with open(f, "w") as out:
                out.write(t["script"])
            if subprocess.run([pyflakes, f], env=env).returncode != 0:
                failed += 1
    if failed:
        print(f"lint-scripts: {failed} test scripts fail", file=sys.stderr)
        return 1
    print(f"lint-scripts: {len(tests)} test scripts parse and pass pyflakes")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
