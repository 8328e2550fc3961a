"""The bubblewrap command line that jails the optimizer child (Linux).

:class:`Jail` lists what the child may see: read-only, only what Python
needs (the interpreter and its installed packages, the ``lego_core``
package, ``/usr`` and the libraries, a few files of ``/etc``, the GPU's
device files), plus the files the run names (the model file and its folder read-only,
so that it imports its sibling modules: ``local_modules.import_view``; the
command line's ``PYTHONPATH`` folders read-only; the kernel cache
read-only, the agent relay's socket); writable, only the run's
scratch folder (``$HOME`` and ``$TMPDIR``) and its output staging
folder.  :meth:`Jail.command` turns it into ``bwrap ... -- python -c
sandbox_child.ENTRY``: new user, pid, ipc, uts, cgroup and network
namespaces (no network at all), every capability dropped, no further user
namespaces, a new session (no terminal), killed with its parent, and an
environment cleared down to :func:`child_environment`.  Nothing else of the
host exists inside: not the database file, the settings, the secrets, other
runs' folders, the web app's source nor the broker folder.

:func:`available` says whether bubblewrap is installed and can make the
namespaces here (it cannot, for instance, in a container that forbids user
namespaces); ``lego_core.runtime.sandbox`` falls back to a plain child with a
warning when it cannot.  ``LEGO_SANDBOX=off`` turns the jail off on purpose
(the same fallback, same warning); ``LEGO_SANDBOX=require`` makes a missing
jail an error instead.
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lego_core.load import local_modules
from lego_core.runtime import gpu_lock, gpu_probe

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the lego_core package folder

# files of /etc the interpreter and the libraries read (dynamic linker, time zone)
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")
# system folders, read-only (merged-/usr systems have /bin, /lib... as links into /usr)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# environment variables passed on by name or prefix (everything else is dropped)
ENV_NAMES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NVIDIA_VISIBLE_DEVICES")
ENV_PREFIXES = ("TRITON_", "CUDA_", "LEGO_", "TORCH_", "PYTORCH_", "NCCL_")
# variables of the web app's own that must not reach the child even though they start with LEGO_
ENV_SECRET_WORDS = ("SECRET", "PASSWORD", "TOKEN", "KEY", "DATABASE", "BROKER", "REDIS", "URL")


@dataclasses.dataclass
class Jail:
    """What the jailed child sees.  Paths are absolute; each is mounted at the
    same path inside.  ``read_only``: files
    and folders to show read-only (missing ones are skipped); ``writable``:
    folders the child may write (they must exist); ``scratch``: the run's
    private writable folder (``$HOME`` and ``$TMPDIR`` inside); ``env``: the
    child's environment (:func:`child_environment`; HOME and TMPDIR added)."""

    scratch: str
    read_only: list[str] = dataclasses.field(default_factory=list)
    writable: list[str] = dataclasses.field(default_factory=list)
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    def command(self, argv: list[str]) -> list[str]:
        """The bwrap command line that runs ``argv`` (an absolute executable
        first) in this jail.  Raises FileNotFoundError without bwrap."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise FileNotFoundError("bwrap (Debian package bubblewrap) is not installed")
        cmd = [
            bwrap, "--unshare-user", "--uid", "65534", "--gid", "65534",
            "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--disable-userns", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            "--hostname", "lego-sandbox", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm",
            "--size", str(TMP_BYTES), "--tmpfs", "/tmp",  # a private /tmp for what ignores $TMPDIR
        ]
        for path in _system_paths():
            cmd += _mount_ro(path)
        for device in _gpu_devices():
            cmd += ["--dev-bind", device, device]
        if os.path.isdir("/sys"):
            cmd += ["--ro-bind", "/sys", "/sys"]  # CUDA reads the PCI topology; nothing secret there
        for path in _unique(self.read_only):
            if os.path.lexists(path):
                cmd += _mount_ro(path)
        for path in _unique([self.scratch, *self.writable]):
            cmd += ["--bind", path, path]
        env = dict(self.env, HOME=self.scratch, TMPDIR=self.scratch)
        cmd += ["--chdir", self.scratch, "--clearenv"]
        for name, value in sorted(env.items()):
            cmd += ["--setenv", name, value]
        return cmd + ["--", *argv]


def child_environment(extra_path: list[str]) -> dict[str, str]:
    """The jailed child's environment (:class:`Jail` adds HOME and TMPDIR:
    the scratch folder): PATH, LANG, USER, PYTHONPATH (``extra_path``: the folder that
    holds ``lego_core`` first) and the variables named in :data:`ENV_NAMES`
    or starting with :data:`ENV_PREFIXES` (Triton, CUDA, LEGO's own knobs),
    minus any whose name looks like a secret (:data:`ENV_SECRET_WORDS`)."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "USER": "lego",
        "LOGNAME": "lego",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "PYTHONPATH": os.pathsep.join(extra_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
    }
    for name, value in os.environ.items():
        wanted = name in ENV_NAMES or name.startswith(ENV_PREFIXES)
        if wanted and not any(word in name.upper() for word in ENV_SECRET_WORDS):
            env[name] = value
    env.pop("TRITON_CACHE_DIR", None)  # a shared cache folder is not mounted: Triton uses $HOME/.triton
    return env


def package_paths() -> list[str]:
    """The interpreter and its packages: ``sys.prefix`` (the virtual
    environment), ``sys.base_prefix`` (the Python it was made from), every
    ``sys.path`` folder inside either, and the ``lego_core`` package alone
    (not the project folder around it)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parent)}
    paths.add(str(PACKAGE_DIR))
    return sorted(p for p in paths if p)


@functools.lru_cache(maxsize=None)
def available() -> str | None:
    """None when bubblewrap can jail a process here, else why not (one
    line).  Probes once per process with ``bwrap ... true``."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (this is {sys.platform})"
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian package bubblewrap; `make install` installs it)"
    probe = Jail(scratch=tempfile.gettempdir()).command(["/bin/true"])
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap could not be started: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot make its namespaces here ({done.stderr.strip()[:200] or f'exit code {done.returncode}'})"
    return None


def _system_paths() -> list[str]:
    found = []
    for path in (*SYSTEM_DIRS, *ETC_FILES, *package_paths()):
        if os.path.lexists(path):
            found.append(path)
    return _unique(found)


def _gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*"))


def _mount_ro(path: str) -> list[str]:
    """Mount ``path`` read-only; a symbolic link is recreated as a link (``/lib
    -> usr/lib``), pointing where it points outside."""
    if os.path.islink(path) and os.path.dirname(path) == "/":
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path]


def _unique(paths: list[str]) -> list[str]:
    seen, out = set(), []
    for path in paths:
        if path not in seen:
            seen.add(path)
            out.append(path)
    return out


TMP_BYTES = 256 << 20  # the private /tmp (memory); the scratch folder is where files go
RELAY_ENV = "LEGO_AGENT_RELAY"  # the agent relay's socket (lego_core.agents.relay)
_warned: set[str] = set()


def for_run(model_file: str, stage: str, scratch: str, cache_root: str | None, *,
            model_folder: bool = True, import_paths: tuple | list = ()) -> Jail:
    """The jail of one optimizer run: the model file, its folder (not its
    parents; unless ``model_folder`` is False or the folder is too broad:
    ``local_modules.import_view``), the folders of ``import_paths`` (the
    command line's ``PYTHONPATH``, also put on the child's ``PYTHONPATH``)
    and the kernel cache (``cache_root``, None when the run does not use it)
    read-only, the agent relay's socket folder (``$LEGO_AGENT_RELAY``) so
    the child reaches the relay (nothing of the caller's own code: its
    agent pools answer on the caller's side of the socket), the staging folder ``stage`` and the private ``scratch`` folder writable; on
    a GPU machine also the GPU lock folder (``lego_core.runtime.gpu_lock``),
    read-only with its lock files made here (:func:`gpu_lock_folder`), so
    that jailed runs sharing a card still keep their timings apart.  What it
    shows of the user's files is logged and handed to the child in
    ``$LEGO_IMPORT_VIEW`` (``local_modules.VIEW_ENV``: the report and a
    failed import's message say it)."""
    view = local_modules.import_view(model_file, import_paths, model_folder)
    read_only = [*([view["model_folder"]] if view["model_folder"] else []), str(Path(model_file).resolve()), *view["import_paths"]]
    if cache_root:
        read_only.append(str(Path(cache_root).resolve()))
    extra_path = [str(PACKAGE_DIR.parent), *view["import_paths"]]
    relay = os.environ.get(RELAY_ENV)
    if relay and os.path.exists(relay):
        read_only.append(str(Path(relay).resolve().parent))  # a private folder that holds only the socket
    writable = [str(Path(stage).resolve())]
    if _gpu_devices():  # the runs sharing a card keep their timings apart through its lock files (lego_core.runtime.gpu_lock)
        read_only.append(gpu_lock_folder())
    env = dict(child_environment(extra_path), **{local_modules.VIEW_ENV: json.dumps(view)})
    logging.getLogger(__name__).info("the sandbox shows of the user's files, read-only: %s", local_modules.describe_view(view))
    return Jail(scratch=scratch, read_only=read_only, writable=writable, env=env)


def gpu_lock_folder() -> str:
    """The GPU lock folder (``lego_core.runtime.gpu_lock``), with the lock files of
    every visible GPU made by this process (``gpu_probe.probe``): the jail
    shows it read-only, so a jailed run takes the locks (``flock(2)`` on a
    file opened read-only) but cannot remove, replace or plant files there."""
    locks = Path(os.environ.get(gpu_lock.LOCK_DIR_ENV) or gpu_lock.DEFAULT_LOCK_DIR)
    locks.mkdir(parents=True, exist_ok=True)
    gpu_probe.probe()  # makes the lock files
    return str(locks.resolve())


def wanted() -> bool:
    """Whether to jail the child: bubblewrap works here (:func:`available`)
    and ``LEGO_SANDBOX`` is not ``off``.  Otherwise logs, once per process and
    reason, that the child runs unjailed (see docs/SECURITY.md for what that
    does not protect).  Raises RuntimeError when ``LEGO_SANDBOX=require``
    and the jail is not available."""
    setting = os.environ.get("LEGO_SANDBOX", "auto").lower()
    if setting == "off":
        why = "LEGO_SANDBOX=off"
    else:
        why = available()
        if why is None:
            return True
        if setting == "require":
            raise RuntimeError(f"the sandbox is required (LEGO_SANDBOX=require) but cannot be used: {why}")
    if why not in _warned:
        _warned.add(why)
        logging.getLogger(__name__).warning(
            "uploaded code runs WITHOUT the bubblewrap sandbox (%s): only its network is cut; it can read and write "
            "whatever this user can (docs/SECURITY.md)", why)
    return False
