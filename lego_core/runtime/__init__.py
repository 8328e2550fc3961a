"""The machine the optimizer runs on: processes, jail, GPU, memory, clocks.

Enters: a function to run isolated, a folder to stage, a GPU to share.
Leaves: its events and results (``sandbox`` / ``sandbox_child``, jailed by
``jail``), an output folder written atomically (``output``, from the
child's staging folder by ``staged``), a timing in ms (``timing``: CUDA
events or perf_counter; several callables interleaved), the GPU held alone
while timing (``gpu_lock``, ``gpu_probe``), how busy the host was while it
timed (``host_load``), device memory in bytes (``memory``) and Triton's CPU
interpreter made usable (``triton_interpreter``).  Mechanism only: no
policy of the search lives here.
"""
