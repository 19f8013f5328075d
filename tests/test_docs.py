"""The API reference page at /v2/docs: public, and everything it loads is served by the app itself."""

import pathlib
import re
import subprocess
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from markdown_it import MarkdownIt

from support.helpers import assert_error

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = "http://localhost/v2/docs"
CONTENT_TYPES = {".js": "javascript", ".css": "text/css"}


class AssetLinks(HTMLParser):
    """The src and href of every script and link tag."""

    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.links.append(attrs["src"])
        elif tag == "link" and attrs.get("href"):
            self.links.append(attrs["href"])


def test_reference_page_is_public_and_loads_only_assets_the_app_serves(client):
    page = client.get("/v2/docs")  # no key
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    # The document is fetched relative to the page, so the page works under a path prefix.
    assert '"url":"openapi.json"' in html
    parser = AssetLinks()
    parser.feed(html)
    assert len(parser.links) >= 2, parser.links
    for link in parser.links:
        # No scheme, no host: the browser asks the app, never a CDN.
        assert not urlsplit(link).scheme and not urlsplit(link).netloc, link
        url = urlsplit(urljoin(PAGE, link))
        assert url.netloc == "localhost" and url.path.startswith("/v2/docs/assets/"), link
        asset = client.get(url.path)
        assert asset.status_code == 200, link
        assert CONTENT_TYPES[url.path[url.path.rfind(".") :]] in asset.content_type, (link, asset.content_type)
        assert len(asset.data) > 1000, link


def test_trailing_slash_leads_to_the_page(client):
    response = client.get("/v2/docs/")
    assert response.status_code == 308
    assert response.headers["Location"] == "../docs"
    assert urljoin("http://localhost/v2/docs/", response.headers["Location"]) == PAGE


def test_unknown_asset_is_the_usual_404(client):
    assert_error(client.get("/v2/docs/assets/nothing.js"), 404)
    assert_error(client.get("/v2/docs/assets/../../../app/config.py"), 404)


def markdown_files() -> list:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]


def heading_anchors(path) -> set:
    """The anchors GitHub makes of a Markdown file's headings."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_every_link_in_the_docs_resolves_inside_the_repository():
    """README.md, BENCHMARKS.md and docs/ link only to files of the repository (and headings
    in them), never elsewhere: the API reference is the service's own OpenAPI document."""
    broken = []
    for path in markdown_files():
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            inside = resolved.is_relative_to(ROOT)
            if not inside or not resolved.exists() or (anchor and anchor not in heading_anchors(resolved)):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_readme_fits_a_few_screens_and_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120
    first_screen = "\n".join(readme.splitlines()[:40])
    assert "scripts/serve" in first_screen and "scripts/test" in first_screen
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "exec scripts/test\n" in ci, "CI runs exactly the README's test command"


def test_sourcing_the_venv_script_leaves_a_persons_shell_as_it_was():
    """docs/feeding.md has people `source scripts/venv.sh`: their shell must not come out of it
    with `set -e` on (their next failing command would close it)."""
    done = subprocess.run(
        ["bash", "--norc", "-i", "-c", "source scripts/venv.sh; false; echo still-here; echo options=$-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "still-here" in done.stdout, done.stderr[-2000:]
    assert "e" not in done.stdout.split("options=")[1].strip()


def test_the_layout_names_every_module():
    """docs/layout.md names each module of the code (a support module of the tests too) by its
    file name, so the map of the repository has no blank; the schema's steps, one file a
    version, by their first and last."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    unnamed = [
        str(path.relative_to(ROOT))
        for part in ("app", "models", "schemas", "feeds", "bench", "tests")
        for path in sorted((ROOT / part).rglob("*.py"))
        if path.name != "__init__.py"
        and not path.name.startswith(("test_", "conftest"))
        and not (path.parent.name == "migrations" and re.match(r"v\d+_", path.name))
        and f"`{path.name}`" not in layout
        and f"`{path.relative_to(ROOT)}`" not in layout
    ]
    assert unnamed == []


def rows_outside_tables(text: str) -> list[int]:
    """Line numbers (1-based) of lines that look like table rows (`| ... |`) but that the
    Markdown renderer (GitHub's tables, markdown-it's GFM) does not put in a table: after a
    blank line splitting a table, its rows render as plain text."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    inside = set()
    for token in tokens:
        if token.map and token.type in ("table_open", "fence", "code_block", "html_block"):
            inside.update(range(*token.map))
    return [
        number + 1
        for number, line in enumerate(text.splitlines())
        if line.lstrip().startswith("|") and line.rstrip().endswith("|") and number not in inside
    ]


def test_rows_outside_tables_are_found():
    split = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert rows_outside_tables(split) == [5]
    assert rows_outside_tables("```\n| not | a table |\n```\n") == []


def test_every_table_row_in_the_docs_is_inside_its_table():
    broken = []
    for path in markdown_files():
        for number in rows_outside_tables(path.read_text(encoding="utf-8")):
            broken.append(f"{path.relative_to(ROOT)}:{number}")
    assert broken == []


def test_every_search_mode_is_in_the_openapi_document_and_in_docs_api(client):
    """`apex` among them: the parameter's enum and description in every operation that takes
    it, and a row of docs/api.md's table of modes."""
    document = client.get("/v2/openapi.json").json
    modes = ["includes", "startsWith", "endsWith", "excludes", "apex", "regex"]
    taking = [
        parameter
        for operations in document["paths"].values()
        for operation in operations.values()
        if isinstance(operation, dict)  # not a path's own list of parameters
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "searchQuestionMode"
    ]
    assert len(taking) >= 5
    for parameter in taking:
        assert parameter["schema"]["enum"] == modes
        assert all(f"`{mode}`" in parameter["description"] for mode in modes), parameter
    assert "`www.example.co.uk`, not `myexample.co.uk`" in taking[0]["description"]
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert all(f"\n| `{mode}` |" in api for mode in modes)


def test_the_readmes_commands_are_the_scripts_and_install_what_the_readme_says():
    """README: `scripts/serve` installs only the service, `scripts/test` the test tools too."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", readme, flags=re.DOTALL).group(1)
    commands = [line.split()[0] for line in block.splitlines() if line.strip()]
    assert commands == ["scripts/serve", "scripts/test"]
    sets = {"scripts/serve": "serve", "scripts/test": "test"}
    for command in commands:
        script = ROOT / command
        assert script.stat().st_mode & 0o111, f"{command} is not executable"
        sourced = re.findall(r'^source "\$\(dirname "\$0"\)/venv\.sh"(.*)$', script.read_text(), flags=re.MULTILINE)
        assert sourced == [f" {sets[command]}"], (command, sourced)
    assert "`scripts/serve` only the service" in readme and "`scripts/test` the test tools as well" in readme
