"""The built site, as a reader's browser sees it (headless Debian chromium via Playwright).

Run after ``make book``::

    make browser-test            # = .venv/bin/python -m pytest tests/browser
    .venv/bin/python -m pytest tests/browser -k ising_trg     # one page

Every page listed in the sidebar (plus the root page) is loaded once; the per-page tests
below read that one visit. Screenshots land in ``_build/screenshots/<page>.png``.
The browser tests are skipped in the default ``make test`` run (see conftest.py); the
helper tests at the end (no browser, no site) run there.
"""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest

from conftest import (BOOK, CJK, RESULTS, SITE, count_outputs, executed_notebook, expected_labels,
                      figure_mismatch, flowchart_calls, fmt_list, glue_refs, glue_values, http_status,
                      intended_text, literal_text, load_nb, page_id, page_params, parse_printed,
                      require_site, results_for, same_number, site_pages, source_notebook, squash)

browser_test = pytest.mark.browser
PAGES = page_params()


def _require(rel):
    require_site()
    if rel is None or rel.startswith("<"):
        pytest.fail(f"cannot list the site's pages: {rel}", pytrace=False)


# --- the site as a whole -------------------------------------------------------------------------------
@browser_test
def test_toc_pages_are_on_the_site():
    """Every file of _toc.yml is built and linked from the sidebar."""
    import yaml

    require_site()
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    files.append(str(node[key]))
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    walk(child)

    walk(toc)
    pages = set(site_pages())
    missing = [f for f in files if f"{f}.html" not in pages]
    assert not missing, f"_toc.yml files not in the site's sidebar ({SITE}):{fmt_list(missing)}"
    generated = [p for p in pages if p.startswith("about/")]
    assert {"about/status.html", "about/reproduction.html"} <= set(generated), \
        f"the execution status and reproduction pages are missing from the sidebar; sidebar pages:{fmt_list(sorted(pages))}"


@browser_test
def test_sidebar_links_resolve(browser):
    """Every link of every page's sidebar (and the download links) answers HTTP 200."""
    require_site()
    urls = set()
    for rel in site_pages():
        v = browser.visit(rel)
        urls.update(v.dom.get("sidebar", []))
        urls.update(v.dom.get("downloads", []))
    bad = []
    for url in sorted(urls):
        if not browser.is_local(url):
            bad.append(f"{url}: leaves 127.0.0.1")
            continue
        status = http_status(urllib.parse.urldefrag(url)[0])
        if status != 200:
            bad.append(f"{url}: HTTP {status}")
    assert urls, "no sidebar links found (nav.bd-docs-nav)"
    assert not bad, f"{len(bad)} of {len(urls)} sidebar/download links do not resolve:{fmt_list(bad)}"


def _search_word(browser) -> tuple[str, str, str]:
    """A Chinese word from the middle of a sentence in a pitfall page body: (word, page rel, sentence)."""
    import jieba

    jieba.setLogLevel(60)
    pages = site_pages()
    pitfalls = [p for p in pages if "/pitfalls/" in f"/{p}"]
    assert pitfalls, f"no pitfall page (chapters/pitfalls/...) on the site:{fmt_list(pages)}"
    titles = "".join(browser.visit(p).dom.get("title", "") for p in pages)
    for rel in pitfalls:
        paras = [p for p in browser.visit(rel).dom.get("paragraphs", []) if len(CJK.findall(p)) >= 20]
        for para in paras[len(paras) // 2:] + paras[:len(paras) // 2]:
            for sentence in re.split(r"[。！？；]", para):
                words = [w for w in jieba.cut(sentence) if len(w) >= 2 and all(CJK.match(c) for c in w)]
                if len(words) < 5:
                    continue
                # middle of the sentence, not a title word
                for w in words[len(words) // 2:-1] + words[1:len(words) // 2]:
                    if w not in titles and len(w) >= 2:
                        return w, rel, sentence.strip()
    pytest.fail(f"no sentence with five Chinese words found on the pitfall pages {pitfalls}", pytrace=False)


@browser_test
def test_search_finds_a_chinese_word_from_a_pitfall_page(browser):
    """The search box finds a word from the middle of a sentence (zh_CN search indexes words with jieba)."""
    require_site()
    word, rel, sentence = _search_word(browser)
    index = (SITE / "searchindex.js").read_text(encoding="utf-8")
    terms = json.loads(index[index.index("(") + 1:index.rindex(")")]).get("terms", {})
    assert word in terms, (f"search index has no term {word!r} (from {rel}: “{sentence}”); "
                           f"{sum(1 for t in terms if CJK.search(t))} Chinese terms indexed - was jieba installed "
                           f"when the site was built?")
    page = browser.new_page()
    try:
        page.goto(urllib.parse.urljoin(browser.base, "search.html"), wait_until="load")
        box = page.locator("#search-results").locator("xpath=ancestor::*[1]").locator("input[name=q]")
        box = box if box.count() else page.locator("article input[name=q], main input[name=q]")
        if box.count():  # the reader types into the search page's box and presses Enter
            box.first.fill(word)
            box.first.press("Enter")
        else:
            page.goto(urllib.parse.urljoin(browser.base, "search.html?q=" + urllib.parse.quote(word)))
        try:
            # Sphinx lists results one by one and writes its summary ("... 匹配到 N 页") when done
            page.wait_for_function("() => { const s = document.querySelector('#search-results p.search-summary');"
                                   " return document.querySelectorAll('#search-results li a').length > 0"
                                   " && s && /[0-9]/.test(s.textContent); }",
                                   timeout=30_000)
        except Exception:  # noqa: BLE001 - report what the page said instead
            status = page.locator("#search-results").inner_text() if page.locator("#search-results").count() else ""
            pytest.fail(f"search for {word!r} (from {rel}) shows no results after 30 s; page says: {status!r}",
                        pytrace=False)
        hits = page.eval_on_selector_all("#search-results li a", "as => as.map(a => a.href)")
        page.screenshot(path=str(browser.visit(rel).screenshot.parent / "search.png"), full_page=True)
    finally:
        page.close()
    target = rel.rsplit(".", 1)[0]
    assert any(target in urllib.parse.urlsplit(h).path for h in hits), \
        f"search for {word!r} (from “{sentence}” on {rel}) does not list that page; results:{fmt_list(hits)}"


# --- each page -----------------------------------------------------------------------------------------
@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_page_loads_without_errors(browser, rel):
    _require(rel)
    v = browser.visit(rel)
    assert v.status == 200, f"{rel}: HTTP {v.status}"
    problems = ([f"console: {e}" for e in v.console_errors] + [f"script error: {e}" for e in v.page_errors]
                + [f"failed request: {e}" for e in v.bad_local])
    assert not problems, f"{rel} ({v.url}) has {len(problems)} errors in the browser:{fmt_list(problems)}"
    assert CJK.search(v.dom.get("h1", "")), f"{rel}: no Chinese title (h1 = {v.dom.get('h1')!r})"


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_page_stays_on_localhost(browser, rel):
    _require(rel)
    v = browser.visit(rel)
    assert not v.external, (f"{rel} tried to fetch {len(v.external)} URLs outside 127.0.0.1 "
                            f"(blocked):{fmt_list(sorted(set(v.external)))}")


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_flowcharts_show_their_labels(browser, rel):
    """Each page.flowchart(src, name) of the notebook is an SVG on the page holding its labels."""
    _require(rel)
    src = source_notebook(rel)
    if src is None:
        pytest.skip(f"{rel} is generated (no notebook)")
    calls = flowchart_calls(load_nb(src))
    dom = browser.visit(rel).dom
    shown = dom.get("flowcharts", {})
    assert not dom.get("raw_svg"), (f"{rel}: SVG source printed as text in a cell output (a cell ends with "
                                    f"page.flowchart(...) and Jupyter shows the returned string):{fmt_list(dom['raw_svg'])}")
    if not calls:
        assert not shown, f"{rel}: flowcharts on the page but no page.flowchart call in {src.name}: {list(shown)}"
        return
    problems = []
    for name, mermaid in calls:
        svg = shown.get(f"flowchart-{name}")
        if svg is None:
            problems.append(f"{name}: no <div class=trglab-flowchart id=flowchart-{name}> with an <svg> "
                            f"(found: {sorted(shown)})")
            continue
        if svg["width"] < 50 or svg["height"] < 50:
            problems.append(f"{name}: SVG is {svg['width']:.0f}x{svg['height']:.0f} px")
        labels = expected_labels(mermaid)
        text = squash(svg["text"])
        missing = [lab for lab in labels if squash(lab) not in text]
        if not any(CJK.search(lab) for lab in labels):
            problems.append(f"{name}: the mermaid source has no Chinese label")
        if missing:
            problems.append(f"{name}: {len(missing)} of {len(labels)} labels not in the SVG text: {missing}")
    assert not problems, f"{rel}: flowcharts:{fmt_list(problems)}"


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_tables_and_plots_are_there(browser, rel):
    """As many trglab tables and matplotlib images on the page as the executed notebook shows."""
    _require(rel)
    src = source_notebook(rel)
    if src is None:
        pytest.skip(f"{rel} is generated (no notebook)")
    exe = executed_notebook(rel)
    assert exe is not None, f"{rel}: the site offers no executed notebook at _sources/{src.relative_to(src.parents[len(src.parents) - 2])}"
    want = count_outputs(load_nb(exe))
    dom = browser.visit(rel).dom
    source = "".join("".join(c.get("source", "")) for c in load_nb(src)["cells"] if c.get("cell_type") == "code")
    problems = []
    if dom["tables"] != want["tables"]:
        problems.append(f"{dom['tables']} table.trglab-table on the page, {want['tables']} in the executed notebook")
    if "page.table(" in source and dom["tables"] == 0:
        problems.append("the notebook calls page.table but the page has no table.trglab-table")
    empty = [i for i, n in enumerate(dom.get("table_rows", [])) if n == 0]
    if empty:
        problems.append(f"tables without rows (0-based, page order): {empty}")
    imgs = dom["images"]
    if len(imgs) != want["images"]:
        problems.append(f"{len(imgs)} plot images on the page, {want['images']} PNG outputs in the executed notebook")
    if "plt.show()" in source and not imgs:
        problems.append("the notebook shows matplotlib figures but the page has no plot image")
    broken = [i["src"] for i in imgs if not i["ok"]]
    if broken:
        problems.append(f"plot images that did not load: {broken}")
    assert not problems, f"{rel}:{fmt_list(problems)}"


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_glued_figures_equal_results(browser, rel):
    """Each {glue:text} figure in the prose is there, and equals _build/results/<page>.json."""
    _require(rel)
    src = source_notebook(rel)
    if src is None:
        pytest.skip(f"{rel} is generated (no notebook)")
    exe = executed_notebook(rel)
    assert exe is not None, f"{rel}: no executed notebook under {SITE}/_sources"
    nb = load_nb(exe)
    refs, glued = glue_refs(nb), glue_values(nb)
    shown = browser.visit(rel).dom.get("glued", [])
    pid = page_id(rel)
    figures = results_for(pid)
    if "page.record(" in "".join("".join(c.get("source", "")) for c in load_nb(src)["cells"]):
        assert figures is not None, f"{rel} records figures but there is no {RESULTS}/{pid}.json"
    figures = figures or {}
    unglued = sorted({k for k, _, _ in refs if k not in glued and "::" not in k})
    assert not unglued, (f"{rel}: the prose uses {{glue:text}} names the executed notebook never glued "
                         f"(page stopped early, or a misspelt name): {unglued}")
    assert len(shown) == len(refs), (f"{rel}: {len(shown)} glued figures (span.pasted-text) on the page, "
                                     f"{len(refs)} {{glue:text}} references in the notebook: {[r[0] for r in refs]}")
    problems, checked = [], 0
    for (key, fmt, _kind), text in zip(refs, shown):
        if "::" in key:
            continue  # glued on another page
        if not text.strip():
            problems.append(f"{key}: empty on the page")
            continue
        meant = intended_text(glued[key])
        if fmt is None and text != meant and not same_number(text, meant):
            hint = (" (myst-nb's {glue:text} literal_evals the glued text/plain: glue repr(text) to keep it as is)"
                    if text == literal_text(meant) else "")
            problems.append(f"{key}: page shows {text!r}, the notebook glued {meant!r}{hint}")
            continue
        if key in figures:
            why = figure_mismatch(text, figures[key])
            checked += 1
            if why:
                problems.append(f"{key}: {why}")
    assert not problems, (f"{rel}: {len(problems)} glued figures wrong "
                          f"({checked} compared with {RESULTS}/{pid}.json):{fmt_list(problems)}")


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_page_offers_notebook_and_rerun_command(browser, rel):
    """A notebook page links its .ipynb for download and says at its foot how to re-run it."""
    _require(rel)
    src = source_notebook(rel)
    if src is None:
        pytest.skip(f"{rel} is generated (no notebook)")
    v = browser.visit(rel)
    nb_path = rel.rsplit(".", 1)[0] + ".ipynb"
    assert any(urllib.parse.urlsplit(u).path.endswith(nb_path) for u in v.dom.get("downloads", [])), \
        f"{rel}: no download link to {nb_path}; .ipynb links:{fmt_list(v.dom.get('downloads', []))}"
    assert f"make page PAGE={nb_path}" in v.dom.get("text", ""), \
        f"{rel}: the page does not say how to re-run it (`make page PAGE={nb_path}`)"


@browser_test
@pytest.mark.parametrize("rel", PAGES)
def test_links_in_page_body_resolve(browser, rel):
    """Links in the page body that stay on the site (other pages, downloads) answer HTTP 200."""
    _require(rel)
    v = browser.visit(rel)
    bad = []
    for url in sorted(set(v.dom.get("content_links", []))):
        if not url.startswith(("http:", "https:")) or not browser.is_local(url):
            continue  # external links are fine to have, as long as nothing is fetched
        status = http_status(urllib.parse.urldefrag(url)[0])
        if status != 200:
            bad.append(f"{url}: HTTP {status}")
    assert not bad, f"{rel}: links that do not resolve:{fmt_list(bad)}"


# --- the checker's own helpers (no browser, no site: these run in the default `make test`) ---------
def test_parse_printed_gives_half_a_unit_in_the_last_digit():
    assert parse_printed("0.744793433200000") == (0.7447934332, 0.5e-15)
    value, tol = parse_printed("1.2e-05")
    assert value == 1.2e-05 and tol == pytest.approx(5e-07)
    value, tol = parse_printed("12%")
    assert value == pytest.approx(0.12) and tol == pytest.approx(0.005)
    assert parse_printed("\u22123.5")[0] == -3.5
    with pytest.raises(ValueError, match="not a number"):
        parse_printed("是")


def test_figure_mismatch_compares_to_the_printed_digits():
    assert figure_mismatch("0.744793433200000", 0.74479343320000012) is None
    assert figure_mismatch("0.744793433", 0.7447934332) is None           # 9 digits printed
    assert "results say" in figure_mismatch("0.744793434", 0.7447934332)  # wrong in the last digit
    assert figure_mismatch("1.2e-05, 3.0e-04", [1.24e-05, 2.96e-04]) is None
    assert "item 1" in figure_mismatch("1.2e-05, 3.1e-04", [1.24e-05, 2.96e-04])
    assert "2 items shown" in figure_mismatch("1, 2", [1, 2, 3])
    assert figure_mismatch("是", True) is None and figure_mismatch("否", True) is not None
    assert figure_mismatch("7", 7) is None and figure_mismatch("8", 7) is not None
    assert figure_mismatch("ok: 3", "ok: 3") is None and figure_mismatch("ok", "ok: 3") is not None


def test_flowchart_labels_come_from_the_mermaid_source():
    nb = {"cells": [{"cell_type": "code", "source": [
        "n = 4\n",
        "page.flowchart(f'''flowchart TB\n  a[\"第 {n} 步：建图\"] --> b[\"反向<br/>求导\"]\n  b --> c(\"done\")''', \"demo\")"]}]}
    (name, src), = flowchart_calls(nb)
    assert name == "demo"
    assert expected_labels(src) == ["第", "步：建图", "反向", "求导", "done"]
    assert squash(" 反向\n 求导 ") == "反向求导"


def test_glue_refs_and_values_follow_the_notebook():
    nb = {"cells": [
        {"cell_type": "markdown", "source": "梯度 {glue:text}`grad_5` 与 {glue:text}`u_5:.3f`，{glue}`fig`。"},
        {"cell_type": "markdown", "metadata": {"tags": ["remove-cell"]}, "source": "{glue:text}`hidden`"},
        {"cell_type": "code", "source": "", "outputs": [
            {"output_type": "display_data", "metadata": {"scrapbook": {
                "name": "grad_5", "mime_prefix": "application/papermill.record/"}},
             "data": {"application/papermill.record/text/plain": "0.744793433200000"}},
            {"output_type": "display_data", "metadata": {}, "data": {
                "text/html": '<table class="trglab-table"></table><div class="trglab-flowchart" id="x"></div>'}},
            {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}]}]}
    assert [(k, f) for k, f, _ in glue_refs(nb)] == [("grad_5", None), ("u_5", ".3f")]
    assert glue_values(nb) == {"grad_5": "0.744793433200000"}
    assert count_outputs(nb) == {"tables": 1, "flowcharts": 1, "images": 1}


def test_browser_tests_are_skipped_unless_asked(pytestconfig, monkeypatch):
    from conftest import browser_enabled

    monkeypatch.setenv("TRGLAB_BROWSER", "1")
    assert browser_enabled(pytestconfig)
    monkeypatch.setenv("TRGLAB_BROWSER", "0")
    assert not browser_enabled(pytestconfig)


def test_intended_text_undoes_a_str_repr_only():
    assert intended_text("'5, 6, 20'") == "5, 6, 20"
    assert intended_text("5, 6, 20") == "5, 6, 20"          # a bare list text stays (myst-nb would show a tuple)
    assert same_number("0.84405407362385", "0.844054073623850")
    assert not same_number("(5, 6, 20)", "5, 6, 20") and not same_number("0.1", "0.2")
    assert literal_text("5, 6, 20") == "(5, 6, 20)" and literal_text("是") == "是"
