"""Drop repeated <script> entries: sphinx-thebe adds its inline config twice under Sphinx 7.4
(once with filename None, once with ''), which the browser reports as
"Identifier 'THEBE_JS_URL' has already been declared"."""


def _dedup(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for js in context.get("script_files", []):
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted((k, str(v)) for k, v in attrs.items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"][:] = kept


def setup(app):
    app.connect("html-page-context", _dedup, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
