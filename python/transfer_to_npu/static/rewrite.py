"""The edits of ``convert``, made on the text itself.

Each change a scan finds carries its edits as splices of the file's text
(start, end, new text), computed where the tree says the code is; every
other character stays as it was (comments, layout, quotes, line endings,
bare CRs included).  What is left as written gets a ``# transfer_to_npu:``
comment line above the logical line of the innermost statement holding it,
once: a comment already there (a file converted before) is not added
again, so that converting twice changes nothing.
"""

import ast
import bisect

from .scan import ADVICE, CHANGE, UNSUPPORTED
from .text import Text

COMMENT = "# transfer_to_npu: "

# At one place: the statements added after the line before, then the
# comments above the line, then the splices of the line itself.
_AFTER, _COMMENTS, _SPLICE = 0, 1, 2


def apply(source, findings, tree):
    """source with the findings' edits made, and comments above what stays
    as written.  A change whose edits overlap another's, or make the result
    fail to parse, becomes a hand edit (its comment says what it
    becomes)."""
    text = Text(source)
    changes = [f for f in findings if f.category == CHANGE and f.edits]
    refused = _overlapping(changes)
    while True:
        kept = [f for f in changes if id(f) not in refused]
        new, placed = _render(text, tree, findings, kept, refused)
        try:
            ast.parse(new)
            break
        except SyntaxError as exc:
            if not kept:
                raise
            refused.add(_culprit(new, placed, exc.lineno))
        except (ValueError, RecursionError, MemoryError):
            if not kept:
                raise
            refused |= {id(f) for f in kept}
    for f in changes:
        if id(f) in refused:
            _demote(f)
    return new


def _culprit(new, placed, lineno):
    """The change whose edit comes last before the end of the line a parse
    failed at (where the error is seen is at or after its cause)."""
    lines = Text(new)
    end = lines.starts[lineno] if lineno and lineno < len(lines.starts) else len(new)
    before = [(start, key) for start, key in placed if start < end]
    return max(before)[1] if before else placed[0][1]


def _demote(f):
    f.category, f.kind = UNSUPPORTED, "hand_edit"
    f.result = f"not converted automatically: it becomes {f.result}"
    f.edits = []


def _splices(f):
    return [e[1:] for e in f.edits if e[0] == "splice"]


def _overlapping(changes):
    """The changes (ids) whose splices overlap one taken before them, in
    source order; identical splices are one."""
    taken = []          # (start, end, new), sorted
    refused = set()
    for f in sorted(changes, key=lambda f: min(s for s, _, _ in _splices(f))):
        mine = _splices(f)
        if any(_clashes(taken, sp) for sp in mine):
            refused.add(id(f))
            continue
        for sp in mine:
            bisect.insort(taken, sp)
    return refused


def _clashes(taken, splice):
    """Whether a splice overlaps one of those taken (sorted, none
    overlapping another): two replacements that share text, or an
    insertion strictly inside a replacement.  Identical splices, and
    insertions at one place, do not."""
    start, end, _ = splice
    i = bisect.bisect_left(taken, (start,))
    near = taken[i - 1:i] if i else []
    j = i
    while j < len(taken) and taken[j][0] < max(end, start + 1):
        near.append(taken[j])
        j += 1
    for other in near:
        if other == splice:
            continue
        s, e, _ = other
        if s == e and start == end:
            continue
        if s == e:
            if start < s < end:
                return True
        elif start == end:
            if s < start < e:
                return True
        elif max(s, start) < min(e, end):
            return True
    return False


def _spliced(source, pieces):
    """source with the pieces (start, end, order, new text, key) made, and
    where each keyed piece's text starts in the result: [(offset, key)].
    Two findings may make one splice (a value that is both a device
    argument and a device key): it is made once."""
    out, pos, length, placed, done = [], 0, 0, [], set()
    for start, end, _, new, key in sorted(pieces, key=lambda p: (p[0], p[2])):
        if (start, end, new) in done:
            continue
        done.add((start, end, new))
        kept = source[pos:start]
        out += (kept, new)
        length += len(kept)
        if key is not None:
            placed.append((length, key))
        length += len(new)
        pos = max(pos, end)
    out.append(source[pos:])
    return "".join(out), placed


def _render(text, tree, findings, kept, refused):
    pieces = []
    for f in kept:
        for s, e, new in _splices(f):
            # A whole line added before another sorts with the statements
            # added, ahead of that line's comments.
            at_line = s == e and new.endswith(("\n", "\r")) and _line_start(text, s)
            pieces.append((s, e, _AFTER if at_line else _SPLICE, new, id(f)))
    commented = [f for f in findings if f.category not in (CHANGE, ADVICE) or id(f) in refused]
    if commented:
        pieces += _comments(text, tree, commented, refused)
    return _spliced(text.text, pieces)


def _line_start(text, offset):
    i = bisect.bisect_left(text.starts, offset)
    return i < len(text.starts) and text.starts[i] == offset


def _comments(text, tree, findings, refused):
    """A comment line per finding above its statement's logical line, each
    once per line and not when the line above says it already."""
    statements = _Statements(tree)
    per_line = {}
    for f in findings:
        stmt_line, stmt_col = statements.innermost(f.line, f.col)
        line = text.logical_start(stmt_line, stmt_col)
        comment = COMMENT + _comment(f, id(f) in refused)
        per_line.setdefault(line, dict.fromkeys(()))[comment] = None
    pieces = []
    for line, comments in per_line.items():
        present = _comments_above(text, line)
        indent, newline = text.indent(line), text.newline(line)
        added = "".join(f"{indent}{c}{newline}" for c in comments if c not in present)
        if added:
            pieces.append((text.starts[line - 1], text.starts[line - 1], _COMMENTS, added, None))
    return pieces


def _comments_above(text, line):
    found = set()
    n = line - 1
    while n >= 1 and text.line(n).lstrip(" \t\f").startswith("#"):
        found.add(text.line(n).strip(" \t\f"))
        n -= 1
    return found


def _comment(f, refused=False):
    result = f"not converted automatically: it becomes {f.result}" if refused else f.result
    text = f"{f.api}: {result}" if f.api not in result else result
    return " ".join(text.split())


class _Statements:
    """The statements of a tree, for the innermost one holding a place:
    each body's statements in order, searched by bisection, level by
    level."""

    _BODIES = ("body", "orelse", "finalbody", "handlers", "cases")

    def __init__(self, tree):
        self.tree = tree
        self._starts = {}

    @staticmethod
    def _start(node):
        decorators = getattr(node, "decorator_list", None)
        line = min([node.lineno] + [d.lineno for d in decorators]) if decorators else \
            node.lineno
        return (line, node.col_offset)

    def _children(self, node):
        out = []
        for name in self._BODIES:
            for child in getattr(node, name, None) or ():
                if isinstance(child, (ast.excepthandler, getattr(ast, "match_case", ()))):
                    out.extend(child.body)
                elif isinstance(child, ast.stmt):
                    out.append(child)
        return sorted(out, key=self._start)

    def innermost(self, line, col):
        """(line, column) where the innermost statement holding the place
        starts (its first decorator's line for a decorated one)."""
        node, found = self.tree, None
        while True:
            key = id(node)
            if key not in self._starts:
                children = self._children(node)
                self._starts[key] = (children, [self._start(c) for c in children])
            children, starts = self._starts[key]
            i = bisect.bisect_right(starts, (line, col)) - 1
            if i < 0:
                break
            child = children[i]
            if (child.end_lineno, child.end_col_offset) < (line, col):
                break
            node, found = child, starts[i]
        if found is None:
            return line, col
        return found
