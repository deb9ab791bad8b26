"""Size expressions: sympy expressions over size symbols, kept as strings between stages.

>>> expr_str(parse("s0*256 + 0"))
'256*s0'
>>> to_cpp(parse("-((256*s0) // -512)"))  # ceil(s0 / 2), in floor-division semantics
'-mirai_floordiv(-s0, 2)'
>>> to_python("-((256*s0) // -512)")  # the same in Python, for generated Python APIs
'-((-s0) // 2)'
"""

from __future__ import annotations

import sympy
from sympy.printing.c import C99CodePrinter


def parse(text: str) -> sympy.Expr:
    """Parse an expression string (Python syntax, integer symbols)."""
    symbols = {name: sympy.Symbol(name, integer=True, positive=True) for name in _names(text)}
    return sympy.sympify(text, locals=symbols)


def _names(text: str) -> set[str]:
    import re

    return set(re.findall(r"\b[a-zA-Z_]\w*\b", text)) - {"floor", "ceiling", "Max", "Min", "Mod"}


def expr_str(expr) -> str:
    """A canonical string for an expression (integers stay plain)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    return sympy.sstr(sympy.simplify(expr), order="grlex")


def free_symbols(text: str) -> set[str]:
    return {str(s) for s in parse(text).free_symbols}


def evaluate(text: str, values: dict[str, int]) -> int:
    """Evaluate an expression string with concrete symbol values.

    >>> evaluate("2*s0 + 1", {"s0": 4})
    9
    """
    result = parse(text).subs(
        {sympy.Symbol(k, integer=True, positive=True): v for k, v in values.items()}
    )
    return int(result)


class _CppPrinter(C99CodePrinter):
    """Integer C++ for size expressions: int64_t arithmetic, exact floor/ceil division."""

    def _print_Symbol(self, expr):
        return expr.name

    def _print_floor(self, expr):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if den == 1:
            return self._print(num)
        return f"mirai_floordiv({self._print(num)}, {self._print(den)})"

    def _print_ceiling(self, expr):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if den == 1:
            return self._print(num)
        return f"(({self._print(num)} + {self._print(den - 1)}) / {self._print(den)})"

    def _print_Integer(self, expr):
        value = int(expr)
        return f"{value}" if abs(value) < 2**31 else f"INT64_C({value})"

    def _fold(self, expr, function: str) -> str:
        items = [self._print(a) for a in expr.args]
        out = items[0]
        for item in items[1:]:
            out = f"{function}<int64_t>({out}, {item})"
        return out

    def _print_Max(self, expr):
        return self._fold(expr, "std::max")

    def _print_Min(self, expr):
        return self._fold(expr, "std::min")

    def _print_Mod(self, expr):
        a, b = expr.args
        return f"mirai_mod({self._print(a)}, {self._print(b)})"

    def _print_Pow(self, expr):
        base, exp = expr.args
        if exp.is_Integer and int(exp) > 0:
            return "(" + "*".join([f"({self._print(base)})"] * int(exp)) + ")"
        raise ValueError(f"cannot print {expr} as integer C++")


def to_cpp(expr) -> str:
    """C++ int64 arithmetic for an expression (string or sympy)."""
    if isinstance(expr, str):
        expr = parse(expr)
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return _CppPrinter()._print_Integer(expr)
    return _CppPrinter().doprint(expr)


class _PythonPrinter(_CppPrinter):
    """Integer Python for size expressions: the same arithmetic as `_CppPrinter`, in Python's terms
    (`//` and `%` floor as sympy's floor and Mod do)."""

    def _print_floor(self, expr):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if den == 1:
            return self._print(num)
        return f"(({self._print(num)}) // {self._print(den)})"

    def _print_ceiling(self, expr):
        num, den = sympy.fraction(sympy.together(expr.args[0]))
        if den == 1:
            return self._print(num)
        return f"(-((-({self._print(num)})) // {self._print(den)}))"

    def _print_Integer(self, expr):
        return str(int(expr))

    def _fold(self, expr, function: str) -> str:
        return f"{function}({', '.join(self._print(a) for a in expr.args)})"

    def _print_Max(self, expr):
        return self._fold(expr, "max")

    def _print_Min(self, expr):
        return self._fold(expr, "min")

    def _print_Mod(self, expr):
        a, b = expr.args
        return f"(({self._print(a)}) % ({self._print(b)}))"

    def _print_Pow(self, expr):
        base, exp = expr.args
        if exp.is_Integer and int(exp) > 0:
            return f"(({self._print(base)}) ** {int(exp)})"
        raise ValueError(f"cannot print {expr} as integer Python")


def to_python(expr) -> str:
    """Python int arithmetic for an expression (string or sympy), over its symbols as variables.

    >>> to_python("Max(1, s0 - 1)")
    'max(1, s0 - 1)'
    """
    if isinstance(expr, str):
        expr = parse(expr)
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    return _PythonPrinter().doprint(expr)
