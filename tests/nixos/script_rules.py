"""Rules about how a VM test script uses the test driver that neither mypy
nor pyflakes can see (tests/nixos/lint-scripts.py runs them):

retry-raises
    A function handed to `retry` must return False while its condition
    does not hold. `retry` does not catch exceptions, so a check that calls
    a machine method that raises on a failed command (`succeed`, `fail`,
    `wait_*`, ...), directly or through a function of the script, aborts
    the test at its first try instead of retrying. Use `execute`.

etcdctl-env-after-switch
    The driver's shell on a machine sourced its environment when the
    machine booted. After `switch-to-configuration` on that machine the
    ETCDCTL_* variables of the new configuration are not in that shell, so
    an etcdctl command run there afterwards (directly, or through a
    function of the script given that machine) must name its endpoints and
    certificates itself (--endpoints, --cacert, --cert, --key).

Strings are followed through f-strings, `+` and names bound once at the
top level of the script to a string; what cannot be followed counts as
empty.
"""
import ast
from dataclasses import dataclass, field

# Machine methods that raise when the command fails or the wait times out.
RAISING = {
    "succeed", "fail", "wait_until_succeeds", "wait_until_fails", "wait_for_unit",
    "wait_for_file", "wait_for_open_port", "wait_for_closed_port", "wait_for_open_unix_socket",
    "require_unit_state", "get_unit_info", "get_unit_property", "wait_for_console_text",
}
# Machine methods that run a shell command given as their first argument.
RUNS_COMMAND = {"execute", "succeed", "fail", "wait_until_succeeds", "wait_until_fails"}
ETCDCTL_FLAGS = ["--endpoints", "--cacert", "--cert", "--key"]


@dataclass
class Problem:
    """One finding: the rule, the line and what to do."""
    rule: str
    line: int
    message: str


@dataclass
class Script:
    """A parsed script: its functions and its names bound once to a value."""
    tree: ast.Module
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    strings: dict[str, ast.expr] = field(default_factory=dict)


def parse(source: str, name: str) -> Script:
    s = Script(ast.parse(source, filename=name))
    assigned: dict[str, int] = {}
    for node in ast.walk(s.tree):
        if isinstance(node, ast.FunctionDef):
            s.functions[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    assigned[t.id] = assigned.get(t.id, 0) + 1
                    s.strings[t.id] = node.value
    s.strings = {k: v for k, v in s.strings.items() if assigned[k] == 1}
    return s


def text(s: Script, e: ast.expr | None, depth: int = 0) -> str:
    """The string e evaluates to, as far as it can be followed."""
    if e is None or depth > 10:
        return ""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    if isinstance(e, ast.JoinedStr):
        return "".join(text(s, v, depth + 1) for v in e.values)
    if isinstance(e, ast.FormattedValue):
        return text(s, e.value, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        return text(s, e.left, depth + 1) + text(s, e.right, depth + 1)
    if isinstance(e, ast.Name) and e.id in s.strings:
        return text(s, s.strings[e.id], depth + 1)
    return ""


def method_calls(node: ast.AST):
    """(receiver name, method, call) of every `x.method(...)` under node."""
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name):
            yield c.func.value.id, c.func.attr, c


def calls_of_functions(s: Script, node: ast.AST):
    """(function, call) of every call under node of a function of the script."""
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in s.functions:
            yield s.functions[c.func.id], c


def raising_call(s: Script, fn: ast.AST, seen: frozenset = frozenset()) -> str | None:
    """How fn (transitively) calls a raising machine method, or None."""
    for recv, meth, _ in method_calls(fn):
        if meth in RAISING:
            return f"{recv}.{meth}"
    for f, _ in calls_of_functions(s, fn):
        if f.name not in seen:
            via = raising_call(s, f, seen | {f.name})
            if via:
                return f"{via} (through {f.name})"
    return None


def check_retry(s: Script) -> list[Problem]:
    out = []
    for c in ast.walk(s.tree):
        if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "retry" and c.args):
            continue
        arg = c.args[0]
        fn: ast.AST | None = arg if isinstance(arg, ast.Lambda) else None
        if isinstance(arg, ast.Name):
            fn = s.functions.get(arg.id)
        via = raising_call(s, fn) if fn is not None else None
        if via:
            out.append(Problem("retry-raises", c.lineno,
                               f"the check given to retry calls {via}, which raises when its command fails, and retry "
                               "does not catch it: run the command with execute and return False while it fails"))
    return out


def env_etcdctl(command: str) -> bool:
    """Whether command runs etcdctl relying on the ETCDCTL_* environment."""
    return "etcdctl" in command and not all(f in command for f in ETCDCTL_FLAGS)


def uses_env_etcdctl(s: Script, fn: ast.FunctionDef, param: str, seen: frozenset = frozenset()) -> bool:
    """Whether fn runs an environment-dependent etcdctl on its parameter param."""
    for recv, meth, c in method_calls(fn):
        if recv == param and meth in RUNS_COMMAND and c.args and env_etcdctl(text(s, c.args[0])):
            return True
    for f, c in calls_of_functions(s, fn):
        for i, a in enumerate(c.args):
            if isinstance(a, ast.Name) and a.id == param and i < len(f.args.args) and f.name not in seen:
                if uses_env_etcdctl(s, f, f.args.args[i].arg, seen | {f.name}):
                    return True
    return False


def check_switch(s: Script, machines: set[str]) -> list[Problem]:
    out = []
    switched: set[str] = set()
    # Statements of the script (not of its functions) in source order.
    body = [n for n in ast.walk(s.tree) if isinstance(n, (ast.Expr, ast.Assign, ast.AugAssign, ast.Assert, ast.Return))]
    body.sort(key=lambda n: (n.lineno, n.col_offset))
    inside_fn = {id(n) for f in s.functions.values() for n in ast.walk(f)}
    for stmt in body:
        if id(stmt) in inside_fn:
            continue
        for recv, meth, c in method_calls(stmt):
            if recv in switched and meth in RUNS_COMMAND and c.args and env_etcdctl(text(s, c.args[0])):
                out.append(Problem("etcdctl-env-after-switch", c.lineno,
                                   f"etcdctl on {recv} after switch-to-configuration there relies on ETCDCTL_* the driver's shell "
                                   "never got: pass " + ", ".join(ETCDCTL_FLAGS)))
        for f, c in calls_of_functions(s, stmt):
            for i, a in enumerate(c.args):
                if isinstance(a, ast.Name) and a.id in switched and i < len(f.args.args) and uses_env_etcdctl(s, f, f.args.args[i].arg):
                    out.append(Problem("etcdctl-env-after-switch", c.lineno,
                                       f"{f.name}({a.id}, ...) runs etcdctl on {a.id} after switch-to-configuration there, relying on "
                                       "ETCDCTL_* the driver's shell never got: pass " + ", ".join(ETCDCTL_FLAGS)))
        for recv, meth, c in method_calls(stmt):
            if recv in machines and meth in RUNS_COMMAND and c.args and "switch-to-configuration" in text(s, c.args[0]):
                switched.add(recv)
    return out


def check(source: str, name: str, machines: set[str]) -> list[Problem]:
    """Every problem of the script source (named name, run on machines)."""
    s = parse(source, name)
    return sorted(check_retry(s) + check_switch(s, machines), key=lambda p: p.line)
