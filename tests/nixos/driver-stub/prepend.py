# The declarations the test driver puts before a testScript to type-check
# it (nixpkgs' nixos/lib/test-script-prepend.py and the per-node hints of
# nixos/lib/testing/driver.nix), against the stub in test_driver/.
# tests/nixos/lint-scripts.py appends `<node>: QemuMachine` for every node,
# then the script, and runs mypy --no-implicit-optional on the result.
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol
from unittest import TestCase

from test_driver.driver import Driver
from test_driver.logger import AbstractLogger
from test_driver.machine import BaseMachine, Machine, NspawnMachine, QemuMachine, retry
from test_driver.vlan import VLan


class PollingConditionProtocol(Protocol):
    def __call__(
        self,
        fun_: Callable | None = None,
        *,
        seconds_interval: float = 2.0,
        description: str | None = None,
    ) -> Callable[[Callable], AbstractContextManager] | AbstractContextManager: ...


class CreateMachineProtocol(Protocol):
    def __call__(self, start_command: str, *, name: str | None = None, keep_machine_state: bool = False) -> BaseMachine: ...


start_all: Callable[[], None]
subtest: Callable[[str], AbstractContextManager[None]]
test_script: Callable[[], None]
machines: list[BaseMachine]
machines_qemu: list[QemuMachine]
machines_nspawn: list[NspawnMachine]
vlans: list[VLan]
driver: Driver
log: AbstractLogger
create_machine: CreateMachineProtocol
run_tests: Callable[[], None]
join_all: Callable[[], None]
serial_stdout_off: Callable[[], None]
serial_stdout_on: Callable[[], None]
polling_condition: PollingConditionProtocol
t: TestCase
