"""The book's Verdicts page, written at build time from the claims the notebooks recorded.

Every :func:`robattr.papers.claim` is recorded (metric ``claim``) in its notebook's
results CSV. Before jupyter-book runs, :func:`write` gathers them from
``book/**/*.results.csv`` into ``book/verdicts.md``: one table per paper, in the order of
the book's chapters (:func:`book_order`), with one short row per claim (the claim, its
verdict, each kept reference's verdict, the scale in a few words, a link to the claim in
its notebook; the rule, its numbers and the full scale a click away), and a figure
counting the verdicts per paper (``book/verdicts_counts.png``). Both files are build
outputs, like the executed notebooks.

The notebooks write their claims in plain ASCII ("Thm 2 (000): ||H~_x||_2 <= 2F /
sigma^2", "(kin_auc_SM)"); the page shows them in the reader's language
(:func:`reader_text`): the papers' keys for their codes 000-004, the papers' names for
our metric keys (:func:`metric_name`), and formulas typeset by MathJax (:func:`typeset`),
cut where a narrow column needs it. The module is longer than 600 lines because that
reader's-language layer lives with the only page that needs it.
"""
from __future__ import annotations

import re
from pathlib import Path

from robattr.book.stamps import read_stamps

__all__ = ["PAGE", "FIGURE", "AGAINST", "PAPER_KEYS", "collect", "against", "changed",
           "book_order", "metric_name", "paper_keys", "typeset", "reader_text", "write"]

PAGE = "verdicts.md"
FIGURE = "verdicts_counts.png"
#: the anchor of the section listing the claims that went against the paper
AGAINST = "against-the-paper"
_GROUPS = {"crosspaper": "Across the papers (the cross-paper matrix)",
           "example": "Worked examples"}


def collect(book_dir: Path):
    """Every recorded claim under ``book_dir`` as a DataFrame (one row per claim, with the
    notebook ``key`` and the ``chapter``), in notebook order."""
    import pandas as pd

    from robattr import results

    frames = []
    for csv in sorted(Path(book_dir).rglob("*.results.csv")):
        if "_build" in csv.parts:
            continue
        df = results.read(csv)
        if "metric" not in df or not (df["metric"] == "claim").any():
            continue
        df = df[df["metric"] == "claim"].copy()
        key = csv.relative_to(book_dir).as_posix().removesuffix(".results.csv")
        df["key"], df["chapter"] = key, key.split("/")[0]
        frames.append(df)
    cols = ["chapter", "key", "kind", "text", "verdict", "rule", "scale", "evidence", "anchor",
            "erratum"]
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    for c in cols:
        if c not in out:
            out[c] = ""
    out = out[cols].fillna("")
    out.loc[out["kind"] == "", "kind"] = "claim"      # recorded before kinds existed
    return out


def _reference_verdicts(root: Path) -> dict[str, dict]:
    """Per kept reference: ``{"claims": {(key, text): verdict}, "stale": {key: bool},
    "prov": provenance}``."""
    from robattr import results
    from robattr.book import reference
    from robattr.book.notebooks import discover

    names = reference.profiles(root)
    if not names:
        return {}
    notebooks = discover(root)
    out = {}
    for name in names:
        status = reference.status(root, name, notebooks)
        claims, detail = {}, {}
        for key, state in status.items():
            path = reference.results_file(root, name, key)
            if state == "missing":
                continue
            df = results.read(path)
            if "text" in df and (df["metric"] == "claim").any():
                for _, r in df[df["metric"] == "claim"].iterrows():
                    if str(r.get("kind", "claim")) in ("claim", "", "nan"):
                        claims[(key, r["text"])] = r["verdict"]
                        detail[(key, r["text"])] = (str(r.get("rule", "")),
                                                    str(r.get("scale", "")))
        out[name] = {"claims": claims, "detail": detail, "status": status,
                     "prov": reference.provenance(root, name)}
    return out


def _reference_parts(ref: dict, key: str, text: str, scale: str = "") -> tuple[str, str]:
    """A reference's verdict word on a claim and what lies behind it (its rule and numbers
    and its own scale, or that it ran at this build's settings)."""
    from robattr.papers import _same_scale

    state = ref["status"].get(key, "missing")
    if state == "missing":
        return "no run", ""
    verdict = ref["claims"].get((key, text))
    if not verdict:
        return "not tested", ""
    word = verdict + (" (stale)" if state == "stale" else "")
    rule, where = ref.get("detail", {}).get((key, text), ("", ""))
    if where and scale and _same_scale(where, scale):
        return word, "same settings as this build: the same evidence, not a corroboration"
    return word, "; ".join(p for p in (rule, where) if p)


# --------------------------------------------------------------------------- reader's text
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


_RELATIONS = re.compile(r"(?=(?:\\le|\\ge|\\lt|\\gt|\\ne|\\to|=)(?![A-Za-z]))")


def _math(tex: str) -> str:
    """``tex`` as inline math; a long formula is cut into formulas side by side, so that a
    narrow column can wrap it (MathJax 3 does not break lines): before its top-level
    relations (``\\le``, ``=``, ...), then, in a piece still long, before a binary ``+``
    or ``-`` outside braces (the least nested first)."""
    if len(tex) <= 40:
        return f"${tex}$"

    def cuts(text, at, depth):
        out, brace, paren, start = [], 0, 0, 0
        for k, ch in enumerate(text):
            escaped = text[k - 1:k] == "\\"
            brace += (ch == "{") - (ch == "}") if not escaped else 0
            paren += (ch in "([") - (ch in ")]") if not escaped else 0
            if brace == 0 and paren <= depth and k > start and at(text, k):
                out.append(text[start:k].strip())
                start = k
        return [p for p in out + [text[start:].strip()] if p]

    def relation(text, k):
        return bool(_RELATIONS.match(text, k)) and not text[k - 1:k].isalpha() and \
            text[k - 1:k] != "\\"

    pieces = []
    def binary(text, k):
        return text[k - 1:k + 2] in (" + ", " - ", " / ")

    for piece in cuts(tex, relation, 0):
        if len(piece) <= 45:
            pieces.append(piece)
            continue
        for depth in range(4):                # the outermost operators first
            small = cuts(piece, binary, depth)
            if max(map(len, small)) <= 45:
                break
        cur = ""
        for part in small:                    # join the small parts back up to ~40 chars
            if cur and len(cur) + len(part) > 36:
                pieces.append(cur)
                cur = part
            else:
                cur = f"{cur} {part}".strip()
        pieces.append(cur)
    return " ".join(f"${p}$" for p in pieces if p)


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
    return " ".join(p for p in out if p).replace("\x00", "=")


def reader_text(text: str, chapter: str | None = None) -> str:
    """A claim, rule or scale as the page shows it: paper keys for the papers' codes,
    the papers' names for our metric keys, formulas in MathJax."""
    text = paper_keys(text, chapter)
    text = _METRIC_RE.sub(lambda m: metric_name(m.group(0)), text)
    return typeset(text)


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas that are outside brackets."""
    parts, depth, cur = [], 0, ""
    for k, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0 and text[k + 1:k + 2] == " ":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in parts + [cur.strip()] if p]


def _scale_parts(scale: str) -> list[str]:
    """The parts of a scale line without the profile (the page says which profile ran)."""
    return [p for p in _split_top(str(scale))
            if not p.startswith("profile ") and p != "run outside the pipeline"]


def _short_scale(scale: str) -> str:
    """The scale in a few words: the data, the trained models' test accuracy and the
    number of items (the model and its training budget are with the rule)."""
    parts = _scale_parts(scale)
    if not parts:
        return ""
    head = parts[0]
    if not re.fullmatch(r"[\w-]+ \d+×\d+", head) and len(head) > 40:
        head = re.split(r" \(|:", head)[0]
    out = [head]
    for p in parts[1:]:
        m = re.match(r"test accuracy ([\d.–]+ %)", p)
        if m:
            out.append(f"test accuracy {m.group(1)}")
    if len(parts) > 1 and re.match(r"\d", parts[-1]):
        out.append(parts[-1])
    return " · ".join(out)


def _details(head: str, body: str, summary: str = "numbers") -> str:
    """A table cell with ``body`` a click away (an HTML details element on one line; its
    text is still Markdown, so ``$...$`` is typeset)."""
    if not body:
        return head
    return (f"{head} <details><summary>{summary}</summary>"
            f"{_cell(body).replace('<', '&lt;')}</details>").strip()


def _chapter_title(chapter: str) -> str:
    """A chapter's heading: the paper's first author, its year and its key."""
    from robattr.papers import CITATIONS

    cite = CITATIONS.get(chapter)
    if not cite:
        return _GROUPS.get(chapter, chapter)
    authors = cite.split(". ")[0].split(", ")
    year = re.findall(r"\b(?:19|20)\d\d\b", cite)[-1]
    first = authors[0].split(" ")[-1]
    who = f"{first} et al." if len(authors) > 2 else \
        f"{first} and {authors[1].split(' ')[-1]}" if len(authors) == 2 else first
    return f"{who} ({year}, `{chapter}`)"


def _where(key: str, anchor: str) -> str:
    """A short link to a claim in its notebook (the notebook's name, which may break at
    "_"; the chapter is the section's)."""
    name = key.split("/")[-1].replace("_", "_<wbr>")
    return f'<a href="{key}.html#{anchor}">{name}</a>'


def _chapter_lines(chapter: str, group, refs: dict[str, dict]) -> list[str]:
    """A chapter's section: one short row per claim (the claim, its verdict, each kept
    reference's verdict, the scale in a few words, a link to the notebook), with the rule,
    the numbers and the full scale a click away."""
    from robattr.papers import CITATIONS
    from robattr.verdicts import VERDICTS

    lines = [f"## {_chapter_title(chapter)}", ""]
    if chapter in CITATIONS:
        lines += [f"*{CITATIONS[chapter]}* The chapter: {{doc}}`{chapter} <{chapter}/index>`.",
                  ""]
    ref_heads = "".join(f" {name} ref |" for name in refs)
    lines += [f"| claim | verdict |{ref_heads} scale | where |",
              "|---|---|" + "---|" * len(refs) + "---|---|"]
    for _, r in group.iterrows():
        body = [reader_text(r["rule"], chapter)]
        if str(r["evidence"]).strip():
            body.append(reader_text(str(r["evidence"]).strip(), chapter))
        scale = "; ".join(_scale_parts(r["scale"]))
        if scale:
            body.append(f"Scale: {reader_text(scale, chapter)}.")
        rule = " ".join(b if b.endswith(".") or b is body[-1] else b + "." for b in body)
        ref_cells = "".join(
            f" {_details(_mark(word), reader_text(more, chapter))} |"
            for word, more in (_reference_parts(ref, r["key"], r["text"], r["scale"])
                               for ref in refs.values()))
        claim = _details(_cell(reader_text(r["text"], chapter)), rule, "rule and numbers")
        lines.append(f"| {claim} "
                     f"| {VERDICTS.get(r['verdict'], r['verdict'])} |{ref_cells} "
                     f"{_cell(reader_text(_short_scale(r['scale']), chapter))} | "
                     f"{_where(r['key'], r['anchor'])} |")
    return lines + [""]


def book_order(root: Path, keys) -> list[str]:
    """Notebook keys in the order of the book's table of contents (unknown keys last)."""
    import yaml

    toc = Path(root) / "_toc.yml"
    order: list[str] = []
    if toc.is_file():
        def walk(node):
            if isinstance(node, dict):
                f = node.get("file")
                if isinstance(f, str) and f.startswith("book/"):
                    order.append(f.removeprefix("book/"))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(yaml.safe_load(toc.read_text()))
    rank = {k: i for i, k in enumerate(order)}
    return sorted(dict.fromkeys(keys), key=lambda k: (rank.get(k, len(rank)), k))


def _mark(word: str) -> str:
    """A verdict word as the page shows it (with its mark), keeping a " (stale)"."""
    from robattr.verdicts import VERDICTS

    verdict = word.removesuffix(" (stale)")
    return VERDICTS.get(verdict, verdict) + word[len(verdict):]


def _reference_cell(ref: dict, key: str, text: str, scale: str = "") -> str:
    """The reference's verdict on a claim with its own numbers and scale, in one string."""
    word, more = _reference_parts(ref, key, text, scale)
    return f"{_mark(word)} ({more})" if more else _mark(word)


def _reference_section(refs: dict[str, dict]) -> list[str]:
    lines = ["## Reference runs", "",
             "Kept runs of other profiles (`robattr build --profile NAME --keep-reference`), "
             "committed under `reference/NAME/` and shown beside this build's numbers. "
             "*Stale* means the notebook changed after the run.", "",
             "| reference | notebooks | stale | datasets | commits | devices | dates |",
             "|---|---|---|---|---|---|---|"]
    for name, ref in refs.items():
        prov = ref["prov"]
        kept = [k for k, v in ref["status"].items() if v != "missing"]
        stale = [k for k, v in ref["status"].items() if v == "stale"]
        datasets = sorted({str((e.get("params") or {}).get("dataset")) for e in prov.values()
                           if (e.get("params") or {}).get("dataset")})
        commits = sorted({str(e.get("commit", ""))[:7] for e in prov.values()})
        devices = sorted({str(e.get("device", "")) for e in prov.values()})
        dates = sorted(str(e.get("date", ""))[:10] for e in prov.values())
        span = f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else \
            (dates[0] if dates else "")
        lines.append(f"| {name} | {len(kept)} of {len(ref['status'])} | {len(stale)} | "
                     f"{', '.join(datasets)} | {', '.join(commits)} | "
                     f"{_cell('; '.join(devices))} | {span} |")
    return lines + [""]


def changed(claims, ref: dict) -> list[tuple[str, str, str, str]]:
    """The claims whose verdict in this build differs from the reference's:
    ``(key, text, this build's verdict, the reference's verdict)``; claims the reference
    did not test are left out."""
    out = []
    for _, r in claims.iterrows():
        other = ref["claims"].get((r["key"], r["text"]))
        if other is not None and other != r["verdict"]:
            out.append((r["key"], r["text"], r["verdict"], other))
    return out


def _changed_section(claims, refs: dict[str, dict]) -> list[str]:
    from robattr.verdicts import VERDICTS

    lines = []
    for name, ref in refs.items():
        diff = changed(claims, ref) if not claims.empty else []
        both = sum((r["key"], r["text"]) in ref["claims"] for _, r in claims.iterrows())
        lines += [f"## Where the {name} reference decides otherwise", "",
                  f"{len(diff)} of the {both} claims tested in both this build and the {name} "
                  "reference get a different verdict there.", ""]
        if diff:
            lines += ["| claim | this build | " + f"{name} ref | where |", "|---|---|---|---|"]
            for key, text, here, there in diff:
                lines.append(f"| {_cell(reader_text(text, key.split('/')[0]))} | "
                             f"{VERDICTS.get(here, here)} | "
                             f"{VERDICTS.get(there, there)} | {{doc}}`{key}` |")
            lines.append("")
    return lines


def against(claims, refs: dict[str, dict],
            others=()) -> list[tuple[str, str, str, dict[str, str]]]:
    """The claims that **do not hold** in this build or in a kept reference that is not
    stale: ``(key, text, this build's verdict or "", {reference: verdict})``, in this
    build's order, then the references' own (claims this build did not record).
    ``others`` are ``(key, text)`` pairs this build records as checks or demonstrations,
    which a reference made before kinds existed recorded as claims: they are left out."""
    seen, out = set(others), []

    def row(key, text, here):
        there = {name: ref["claims"][(key, text)] for name, ref in refs.items()
                 if (key, text) in ref["claims"] and ref["status"].get(key) == "fresh"}
        if "does not hold" in (here, *there.values()):
            out.append((key, text, here, there))
        seen.add((key, text))

    for _, r in claims.iterrows():
        row(r["key"], r["text"], r["verdict"])
    for ref in refs.values():
        for key, text in ref["claims"]:
            if (key, text) not in seen:
                row(key, text, "")
    return out


def _against_section(claims, refs: dict[str, dict], others=()) -> list[str]:
    from robattr.verdicts import VERDICTS

    rows = against(claims, refs, others)
    names = list(refs)
    lines = [f"({AGAINST})=", "## Where a run goes against the paper", "",
             "The claims that do not hold in this build, or in a kept reference run that is "
             "not stale"
             + (f" ({', '.join(names)})" if names else "") + ". Each is a verdict at the scale "
             "shown on its claim line, which a run at another scale may reverse. The "
             "statements that are wrong as printed are not here: they are the errata, shown "
             "by the counterexamples listed below.", ""]
    if not rows:
        return lines + ["None.", ""]
    lines += [f"{len(rows)} claims.", "",
              "| claim | this build |" + "".join(f" {n} ref |" for n in names) + " where |",
              "|---|---|" + "---|" * len(names) + "---|"]
    for key, text, here, there in rows:
        cells = "".join(f" {VERDICTS.get(there[n], there[n]) if n in there else '—'} |"
                        for n in names)
        lines.append(f"| {_cell(reader_text(text, key.split('/')[0]))} | "
                     f"{VERDICTS.get(here, here) if here else 'not run'} |"
                     f"{cells} {{doc}}`{key}` |")
    return lines + [""]


def _apart_section(checks, demos) -> list[str]:
    """Checks of our arithmetic and demonstrations of errata: listed, never tallied."""
    lines = ["(checks-and-demonstrations)=", "## Checks and demonstrations (not counted)", ""]
    lines += [f"**Checks of our own arithmetic.** {len(checks)} passed in this build (a check "
              "that fails stops its notebook)." if len(checks) else
              "**Checks of our own arithmetic.** None in this build.", ""]
    if len(checks):
        lines += ["| check | rule and numbers | where |", "|---|---|---|"]
        for _, r in checks.iterrows():
            link = f"{_where(r['key'], r['anchor'])} ({r['chapter']})"
            lines.append(f"| {_cell(reader_text(r['text'], r['chapter']))} | "
                         f"{_cell(reader_text(r['rule'], r['chapter']))} | {link} |")
        lines.append("")
    lines += [f"**Errata shown by a built counterexample.** {len(demos)} in this build; each "
              "links to its entry on the {doc}`errata page <errata>`." if len(demos) else
              "**Errata shown by a built counterexample.** None in this build.", ""]
    if len(demos):
        lines += ["| statement as printed | the counterexample | erratum | where |",
                  "|---|---|---|---|"]
        for _, r in demos.iterrows():
            link = f"{_where(r['key'], r['anchor'])} ({r['chapter']})"
            lines.append(f"| {_cell(reader_text(r['text'], r['chapter']))} | "
                         f"{_cell(reader_text(r['rule'], r['chapter']))} | "
                         f"{{ref}}`{r['erratum']}` | {link} |")
        lines.append("")
    return lines


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _figure(claims, path: Path) -> None:
    import seaborn as sns
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from robattr.verdicts import VERDICTS
    from robattr.viz import VERDICT_COLORS, theme

    order = [c for c in dict.fromkeys(claims["chapter"])]
    with theme():
        fig = Figure(figsize=(1.3 * len(order) + 3, 3.2))
        ax = fig.subplots()
        sns.countplot(data=claims, x="chapter", hue="verdict", order=order,
                      hue_order=[v for v in VERDICTS if v in set(claims["verdict"])],
                      palette=VERDICT_COLORS, ax=ax)
        ax.set_xlabel("chapter")
        ax.set_ylabel("claims")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title("Verdicts per chapter in this build")
        ax.legend(title="verdict", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        fig.tight_layout()
        fig.savefig(path, dpi=110)


def write(root: Path, log=print) -> Path:
    """Write ``book/verdicts.md`` (and its figure) from the recorded claims."""
    from robattr.verdicts import VERDICTS

    book_dir = Path(root) / "book"
    everything = collect(book_dir)
    if not everything.empty:
        rank = {k: i for i, k in enumerate(book_order(root, everything["key"]))}
        everything = everything.sort_values("key", key=lambda c: c.map(rank), kind="stable")
    claims = everything[everything["kind"] == "claim"]
    checks = everything[everything["kind"] == "check"]
    demos = everything[everything["kind"] == "demonstration"]
    others = {(r["key"], r["text"]) for _, r in everything.iterrows() if r["kind"] != "claim"}
    stamps = read_stamps(book_dir)
    refs = _reference_verdicts(Path(root))
    profiles = sorted({m.group(1) for s in everything["scale"]
                       for m in [re.search(r"profile (\S+)$", str(s))] if m})
    ran = (f"This build ran the `{profiles[0]}` profile and " if len(profiles) == 1 else
           f"This build ran the profiles {', '.join(f'`{p}`' for p in profiles)} and "
           if profiles else "This build ")
    lines = [
        "(verdicts)=",
        "# Verdicts",
        "",
        "Where each paper stands in this build: every claim of a paper that the notebooks",
        "test, as this build decided it, in the order of the book's chapters. A verdict is",
        "never written by hand: a rule in `robattr.verdicts` computes it from the run's",
        "numbers and their uncertainty (a bootstrap interval over images, a Wilson interval",
        "over cases, or a count of violations). *Inconclusive* means that the effect is",
        "within that noise, or that the attack moved the maps no more than random noise of",
        "the same size does.",
        "",
        "Each claim takes one row: the claim, its verdict, what each kept reference run",
        "found, the scale it was decided at (the data, the trained models' test accuracy,",
        "the number of items) and where the claim is in its notebook. A verdict on 8×8",
        "digits is a verdict on 8×8 digits. Open *rule and numbers* under a claim for the",
        "rule and the numbers behind its verdict and the full scale (models and training",
        "budget), and *numbers* under a reference's verdict for what that run measured.",
        "",
        "Only the papers' own claims are counted here. The notebooks also run checks of our",
        "own arithmetic (identities, round trips, the book's corrected forms: a failure is a",
        "bug, and the build stops on it) and counterexamples built to show an erratum; both",
        "are listed apart at the end of the page.",
        "",
    ]
    if claims.empty:
        lines += ["No notebook of this build has recorded a claim yet.", ""]
    else:
        _figure(claims, book_dir / FIGURE)
        counts = claims["verdict"].value_counts()
        summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
        lines += [f"{ran}recorded {len(claims)} claims: {summary}.", "",
                  f"![Verdicts per chapter]({FIGURE})", ""]
        for chapter, group in claims.groupby("chapter", sort=False):
            lines += _chapter_lines(chapter, group, refs)
    lines += _against_section(claims, refs, others)
    lines += _apart_section(checks, demos)
    if refs:
        lines += _reference_section(refs)
        lines += _changed_section(claims, refs)
    timed = {k: v.get("seconds") for k, v in stamps.items() if v.get("seconds") is not None}
    if timed:
        lines += ["## Run time of each notebook", "",
                  "Seconds of the last successful run of each page in this book folder, and "
                  "the profile it ran in.", "",
                  "| notebook | seconds | profile |", "|---|---|---|"]
        for key in sorted(timed):
            lines.append(f"| {{doc}}`{key}` | {timed[key]:.0f} | "
                         f"{stamps[key].get('profile', '')} |")
        lines.append("")
    page = book_dir / PAGE
    page.write_text("\n".join(lines))
    log(f"verdicts page: {len(claims)} claims")
    return page
