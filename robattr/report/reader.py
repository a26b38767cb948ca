"""The reader's language: how a claim, rule or scale written in a notebook in plain ASCII
("Thm 2 (000): ||H~_x||_2 <= 2F / sigma^2", "(kin_auc_SM)") is shown to a reader
(:func:`reader_text`): the papers' keys for their codes 000-004 (:func:`paper_keys`), the
papers' names for our metric keys (:func:`metric_name`), and formulas typeset by MathJax
(:func:`typeset`), cut where a narrow column needs it. :func:`robattr.report.papers.claim` shows
its line this way in the notebook, and the Verdicts page (robattr.book.verdicts_page) in
its table; the recorded text stays the ASCII one."""
from __future__ import annotations

import re

__all__ = ["PAPER_KEYS", "metric_name", "paper_keys", "typeset", "reader_text"]

# The claim lines are written in the notebooks in plain ASCII ("lambda <= 2L / ||x - x*||",
# "Prop 3 (000)", "(kin_auc_SM)"). The page shows them in the reader's language: paper keys
# for the papers' codes, the papers' names for our metric keys, formulas typeset by MathJax.

#: the papers' codes (the order of /shared/papers) and the book's keys for them
PAPER_KEYS = {"000": "wang2020", "001": "wangkong2023", "002": "wangkong2025",
              "003": "joo2023", "004": "lim2021"}

_METHODS = r"[A-Z][A-Za-z0-9]*"
#: our evaluation keys (robattr.chapters.crosspaper.evaluations) and the papers' names for
#: them; ``{m}`` is the attribution method, ``{n}`` the norm
_METRIC_PATTERNS = [
    (rf"kin_auc_clean_(?P<m>{_METHODS})", "top-k intersection of {m} without an attack, "
                                          "as an area over the budgets"),
    (rf"kin_auc_(?P<m>{_METHODS})", "top-k intersection of {m} under attack, "
                                    "as an area over the budgets"),
    (rf"spearman_auc_(?P<m>{_METHODS})", "Spearman's rank correlation of {m} under attack, "
                                         "as an area over the budgets"),
    (rf"rps_(?P<m>{_METHODS})", "random perturbation similarity (RPS) of {m}"),
    (rf"advins_(?P<m>{_METHODS})", "Adv-Insertion of {m}"),
    (rf"ins_(?P<m>{_METHODS})", "Insertion of {m}"),
    (rf"retrieval_(?P<m>{_METHODS})", "class retrieval rate of {m}"),
    (r"R_(?P<m>SimGrad|SmoothGrad|IntGrad|RelEx|GradCAM|DeepLIFT|MASK)",
     "feature relevance R of {m}"),
    (r"T_c_deg_(?P<n>l2|linf)", "the angle bound T_c in degrees ({n})"),
    (r"dev_over_Te_(?P<n>l2|linf)", "the attacked deviation over T_e ({n})"),
    (r"frac_above_Te_(?P<n>l2|linf)", "the share of inputs whose deviation exceeds T_e ({n})"),
    (r"angle_deg_(?P<n>l2|linf)", "the attacked angle in degrees ({n})"),
    (r"dev_(?P<n>l2|linf)", "the attacked deviation ({n})"),
    (r"T_e_(?P<n>l2|linf)", "the bound T_e ({n})"),
    (r"eps_cert_mean", "the mean certified budget ε"),
    (r"eps_cert_min", "the smallest certified budget ε"),
    (r"cos_attack_mean", "the mean cosine after the attack"),
    (r"cos_attack_min", "the smallest cosine after the attack"),
    (r"frac_certified", "the share of inputs certified at the attack's budget"),
    (r"cert_violations", "the certified inputs an attack pushed below T"),
    (r"h_unit_norm", "the mean norm of the smoothed map"),
]
_NORM_WORDS = {"l2": "ℓ₂", "linf": "ℓ∞"}


def metric_name(key: str) -> str:
    """The paper's name for one of our evaluation keys (``kin_auc_SM`` -> "top-k
    intersection of SM under attack, as an area over the budgets"); an unknown key is
    returned as it is."""
    for pattern, name in _METRIC_PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            parts = m.groupdict()
            if "n" in parts:
                parts["n"] = _NORM_WORDS[parts["n"]]
            return name.format(**parts)
    return key


_METRIC_RE = re.compile(r"(?<![\w.])(?:" + "|".join(re.sub(r"\?P<\w+>", "", p)
                                                    for p, _ in _METRIC_PATTERNS) + r")(?!\w)")
_CODE_RE = re.compile(r"(?<![\w.])(00[0-4])(?![\w]|\.\d)")


def paper_keys(text: str, chapter: str | None = None) -> str:
    """The papers' codes 000-004 as the book's keys; in the chapter of that paper, a
    parenthesised "(key)" or "(key, ..." after a statement's name is dropped."""
    out = _CODE_RE.sub(lambda m: PAPER_KEYS[m.group(1)], str(text))
    if chapter in PAPER_KEYS.values():
        out = re.sub(rf" \({chapter}\)", "", out)
        out = re.sub(rf"\({chapter}, ", "(", out)
    return out


_GREEK = {"alpha": r"\alpha", "beta": r"\beta", "gamma": r"\gamma", "delta": r"\delta",
          "eps": r"\varepsilon", "epsilon": r"\varepsilon", "eta": r"\eta",
          "theta": r"\theta", "lambda": r"\lambda", "mu": r"\mu", "xi": r"\xi", "pi": r"\pi",
          "rho": r"\rho", "sigma": r"\sigma", "tau": r"\tau", "phi": r"\varphi",
          "omega": r"\omega", "kappa": r"\kappa", "Gamma": r"\Gamma", "Delta": r"\Delta",
          "Sigma": r"\Sigma", "Omega": r"\Omega"}
_FUNCS = {"sqrt": r"\sqrt", "sum": r"\sum", "grad": r"\nabla", "max": r"\max",
          "min": r"\min", "cos": r"\cos", "sin": r"\sin", "arcsin": r"\arcsin",
          "arccos": r"\arccos", "log": r"\log", "exp": r"\exp", "sign": r"\operatorname{sign}",
          "diag": r"\operatorname{diag}", "tr": r"\operatorname{tr}", "tanh": r"\tanh"}
#: subscripts set upright
_UPRIGHT = {"max": r"\max", "min": r"\min", "adv": r"\mathrm{adv}", "lo": r"\mathrm{lo}",
            "hi": r"\mathrm{hi}", "ref": r"\mathrm{ref}", "cert": r"\mathrm{cert}",
            "mean": r"\mathrm{mean}", "inf": r"\infty", "F": "F"}
_UNICODE_MATH = {"Γcos": r"\Gamma^{\cos}", "Γl2": r"\Gamma^{\ell_2}", "‖": r"\Vert ",
                 "≤": r"\le ", "≥": r"\ge ", "⟨": r"\langle ", "⟩": r"\rangle ",
                 "²": "^2", "−": "-", "±": r"\pm ", "×": r"\times ", "⊙": r"\odot "}
_OPS = {"-", "+", "/", "=", "<=", ">=", "<", ">", "!=", "*", "×", "±", "->", "−", "≤", "≥",
        "=>"}
_MATH_CHARS = set("_^|~<>=") | set("‖≤≥⟨⟩²")
_PROSE_LETTERS = {"a", "A", "I"}


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?%?", tok))


def _is_var(tok: str) -> bool:
    """A single letter, or a short product of a number and letters ("2L", "x1", "e2")."""
    return bool(re.fullmatch(r"[A-Za-z]|\d+[A-Za-z]|[A-Za-z]\d", tok)) and \
        tok not in {"l1", "l2"}


def _kind(tok: str) -> str:
    """``math``, ``op``, ``neutral`` (a letter or a number: math only beside math) or
    ``word``, for one whitespace-separated token stripped of its outer punctuation."""
    core = tok.strip("()[],;:.").lstrip("+-±−") if tok not in _OPS else tok
    if tok in _OPS:
        return "op"
    if tok.rstrip(",;:") in ("...", "…"):
        return "neutral"
    if not core:
        return "word"
    if re.fullmatch(r"\([A-Za-z]\)[,.;:]?", tok):          # a panel: "(b)"
        return "word"
    if core in _GREEK or core in _FUNCS or core in ("Γcos", "Γl2") or \
            (core[:-1] in _GREEK and core[-1:].isdigit()):
        return "math"
    name = re.search(r"(?<![A-Za-z0-9])([a-z][a-z0-9]+)_[a-z0-9]{3,}", core)
    if name and len(name.group(1)) >= 2 and \
            re.sub(r"\d$", "", name.group(1)) not in {*_GREEK, *_FUNCS}:
        return "word"                     # a name of ours: "ig_norm", "wang2020/table2_attacks"
    if any(c in _MATH_CHARS for c in core) or re.search(r"\|\|", core):
        # not code, not a path, not our own dotted names
        return "word" if re.search(r"[`]|\.[a-z]", core) else "math"
    if re.search(r"(?<![A-Za-z])[A-Za-z]\(|(?<![A-Za-z])(" + "|".join([*_FUNCS, *_GREEK]) +
                 r")\(", core):
        return "math"                                   # f(x), B(x, sqrt(
    if "/" in core and core not in ("w/o", "and/or"):
        pieces = re.split(r"/", core.strip("()"))
        if all(_is_number(p.strip("()")) or _is_var(p.strip("()")) or p.strip("()") in _GREEK or
               any(c in "+-*^_()" for c in p) for p in pieces if p):
            return "math"
        return "word"
    if "*" in core and re.fullmatch(r"[A-Za-z0-9]+\*", core):
        return "math"                                   # x*
    if _is_number(core) or _is_var(core) or core in ("...", "…") or \
            re.fullmatch(r"[αβγδεηθκλμξπρστφωΓΔΣΩ]", core):
        return "neutral"
    return "word"


def _balance(s: str) -> int:
    return s.count("(") - s.count(")") + s.count("{") - s.count("}")


#: words after which a letter or a letter-digit pair names a part of the paper, not a variable
_REFERENCE_WORD = re.compile(r"\(?(Appendix|Appendices|Table|Tables|Fig\.|Figs\.|Figure|Eq\.|Eqs\.|"
                             r"Section|Sec\.|Thm|Theorem|Lemma|Prop|Proposition|Cor\.?|"
                             r"Corollary|Definition|Part|part|panel)$")


def _spans(tokens: list[str]) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of the tokens that form formulas."""
    n = len(tokens)
    kinds = [_kind(t) for t in tokens]
    cores = [t.strip("()[],;:.") for t in tokens]

    def mathy(i):
        if kinds[i] in ("math", "op"):
            return True
        if kinds[i] != "neutral" or (i > 0 and _REFERENCE_WORD.match(tokens[i - 1])):
            return False
        if cores[i] in _PROSE_LETTERS:        # "a" is a variable only beside an operator
            return (i + 1 < n and kinds[i + 1] == "op") or (
                i > 0 and kinds[i - 1] == "op" and (i + 1 == n or kinds[i + 1] != "word"))
        return True

    def lone(i):
        c = cores[i]
        return bool(re.fullmatch(r"[A-Za-z]|[a-z]\d", c)) and c not in _PROSE_LETTERS

    spans, i = [], 0
    while i < n:
        if not mathy(i):
            i += 1
            continue
        j, depth = i, 0
        while j < n:
            if j > i and depth <= 0 and tokens[j].startswith("(") and \
                    tokens[j - 1].endswith(")") and kinds[j - 1] != "op":
                break                         # "h(x) (cos theta = 0)": a parenthesis after
            if j > i and depth <= 0:
                prev = tokens[j - 1]
                if not mathy(j) or re.search(r"[,;:]$", prev) or \
                        (prev.endswith(".") and not _is_number(prev.rstrip("."))):
                    break
                if kinds[j] == "neutral" and kinds[j - 1] == "neutral" and not (
                        _is_number(cores[j - 1]) and lone(j)):
                    break                     # "at eps 0.07", "c 2": two names in a row
                if kinds[j] == "neutral" and _is_number(cores[j]) and kinds[j - 1] != "op":
                    break
                if tokens[j].startswith("(") and kinds[j - 1] == "neutral" and \
                        _is_number(cores[j - 1]):
                    break                     # "0.1 (...)": a value and its note
            if j > i and not mathy(j):
                break                         # a word ends a formula, even in brackets
            depth += _balance(tokens[j])
            j += 1
            if depth < 0:                     # "so b - a) = ...": the sentence's bracket
                break
        a, b = i, j
        if b - a > 1 and re.fullmatch(r"\d{2,}", cores[a]) and kinds[a + 1] != "op":
            a += 1                            # "in 201 P = ...": a count, not a coefficient
        while a < b and kinds[a] == "op":
            a += 1
        while b > a and kinds[b - 1] == "op":
            b -= 1
        run = range(a, b)
        if b > a and (any(kinds[k] in ("math", "op") for k in run) or
                      (b - a == 1 and lone(a))):
            spans.append((a, b))
        i = max(j, i + 1)
    merged = []
    for a, b in spans:                        # "m x": two names side by side, one formula
        if merged and merged[-1][1] == a and b == a + 1 and merged[-1][0] == a - 1 and \
                lone(a) and lone(a - 1) and not re.search(r"[,;:.]$", tokens[a - 1]):
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _group(s: str, start: int) -> int:
    """The index just past the bracket group that opens at ``s[start]``."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    close, depth = pairs[s[start]], 0
    for k in range(start, len(s)):
        if s[k] == s[start]:
            depth += 1
        elif s[k] == close:
            depth -= 1
            if depth == 0:
                return k + 1
    return len(s)


def _tex(s: str) -> str:
    """One ASCII formula as TeX, with no "|" left (a table cell would split on it)."""
    for k, v in _UNICODE_MATH.items():
        s = s.replace(k, v)
    s = re.sub(r"(\d(?:\.\d+)?)e-0*(\d+)", r"\1 \\cdot 10^{-\2}", s)
    s = s.replace("%", r"\%").replace("...", r"\dots ").replace("…", r"\dots ")
    # norms and absolute values
    s = s.replace("||", r" \Vert ").replace("|", r" \vert ")
    for a, b in (("<=", r" \le "), (">=", r" \ge "), ("!=", r" \ne "), ("+-", r"\pm "),
                 ("->", r" \to "), ("=>", r" \Rightarrow ")):
        s = s.replace(a, b)
    s = s.replace("<", r" \lt ").replace(">", r" \gt ")      # no "<" for an HTML cell
    s = re.sub(r"(?<=\s)\*(?=\s)", r"\\odot", s)
    s = re.sub(r"(?<=[A-Za-z0-9)])\*", r"^*", s)
    # square roots and braced powers need their bracket groups; a converted group waits
    # behind a marker so that the names of the rest are converted once
    done: list[str] = []

    def keep(tex: str) -> str:
        done.append(tex)
        return f"\x01{len(done) - 1}\x01"

    out, k = "", 0
    while k < len(s):
        if s.startswith("_(", k):
            end = _group(s, k + 1)
            out += keep("_{" + _tex(s[k + 2:end - 1]) + "}")
            k = end
        elif s.startswith("sqrt(", k):
            end = _group(s, k + 4)
            out += keep(r"\sqrt{" + _tex(s[k + 5:end - 1]) + "}")
            k = end
        elif s.startswith("^(", k):
            end = _group(s, k + 1)
            inner = s[k + 2:end - 1]
            if re.fullmatch(r"[A-Za-z]", inner):         # h^(x): a hat, then the argument
                out += "^" + "\x02" + "(" + inner + ")"
            else:
                out += keep("^{" + _tex(inner) + "}")
            k = end
        else:
            out += s[k]
            k += 1
    s = out
    s = re.sub(r"([A-Za-z])\^\x02", r"\\hat{\1}", s)
    s = re.sub(r"([A-Za-z])\^(?=\s*\\Vert|\s*$|\s*\))", r"\\hat{\1}", s)     # h^ alone
    s = re.sub(r"\^T(?![A-Za-z])", r"^\\top ", s)
    s = re.sub(r"(?<![A-Za-z0-9])_inf(?![A-Za-z])", r"_\\infty ", s)
    s = _tex_inner(s)
    while "\x01" in s:
        s = re.sub("\x01(\\d+)\x01", lambda m: done[int(m.group(1))], s)
    return re.sub(r"\s+", " ", s).strip()


def _tex_inner(s: str) -> str:
    """Names, subscripts and tildes of an ASCII formula (brackets already handled)."""
    def ident(m):
        base, prime, tilde, subs = m.group(1), m.group(2), m.group(3), m.group(4)
        if base in _GREEK:
            head = _GREEK[base]
        elif base[:-1] in _GREEK and base[-1].isdigit():          # lambda1
            head = _GREEK[base[:-1]] + "_" + base[-1]
        elif base in _FUNCS:
            head = _FUNCS[base]
        elif base == "l" and subs:                      # l_p, l_inf, l_2: a norm's name
            head = r"\ell"
        elif len(base) >= 3 and base.isalpha() and base.islower():
            head = r"\text{" + base + "}"
        elif base in ("l1", "l2"):
            head = r"\ell_" + base[1]
        elif re.fullmatch(r"[a-z]\d", base) and not subs:     # x1, e2
            head = base[0] + "_" + base[1]
        else:
            head = base
        if tilde:
            head = r"\tilde{" + head + "}"
        head += prime
        if subs:
            parts = [p for p in subs.split("_") if p]
            conv = [_UPRIGHT.get(p, _GREEK.get(p, p if (len(p) <= 2 and not p.isupper()) or
                                              len(p) == 1 or not p.isalpha()
                                              else r"\mathrm{" + p + "}")) for p in parts]
            head += "_{" + ",".join(conv) + "}"
        return head + (" " if re.match(r"\\[A-Za-z]+$", head) else "")

    s = re.sub(r"(?<![\\A-Za-z])([A-Za-z]+\d?)('?)(~?)((?:_(?:\{[^}]*\}|[A-Za-z0-9]+(?:\.\d+)?))*)",
               lambda m: ident(m) if not m.group(4).startswith("_{") else
               (_ident_braced(m, ident)), s)
    s = re.sub(r"\s+", " ", s).strip()
    return s


def _ident_braced(m, ident):
    """``I_{...}``: a subscript the text already braces, converted inside."""
    base = m.group(1)
    head = _GREEK.get(base, _FUNCS.get(base, base))
    rest = m.group(4)
    inner = rest[2:rest.index("}")]
    return head + "_{" + _tex(inner) + "}" + rest[rest.index("}") + 1:]


def _math(tex: str) -> str:
    """``tex`` as one inline formula, however long: a formula cut into pieces side by side
    reads as two formulas (and a cut inside parentheses leaves both halves unbalanced), so
    a long one widens its table column instead (the book's stylesheet wraps the words
    around it)."""
    return f"${tex}$"


#: Two formulas side by side with only spaces between them: ``$a$ $= b$``.
_ADJACENT = re.compile(r"(?<=[^\s$])\$( +)\$(?=[^\s$])")


def _join_adjacent(text: str) -> str:
    """``$a$ $= b$`` -> ``$a = b$``: formulas that the token grouping set apart although
    nothing but spaces separates them are one formula to a reader."""
    return _ADJACENT.sub(" ", text)


def _outer(chunk: str) -> tuple[str, str, str]:
    """``chunk`` split into the sentence's punctuation and brackets around a formula and
    the formula itself: unmatched brackets at either end belong to the sentence."""
    m = re.search(r"[.,;:]*$", chunk)
    core, trail = chunk[:m.start()], m.group(0)
    stack, unmatched_close = [], []
    for k, ch in enumerate(core):
        if ch in "([":
            stack.append(k)
        elif ch in ")]":
            if stack:
                stack.pop()
            else:
                unmatched_close.append(k)
    lead_n = 0
    while lead_n < len(core) and lead_n in stack:
        lead_n += 1
    end = len(core)
    while unmatched_close and unmatched_close[-1] == end - 1:
        unmatched_close.pop()
        end -= 1
    lead, trail = core[:lead_n], core[end:] + trail
    core = core[lead_n:end]
    m = re.search(r"[.,;:]*$", core)
    return lead, core[:m.start()], m.group(0) + trail


def typeset(text: str) -> str:
    """A sentence with its ASCII formulas set as MathJax (``$...$``); text that already
    holds ``$`` is left as it is, and so are code spans. Bare norm names become ℓ₂, ℓ₁,
    ℓ∞ ("l2+Cosd" -> "ℓ₂+Cosd")."""
    text = str(text)
    if "$" in text:
        return text
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) > 1:
            out.append(p)
            continue
        out.append(_typeset_prose(p))
    return "".join(out)


def _typeset_prose(text: str) -> str:
    # a rule's result ("mean a − b = 0.02, 95 % bootstrap interval") is no formula
    text = re.sub(r" = (?=-?[\d.]+(?:e-?\d+)?, \d+ % )", " \x00 ", text)
    text = re.sub(r"(?<![\w\\])l-?inf(?![\w])", "ℓ∞", text)
    text = re.sub(r"(?<![\w\\])l1(?![\w])", "ℓ₁", text)
    text = re.sub(r"(?<![\w\\])l2(?![\w])", "ℓ₂", text)
    text = re.sub(r"(?<![\w.])([A-Za-z]) x ([A-Za-z])(?![\w])", r"\1 × \2", text)
    text = re.sub(r"(?<=[A-Za-z]{3}) x (?=[A-Za-z]{3})", " × ", text)
    text = re.sub(r"(?<![\w.])x (?=[A-Z]{2})", "× ", text)
    text = text.replace(" -> ", " → ")
    tokens = text.split(" ")
    spans = _spans(tokens)
    if not spans:
        return text.replace("\x00", "=")
    out, last = [], 0
    for i, j in spans:
        out.append(" ".join(tokens[last:i]))
        chunk = " ".join(tokens[i:j])
        lead, core, trail = _outer(chunk)
        out.append(f"{lead}{_math(_tex(core))}{trail}" if core else chunk)
        last = j
    out.append(" ".join(tokens[last:]))
    return _join_adjacent(" ".join(p for p in out if p)).replace("\x00", "=")


def reader_text(text: str, chapter: str | None = None) -> str:
    """A claim, rule or scale as the page shows it: paper keys for the papers' codes,
    the papers' names for our metric keys, formulas in MathJax."""
    text = paper_keys(text, chapter)
    text = _METRIC_RE.sub(lambda m: metric_name(m.group(0)), text)
    return typeset(text)
