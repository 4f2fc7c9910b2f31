# A virtual network of the test (test_driver/vlan.py).
from pathlib import Path

class VLan:
    nr: int
    socket_dir: Path
    def stop(self) -> None: ...
