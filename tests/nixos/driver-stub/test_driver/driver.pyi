# The driver object (test_driver/driver.py), exposed to scripts as `driver`.
from test_driver.machine import NspawnMachine, QemuMachine
from test_driver.vlan import VLan

class Driver:
    vlans: list[VLan]
    machines_qemu: list[QemuMachine]
    machines_nspawn: list[NspawnMachine]
    global_timeout: int
    @property
    def machines(self) -> list[QemuMachine | NspawnMachine]: ...
    def start_all(self) -> None: ...
    def join_all(self) -> None: ...
    def run_tests(self) -> None: ...
