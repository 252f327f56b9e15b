"""The committed generated code is what scripts/gen_proto.sh makes of tether.proto now: a
.proto edited without regenerating (or generated code edited by hand) fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WIRE = ROOT / "src" / "tether" / "_wire"
GENERATED = ("tether_pb2.py", "tether_pb2.pyi", "tether_pb2_grpc.py")


def test_generated_code_is_current(tmp_path: Path) -> None:
    env_path = f"{Path(sys.executable).parent}"
    result = subprocess.run(
        ["sh", str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)], cwd=ROOT,
        capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": f"{env_path}:/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    for name in GENERATED:
        fresh = (tmp_path / "tether" / "_wire" / name).read_text(encoding="utf-8")
        assert fresh == (WIRE / name).read_text(encoding="utf-8"), f"{name} is stale"


def test_every_rpc_has_a_role() -> None:
    from tether._wire import roles
    from tether._wire import tether_pb2 as pb

    rpcs = {m.name for m in pb.DESCRIPTOR.services_by_name["Store"].methods}
    assert rpcs == set(roles.METHODS)
    assert roles.WORKER <= roles.ADMIN
