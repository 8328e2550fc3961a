"""What the fork server imports before it forks executors (``lego_core.judge.process.forkserver``).

Only library code: no candidate file, no user model, and nothing that
initialises CUDA (an executor initialises CUDA itself, after the fork)."""
from lego_core.judge.process.child import preload

preload()
