#!/usr/bin/env python3
"""Checks the VM tests' Python scripts as nixpkgs' test driver does before
running them, and a little more:

1. each script parses;
2. mypy type-checks it (`mypy --no-implicit-optional`, as runNixOSTest does
   unless skipTypeCheck) after the declarations the driver prepends,
   against a stub of the driver written from its sources
   (tests/nixos/driver-stub: Machine's methods, retry, subtest,
   start_all, machines, ...; prepend.py), with `<node>: QemuMachine` for
   each node;
3. pyflakes finds nothing, with the driver's symbols and the test's
   machine names as builtins (the driver lints with PYFLAKES_BUILTINS the
   same way);
4. the driver-usage rules of script_rules.py (a check given to retry must
   not raise; etcdctl after switch-to-configuration names its endpoints
   and certificates).

mypy and pyflakes come from Debian (mypy, python3-pyflakes; .ci/deps.sh).
Without one of them that step is skipped and this says so, and fails with
NICO_REQUIRE_SCRIPT_CHECKS=1.

Usage: lint-scripts.py SCRIPTS.json   (nix-instantiate --eval --strict --json tests/nixos/eval/scripts.nix)
"""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import script_rules  # noqa: E402

STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "driver-stub")

# test_driver.driver.Driver.test_symbols in nixpkgs.
DRIVER_SYMBOLS = [
    "start_all", "test_script", "machines", "machines_qemu", "machines_nspawn", "vlans",
    "driver", "log", "os", "create_machine", "subtest", "run_tests", "join_all", "retry",
    "serial_stdout_off", "serial_stdout_on", "polling_condition", "BaseMachine",
    "QemuMachine", "Machine", "t",
]


def pythonize(name):
    """A node's name as the driver binds it in the script."""
    return re.sub(r"^[^A-Za-z_]|[^A-Za-z0-9_]", "_", name)


def typed_script(t):
    """The script with the driver's declarations before it, as the driver
    type-checks it. Returns (text, number of lines before the script)."""
    names = [pythonize(n) for n in t["nodes"]]
    if len(names) == 1 and "machine" not in names:
        names.append("machine")
    head = open(os.path.join(STUB, "prepend.py")).read() + "".join(f"{n}: QemuMachine\n" for n in names)
    return head + t["script"], head.count("\n")


def run_mypy(tests, d):
    mypy = shutil.which("mypy")
    if mypy is None:
        return None
    failed = 0
    for name, t in sorted(tests.items()):
        f = os.path.join(d, "typed-" + pythonize(name) + ".py")
        src, offset = typed_script(t)
        with open(f, "w") as out:
            out.write(src)
        r = subprocess.run([mypy, "--no-implicit-optional", "--check-untyped-defs", "--no-color-output", "--no-error-summary",
                            "--cache-dir", os.path.join(d, "mypy-cache"), f],
                           env=dict(os.environ, MYPYPATH=STUB), capture_output=True, text=True)
        if r.returncode != 0:
            failed += 1
            # Line numbers of the script itself, not of the prepended text.
            for line in (r.stdout + r.stderr).splitlines():
                m = re.match(r"^(.*?):(\d+):(.*)$", line)
                if m:
                    n = int(m.group(2)) - offset
                    where = f"line {n}" if n > 0 else f"prepended line {m.group(2)}"
                    line = f"{name} {where}:{m.group(3)}"
                print(f"lint-scripts: mypy: {line}", file=sys.stderr)
    return failed


def run_pyflakes(tests, d):
    pyflakes = shutil.which("pyflakes3") or shutil.which("pyflakes")
    if pyflakes is None:
        return None
    names = {pythonize(n) for t in tests.values() for n in t["nodes"]}
    env = dict(os.environ, PYFLAKES_BUILTINS=",".join(DRIVER_SYMBOLS + sorted(names) + ["machine"]))
    failed = 0
    for name, t in sorted(tests.items()):
        f = os.path.join(d, name + ".py")
        with open(f, "w") as out:
            out.write(t["script"])
        if subprocess.run([pyflakes, f], env=env).returncode != 0:
            failed += 1
    return failed


def main(path):
    tests = json.load(open(path))
    failed = 0
    for name, t in sorted(tests.items()):
        try:
            ast.parse(t["script"], filename=name)
        except SyntaxError as e:
            print(f"lint-scripts: {name}: {e}", file=sys.stderr)
            failed += 1
    if failed:
        print(f"lint-scripts: {failed} test scripts do not parse", file=sys.stderr)
        return 1
    for name, t in sorted(tests.items()):
        problems = script_rules.check(t["script"], name, {pythonize(n) for n in t["nodes"]})
        for p in problems:
            print(f"lint-scripts: {name} line {p.line}: {p.rule}: {p.message}", file=sys.stderr)
        failed += bool(problems)
    skipped = []
    with tempfile.TemporaryDirectory() as d:
        for tool, run in [("mypy (Debian package mypy)", run_mypy), ("pyflakes (python3-pyflakes)", run_pyflakes)]:
            n = run(tests, d)
            if n is None:
                skipped.append(tool)
            else:
                failed += n
    if skipped:
        print(f"lint-scripts: NOTE {' and '.join(skipped)} not installed: that check did NOT run")
        if os.environ.get("NICO_REQUIRE_SCRIPT_CHECKS") == "1":
            return 1
    if failed:
        print(f"lint-scripts: {failed} failures in {len(tests)} test scripts (above)", file=sys.stderr)
        return 1
    ran = ", ".join(x for x in ["mypy against the driver stub", "pyflakes"] if not any(x.split()[0] in s for s in skipped))
    print(f"lint-scripts: {len(tests)} test scripts parse and pass the driver-usage rules" + (f", {ran}" if ran else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
