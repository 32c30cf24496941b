"""What a downloaded page says: HTML as its main content in markdown (trafilatura; links kept, boilerplate
removed), the visible text when extraction finds none, a PDF's text layer (pypdf), and the charset a
Content-Type names. Pure functions over bytes and text."""

from __future__ import annotations

from typing import Any

from ba_mcp.errors import ErrorType, ToolFailure


def charset(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            import codecs

            try:
                return codecs.lookup(value.strip('"')).name
            except LookupError:
                return None
    return None


def html_to_markdown(html: str, url: str) -> tuple[str | None, str]:
    """The page's title and main content as markdown (trafilatura); an error when nothing is readable."""
    import trafilatura
    from trafilatura.metadata import extract_metadata

    if "<script" in html.lower() and len(visible_text(html)) < 50:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "NO_READABLE_TEXT",
            f"{short_url(url)} has no readable text without JavaScript (the page builds itself in a browser)",
            "look for the data behind it (an API, a CSV or JSON link), or another source",
        )
    markdown = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_links=True,
        include_formatting=True,
        include_comments=False,
        favor_recall=True,
    )
    meta = extract_metadata(html, default_url=url)
    title = meta.title if meta and meta.title else None
    if not markdown or not markdown.strip():
        body = visible_text(html)
        if not body:
            raise ToolFailure(ErrorType.VALIDATION_ERROR, "NO_READABLE_TEXT", f"{short_url(url)} has no readable text")
        markdown = body
    if title and not markdown.lstrip().startswith("#"):
        markdown = f"# {title}\n\n{markdown}"
    return title, markdown


def visible_text(html: str) -> str:
    """The text a browser without JavaScript would show (scripts, styles, noscript and templates left out)."""
    import lxml.html

    try:
        doc = lxml.html.fromstring(html)
    except Exception:
        return ""
    for node in doc.xpath("//script|//style|//noscript|//template|//head"):
        node.drop_tree()
    return " ".join(doc.text_content().split())


def pdf_text(data: bytes, url: str) -> str:
    import io

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR, "BAD_PDF", f"{short_url(url)} is not a readable PDF ({type(exc).__name__})"
        ) from None
    text = "\n\n".join(f"[page {i}]\n{t.strip()}" for i, t in enumerate(pages, 1) if t.strip())
    if not text:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "NO_READABLE_TEXT",
            f"{short_url(url)} is a PDF without a text layer (scanned pages)",
            "it needs OCR, which this server does not do",
        )
    return text


def extract_in_worker(body: bytes, kind: str, url: str, charset: str | None = None) -> dict[str, Any]:
    """What a DuckDB worker answers for ``extract``: the readable text of a page (``kind`` html, in ``charset``)
    or a PDF, with its title when the page names one."""
    if kind == "pdf":
        return {"text": pdf_text(body, url), "title": None}
    html = body.decode(charset or "utf-8", "replace")
    title, markdown = html_to_markdown(html, url)
    return {"text": markdown, "title": title}


def short_url(url: str) -> str:
    return url if len(url) <= 120 else url[:119] + "…"
