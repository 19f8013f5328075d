"""The API reference page at /v2/docs: public, and everything it loads is served by the app itself."""

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from helpers import assert_error

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
