from pathlib import Path

from haystack.dataclasses import ByteStream

from components.converters.html_to_markdown_document import (
    HTMLToMarkdownDocument,
    html_codec,
    html_to_markdown,
)

# A documentation page as generators write them: headings straight under <body> (no <article> or <main>), a
# permalink mark in each heading, a generated table of contents, a sidebar, a data table with merged cells, nested
# lists, a code block whose comment line starts with `#`, and a definition list.
PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Backup guide</title><style>h1 {color: red}</style></head>
<body>
<div class="toc"><ul><li><a href="#schedule">Schedule</a></li></ul></div>
<aside>Other guides: Restore, Monitoring</aside>
<h1>Backup guide<a class="headerlink" href="#top">¶</a></h1>
<p>This guide explains how the <b>nightly  backup</b> works
   and how to <a href="/restore">restore</a> files.</p>
<h2 id="schedule">Schedule</h2>
<table>
<caption>Retention by tier</caption>
<thead><tr><th>Tier</th><th>Retention</th><th>Copies</th></tr></thead>
<tbody>
<tr><td>Basic</td><td>7 days</td><td rowspan="2">1</td></tr>
<tr><td>Pro</td><td>30 days | extendable</td></tr>
<tr><td>Enterprise</td><td colspan="2">by contract</td></tr>
</tbody></table>
<h3>Exceptions</h3>
<ul><li>Files larger than 5 GB are skipped.</li>
<li>Never backed up:<ul><li>temporary folders</li><li>caches</li></ul></li></ul>
<h2>Restoring files</h2>
<ol start="3"><li><p>Pick a snapshot.</p></li><li>Run:<pre>
# as root
backup restore --snapshot `latest`</pre></li></ol>
<dl><dt>snapshot</dt><dd>A frozen copy of the files.<br>Kept per tier.</dd></dl>
<p># of copies is set per tier.</p>
<script>track()</script>
<footer>Copyright 2024 Example Corp</footer>
</body></html>"""

MARKDOWN = """# Backup guide

This guide explains how the nightly backup works and how to restore files.

## Schedule

Retention by tier

| Tier | Retention | Copies |
| --- | --- | --- |
| Basic | 7 days | 1 |
| Pro | 30 days \\| extendable | 1 |
| Enterprise | by contract | by contract |

### Exceptions

- Files larger than 5 GB are skipped.
- Never backed up:
  - temporary folders
  - caches

## Restoring files

3. Pick a snapshot.
4. Run:
   ```
   # as root
   backup restore --snapshot `latest`
   ```

snapshot

A frozen copy of the files.
Kept per tier.

 # of copies is set per tier."""


def test_headings_tables_lists_and_code_become_markdown_and_the_text_stays_as_the_page_shows_it():
    assert html_to_markdown(PAGE.encode("utf-8")) == MARKDOWN


def test_the_main_content_is_the_pages_one_main_element_or_article():
    page = "<body><nav>Home</nav><div>Banner</div><main><h1>Leave</h1><p>Twenty days.</p></main></body>"
    assert html_to_markdown(page.encode()) == "# Leave\n\nTwenty days."
    two = "<body><article><p>One.</p></article><article><p>Two.</p></article></body>"
    assert html_to_markdown(two.encode()) == "One.\n\nTwo."  # two articles: a listing page, read whole


def test_a_layout_table_is_read_as_text():
    framed = "<body><table><tr><td><p>Note: the office is closed on May 1.</p></td></tr></table></body>"
    assert html_to_markdown(framed.encode()) == "Note: the office is closed on May 1."
    grid = (
        "<body><table><tr><td><h2>Menu</h2></td><td><table><tr><td>a</td><td>b</td></tr>"
        "<tr><td>1</td><td>2</td></tr></table></td></tr></table></body>"
    )
    assert html_to_markdown(grid.encode()) == "## Menu\n\n| a | b |\n| --- | --- |\n| 1 | 2 |"


def test_the_charset_is_utf8_else_the_declared_one_and_never_a_guess():
    text = "<p>员工年假为二十天，病假另计。</p>"
    declared = (
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312"></head>'
        f"<body>{text}</body></html>"
    )
    assert html_to_markdown(declared.encode("gb18030")) == "员工年假为二十天，病假另计。"
    assert html_to_markdown(f"<body>{text}</body>".encode("utf-8-sig")) == "员工年假为二十天，病假另计。"
    assert html_codec(declared.encode("utf-8")) == "utf-8-sig"  # a page in UTF-8 whatever it declares
    assert html_codec('<meta charset="iso-8859-1"><p>“Café”</p>'.encode("cp1252")) == "cp1252"  # as browsers
    latin = "<body><p>Le café ouvre à 9 heures.</p></body>".encode("latin-1")
    assert (
        html_codec(latin) is None
    )  # cp1250 reads it too, differently: the caller decides (dataset.encoding)
    assert HTMLToMarkdownDocument().run(sources=[ByteStream(latin)])["documents"] == []


def test_the_component_keeps_metadata_and_skips_a_page_without_text(tmp_path: Path):
    path = tmp_path / "guide.html"
    path.write_text(PAGE, encoding="utf-8")
    empty = ByteStream(b"<html><body><nav>Home</nav></body></html>", meta={"file_path": "/x/empty.html"})
    documents = HTMLToMarkdownDocument().run(sources=[path, empty], meta={"tenant": "acme"})["documents"]
    assert [(doc.content, doc.meta) for doc in documents] == [
        (MARKDOWN, {"file_path": "guide.html", "tenant": "acme"})
    ]
    restored = HTMLToMarkdownDocument.from_dict(HTMLToMarkdownDocument().to_dict())
    assert isinstance(restored, HTMLToMarkdownDocument)
