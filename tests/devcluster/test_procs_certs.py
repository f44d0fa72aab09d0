"""Process supervision by PID, and the generated PKI/kubeconfig (real processes, real TLS)."""

from __future__ import annotations

import json
import socket
import ssl
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from elasticityops.devcluster import procs
from elasticityops.devcluster.certs import generate_pki, write_kubeconfig


def test_start_and_stop_by_pid(tmp_path: Path) -> None:
    rec = procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log")
    assert procs.is_alive(rec)
    procs.stop(rec, timeout=5)
    assert not procs.is_alive(rec)


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    log = tmp_path / "stubborn.log"
    rec = procs.start("stubborn", [sys.executable, "-c", code], log)
    deadline = time.monotonic() + 10
    while "up" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    procs.stop(rec, timeout=0.5)
    assert not procs.is_alive(rec)
    assert time.monotonic() - started < 5


def test_reused_pid_is_not_signalled(tmp_path: Path) -> None:
    rec = procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log")
    assert rec.start_ticks is not None
    impostor = replace(rec, name="x", create_time=rec.create_time - 100, start_ticks=rec.start_ticks - 100)
    assert not procs.is_alive(impostor)
    procs.stop(impostor)  # must not touch the real process
    assert procs.is_alive(rec)
    # A record written before start ticks were kept falls back on the wall-clock create time.
    old_impostor = replace(impostor, start_ticks=None)
    assert not procs.is_alive(old_impostor)
    assert procs.is_alive(replace(rec, start_ticks=None))
    procs.stop(rec)


def test_a_stepped_clock_does_not_make_a_running_process_look_dead(tmp_path: Path) -> None:
    # A fresh process computes psutil's create time from the boot time as it reads it now; after
    # the wall clock is stepped (a VM restored from a snapshot) that differs from the recorded
    # one by the step. The start in ticks since boot does not move.
    rec = procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log")
    stepped = replace(rec, create_time=rec.create_time + 7.5)
    assert procs.is_alive(stepped)
    again = procs.ProcessRecord.from_json(json.loads(json.dumps(stepped.to_json())))
    assert again == stepped
    assert procs.is_alive(again)
    procs.stop(again)
    assert not procs.is_alive(rec)


def test_start_ticks_reads_a_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    odd = tmp_path / "a (b) c"
    odd.symlink_to(sys.executable)
    rec = procs.start("odd", [str(odd), "-c", "import time; time.sleep(60)"], tmp_path / "o.log")
    try:
        assert rec.start_ticks is not None
        assert procs.start_ticks(rec.pid) == rec.start_ticks
        assert procs.start_ticks(2**22 + 12345) is None
    finally:
        procs.stop(rec)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = {procs.free_port() for _ in range(5)}
    assert len(ports) == 5


def test_a_free_port_is_below_the_range_the_kernel_hands_out_itself() -> None:
    # Ports of that range go to every bind to port 0 and every outgoing connection: one picked
    # there could be taken before its server binds it (seen with cluster tests side by side).
    low, _high = (int(n) for n in procs.EPHEMERAL_RANGE.read_text().split())
    ports = [procs.free_port() for _ in range(50)]
    assert all(max(1024, low - 12_000) <= port < low for port in ports), ports
    for port in ports[:5]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))  # bindable, as promised


def test_without_room_below_the_kernels_range_the_kernel_picks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernels = int(procs.EPHEMERAL_RANGE.read_text().split()[0])
    tight = tmp_path / "ip_local_port_range"
    tight.write_text("1500\t60999\n")  # not even 1,000 ports under it
    monkeypatch.setattr(procs, "EPHEMERAL_RANGE", tight)
    assert procs.free_port() >= kernels  # bind to port 0: the kernel's own pick


def test_pki_and_kubeconfig(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    cert = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    assert "O=system:masters" in cert.subject.rfc4514_string()
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))  # the pair matches
    write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", pki)
    kc = yaml.safe_load((tmp_path / "kc").read_text())
    assert kc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert (tmp_path / "kc").stat().st_mode & 0o077 == 0
