"""Tool flag policy: the first line of defence of the explorer's sandbox. Before any stage of a
pipeline starts, every flag of every stage is checked here; a refused flag fails the whole request
with "Invalid flags for <tool>" and a detail that names each refused flag and why. Nothing runs.

What is refused, for every tool (for user_tool, in the flags after its executable):
  - an argument that is not a flag (an input file name; the IR comes on stdin), and `--`, after
    which the LLVM tools read every argument as a file name; `-` (stdin) is allowed;
  - a response file `@FILE` (the tool would read more arguments from FILE);
  - output files: `-o` in every spelling (`-o F`, `-o=F`, `--o=F`, `-oF`), any option whose name
    starts with `output` or is an abbreviation of it (`--out=F`, as getopt_long accepts);
  - plugins: `--load`, any option with `plugin` in its name (`--load-pass-plugin`, ...);
  - a flag that contains `/` or whose value is `..` (a path out of the stage's scratch directory,
    which is its working directory and is removed afterwards);
and, for the LLVM-based tools (mlir-opt, mlir-translate, opt, llc, torch-mlir-opt; the same table
also guards user_tool), every option that reads or writes a file, loads code or runs a program,
named below; plus the pass options that do so inside pass pipelines (`--pass-pipeline=`, `-p`,
`--some-pass=options`, `-passes=`).

Why a deny list and not an allow list: each LLVM tool accepts some 2,700-2,800 options (most of
LLVM's libraries register theirs in every tool) and mlir-opt some 1,000 passes with options; the
explorer exists to try any of them, and an allow list would have to be kept in step with every
LLVM release. The deny list was derived from the `--help-hidden` output of the binaries
mirai.explorer.tools resolves: Debian LLVM 22.1.8 (`llvm-22`, `mlir-22-tools`
1:22.1.8-1~deb12u1: mlir-opt-22, mlir-translate-22, opt-22, llc-22, and `opt-22 --print-passes`)
and torch-mlir-opt of the torch-mlir 20261001 wheel (LLVM 24.0.0git); for mirai's triton-opt and
triton-llvm-opt, from their own argument parsers. tests/explorer/test_flag_policy.py re-reads the
help of the installed binaries and fails when an option typed as a file, directory, path or plugin
is not refused, so a new LLVM shows up there.

This is not the sandbox: the IR itself can make tools read files (llc assembles
`module asm ".incbin \\"/etc/passwd\\""` into its output; `#nvvm.target<link = [...]>`; transform
dialect scripts), which only a sandbox around each stage stops.

>>> [r.flag for r in LLVM.refusals(["--canonicalize", "-o", "/tmp/x", "@args"])]
['-o', '/tmp/x', '@args']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mirai.explorer.errors import ExplorerError

OUTPUT = "names an output file: the IR comes back on stdout and tools may not write files"
WRITES = "writes a file: tools may not write files"
READS = "reads a file: the IR comes on stdin and tools may not read other files"
CHANNEL = "reads and writes files (an interactive channel)"
PLUGIN = "loads a shared library (runs its code)"
RUNS = "runs another program"
VIEWER = "opens a graph viewer (runs another program)"
PROFILE_PATH = "names a file the instrumented program writes"
REPRODUCER = "runs the pass pipeline stored in the input IR, which this policy cannot check"
INCLUDE = "adds a directory that inline assembly may read files from"
DOWNSTREAM = (
    "passes options to a downstream compiler (ptxas or the like) that this policy cannot check"
)
TOOLKIT = "runs the GPU toolkit's programs from the given path"
LINKS = "links extra files into the GPU binary (reads files)"

# Top-level options of the LLVM-based tools (name without dashes -> why it is refused).
LLVM_DENIED: dict[str, str] = {
    "o": OUTPUT,
    # writes a file (or a directory of files) at a path it is given
    **dict.fromkeys(
        (
            "info-output-file",
            "as-secure-log-file",
            "amdgpu-module-splitting-print-module-dotcfg",
            "amdgpu-module-splitting-print-partition-summaries",
            "attributor-depgraph-dot-filename-prefix",
            "callgraph-dot-filename-prefix",
            "cfg-dot-filename-prefix",
            "crash-diagnostics-dir",
            "debugify-export",
            "dot-cfg-dir",
            "dot-cfg-mssa",
            "dot-ddg-filename-prefix",
            "ir-dump-directory",
            "log-actions-to",
            "lowertypetests-write-summary",
            "lto-pass-remarks-output",
            "lto-stats-file",
            "mcfg-dot-filename-prefix",
            "memprof-dot-file-path-prefix",
            "mlir-generate-reproducer",
            "mlir-pass-pipeline-crash-reproducer",
            "mlir-print-ir-tree-dir",
            "module-summary-dot-file",
            "opt-bisect-print-ir-path",
            "pass-remarks-output",
            "polly-dump-after-file",
            "polly-dump-before-file",
            "print-on-crash-path",
            "profile-actions-to",
            "remarks-output-file",
            "spirv-save-validation-files-with-prefix",
            "split-dwarf-output",
            "thin-link-bitcode-file",
            "time-trace-file",
            "verify-di-preserve-export",
            "wholeprogramdevirt-write-summary",
        ),
        WRITES,
    ),
    # reads a file (or a directory) at a path it is given
    **dict.fromkeys(
        (
            "cgscc-inline-replay",
            "chr-function-list",
            "chr-module-list",
            "codegen-data-use-path",
            "cs-profile-path",
            "dfsan-abilist",
            "extract-blocks-file",
            "forceattrs-csv-path",
            "fs-profile-file",
            "fs-remapping-file",
            "internalize-public-api-file",
            "ir2vec-vocab-path",
            "irdl-file",
            "lowertypetests-read-summary",
            "memory-profile-file",
            "memprof-import-summary",
            "mir2vec-vocab-path",
            "ml-inliner-ir2vec-vocab-file",
            "ms-secure-hotpatch-functions-file",
            "pgo-test-profile-file",
            "pgo-test-profile-remapping-file",
            "polly-import-jscop-dir",
            "polly-import-jscop-postfix",
            "profile-file",
            "profile-remapping-file",
            "rewrite-map-file",
            "sample-profile-file",
            "sample-profile-inline-replay",
            "sample-profile-remapping-file",
            "summary-file",
            "thinlto-workload-def",
            "use-ctx-profile",
            "wholeprogramdevirt-read-summary",
        ),
        READS,
    ),
    **dict.fromkeys(("cs-profilegen-file", "instrument-cold-function-only-path"), PROFILE_PATH),
    **dict.fromkeys(
        (
            "inliner-interactive-channel-base",
            "regalloc-evict-interactive-channel-base",
            "regalloc-priority-interactive-channel-base",
        ),
        CHANNEL,
    ),
    "I": INCLUDE,
    **dict.fromkeys(
        ("load", "load-pass-plugin", "load-dialect-plugin", "x86-lvi-load-opt-plugin"), PLUGIN
    ),
    **dict.fromkeys(
        (
            "exec-on-ir-change",
            "print-changed-diff-path",
            "print-changed-dot-path",
            "lto-aix-system-assembler",
        ),
        RUNS,
    ),
    **dict.fromkeys(
        (
            "attributor-view-dep-graph",
            "dfa-jump-view-cfg-before",
            "fs-viewbfi-after",
            "fs-viewbfi-before",
            "pgo-view-counts",
            "pgo-view-raw-counts",
            "polly-view-cfg",
        ),
        VIEWER,
    ),
    "run-reproducer": REPRODUCER,
}

# Every `view-*` option of LLVM pops up a graph viewer.
LLVM_DENIED_PREFIXES: tuple[tuple[str, str], ...] = (("view-", VIEWER),)
# Exempt from every rule: mlir-opt's `--view-op-graph` pass prints Graphviz text to stderr; the
# others take a marker string or a number (`--split-input-file=// -----`), never a file.
LLVM_ALLOWED: frozenset[str] = frozenset(
    {"view-op-graph", "output-split-marker", "output-asm-variant", "split-input-file"}
)

# Inside pass pipelines and pass options: MLIR pass options `key=value` (in `--pass=k=v k2=v2`,
# `--pass-pipeline=...(pass{k=v})`) and opt's `-passes=` parameters and pass names.
_KEY = r"(?:^|[\s{(,;<])-{0,2}(%s)\s*="
LLVM_PIPELINE_DENIED: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(_KEY % "l"), LINKS),  # gpu-module-to-binary, nvvm/rocdl/xevm-attach-target
    (re.compile(_KEY % "toolkit"), TOOLKIT),  # gpu-module-to-binary
    (re.compile(_KEY % "opts|cmd-options|ptxas-cmd-options|igc-cmd-options"), DOWNSTREAM),
    (re.compile(_KEY % "filename"), WRITES),  # snapshot-op-locations
    (re.compile(_KEY % "transform-library-paths|extra-library"), READS),  # transform, torch-mlir
    (re.compile(_KEY % "profile-filename"), READS),  # opt's memprof-use<profile-filename=...>
    (re.compile(r"(?:^|[\s,(])(view-(?:callgraph|cfg|dom|post-dom)[\w-]*)"), VIEWER),  # opt passes
)

# A plausible long option name, as `-opt-bisect-limit`. Any other `-o<rest>` (`-I<rest>`) is a
# short option with its value attached, as getopt-style tools read it (LLVM's refuse it).
_LONG_NAME = re.compile(r"[A-Za-z][a-z0-9]*(-[a-z0-9]+)+")


@dataclass(frozen=True)
class Refusal:
    flag: str
    reason: str


@dataclass(frozen=True)
class FlagPolicy:
    """What one tool's flags may not do (the rules every tool gets are in `refusals`)."""

    denied: Mapping[str, str] = field(default_factory=dict)
    denied_prefixes: tuple[tuple[str, str], ...] = ()
    allowed: frozenset[str] = frozenset()  # option names exempt from every rule
    pipeline_denied: tuple[tuple[re.Pattern, str], ...] = ()
    short_values_attached: bool = False  # getopt style: `-oFILE` is `-o FILE` whatever FILE is

    def refusals(self, args: Sequence[str]) -> list[Refusal]:
        """Every refused argument of one stage, with the reason, in order."""
        found = []
        for arg in args:
            reason = self._reason(arg)
            if reason:
                found.append(Refusal(arg, reason))
        return found

    def check(self, tool: str, args: Sequence[str], flags: str | None = None) -> None:
        """Raise ExplorerError("Invalid flags for <tool>") when any argument is refused."""
        refused = self.refusals(args)
        if refused:
            raise ExplorerError(f"Invalid flags for {tool}", describe(tool, refused, flags))

    def _reason(self, arg: str) -> str | None:
        if "\0" in arg:
            return "contains a NUL character"
        if arg.startswith("@"):
            return "a response file: the tool would read more arguments from that file"
        if arg == "--":
            return "ends the options: the tool would read every argument after it as a file name"
        if arg == "-":
            return None  # stdin, where the IR is anyway
        if not arg.startswith("-"):
            return (
                "not a flag: an argument that is not a flag names an input file, and the IR "
                "comes on stdin (write an option's value as -flag=value)"
            )
        single_dash = not arg.startswith("--")
        name, has_value, value = arg.lstrip("-").partition("=")
        if name in self.allowed:
            return None
        reason = self._name_reason(name, single_dash)
        if reason:
            return reason
        if has_value:
            for pattern, why in self.pipeline_denied:
                match = pattern.search(value)
                if match:
                    return f"{match.group(1)} (in a pass pipeline or pass options): {why}"
        # Anywhere in the flag: getopt reads `-no/x` as `-n -o /x`.
        if "/" in arg or value == "..":
            return (
                "contains '/' or has the value '..': flags may not point tools at files "
                "(the IR comes on stdin, the output goes to stdout)"
            )
        return None

    def _name_reason(self, name: str, single_dash: bool) -> str | None:
        if name in self.denied:
            return self.denied[name]
        if name == "o" or name.startswith(("output", "out-")):
            return OUTPUT
        if not single_dash and len(name) >= 3 and "output".startswith(name):
            return OUTPUT  # getopt_long takes `--out` for `--output`
        if single_dash and len(name) > 1:
            short = name[0]
            why = OUTPUT if short == "o" else self.denied.get(short)
            if why and (self.short_values_attached or not _LONG_NAME.fullmatch(name)):
                return f"-{name} is -{short} {name[1:]}: {why}"
        if name == "load" or "plugin" in name:
            return PLUGIN
        for prefix, why in self.denied_prefixes:
            if name.startswith(prefix):
                return why
        return None


def describe(tool: str, refused: Sequence[Refusal], flags: str | None = None) -> str:
    """The error detail: one line per refused flag, then the stage's flags."""
    lines = [f"{r.flag}: {r.reason}" for r in refused]
    if flags is not None:
        lines.append(f"(in the {tool} flags: {flags})")
    lines.append("The explorer's tool flag policy: docs/explorer.md, 'Flag policy'.")
    return "\n".join(lines) + "\n"


# The LLVM-based tools: mlir-opt, mlir-translate, opt, llc, torch-mlir-opt.
LLVM = FlagPolicy(
    denied=LLVM_DENIED,
    denied_prefixes=LLVM_DENIED_PREFIXES,
    allowed=LLVM_ALLOWED,
    pipeline_denied=LLVM_PIPELINE_DENIED,
)
# mirai's triton-opt: `-o FILE` or `-oFILE`, one positional input; passes have no file options.
TRITON_OPT = FlagPolicy(short_values_attached=True)
# mirai's triton-llvm-opt: `-o FILE`, one positional input.
TRITON_LLVM_OPT = FlagPolicy()
# A tool whose options are unknown (user_tool: an executable the operator allowed; the default of
# a new registry entry): the generic rules, getopt style, and LLVM's table in case it is one.
ANY_TOOL = FlagPolicy(
    denied=LLVM_DENIED,
    denied_prefixes=LLVM_DENIED_PREFIXES,
    pipeline_denied=LLVM_PIPELINE_DENIED,
    short_values_attached=True,
)
