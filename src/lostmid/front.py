"""The report's first screen: what the run found, in sentences, before any run spec or graph.

docs/findings.md's questions and answers where the run has the page (each ``## `` section: its heading
and its first paragraph of prose); otherwise the run's headline (lostmid.pages.evidence.headline: one
line per claim family). Written as an HTML fragment that workflow/report/workflow.rst includes first.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

FINDINGS = "docs/findings.md"


def inline(markdown: str) -> str:
    """One line of markdown as HTML: escaped, with its bold, code and links (their text kept)."""
    text = html.escape(markdown, quote=False)
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _prose(paragraph: list[str]) -> bool:
    """A paragraph of sentences, not a figure, table, list, quote, comment or heading."""
    return bool(paragraph) and not paragraph[0].lstrip().startswith(("!", "|", "<", ">", "#", "-", "*", "```"))


def findings_sentences(markdown: str) -> list[tuple[str, str]]:
    """``[(question, answer)]``: each ``## `` section's heading and its first paragraph of prose."""
    found = []
    for section in re.split(r"^## ", markdown, flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        paragraphs = [[line for line in p.splitlines() if line.strip()] for p in re.split(r"\n\s*\n", body)]
        answer = next((" ".join(line.strip() for line in p) for p in paragraphs if _prose(p)), "")
        found.append((heading.strip(), answer))
    return found


def findings_figures(markdown: str, folder: Path) -> list[Path]:
    """The images the findings page shows (``![...](path)``, relative to its ``folder``) that exist."""
    paths = [folder / path for path in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", markdown)]
    return [path for path in paths if path.suffix == ".png" and path.exists()]


def image(path: Path, width: str) -> str:
    """A PNG as an <img> that carries its bytes (the report is one file), ``width`` of the text's."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(Path(path).stem)}" style="width:{width}">'


def endpoint_table(markdown: str) -> str:
    """The findings page's first Markdown table (its endpoints: estimate, interval, level, p, units, outcome) as an
    HTML table; "" where the page has none."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    if len(lines) < 2:  # a header and its rule at least
        return ""

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    head = "".join(f"<th>{inline(c)}</th>" for c in cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in cells(line)) + "</tr>" for line in lines[2:])
    return f'<table class="endpoints"><tr>{head}</tr>{body}</table>'


def run_headline(evidence: pd.DataFrame) -> str:
    """The run's evidence headline (lostmid.pages.evidence.headline) as an HTML list."""
    from lostmid.pages.evidence import headline

    items = [line.removeprefix("- ") for line in headline(evidence).splitlines() if line.strip()]
    return "<ul>" + "".join(f"<li>{inline(item)}</li>" for item in items) + "</ul>"


# The first screen (1280 x 800, the report's viewer a frame of about 950 px beside its menu): the answers on the
# left, the headline figure and the endpoint table on the right; the other figures below.
SCREEN_STYLE = (
    "<style>#findings .screen{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}"
    "#findings .answers{flex:1 1 380px;font-size:13px}#findings .answers dd{margin:0 0 .4em 1em}"
    "#findings code::before,#findings code::after{content:none}"  # the report's style puts backticks around code
    "#findings .run{font-size:11px;margin-top:.6em}"
    "#findings .headline{flex:1 1 440px}#findings .headline img{width:100%}"
    "#findings table.endpoints{border-collapse:collapse;font-size:11px}"
    "#findings table.endpoints td,#findings table.endpoints th{border:1px solid #ccc;padding:1px 4px}</style>"
)


def front_html(
    evidence: pd.DataFrame | None,
    findings: str | None,
    stamp: str | None = None,
    figures: list[Path] = (),
    headline: Path | None = None,
) -> str:
    """The first screen's fragment: the findings' sentences if ``findings`` (the page's text) has any, else the
    headline of ``evidence`` (the run's evidence table); beside them ``headline`` (a PNG: accuracy by position)
    over the findings' endpoint table; then ``figures`` (PNG files: the findings' at nearly the text's width, else
    two abreast); ``stamp``: where the run came from."""
    sentences = findings_sentences(findings) if findings else []
    if sentences:
        source = f"The study's answers, from {FINDINGS} (its run record's, not necessarily this run's)."
        body = "<dl>" + "".join(f"<dt><b>{inline(q)}</b></dt><dd>{inline(a)}</dd>" for q, a in sentences) + "</dl>"
        if evidence is not None:  # this run's own outcome beside the study's: its arms and seeds are not the study's
            body += (
                '<div class="run"><b>This run\'s own verdicts</b> (its evidence table, one line per claim family; '
                "where they differ from the answers above, the study's planned run is the answer)"
                + run_headline(evidence)
                + "</div>"
            )
    elif evidence is not None:
        source = (
            f"{FINDINGS} is not in this run: the run's headline, one line per claim family "
            "(its rows counted by verdict; <code>lostmid results-page --headline</code>)."
        )
        body = run_headline(evidence)
    else:
        source, body = "This run has neither findings nor an evidence table.", ""
    made = "<p><small>" + "<br>".join(inline(line) for line in stamp.splitlines()) + "</small></p>" if stamp else ""
    side = (image(headline, "100%") if headline else "") + (endpoint_table(findings) if sentences else "")
    screen = f'<div class="screen"><div class="answers">{body}</div>'
    screen += f'<div class="headline">{side}</div></div>' if side else "</div>"
    width = "90%" if sentences else "48%"  # a finding's figure is drawn at a page's width; the blog's two abreast
    shown = "<p>" + "".join(image(path, width) for path in figures) + "</p>" if figures else ""
    heading = "What the study found" if sentences else "What this run found"  # the page is the study's record
    return (
        f'{SCREEN_STYLE}<section id="findings"><h2>{heading}</h2><p><i>{source}</i></p>{screen}{shown}{made}'
        "</section>\n"
    )
