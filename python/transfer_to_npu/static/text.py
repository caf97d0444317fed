"""Source text by lines, as ``ast`` numbers them, and its positions.

ast gives a node's place as a 1-based line and a column counted in UTF-8
bytes; the text is a str.  ``Text`` turns one into the other in constant
time once a line has been seen (a line of non-ASCII text is measured once),
so that reading every finding of a file stays linear in its size.
"""

import bisect
import io
import re
import tokenize

_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text):
    """The lines of source text, as Python counts them (a form feed or
    other Unicode line break inside a line does not end it)."""
    return _NEWLINE.split(text)


class Text:
    """One file's text: its lines (without their endings), where each
    starts in the text, and each one's ending ('' for a last line with
    none)."""

    def __init__(self, text):
        self.text = text
        self.lines, self.starts, self.endings = [], [0], []
        pos = 0
        for m in _NEWLINE.finditer(text):
            self.lines.append(text[pos:m.start()])
            self.endings.append(m.group())
            pos = m.end()
            self.starts.append(pos)
        self.lines.append(text[pos:])
        self.endings.append("")
        self._columns = {}   # line -> byte offset of each character, for non-ASCII lines
        self._logical = None

    def line(self, n):
        return self.lines[n - 1] if 0 < n <= len(self.lines) else ""

    def char_col(self, n, col):
        """The character column of byte column col of line n."""
        text = self.line(n)
        if text.isascii():
            return col
        offsets = self._columns.get(n)
        if offsets is None:
            offsets, total = [], 0
            for ch in text:
                offsets.append(total)
                total += len(ch.encode("utf-8", "surrogatepass"))
            offsets.append(total)
            self._columns[n] = offsets
        return bisect.bisect_right(offsets, col) - 1

    def index(self, n, col):
        """The offset in the text of byte column col of line n."""
        if n > len(self.lines):
            return len(self.text)
        return self.starts[n - 1] + self.char_col(n, col)

    def segment(self, l1, c1, l2, c2):
        return self.text[self.index(l1, c1):self.index(l2, c2)]

    def newline(self, n):
        """The ending of line n, or, for a last line with none, the text's
        first (so that an added line ends as the others do)."""
        ending = self.endings[n - 1] if 0 < n <= len(self.endings) else ""
        return ending or next((e for e in self.endings if e), "\n")

    def indent(self, n):
        text = self.line(n)
        return text[:len(text) - len(text.lstrip(" \t\f"))]

    def logical_start(self, n, col):
        """The line the logical line that holds column col of line n starts
        on.  It is n when only blanks come before col and no backslash
        joins line n to the one before; otherwise (a statement after ';'
        or ':', or after a string that spans lines) the tokenizer is
        asked."""
        if not self.line(n)[:self.char_col(n, col)].strip(" \t\f") and \
                not self.line(n - 1).endswith("\\"):
            return n
        if self._logical is None:
            self._logical = _logical_starts(self.text)
        i = bisect.bisect_right(self._logical, n) - 1
        return self._logical[i] if i >= 0 else n


_BARE_CR = re.compile(r"\r(?!\n)")


def tokens(text):
    """tokenize's tokens of source text whose lines may end with a bare CR,
    which Python reads as a line end and the tokenizer of some Python
    versions does not: it is given LF in its place, one character for one,
    so that positions stay."""
    return tokenize.generate_tokens(io.StringIO(_BARE_CR.sub("\n", text), newline="").readline)


def _logical_starts(text):
    """The first line of each logical line of the text; [] when it does not
    tokenize."""
    starts, new = [], True
    skip = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        for tok in tokens(text):
            if tok.type == tokenize.NEWLINE:
                new = True
            elif new and tok.type not in skip:
                starts.append(tok.start[0])
                new = False
    except (tokenize.TokenError, SyntaxError):
        return []
    return starts
