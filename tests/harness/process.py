"""Child processes of the harness: one process group each, output to a log file, clean stop."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time


class ComponentError(RuntimeError):
    """A component could not be started or did not become healthy."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """n distinct free ports: all sockets stay bound until every port is known."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def tail(path: str, lines: int = 25) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


class Component:
    """One long-running program (etcd, kube-apiserver, ...) in its own process group."""

    def __init__(self, name: str, argv: list[str], log_path: str, env: dict | None = None,
                 die_with_parent: bool = False):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.env = env
        # Linux: the kernel SIGTERMs the component if the process that started it dies (a killed
        # pytest must not leave an API server behind). Off for `python -m tests.harness up`.
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")
        try:
            log.write(("# " + " ".join(self.argv) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # own process group: stop() signals the whole group
                preexec_fn=_set_parent_death_signal if self.die_with_parent else None,
            )
        except OSError as e:
            raise ComponentError(f"{self.name}: cannot run {self.argv[0]}: {e}") from e
        finally:
            log.close()
        self.pid = self.proc.pid

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return pid_alive(self.pid)

    def check_alive(self) -> None:
        if not self.alive():
            code = self.proc.returncode if self.proc is not None else "?"
            raise ComponentError(
                f"{self.name} exited (code {code}); log {self.log_path}:\n{tail(self.log_path)}")

    def stop(self, timeout: float = 10.0) -> None:
        if self.pid is None:
            return
        stop_group(self.pid, timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass


def _set_parent_death_signal() -> None:
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - not Linux: stop() and atexit still clean up
        pass


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def stop_group(pgid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group led by pgid, wait, then SIGKILL what is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.waitpid(pgid, os.WNOHANG)   # reap it if it is our child, so it stops answering kill(0)
        except ChildProcessError:
            pass
        if not pid_alive(pgid):
            break
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
