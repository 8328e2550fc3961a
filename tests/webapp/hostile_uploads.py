"""The corpus of hostile uploads (issue 11): model files an attacker sends,
each with what the user must see when its run ends.

Each :class:`Hostile` is a model file's source, written with the paths of
the service under test filled in (``{database}``, ``{settings}``, ...;
:func:`Hostile.source`), and what its run must show: its final state, the
words its error message must hold, and the words it must never hold (the
secrets it went after).  ``test_web_badinput_uploads.py`` sends every one
through one real run worker and has that worker finish a good run after
each that does more than read (``reads_only``) and after the last.  Whatever an upload reads it raises in its error message, so a secret
that got out would be on the page.
"""
from __future__ import annotations

import dataclasses

# a valid model after the attack, for uploads that must not fail on their own fault
TAIL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''

# what each attack that reads tries to raise: the data it got
READ_AND_RAISE = '''
def steal(action):
    try:
        got = action()
    except BaseException as exc:
        raise RuntimeError(f"refused: {{type(exc).__name__}}: {{exc}}") from None
    raise RuntimeError(f"STOLEN {{got!r}}"[:2000])
'''

SECRET_WORDS = ("STOLEN", "planted-secret", "pbkdf2_sha256", "postgres://", "redis://")


@dataclasses.dataclass(frozen=True)
class Hostile:
    """One hostile upload: ``name`` (its file name too), ``code`` (a
    ``str.format`` template of the model file), ``state`` the run ends in,
    ``says`` (words the error message holds; all of them), ``never``
    (words it never holds, besides :data:`SECRET_WORDS`), ``jail``
    (whether what it shows depends on the bubblewrap jail), ``reads_only``
    (it only tries to read and raises what it got: no good run is needed
    after it to show the worker still works, the next one shows it)."""

    name: str
    code: str
    says: tuple[str, ...]
    state: str = "failed"
    never: tuple[str, ...] = ()
    jail: bool = False
    # only reads (and raises what it got): it cannot leave the worker worse off
    # than its checks see (its pids, its pool, leftover processes, the cache)
    reads_only: bool = False
    data: bytes = b""  # the file's bytes as they are (binary content), instead of ``code``

    def source(self, paths: dict[str, str]) -> bytes:
        return self.data or self.code.format(**paths).encode()


def _png() -> bytes:
    """A real 4x1 PNG image: a screenshot renamed model.py."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" + b"\xff\x00\x00" * 4)) + chunk(b"IEND", b""))


def _steal(name: str, action: str, says: tuple[str, ...], **kw) -> Hostile:
    return Hostile(name, READ_AND_RAISE + f"\nsteal(lambda: {action})\n", says, jail=True, reads_only=True, **kw)


CORPUS: list[Hostile] = [
    # --- the secrets of the service: each read raises what it got ------------------------
    _steal("read_database", "open({database!r}).read()", ("refused: FileNotFoundError",)),
    _steal("read_settings", "open({settings!r}).read()", ("refused: FileNotFoundError",)),
    _steal("read_source_tree", "open({source!r}).read()", ("refused: FileNotFoundError",)),
    _steal("read_other_users_upload", "open({other_upload!r}).read()", ("refused: FileNotFoundError",)),
    _steal("list_other_runs", "[n for n in __import__('os').listdir({runs!r}) if n != __file__.split('/')[-3]] or 1/0",
           ("refused: ZeroDivisionError",)),
    _steal("environment_secrets", "[k + '=' + v for k, v in __import__('os').environ.items() "
           "if any(w in k for w in ('SECRET', 'DATABASE', 'REDIS', 'TOKEN', 'PASSWORD'))] or 1/0",
           ("refused: ZeroDivisionError",)),
    _steal("other_processes_environment", "[open(f'/proc/{{p}}/environ', 'rb').read() for p in __import__('os').listdir('/proc') "
           "if p.isdigit() and b'planted-secret' in open(f'/proc/{{p}}/environ', 'rb').read()] or 1/0",
           ("refused: ZeroDivisionError",)),
    _steal("broker_over_tcp", "__import__('socket').create_connection(('127.0.0.1', {redis_port}), timeout=3)",
           ("refused: ConnectionRefusedError",)),
    _steal("database_over_tcp", "__import__('socket').create_connection(('127.0.0.1', {postgres_port}), timeout=3)",
           ("refused: ConnectionRefusedError",)),
    _steal("database_unix_socket", "__import__('socket').socket(__import__('socket').AF_UNIX).connect({postgres_socket!r})",
           ("refused: FileNotFoundError",)),
    _steal("the_internet", "__import__('socket').create_connection(('1.1.1.1', 443), timeout=3)",
           ("refused: OSError", "Network is unreachable")),
    _steal("kill_the_worker_by_pid", "__import__('os').kill({worker_pid}, 9)", ("refused: ProcessLookupError",)),
    _steal("device_files", "open('/dev/mem', 'rb').read(16)", ("refused: FileNotFoundError",)),
    # --- the kernel cache: append to every entry, plant a new one ----------------------
    _steal("append_to_the_kernel_cache",
           "[open(__import__('os').path.join(d, f), 'a').write('import os') for d, _, fs in __import__('os').walk({cache!r}) for f in fs] or 1/0",
           ("refused: OSError", "Read-only file system")),
    _steal("plant_a_kernel_cache_entry", "__import__('os').makedirs({own_cache!r} + '/ab', exist_ok=True) or "
           "open({own_cache!r} + '/ab/ab' + '0' * 62 + '.json', 'w').write('{{}}')", ("refused: OSError", "Read-only file system")),
    # --- links into its own output, for the zip -----------------------------------------
    Hostile("link_secrets_into_the_output", '''import os
for line in open('/proc/self/mountinfo'):
    point = line.split()[4]
    if '.lego-' in point and not os.path.lexists(point + '/environ'):
        os.symlink('/proc/self/environ', point + '/environ')
        os.symlink({database!r}, point + '/db.sqlite3')
''' + TAIL, ("which LEGO never writes",), jail=True),
    # --- taking its own process down -----------------------------------------------------
    Hostile("kill_its_parent", "import os\nimport signal\n\nos.kill(os.getppid(), signal.SIGKILL)\n", ("defines no `Model`",), jail=True),
    Hostile("sigkill_itself", "import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGKILL)\n", ("killed by SIGKILL",)),
    Hostile("segfault", "import ctypes\n\nctypes.string_at(0)\n", ("killed by SIGSEGV", "crash in native code")),
    Hostile("abort", "import os\n\nos.abort()\n", ("killed by SIGABRT",)),
    Hostile("exit_at_import", "import os\n\nos._exit(3)\n", ("exited with code 3 without a result", "os._exit")),
    Hostile("sys_exit_at_import", "import sys\n\nsys.exit('bye')\n", ("bye",)),
    Hostile("keyboard_interrupt_at_import", "raise KeyboardInterrupt\n", ("keyboard_interrupt_at_import.py:1: KeyboardInterrupt while importing the file.",)),
    Hostile("close_every_file_descriptor", "import os\n\nos.closerange(0, 4096)\n" + TAIL,
            ("the optimizer process exited with code 120 without a result",)),  # its pipes closed, the result cannot go out
    Hostile("garbage_on_every_descriptor", "import os\n\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'\\xff' * 4096)\n    except OSError:\n        pass\n" + TAIL,
            ("the optimizer process sent a message over 256 MiB and was stopped.",)),  # 0xff... read as a length
    # --- resources: memory, files, processes, output -----------------------------------
    Hostile("allocate_past_the_memory_limit", "x = bytearray({memory_bytes} * 2)\n" + TAIL, ("MemoryError while importing the file. Fix: fix the code at that line.",)),
    Hostile("write_past_the_file_size_limit", "import os\n\nwith open(os.path.expanduser('~/big'), 'wb') as f:\n"
            "    for _ in range({file_chunks}):\n        f.write(b'x' * (1 << 20))\n" + TAIL, ("File too large",)),
    # each thread's 8 MiB stack counts toward the data limit; RLIMIT_NPROC holds too, except for a root worker
    Hostile("start_threads_until_a_limit", "import threading, time\n\nfor _ in range({processes} + 64):\n"
            "    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n" + TAIL, ("can't start new thread",)),
    Hostile("leave_a_process_behind", "import os, time\n\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(3600)\n"
            "raise RuntimeError('left a process behind')\n", ("left a process behind",)),
    Hostile("print_128_mb", "import sys\n\nfor _ in range(64):\n    sys.stdout.write('y' * (1 << 20))\n    sys.stderr.write('z' * (1 << 20))\n"
            "raise RuntimeError('printed 128 MB')\n", ("printed 128 MB",)),
    # lego_core keeps 300 characters of an exception's text (problem.one_line)
    Hostile("a_huge_error_message", "raise ValueError('x' * 50_000_000)\n",
            ("a_huge_error_message.py:1: ValueError while importing the file: " + "x" * 299 + "…. Fix: fix the code at that line.",)),
    # its own path and the media folder above it, as the jail shows them: the page names them relative
    Hostile("server_paths_in_the_error", "import os\n\nraise ValueError(__file__ + ' ' + os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))\n",
            ("server_paths_in_the_error.py:3: ValueError while importing the file: server_paths_in_the_error.py var/media.",), never=("{media}",)),
    Hostile("endless_recursion", "def f():\n    return f()\n\n\nf()\n", ("RecursionError",)),
    # --- files that are not a model ----------------------------------------------------
    # binary content (issue 28: was called a text-encoding problem, or queued to fail on a syntax error): refused by the form
    Hostile("not_python_at_all", "\x7fELF\x02\x01\x01 ) binary junk (\n",
            ("not_python_at_all.py: the file is not a Python source file: it is an ELF executable or library, by its first bytes.",),
            state="rejected"),
    Hostile("png_renamed_py", "", ("png_renamed_py.py: the file is not a Python source file: it is a PNG image, by its first bytes.",
                                   "renaming another file to .py does not make it one"), state="rejected", data=_png()),
    # issue 28: a syntax error the form had flagged was queued and failed 15-22 s later
    Hostile("syntax_error", "import torch\n\n\ndef get_inputs(:\n    return []\n",
            ("syntax_error.py:4: syntax error: invalid syntax. Fix: correct the Python syntax on that line.",), state="rejected"),
    # not UTF-8 text: the form says so (lego_core.load.spec.decode_source), no run is made
    Hostile("null_bytes", "x = 1\n\x00\x00\n", ("null_bytes.py:2: the file is not UTF-8 text: it holds null bytes",), state="rejected"),
    Hostile("empty_file", "", ("The submitted file is empty.",), state="rejected"),  # by the form: no run
    Hostile("get_inputs_returns_junk", TAIL + "\n\ndef get_inputs():\n    return [object()]\n", ("TypeError while running Model.forward on get_inputs(): relu(): argument 'input' (position 1) must be Tensor, not object.",)),
    Hostile("forward_returns_none", TAIL.replace("return torch.relu(x) * 2", "return None"), ("forward_returns_none.py: Model.forward returned NoneType, not a tensor (nor a tuple, list or dict of tensors).",)),
    # issue 28: no line of the file in the error (the call itself failed), yet the fix said "fix the code at that line"
    Hostile("forward_argument_count", TAIL.replace("return [torch.randn(4, 8)]", "return [torch.randn(4, 8), torch.randn(4, 8)]"),
            ("forward_argument_count.py: TypeError while running Model.forward on get_inputs(): Model.forward() takes 2 positional "
             "arguments but 3 were given. Fix: make get_inputs() return a list of what Model.forward takes, one item per argument",),
            never=("at that line", "line None")),
    # issue 28: "read torch.export's message above", where nothing is above: torch's own words are in the message
    Hostile("capture_fails_on_data_dependent_control_flow",
            TAIL.replace("return torch.relu(x) * 2", "if x.sum() > 0:\n            return x * 2\n        return x - 1"),
            ("torch.export could not capture the model: data-dependent control flow", "torch.export said: "),
            never=("message above",)),
]
