#!/usr/bin/env python3
"""Cases of script_rules.py: the shapes of the VM scripts' past mistakes
are found, their fixes are not (make nix-check runs this)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import script_rules  # noqa: E402

VOTERS = '''
ETCDCTL = "etcdctl --endpoints https://127.0.0.1:2379 --cacert /p/ca.crt --cert /p/root.crt --key /p/root.key"
def voters(machine):
    return machine.succeed("etcdctl member list")
def voters_flags(machine):
    status, out = machine.execute(f"{ETCDCTL} member list")
    return out if status == 0 else None
'''


def rules(src, machines=("cp1", "cp2")):
    return [p.rule for p in script_rules.check(src, "t", set(machines))]


class RetryRaises(unittest.TestCase):
    def test_succeed_through_a_helper(self):
        self.assertEqual(rules(VOTERS + "def ok(_):\n    return voters(cp1) == []\nretry(ok, 10)\n"), ["retry-raises"])

    def test_lambda_calling_wait(self):
        self.assertEqual(rules("retry(lambda _: cp1.wait_until_succeeds('true') == '', 5)\n"), ["retry-raises"])

    def test_execute_is_fine(self):
        self.assertEqual(rules(VOTERS + "def ok(_):\n    return voters_flags(cp1) == []\nretry(ok, 10)\n"), [])


class EtcdctlAfterSwitch(unittest.TestCase):
    SWITCH = 'cp2.succeed("/run/current-system/specialisation/nico/bin/switch-to-configuration test")\n'

    def test_env_etcdctl_before_switch_is_fine(self):
        self.assertEqual(rules(VOTERS + "voters(cp2)\n" + self.SWITCH), [])

    def test_helper_after_switch(self):
        self.assertEqual(rules(VOTERS + self.SWITCH + "voters(cp2)\n"), ["etcdctl-env-after-switch"])

    def test_direct_after_switch_in_a_block(self):
        src = self.SWITCH + 'with subtest("x"):\n    cp2.succeed("etcdctl member list")\n'
        self.assertEqual(rules(src), ["etcdctl-env-after-switch"])

    def test_other_machine_is_fine(self):
        self.assertEqual(rules(VOTERS + self.SWITCH + "voters(cp1)\n"), [])

    def test_explicit_flags_are_fine(self):
        self.assertEqual(rules(VOTERS + self.SWITCH + "voters_flags(cp2)\n"), [])


if __name__ == "__main__":
    unittest.main()
