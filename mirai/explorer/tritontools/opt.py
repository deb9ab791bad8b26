"""`triton-opt`: run Triton's MLIR passes, named as in Triton's own triton-opt, over a module.

    triton-opt --tritongpu-coalesce --tritongpu-remove-layout-conversions < kernel.ttgir
    triton-opt '--convert-triton-to-tritongpu=target=cuda:90 num-warps=8' kernel.ttir
    triton-opt --list-passes

Input: a file argument or stdin (TTIR, TTGIR or any MLIR Triton's context can parse). Output: the
module after the passes, on stdout (or `-o FILE`). Options of a pass: `--name=key=value key=value`
or `--name={key=value}`.
"""

from __future__ import annotations

import difflib
import sys
import tempfile


def _context():
    from triton._C.libtriton import amd, ir, nvidia

    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    amd.load_dialects(ctx)
    return ctx


def parse_pass_flag(flag: str) -> tuple[str, dict[str, str]]:
    """'--name=a=1 b=2' -> ('name', {'a': '1', 'b': '2'}).

    >>> parse_pass_flag("--tritongpu-pipeline={num-stages=4}")
    ('tritongpu-pipeline', {'num-stages': '4'})
    """
    body = flag.lstrip("-")
    name, _, options = body.partition("=")
    options = options.strip().strip("{}").strip()
    values = {}
    for item in options.split():
        key, _, value = item.partition("=")
        values[key] = value
    return name, values


def split_args(argv: list[str]) -> tuple[str, str, bool, list[str]]:
    """(input, output, list_passes, pass flags) from the command line.

    >>> split_args(["--cse", "in.mlir", "-o", "out.mlir"])
    ('in.mlir', 'out.mlir', False, ['--cse'])
    """
    source, output, list_passes, flags = "-", "-", False, []
    args = iter(argv)
    for arg in args:
        if arg == "-o":
            output = next(args, "-")
        elif arg.startswith("-o") and not arg.startswith("--"):
            output = arg[2:]
        elif arg == "--list-passes":
            list_passes = True
        elif arg in ("-h", "--help"):
            print(__doc__)
            raise SystemExit(0)
        elif arg.startswith("-") and arg != "-":
            flags.append(arg)
        else:
            source = arg
    return source, output, list_passes, flags


def main(argv: list[str] | None = None) -> int:
    source, output, list_passes, pass_flags = split_args(sys.argv[1:] if argv is None else argv)

    from triton._C.libtriton import ir

    from mirai.explorer.tritontools.passes import load_passes

    ctx = _context()
    table = load_passes(ctx)
    if list_passes:
        for name in sorted(table):
            options = " ".join(f"{o.name}={o.default}" for o in table[name].options)
            print(f"--{name}" + (f"  ({options})" if options else ""))
        return 0

    pm = ir.pass_manager(ctx)
    for flag in pass_flags:
        name, values = parse_pass_flag(flag)
        spec = table.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, table, n=3)
            hint = f"; did you mean {', '.join('--' + c for c in close)}?" if close else ""
            print(f"triton-opt: unknown pass --{name}{hint} (see --list-passes)", file=sys.stderr)
            return 2
        try:
            spec.add_to(pm, values)
        except ValueError as err:
            print(f"triton-opt: {err}", file=sys.stderr)
            return 2

    text = sys.stdin.read() if source == "-" else open(source).read()
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as source:
        source.write(text)
        source.flush()
        try:
            module = ir.parse_mlir_module(source.name, ctx)
        except Exception as err:  # the parser's diagnostics are already on stderr
            print(f"triton-opt: cannot parse the input: {err}", file=sys.stderr)
            return 1
    try:
        pm.run(module, "triton-opt")
    except Exception as err:
        print(f"triton-opt: pass pipeline failed: {err}", file=sys.stderr)
        return 1
    result = str(module)
    if output == "-":
        sys.stdout.write(result)
    else:
        with open(output, "w") as out:
            out.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
