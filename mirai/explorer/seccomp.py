"""A seccomp filter for request processes: the system calls that would let a request leave state
behind for the next one, or reach kernel code it has no use for, fail with EPERM.

Refused:
- System V IPC objects and POSIX message queues (`shmget`, `semget`, `msgget`, `mq_open`): they live
  in the sandbox's IPC namespace, outlive the request and sit outside its memory limit;
- kernel keys (`add_key`, `request_key`, `keyctl`): a user's keyrings outlive the request too;
- new namespaces (`unshare`, `setns`, and `clone` with any CLONE_NEW* flag): a request has no use for
  them, and a user namespace would open the kernel's namespace code to it;
- `clone3` answers ENOSYS (its flags sit in memory, out of the filter's reach), so the C library falls
  back to `clone`, whose flags it checks; x32 system calls and other architectures are refused.

The filter is classic BPF installed with prctl(PR_SET_SECCOMP); once set, it holds for the process
and everything it starts. It is written for x86-64, the machines this project runs on; elsewhere
`install` raises rather than run requests unfiltered.

>>> len(program()) > 10
True
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RET = 0x06  # BPF_RET | BPF_K
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16

REFUSED = {  # x86-64 system call numbers
    "shmget": 29,
    "semget": 64,
    "msgget": 68,
    "mq_open": 240,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "setns": 308,
}
CLONE = 56
CLONE3 = 435
CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)


def program() -> list[tuple[int, int, int, int]]:
    """The filter: (code, jump-if-true, jump-if-false, k) per instruction."""
    deny = RET_ERRNO | errno.EPERM
    refused = sorted(REFUSED.values())
    body: list[tuple[int, int, int, int]] = [
        (LD_ABS_W, 0, 0, OFFSET_ARCH),
        (JEQ, 1, 0, AUDIT_ARCH_X86_64),
        (RET, 0, 0, deny),
        (LD_ABS_W, 0, 0, OFFSET_NR),
        (JGE, 0, 1, X32_SYSCALL_BIT),
        (RET, 0, 0, deny),
    ]
    for number in refused:
        body += [(JEQ, 0, 1, number), (RET, 0, 0, deny)]
    body += [(JEQ, 0, 1, CLONE3), (RET, 0, 0, RET_ERRNO | errno.ENOSYS)]
    body += [
        (JEQ, 0, 3, CLONE),
        (LD_ABS_W, 0, 0, OFFSET_ARG0),  # clone's flags (the low half of the first argument)
        (JSET, 0, 1, CLONE_NEW_FLAGS),
        (RET, 0, 0, deny),
        (RET, 0, 0, RET_ALLOW),
    ]
    return body


def install() -> None:
    """Filter this process and everything it starts from now on (no way back)."""
    if platform.machine() != "x86_64":
        raise OSError(f"the request filter is written for x86-64, not {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    instructions = program()
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in instructions)
    buffer = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
