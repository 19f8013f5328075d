// The dashboard: a client of the public /v2 API, with nothing the API does not answer.
// The key lives in sessionStorage and travels only in the Authorization header.
"use strict";

(() => {
  const KEY_STORE = "analytics-api-key";
  const INTERVALS = [60, 300, 900, 3600, 10800, 21600, 43200, 86400, 604800];
  const MAX_BUCKETS = 200;
  const PAGE_SIZE = 50;
  const LIVE_ROWS = 500;
  const ACTIONS = { "-1": "failed", 0: "blocked", 1: "allowed", 2: "spoofed", 3: "redirected" };

  const $ = (id) => document.getElementById(id);
  const state = {
    key: null,
    who: null,
    window: null,
    view: null,
    scope: null, // the view and its URL without the page: paging keeps the window
    client: null, // the client page's client id
    clients: [],
    sort: { column: "last", descending: true },
    logPage: 0,
    adminPage: 0,
    accessPage: 0,
    alertsPage: 0,
    live: null,
    charts: {}, // each chart's box id: its uPlot and the series it draws
    deleting: null,
    privacyAdded: [],
  };

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // At most MAX_IN_FLIGHT calls at once, as a browser keeps to over HTTP/1.1 anyway: over
  // HTTP/2 (the nginx site) a view's panels would otherwise all go at once, past the API's
  // fair share of expensive requests per key (8 per worker) and into 429s. A call that ends
  // hands its place to the next one waiting.
  const MAX_IN_FLIGHT = 6;
  const queue = { running: 0, waiting: [] };

  function acquire() {
    if (queue.running < MAX_IN_FLIGHT) {
      queue.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => queue.waiting.push(resolve));
  }

  function release() {
    const next = queue.waiting.shift();
    if (next) next();
    else queue.running--;
  }

  // One call to the API; the answer's JSON, or the Response itself with raw.
  async function api(path, params, { method = "GET", body, raw = false } = {}) {
    const headers = { Authorization: state.key };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const query = params && [...params].length ? "?" + params.toString() : "";
    await acquire();
    try {
      return await call("v2/" + path + query, { method, headers, body, raw });
    } finally {
      release();
    }
  }

  async function call(url, { method, headers, body, raw }) {
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try {
        message = (await response.json()).error.message;
      } catch (_) {
        // not an ErrorResponse: keep the status
      }
      throw new ApiError(response.status, message);
    }
    return raw ? response : response.json();
  }

  // ---- small helpers -------------------------------------------------------------------------

  const can = (scope) => !!state.who && (state.who.scopes.includes(scope) || state.who.scopes.includes("admin"));
  const number = (n) => Number(n).toLocaleString("en-US");

  function element(tag, text, className) {
    const el = document.createElement(tag);
    if (text !== undefined && text !== null) el.textContent = String(text);
    if (className) el.className = className;
    return el;
  }

  // A name or value that may be too long for its column: kept on one line and cut short with an
  // ellipsis rather than broken inside it, whole in its title (a hover, a long press).
  function named(tag, text, className) {
    const el = element(tag, text, className ? `cut ${className}` : "cut");
    el.title = el.textContent;
    return el;
  }

  // A table cell holding such a value (a cell itself cannot be cut short in a table laid out by
  // its content).
  function namedCell(text, className) {
    const cell = element("td", null, className);
    cell.append(named("span", text));
    return cell;
  }

  function button(text, onClick, className) {
    const el = element("button", text, className);
    el.type = "button";
    el.addEventListener("click", onClick);
    return el;
  }

  function ago(iso) {
    if (iso === null || iso === undefined) return "data expired";
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  const localTime = (iso) => new Date(iso).toLocaleString();
  // <input type="datetime-local"> speaks local time without a zone.
  const toLocalInput = (date) => new Date(date.getTime() - date.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  const fromLocalInput = (value) => new Date(value);

  function showError(error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut(`Signed out: ${error.message}`);
      return;
    }
    $("app-error").textContent = error.message || String(error);
  }

  // ---- the window and the endpoint, shared by every view -------------------------------------

  function chooseWindow() {
    let start;
    let end;
    if ($("window").value === "custom") {
      start = fromLocalInput($("custom-start").value);
      end = fromLocalInput($("custom-end").value);
      if (isNaN(start) || isNaN(end) || start > end) throw new Error("Choose a custom window: From before To.");
    } else {
      end = new Date();
      start = new Date(end.getTime() - Number($("window").value) * 1000);
    }
    state.window = { start, end };
    $("app").dataset.start = start.toISOString();
    $("app").dataset.end = end.toISOString();
    $("window-text").textContent = `${start.toLocaleString()} – ${end.toLocaleString()}`;
  }

  function windowParams(window = state.window) {
    return new URLSearchParams({ startTime: window.start.toISOString(), endTime: window.end.toISOString() });
  }

  function endpointParams(params = new URLSearchParams()) {
    if ($("endpoint").value) params.set("endpointId", $("endpoint").value);
    return params;
  }

  function previousWindow() {
    const length = state.window.end - state.window.start;
    const end = new Date(state.window.start.getTime() - 1);
    return { start: new Date(end.getTime() - length), end };
  }

  function intervalFor(window) {
    const seconds = (window.end - window.start) / 1000;
    return INTERVALS.find((interval) => seconds / interval < MAX_BUCKETS) || INTERVALS[INTERVALS.length - 1];
  }

  const withParams = (params, extra) => {
    const copy = new URLSearchParams(params);
    for (const [name, value] of Object.entries(extra)) copy.append(name, value);
    return copy;
  };

  // ---- overview ------------------------------------------------------------------------------

  const BLOCKED = { "action[]": "0" };

  // The top `limit` values of a group in a scope (window and filters).
  const topOf = (scope) => (group, extra = {}) =>
    api(`statistic/count/${group}`, withParams(scope, { limit: 10, ...extra }));

  // Queries and blocked queries in a scope: totals, and the chart's series.
  function totalsAndTimeline(scope) {
    const series = withParams(scope, { interval: intervalFor(state.window), limit: 1000 });
    return Promise.all([
      api("statistic/count", scope),
      api("statistic/count", withParams(scope, BLOCKED)),
      api("statistic/timeseries", series),
      api("statistic/timeseries", withParams(series, BLOCKED)),
    ]);
  }

  const share = (part, whole) => (whole ? part / whole : 0);

  // The cards of a scope's totals and its chart; `ids` names the page's elements for them.
  function showTotalsAndTimeline(ids, [total, blocked, queries, blockedQueries]) {
    showNumber(ids.total, total.count, number(total.count));
    showNumber(ids.blocked, blocked.count, number(blocked.count));
    const part = share(blocked.count, total.count);
    showNumber(ids.share, part, `${(part * 100).toFixed(1)} %`);
    drawChart(ids.chart, queries.queries, blockedQueries.queries, { ...state.window, interval: queries.interval });
    return part;
  }

  async function loadOverview() {
    const scope = endpointParams(windowParams());
    const previous = endpointParams(windowParams(previousWindow()));
    const top = topOf(scope);
    const [now, before, blockedBefore, ...lists] = await Promise.all([
      totalsAndTimeline(scope),
      api("statistic/count", previous),
      api("statistic/count", withParams(previous, BLOCKED)),
      top("question"),
      top("question", BLOCKED),
      top("clientId"),
      top("protocol"),
      top("statusCode"),
      top("rrType"),
      api("statistic/trend/question", withParams(scope, { limit: 10 })),
      api("statistic/trend/clientId", withParams(scope, { limit: 10 })),
    ]);
    const [domains, blockedDomains, clients, protocol, status, rrType, trendDomains, trendClients] = lists;

    const ids = { total: "total-count", blocked: "blocked-count", share: "blocked-share", chart: "chart" };
    const nowShare = showTotalsAndTimeline(ids, now);
    const [total, blockedTotal] = now;
    showNumber("previous-count", before.count, number(before.count));
    showChange("total-change", total.count, before.count);
    showChange("blocked-change", blockedTotal.count, blockedBefore.count);
    const shareBefore = share(blockedBefore.count, before.count);
    const points = ((nowShare - shareBefore) * 100).toFixed(1);
    $("share-change").textContent = `${points >= 0 ? "+" : ""}${points} points vs previous`;

    barTable("top-domains", domains.counts);
    barTable("top-blocked", blockedDomains.counts, "blocked");
    barTable("top-clients", clients.counts, "", (id) => viewHash("client", { keepFilters: false, clientId: id }));
    barTable("by-protocol", protocol.counts);
    barTable("by-statusCode", status.counts);
    barTable("by-rrType", rrType.counts);
    trendTable("trend-domains", trendDomains.trends);
    trendTable("trend-clients", trendClients.trends);
  }

  function showNumber(id, value, text) {
    $(id).textContent = text;
    $(id).dataset.value = value;
  }

  function showChange(id, now, before) {
    const el = $(id);
    el.className = "change";
    if (before === 0) {
      el.textContent = now ? "new: none in the previous window" : "none in either window";
      return;
    }
    const change = ((now - before) / before) * 100;
    el.textContent = `${change >= 0 ? "▲" : "▼"} ${Math.abs(change).toFixed(1)} % vs previous`;
  }

  // `link`, when given, makes each value a link to the URL it returns for it.
  function barTable(id, counts, className, link) {
    const table = $(id);
    table.replaceChildren();
    if (!counts.length) {
      table.append(row([element("td", "No queries in this window", "empty")]));
      return;
    }
    const most = Math.max(...counts.map((c) => c.count));
    for (const { value, count } of counts) {
      const name = element("td", null, "name");
      const fill = element("span", null, "fill");
      fill.style.width = `${(count / most) * 100}%`;
      const text = named(link ? "a" : "span", value === "" ? "(unknown)" : value, "text");
      if (link) text.href = link(value);
      name.append(fill, text);
      const tr = row([name, element("td", number(count), "num")], className);
      tr.dataset.value = value;
      tr.dataset.count = count;
      table.append(tr);
    }
  }

  function trendTable(id, trends) {
    const table = $(id);
    table.replaceChildren();
    if (!trends.length) {
      table.append(row([element("td", "No queries in this window", "empty")]));
      return;
    }
    for (const { value, count, baselineCount, change } of trends) {
      const text = change === null ? "new" : `${change >= 0 ? "▲" : "▼"} ${Math.abs(change * 100).toFixed(0)} %`;
      const tr = row([
        namedCell(value === "" ? "(unknown)" : value, "name"),
        element("td", number(count), "num"),
        element("td", `was ${number(baselineCount)}`, "num muted"),
        element("td", text, "num"),
      ]);
      tr.dataset.value = value;
      tr.dataset.count = count;
      table.append(tr);
    }
  }

  function row(cells, className) {
    const tr = element("tr", null, className);
    tr.append(...cells);
    return tr;
  }

  // A list's cells carry their column's name, which a phone-sized screen shows beside each value.
  function labelled(tbody, rows) {
    const names = Array.from(tbody.closest("table").tHead.rows[0].cells, (th) => th.textContent);
    for (const tr of rows) Array.from(tr.cells).forEach((td, i) => (td.dataset.label = names[i] || ""));
    return rows;
  }

  // `span`: the window and the buckets' length. A bucket only partly inside the window (the
  // first, from before its start; the last, still filling) is left out of the plot, where it
  // would look like a dip, and said under it; the totals count it.
  function drawChart(id, queries, blocked, span) {
    const box = $(id);
    const old = state.charts[id];
    if (old) old.chart.destroy();
    const colour = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    box.dataset.total = queries.reduce((a, q) => a + q.count, 0);
    box.dataset.blocked = blocked.reduce((a, q) => a + q.count, 0);
    const whole = (q) => Date.parse(q.time) >= span.start.getTime() && Date.parse(q.time) + span.interval * 1000 <= span.end.getTime();
    const kept = queries.map(whole);
    const data = [
      queries.filter((q, i) => kept[i]).map((q) => Date.parse(q.time) / 1000),
      queries.filter((q, i) => kept[i]).map((q) => q.count),
      blocked.filter((q, i) => kept[i]).map((q) => q.count),
    ];
    box.dataset.partial = kept.filter((k) => !k).length;
    box.replaceChildren();
    const last = data[0].length - 1;
    const axis = { stroke: colour("--muted"), grid: { stroke: colour("--line") }, ticks: { stroke: colour("--line") } };
    const chart = new uPlot(
      {
        width: Math.max(box.clientWidth, 200),
        height: 260,
        scales: { x: { time: true } },
        series: [
          {},
          { label: "Queries", stroke: colour("--accent"), fill: colour("--accent") + "22", width: 2 },
          { label: "Blocked", stroke: colour("--blocked"), fill: colour("--blocked") + "22", width: 2 },
        ],
        axes: [axis, { ...axis, size: 60 }],
        // The legend shows the newest whole bucket until the pointer is over another, and again
        // when it leaves, rather than "--".
        hooks: { setCursor: [(u) => u.cursor.idx == null && last >= 0 && u.setLegend({ idx: last }, false)] },
      },
      data,
      box,
    );
    if (last >= 0) chart.setLegend({ idx: last }, false);
    const left = queries.length - data[0].length;
    const note = element("p", null, "hint chart-note");
    if (left) {
      note.textContent = `${left === 1 ? "One bucket" : `${left} buckets`} only partly in the window (the first, or the`
        + ` last, still filling) ${left === 1 ? "is" : "are"} left out of the chart; the totals count ${left === 1 ? "it" : "them"}.`;
    }
    box.append(note);
    state.charts[id] = { chart, series: [queries, blocked, span] };
  }

  // The chart's colours come from the stylesheet: draw it again when light turns dark.
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
    for (const [id, { series }] of Object.entries(state.charts)) drawChart(id, ...series);
  });

  window.addEventListener("resize", () => {
    for (const [id, { chart }] of Object.entries(state.charts)) {
      chart.setSize({ width: Math.max($(id).clientWidth, 200), height: 260 });
    }
  });

  // ---- clients -------------------------------------------------------------------------------

  // GET /v2/client's items as one row per (endpoint, client).
  function clientEntries(items) {
    return Object.entries(items).flatMap(([endpoint, entry]) =>
      Object.entries(entry.clients).map(([clientId, c]) => {
        const os = [c.os.type, c.os.version, c.os.arch].filter(Boolean).join(" ");
        return { endpoint, clientId, ...c, ip: c.ip || "", os, last: c.lastActivityTime };
      }),
    );
  }

  // Each entry with its queries in the window: one count by client per endpoint listed (a
  // client id names a different client on each endpoint).
  async function loadClients() {
    const { items } = await api("client", endpointParams());
    const endpoints = Object.keys(items);
    const counts = await Promise.all(
      endpoints.map((endpoint) => api("statistic/count/clientId", withParams(windowParams(), { endpointId: endpoint, limit: 1000 }))),
    );
    const queries = new Map(endpoints.flatMap((endpoint, i) => counts[i].counts.map((c) => [`${endpoint}\n${c.value}`, c.count])));
    state.clients = clientEntries(items).map((c) => ({ ...c, queries: queries.get(`${c.endpoint}\n${c.clientId}`) ?? 0 }));
    renderClients();
  }

  function clientOrder(a, b) {
    const { column, descending } = state.sort;
    const value = (c) =>
      column === "last" ? (c.last === null ? -Infinity : Date.parse(c.last)) : column === "queries" ? c.queries : c[column].toLowerCase();
    const x = value(a);
    const y = value(b);
    const order = x < y ? -1 : x > y ? 1 : 0;
    return descending ? -order : order;
  }

  function renderClients() {
    const words = $("client-search").value.trim().toLowerCase();
    const shown = state.clients
      .filter((c) => !words || [c.endpoint, c.clientId, c.alias, c.host, c.ip, c.mac, c.os, c.vendor].join(" ").toLowerCase().includes(words))
      .sort(clientOrder);
    for (const th of document.querySelectorAll("#clients th[data-sort]")) {
      th.classList.toggle("sorted-asc", th.dataset.sort === state.sort.column && !state.sort.descending);
      th.classList.toggle("sorted-desc", th.dataset.sort === state.sort.column && state.sort.descending);
    }
    $("client-total").textContent = `${shown.length} of ${state.clients.length} clients`;
    const body = document.querySelector("#clients tbody");
    body.replaceChildren(...labelled(body, shown.map(clientRow)));
  }

  function clientRow(c) {
    const last = element("td", ago(c.last), c.last === null ? "empty" : "");
    if (c.last !== null) last.title = localTime(c.last);
    const alias = element("td", c.alias, "alias");
    const id = clientLink(c);
    if (!c.logged) id.append(element("span", " · not logged", "muted not-logged"));
    const tr = row([
      element("td", c.endpoint),
      id,
      alias,
      element("td", c.host),
      element("td", c.ip),
      element("td", c.mac),
      element("td", c.os),
      element("td", c.vendor),
      last,
    ]);
    // The Clients view counts each entry's queries in the window; the client page has its totals.
    if (c.queries !== undefined) tr.append(element("td", number(c.queries), "num queries"));
    tr.dataset.endpoint = c.endpoint;
    tr.dataset.client = c.clientId;
    tr.dataset.last = c.last === null ? "" : c.last;
    if (can("write")) {
      const actions = element("td", null, "actions");
      actions.append(
        button("Alias", () => editAlias(c, alias), "small alias-edit"),
        " ",
        button(c.logged ? "Stop logging" : "Log again", () => setLogged(c, !c.logged).catch(showError), "small client-logging"),
        " ",
        button("Delete data…", () => confirmDelete(c), "small danger client-delete"),
      );
      tr.append(actions);
    }
    return tr;
  }

  function editAlias(c, cell) {
    const form = element("form", null, "alias-form");
    const input = element("input");
    input.value = c.alias;
    input.maxLength = 64;
    input.placeholder = "alias";
    const save = async (alias) => {
      try {
        const path = `client/alias/${encodeURIComponent(c.endpoint)}/${encodeURIComponent(c.clientId)}`;
        if (alias) await api(path, null, { method: "PUT", body: { alias } });
        else await api(path, null, { method: "DELETE" });
        await run(LOADERS[state.view]);
      } catch (error) {
        showError(error);
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      save(input.value.trim());
    });
    const ok = element("button", "Save", "small");
    ok.type = "submit";
    const cancel = button("Cancel", () => (cell.textContent = c.alias), "small");
    form.append(input, ok, button("Clear", () => save(""), "small"), cancel);
    cell.replaceChildren(form);
    input.focus();
  }

  // Not logged: the client's records go, and none of its queries is kept from now on.
  async function setLogged(c, logged) {
    const path = `client/logging/${encodeURIComponent(c.endpoint)}/${encodeURIComponent(c.clientId)}`;
    await api(path, null, { method: "PUT", body: { logged } });
    await run(loadClients);
    $("app-note").textContent = logged
      ? `"${c.clientId}" is logged again.`
      : `"${c.clientId}" is no longer logged: its records were deleted, and none of its queries is stored from now on.`;
  }

  function confirmDelete(c) {
    state.deleting = c;
    $("delete-until").value = toLocalInput(new Date());
    describeDeletion();
    $("confirm-delete").showModal();
  }

  function describeDeletion() {
    const c = state.deleting;
    const until = fromLocalInput($("delete-until").value);
    const name = c.alias ? `"${c.clientId}" (${c.alias})` : `"${c.clientId}"`;
    $("delete-text").textContent = isNaN(until)
      ? "Choose a time."
      : `This deletes every record of client ${name} on endpoint "${c.endpoint}" up to ` +
        `${until.toLocaleString()}. If the client has no later record, its entry and alias are ` +
        "deleted too. This cannot be undone.";
  }

  async function deleteClient() {
    const c = state.deleting;
    const until = fromLocalInput($("delete-until").value);
    const answer = await api("client", null, {
      method: "DELETE",
      body: { endpointIds: [c.endpoint], clientIds: [c.clientId], endTime: until.toISOString() },
    });
    const gone = answer.deletedClients.length ? "its entry was deleted" : "it has later records, so its entry stays";
    await run(LOADERS[state.view]);
    $("app-note").textContent = `Deleted the records of "${c.clientId}" up to ${until.toLocaleString()}; ${gone}.`;
  }

  // ---- one client ----------------------------------------------------------------------------

  // A client's link to its page: (endpoint, client id) from the Clients view.
  function clientLink(c) {
    const cell = element("td", null, "client-id");
    const link = named("a", c.clientId, "client-link");
    link.href = viewHash("client", { keepFilters: false, clientId: c.clientId, endpoint: c.endpoint });
    cell.append(link);
    return cell;
  }

  // The client page: one client id on the chosen endpoint (or on every endpoint, as the
  // overview's top clients count it), in the window.
  async function loadClient() {
    const id = state.client;
    const scope = withParams(endpointParams(windowParams()), { "clientId[]": id });
    const top = topOf(scope);
    const oldest = withParams(endpointParams(), { "clientId[]": id, startTime: "0001-01-01T00:00:00Z", sortOrder: "asc", pageSize: 1 });
    const [entries, first, totals, ...lists] = await Promise.all([
      api("client", withParams(endpointParams(), { "clientId[]": id })),
      api("activity-log", oldest),
      totalsAndTimeline(scope),
      top("question"),
      top("registrableDomain"),
      top("question", BLOCKED),
      top("statusCode"),
      top("upstream"),
      api("statistic/first-seen/question", withParams(scope, { limit: 10 })),
      api("statistic/first-seen/registrableDomain", withParams(scope, { limit: 10 })),
      api("statistic/latency", scope),
      api("statistic/latency/upstream", withParams(scope, { limit: 10 })),
    ]);
    const [domains, sites, blocked, status, upstreams, newNames, newSites, latency, upstreamLatency] = lists;

    const rows = clientEntries(entries.items).filter((c) => c.clientId === id);
    const endpoint = $("endpoint").value;
    const alias = rows.map((c) => c.alias).find(Boolean);
    $("client-title").textContent = alias ? `${id} (${alias})` : id;
    const where = endpoint ? `on endpoint "${endpoint}"` : "on every endpoint";
    $("client-scope").textContent = rows.length
      ? `${where}${endpoint ? "" : ": " + rows.map((c) => c.endpoint).join(", ")}`
      : `${where} (no client entry: never seen there, or deleted)`;
    $("client-log").href = viewHash("log", { keepFilters: false, clientId: listItem(id) });
    const body = document.querySelector("#client-entries tbody");
    body.replaceChildren(...labelled(body, rows.map(clientRow)));

    const ids = { total: "c-total", blocked: "c-blocked", share: "c-share", chart: "client-chart" };
    showTotalsAndTimeline(ids, totals);
    const oldestRecord = first.queries[0];
    showTime("c-first", oldestRecord ? oldestRecord.timestamp : null, "no records kept");
    const lasts = rows.map((c) => c.last).filter(Boolean).sort();
    showTime("c-last", lasts.length ? lasts[lasts.length - 1] : null, rows.length ? "data expired" : "never");
    barTable("c-top-domains", domains.counts);
    barTable("c-top-sites", sites.counts);
    barTable("c-top-blocked", blocked.counts, "blocked");
    barTable("c-by-statusCode", status.counts);
    barTable("c-by-upstream", upstreams.counts);
    newTable("c-new-names", newNames.names);
    newTable("c-new-sites", newSites.names);
    latencyTable("c-latency", [{ value: null, ...latency }, ...upstreamLatency.latencies]);
  }

  function showTime(id, iso, none) {
    $(id).textContent = iso ? localTime(iso) : none;
    $(id).dataset.value = iso || "";
    $(id).nextElementSibling.textContent = iso ? ago(iso) : "";
  }

  // Names first seen in the window: when, and their queries in it.
  function newTable(id, names) {
    const table = $(id);
    table.replaceChildren();
    if (!names.length) {
      table.append(row([element("td", "Nothing new in this window", "empty")]));
      return;
    }
    for (const { value, firstSeen, count } of names) {
      const tr = row([
        namedCell(value, "name"),
        element("td", localTime(firstSeen), "num muted when"),
        element("td", number(count), "num"),
      ]);
      Object.assign(tr.dataset, { value, firstSeen, count });
      table.append(tr);
    }
  }

  // Response times: every timed query first, then each upstream's.
  function latencyTable(id, latencies) {
    const table = $(id);
    // Milliseconds, said once in the panel's title: six columns fit a phone's width without units.
    const ms = (value) => (value === null ? "–" : Number(value).toFixed(1));
    table.replaceChildren(
      row(["", "timed", "mean", "median", "95th", "max"].map((text) => element("th", text, text ? "num" : ""))),
    );
    for (const l of latencies) {
      const name = l.value === null ? "All queries" : l.value === "" ? "(no upstream)" : l.value;
      const tr = row([
        namedCell(name, "name"),
        element("td", number(l.count), "num"),
        ...[l.meanMs, l.p50Ms, l.p95Ms, l.maxMs].map((v) => element("td", ms(v), "num")),
      ]);
      tr.dataset.upstream = l.value === null ? "*" : l.value;
      tr.dataset.numbers = JSON.stringify([l.count, l.meanMs, l.p50Ms, l.p95Ms, l.maxMs]);
      table.append(tr);
    }
    if (!latencies[0].count) table.append(row([element("td", "No response times recorded in this window", "empty")]));
  }

  // ---- query log -----------------------------------------------------------------------------

  // A list typed into one field: comma-separated, and an item that holds a comma or a quote in
  // double quotes, a quote inside them doubled ("Smith, John", "say ""hi"""); a client id may
  // hold either. Unquoted items are trimmed.
  function listItems(text) {
    const items = [];
    let item = "";
    let quoted = false; // inside quotes
    let closed = false; // the item was quoted: taken as it is
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') (item += '"'), i++;
        else if (c === '"') quoted = false;
        else item += c;
      } else if (c === ",") {
        items.push(closed ? item : item.trim());
        item = "";
        closed = false;
      } else if (c === '"' && !closed && !item.trim()) {
        quoted = closed = true;
        item = "";
      } else if (!closed) item += c;
    }
    items.push(closed ? item : item.trim());
    return items.filter((v) => v !== "");
  }
  const listItem = (value) => (/[",]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);

  // The log's filters (no window): the realtime stream takes exactly these.
  function filterParams() {
    const params = endpointParams();
    for (const id of listItems($("f-client").value)) params.append("clientId[]", id);
    for (const [name, control] of [["action[]", "f-action"], ["trigger[]", "f-trigger"], ["protocol[]", "f-protocol"]]) {
      if ($(control).value) params.append(name, $(control).value);
    }
    for (const name of ["rrType", "statusCode"]) {
      for (const value of listItems($(`f-${name}`).value)) params.append(`${name}[]`, value.toUpperCase());
    }
    const search = $("f-search").value.trim();
    if (search) {
      params.set("searchQuestion", search);
      params.set("searchQuestionMode", $("f-mode").value);
    }
    return params;
  }

  const logParams = () => new URLSearchParams([...windowParams(), ...filterParams()]);

  async function loadLog() {
    const params = withParams(logParams(), { page: state.logPage, pageSize: PAGE_SIZE });
    const [{ queries }, { count }] = await Promise.all([api("activity-log", params), api("statistic/count", logParams())]);
    const body = document.querySelector("#log tbody");
    body.replaceChildren(...labelled(body, queries.map((q) => logRow(q))));
    if (!queries.length) body.append(row([element("td", "No queries match", "empty")]));
    $("log-page").textContent = `Page ${state.logPage + 1}`;
    showNumber("log-total", count, `${number(count)} ${count === 1 ? "query" : "queries"} in all, ${number(Math.ceil(count / PAGE_SIZE))} pages`);
    $("log-prev").disabled = state.logPage === 0;
    $("log-next").disabled = queries.length < PAGE_SIZE;
  }

  function logRow(q, id) {
    const action = ACTIONS[q.action] ?? "";
    const answers = (q.answers || []).flatMap((a) => a.ips || []).join(", ");
    const tr = row([
      element("td", localTime(q.timestamp), "when"),
      namedCell(q.endpointId),
      clientLink({ clientId: q.clientId, endpoint: q.endpointId }),
      namedCell(q.question, "question"),
      element("td", q.rrType),
      element("td", q.statusCode),
      element("td", q.protocol),
      element("td", action, action === "blocked" ? "blocked" : ""),
      namedCell([q.trigger, q.triggerValue].filter(Boolean).join(": ")),
      namedCell(answers),
    ]);
    if (id !== undefined) {
      tr.classList.add("new");
      tr.dataset.id = id;
    }
    return tr;
  }

  async function downloadCsv() {
    const response = await api("activity-log/csv", logParams(), { raw: true });
    const disposition = response.headers.get("Content-Disposition") || "";
    const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || "activity-log.csv";
    const url = URL.createObjectURL(await response.blob());
    const link = element("a");
    link.href = url;
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // Live: tail the realtime stream. A token is single-use, so after a drop a new one is fetched
  // and the stream resumes after the last event received (lastEventId), losing nothing.
  function startLive() {
    stopLive();
    state.live = { source: null, lastId: null, timer: null, filters: filterParams() };
    connectLive(state.live);
  }

  function stopLive() {
    const live = state.live;
    state.live = null;
    if (!live) return;
    clearTimeout(live.timer);
    if (live.source) live.source.close();
    $("live-status").textContent = "";
  }

  async function connectLive(live) {
    const retry = (delay) => {
      if (state.live !== live) return;
      $("live-status").textContent = "reconnecting…";
      live.timer = setTimeout(() => connectLive(live), delay);
    };
    try {
      const { token } = await api("auth/token");
      if (state.live !== live) return;
      const params = new URLSearchParams(live.filters);
      params.set("authToken", token);
      if (live.lastId !== null) params.set("lastEventId", live.lastId);
      const source = new EventSource("v2/activity-log/realtime?" + params.toString());
      live.source = source;
      source.onopen = () => {
        $("live-status").textContent = "live";
        $("live-status").dataset.state = "open";
      };
      source.onmessage = (event) => {
        live.lastId = event.lastEventId;
        const body = document.querySelector("#log tbody");
        body.prepend(...labelled(body, [logRow(JSON.parse(event.data), event.lastEventId)]));
        while (body.children.length > LIVE_ROWS) body.lastElementChild.remove();
      };
      // A resume from too far back replays only the newest records (ANALYTICS_STREAM_BACKLOG):
      // the gap is shown where it is, and the next resume goes on from after it.
      source.addEventListener("skipped", (event) => {
        live.lastId = event.lastEventId;
        const body = document.querySelector("#log tbody");
        const cell = element("td", "Not replayed here: older queries received while the live view was " +
          "away (the query log's pages have them).", "empty");
        cell.colSpan = body.closest("table").tHead.rows[0].cells.length;
        body.prepend(row([cell], "gap"));
      });
      source.onerror = () => {
        source.close();
        $("live-status").dataset.state = "closed";
        retry(1000);
      };
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return showError(error);
      retry(3000);
    }
  }

  // ---- admin actions -------------------------------------------------------------------------

  // An audit log's page in the window, with the filters its controls hold ({parameter: control id}).
  function auditParams(page, controls) {
    const params = withParams(windowParams(), { page, pageSize: PAGE_SIZE });
    for (const [name, id] of Object.entries(controls)) {
      const value = $(id).value.trim();
      if (value) params.set(name, value);
    }
    return params;
  }

  async function loadAdmin() {
    const params = auditParams(state.adminPage, { action: "a-action", search: "a-search" });
    const { actions } = await api("admin-action", params);
    const body = document.querySelector("#admin tbody");
    body.replaceChildren(
      ...labelled(body, actions.map((a) => {
        const details = fields(a.metadata);
        const tr = row([
          element("td", localTime(a.timestamp)),
          element("td", a.action),
          element("td", a.keyName),
          element("td", a.sourceIp),
          details,
        ]);
        tr.dataset.id = a.id;
        return tr;
      })),
    );
    if (!actions.length) body.append(row([element("td", "No admin actions match", "empty")]));
    pager("admin", state.adminPage, actions.length);
  }

  // An object's fields as a cell, one line each ("name: value"), a value that is no text as JSON.
  function fields(object) {
    const cell = element("td", null, "fields");
    for (const [name, value] of Object.entries(object || {})) {
      cell.append(named("div", `${name}: ${typeof value === "string" ? value : JSON.stringify(value)}`));
    }
    return cell;
  }

  // ---- access log (admin): who read the queries ---------------------------------------------

  async function loadAccess() {
    const { reads } = await api("access-log", auditParams(state.accessPage, { kind: "r-kind", keyName: "r-key" }));
    const body = document.querySelector("#access tbody");
    const span = (r) => (r.startTime ? `${localTime(r.startTime)} – ${localTime(r.endTime)}` : "live");
    body.replaceChildren(
      ...labelled(body, reads.map((r) => {
        const cells = [localTime(r.timestamp), r.kind, r.keyName, r.sourceIp, span(r), r.rows ?? "open", r.bytes ?? ""];
        const tr = row([...cells.map((text) => namedCell(text)), fields(r.query)]);
        tr.dataset.id = r.id;
        return tr;
      })),
    );
    if (!reads.length) body.append(row([element("td", "No reads match", "empty")]));
    pager("access", state.accessPage, reads.length);
  }

  // ---- forms of the API's objects (alert rules, outputs) -------------------------------------

  const lineList = (text) => text.split("\n").map((v) => v.trim()).filter(Boolean);

  // Each kind of control: its element, read() its value as the API takes it (undefined: not
  // sent; an Error says what is wrong), and fill(value) to show a value as the API answered it.
  const CONTROLS = {
    text() {
      const el = element("input");
      return { el, read: () => el.value.trim() || undefined, fill: (value) => (el.value = value ?? "") };
    },
    number(field) {
      const el = element("input");
      el.type = "number";
      el.step = field.step || "1";
      const read = () => {
        if (el.validity.badInput) throw new Error(`${field.label}: not a number.`);
        return el.value.trim() === "" ? undefined : Number(el.value);
      };
      return { el, read, fill: (value) => (el.value = value ?? "") };
    },
    select(field) {
      const el = element("select");
      for (const choice of field.choices) {
        const [value, text = value] = [choice].flat();
        el.add(new Option(text, value));
      }
      return { el, read: () => el.value, fill: (value) => value !== undefined && (el.value = value) };
    },
    check() {
      const el = element("input");
      el.type = "checkbox";
      return { el, read: () => el.checked, fill: (value) => (el.checked = !!value) };
    },
    // Names separated by commas, quoted when one holds a comma (`lines`: one a line); none is
    // `field.empty` (null: all).
    list(field) {
      const el = element(field.lines ? "textarea" : "input");
      const split = field.lines ? lineList : listItems;
      const read = () => {
        const values = split(el.value);
        return values.length ? values : field.empty;
      };
      const shown = (value) => (value || []).map(field.lines ? String : listItem);
      return { el, read, fill: (value) => (el.value = shown(value).join(field.lines ? "\n" : ", ")) };
    },
    // "Name: value" a line. The API never shows the values again, so a change of an output
    // shows the names only, sends nothing unless something is typed, and then all of them.
    headers(field) {
      const el = element("textarea");
      const read = () => {
        const entries = lineList(el.value).map((line) => {
          const at = line.indexOf(":");
          if (at < 1) throw new Error(`${field.label}: "${line}" is not "Name: value".`);
          return [line.slice(0, at).trim(), line.slice(at + 1).trim()];
        });
        return entries.length ? Object.fromEntries(entries) : undefined;
      };
      const fill = (value) => {
        const names = Object.keys(value || {});
        el.value = "";
        if (names.length) el.placeholder = `unchanged: ${names.join(", ")} (type every header anew to replace them)`;
      };
      return { el, read, fill };
    },
    // A watched-domain rule's entries, "match value" a line.
    watch(field) {
      const el = element("textarea");
      const read = () => {
        const entries = lineList(el.value).map((line) => {
          const [match, ...value] = line.split(/\s+/);
          return { match, value: value.join(" ") };
        });
        return entries.length ? entries : undefined;
      };
      return { el, read, fill: (value) => (el.value = (value || []).map((w) => `${w.match} ${w.value}`).join("\n")) };
    },
    // TLS: the system's authorities (null), these authorities (PEM), or none checked.
    tls() {
      const el = element("span", null, "tls");
      const choices = [["", "the system's authorities"], ["ca", "these authorities (PEM)"], ["off", "not checked"]];
      const mode = CONTROLS.select({ choices });
      const pem = element("textarea");
      pem.name = "caCert";
      pem.placeholder = "-----BEGIN CERTIFICATE-----";
      const fit = () => (pem.hidden = mode.el.value !== "ca");
      mode.el.addEventListener("change", fit);
      el.append(mode.el, pem);
      const read = () => ({ "": null, ca: { caCert: pem.value.trim() }, off: { verify: false } })[mode.el.value];
      const fill = (value) => {
        mode.el.value = !value ? "" : value.verify === false ? "off" : "ca";
        pem.value = (value && value.caCert) || "";
        fit();
      };
      return { el: mode.el, box: el, read, fill };
    },
  };

  // A form that creates (values null) or changes (values: the object as the API answered it)
  // an object of the API. `fields`: {name, label, type (of CONTROLS; text), kinds (shown only
  // for these kinds), create (only when creating), fixed (not changeable), choices, placeholder,
  // hint}. A change sends only the fields whose value changed. `save(body)` calls the API: what
  // it refuses is said in the form, which stays as it was; once saved the form goes.
  function apiForm(id, title, fields, values, save) {
    const creating = values === null;
    const form = element("form", null, "panel api-form");
    form.id = id;
    form.autocomplete = "off";
    const controls = [];
    const grid = element("div", null, "fields");
    for (const field of fields.filter((f) => creating || !f.create)) {
      const control = CONTROLS[field.type || "text"](field);
      control.el.name = field.name;
      if (field.placeholder) control.el.placeholder = field.placeholder;
      control.fill(creating ? undefined : values[field.name]);
      control.el.disabled = !creating && !!field.fixed;
      const label = element("label", null, field.type === "check" ? "check" : "");
      label.append(element("span", field.label), control.box || control.el);
      if (field.hint) label.append(element("span", field.hint, "hint"));
      controls.push({ field, label, ...control, was: creating ? undefined : JSON.stringify(control.read()) });
      grid.append(label);
    }
    const kind = controls.find((c) => c.field.name === "kind");
    const fit = () => {
      for (const c of controls) c.label.hidden = !!c.field.kinds && !c.field.kinds.includes(kind.read());
    };
    kind.el.addEventListener("change", fit);
    fit();
    const error = element("p", null, "error form-error");
    error.setAttribute("role", "alert");
    const submit = element("button", creating ? "Create" : "Save");
    submit.type = "submit";
    const actions = element("div", null, "controls");
    actions.append(submit, button("Cancel", () => form.remove()));
    form.append(element("h2", title), grid, error, actions);

    const body = () => {
      const sent = {};
      for (const c of controls) {
        if (c.label.hidden || (!creating && c.field.fixed)) continue;
        const value = c.read();
        if (value !== undefined && (creating || JSON.stringify(value) !== c.was)) sent[c.field.name] = value;
      }
      if (!creating && !Object.keys(sent).length) throw new Error("Nothing to save: no field was changed.");
      return sent;
    };
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.textContent = "";
      submit.disabled = true;
      try {
        await save(body());
        form.remove();
      } catch (refused) {
        if (refused instanceof ApiError && refused.status === 401) showError(refused);
        else error.textContent = refused.message;
      } finally {
        submit.disabled = false;
      }
    });
    return form;
  }

  // Show a form in its place on the page (one at a time there).
  function openForm(place, form) {
    $(place).replaceChildren(form);
    form.querySelector("input:not([disabled]), select:not([disabled]), textarea").focus();
  }

  // ---- alerts (admin): the rules and what they fired ---------------------------------------

  const COMMON_RULE_FIELDS = ["id", "kind", "endpointIds", "clientIds", "cooldown", "destinations", "createdAt", "updatedAt"];
  const RULE_KINDS = ["feed-silent", "new-client", "new-domain", "watched-domain", "client-share"];
  const SHARE = ["client-share"];
  // The fields of POST /v2/alert-rule (docs/alerts.md); a default is a placeholder, so a field
  // left empty takes the API's default.
  const RULE_FIELDS = [
    { name: "kind", label: "Kind", type: "select", choices: RULE_KINDS, fixed: true },
    { name: "endpointIds", label: "Endpoints", type: "list", placeholder: "home, office" },
    { name: "clientIds", label: "Clients", type: "list", empty: null, placeholder: "every client", kinds: RULE_KINDS.slice(1) },
    { name: "cooldown", label: "Cooldown (seconds)", type: "number", placeholder: "3600" },
    {
      name: "destinations",
      label: "Destinations",
      type: "list",
      lines: true,
      placeholder: "https://hooks.example.net/dns\nntfy://ntfy.example.net/dns-alerts",
      hint: "One URL a line: http(s) is a signed webhook, another scheme a notification URL (apprise).",
    },
    { name: "silentMinutes", label: "Silent for (minutes)", type: "number", kinds: ["feed-silent"] },
    { name: "days", label: "Not asked for (days)", type: "number", placeholder: "30", kinds: ["new-domain"] },
    {
      name: "allowlist",
      label: "Allowlist",
      type: "list",
      lines: true,
      placeholder: "apple.com\nmicrosoft.com",
      hint: "One domain a line; it covers its subdomains.",
      kinds: ["new-domain"],
    },
    {
      name: "watch",
      label: "Watched names",
      type: "watch",
      placeholder: "suffix doh.example\nexact bad.example\npattern ^[a-z0-9]{20,}\\.example$",
      hint: "One a line: exact, suffix or pattern (RE2), then the name.",
      kinds: ["watched-domain"],
    },
    {
      name: "metric",
      label: "Metric",
      type: "select",
      choices: [["nxdomain", "NXDOMAIN share"], ["blocked", "blocked share"], ["rate", "queries a minute"]],
      kinds: SHARE,
    },
    { name: "threshold", label: "Threshold", type: "number", step: "any", hint: "A share (0-1), or a rate.", kinds: SHARE },
    { name: "windowMinutes", label: "Window (minutes)", type: "number", placeholder: "10", kinds: SHARE },
    { name: "minQueries", label: "Judged from (queries)", type: "number", placeholder: "20", kinds: SHARE },
    { name: "baselineDays", label: "Baseline (days)", type: "number", placeholder: "0 (off)", hint: "Rate only.", kinds: SHARE },
    { name: "baselineFactor", label: "Times the baseline", type: "number", step: "any", placeholder: "3", kinds: SHARE },
  ];

  // A new rule's answer holds its webhook signing secret, shown this once (the API never
  // shows it again): said in the note, never in the list or a form.
  function newRule() {
    openForm("rule-form-place", apiForm("rule-form", "New alert rule", RULE_FIELDS, null, async (body) => {
      const made = await api("alert-rule", null, { method: "POST", body });
      await run(loadAlerts);
      $("app-note").textContent = `Created alert rule ${made.id} (${made.kind}). Its webhooks are signed with ` +
        `this secret, shown only now: ${made.secret}`;
    }));
  }

  function changeRule(r) {
    openForm("rule-form-place", apiForm("rule-form", `Alert rule ${r.id}`, RULE_FIELDS, r, async (body) => {
      await api(`alert-rule/${r.id}`, null, { method: "PATCH", body });
      await run(loadAlerts);
      $("app-note").textContent = `Saved alert rule ${r.id}.`;
    }));
  }

  async function deleteRule(r) {
    const question = `Delete alert rule ${r.id} (${r.kind})? Its alerts stay in the history; ` +
      "deliveries not made yet are given up.";
    if (!window.confirm(question)) return;
    try {
      await api(`alert-rule/${r.id}`, null, { method: "DELETE" });
    } catch (error) {
      return showError(error);
    }
    await run(loadAlerts);
    $("app-note").textContent = `Deleted alert rule ${r.id}.`;
  }

  async function loadAlerts() {
    const [{ items }, { alerts }] = await Promise.all([
      api("alert-rule"),
      api("alert", auditParams(state.alertsPage, {})),
    ]);
    const rules = document.querySelector("#alert-rules tbody");
    rules.replaceChildren(
      ...labelled(rules, items.map((r) => {
        const settings = ruleSettings(r);
        const cells = [r.id, r.kind, r.endpointIds.join(", "), (r.clientIds || ["all"]).join(", "), `${r.cooldown} s`];
        const destinations = element("td");
        destinations.append(...r.destinations.map((url) => named("div", withoutCredentials(url))));
        const actions = element("td", null, "actions");
        actions.append(
          button("Change", () => changeRule(r), "small rule-change"),
          " ",
          button("Delete", () => deleteRule(r), "small danger rule-delete"),
        );
        const tr = row([...cells.map((text) => namedCell(text)), settings, destinations, actions]);
        tr.dataset.id = r.id;
        return tr;
      })),
    );
    if (!items.length) rules.append(row([element("td", "No alert rules yet", "empty")]));
    const body = document.querySelector("#alerts tbody");
    body.replaceChildren(
      ...labelled(body, alerts.map((a) => {
        const deliveries = element("td");
        for (const d of a.deliveries) {
          const said = `${d.state}: ${withoutCredentials(d.destination)}${d.error ? ` (${d.error})` : ""}`;
          deliveries.append(named("div", said, `delivery ${d.state}`));
        }
        const cells = [localTime(a.timestamp), a.ruleId, a.kind, a.endpointId];
        const tr = row([...cells.map((text) => namedCell(text)), element("td", a.message, "message"), deliveries]);
        tr.dataset.id = a.id;
        return tr;
      })),
    );
    if (!alerts.length) body.append(row([element("td", "No alerts in the window", "empty")]));
    pager("alerts", state.alertsPage, alerts.length);
  }

  // A rule's own fields (its kind's), labelled as its form labels them; a kind with none says so.
  function ruleSettings(r) {
    const cell = element("td", null, "fields");
    for (const field of RULE_FIELDS.filter((f) => !COMMON_RULE_FIELDS.includes(f.name) && f.name in r)) {
      const value = r[field.name];
      const shown = field.type === "watch" ? value.map((w) => `${w.match} ${w.value}`) : [value ?? "–"].flat();
      cell.append(named("div", `${field.label}: ${shown.join(", ")}`));
    }
    if (!cell.childElementCount) cell.append(element("span", "none", "muted"));
    return cell;
  }

  // Where an alert went, with any password or token in its address left out (a notification
  // URL may carry one in its user part: mailto://user:password@host).
  const withoutCredentials = (url) => url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, "$1…@");

  function pager(view, number, shown) {
    $(`${view}-page`).textContent = `Page ${number + 1}`;
    $(`${view}-prev`).disabled = number === 0;
    $(`${view}-next`).disabled = shown < PAGE_SIZE;
  }

  // ---- privacy settings (admin) --------------------------------------------------------------

  const PRIVACY_CHOICES = {
    clientIp: ["keep", "truncate", "hash", "drop"],
    ipv4Prefix: null,
    ipv6Prefix: null,
    clientMetadata: ["keep", "drop"],
    question: ["keep", "registrableDomain", "drop"],
    answers: ["keep", "drop"],
    unloggedClients: ["counted", "notCounted"],
    steps: "steps",
  };
  const STEP_FIELDS = ["clientIp", "ipv4Prefix", "ipv6Prefix", "clientMetadata", "question", "answers"];
  // The same object whatever the order of its keys: what the API answers against what was typed.
  const canonical = (value) =>
    JSON.stringify(value, (_, v) => (v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort()) : v));

  // Age steps as rows: after how many days, then each field it coarsens ("–": left as it is).
  function stepsEditor(steps) {
    const el = element("div", null, "steps");
    const list = element("div");
    const add = (step = {}) => {
      const line = element("div", null, "step");
      const after = element("input");
      Object.assign(after, { type: "number", min: 0, value: step.afterDays ?? "", className: "prefix", title: "after days" });
      after.dataset.field = "afterDays";
      line.append(element("span", "after", "muted"), after, element("span", "days:", "muted"));
      for (const field of STEP_FIELDS) {
        const choices = PRIVACY_CHOICES[field];
        let control;
        if (choices) {
          control = element("select");
          control.append(new Option(`${field} –`, ""), ...choices.map((choice) => new Option(`${field} ${choice}`, choice)));
        } else {
          control = element("input");
          Object.assign(control, { type: "number", min: 0, max: field === "ipv4Prefix" ? 32 : 128, className: "prefix", placeholder: field });
        }
        control.title = field;
        control.dataset.field = field;
        control.value = step[field] ?? "";
        line.append(control);
      }
      line.append(button("Remove", () => line.remove(), "small step-remove"));
      list.append(line);
    };
    (steps || []).forEach(add);
    el.append(list, button("Add step", () => add(), "small step-add"));
    const read = () =>
      Array.from(list.children, (line) => {
        const step = {};
        for (const control of line.querySelectorAll("[data-field]")) {
          const { field } = control.dataset;
          if (control.value === "") {
            if (field === "afterDays") throw new Error("Every age step needs its number of days.");
            continue;
          }
          step[field] = control.tagName === "INPUT" ? Number(control.value) : control.value;
        }
        return step;
      });
    return { el, read };
  }
  const PRIVACY_DEFAULT = "_default";

  async function loadPrivacy() {
    const { items } = await api("privacy");
    const body = document.querySelector("#privacy tbody");
    const names = Object.keys(items);
    // Known endpoints without settings of their own follow the default: shown so they can get some.
    for (const option of $("endpoint").options) {
      if (option.value && !names.includes(option.value)) names.push(option.value);
    }
    for (const extra of state.privacyAdded) if (!names.includes(extra)) names.push(extra);
    // A key limited to endpoints is answered all of its own and no default.
    const fallback = items[PRIVACY_DEFAULT];
    const shown = names.filter((name) => items[name] || fallback);
    body.replaceChildren(...labelled(body, shown.map((name) => privacyRow(name, items[name] || fallback, !items[name]))));
  }

  function privacyRow(endpoint, settings, inherited) {
    const controls = {};
    const cells = [element("td", endpoint === PRIVACY_DEFAULT ? "Default (all endpoints)" : endpoint)];
    if (inherited) cells[0].append(element("span", " · follows the default", "muted"));
    if (!inherited && settings.pendingRewrite) {
      cells[0].append(element("span", ` · ${number(settings.pendingRewrite)} stored records to rewrite`, "muted pending"));
    }
    for (const [field, choices] of Object.entries(PRIVACY_CHOICES)) {
      let control;
      if (choices === "steps") {
        const editor = stepsEditor(settings.steps);
        controls[field] = editor;
        const cell = element("td");
        cell.append(editor.el);
        cells.push(cell);
        continue;
      }
      if (choices) {
        control = element("select");
        control.append(...choices.map((choice) => new Option(choice, choice)));
      } else {
        control = element("input");
        control.type = "number";
        control.min = 0;
        control.max = field === "ipv4Prefix" ? 32 : 128;
        control.className = "prefix";
      }
      control.value = String(settings[field]);
      control.name = field;
      controls[field] = control;
      const cell = element("td");
      cell.append(control);
      cells.push(cell);
    }
    const save = button("Save", () => savePrivacy(endpoint, settings, controls).catch(showError), "small privacy-save");
    const cell = element("td");
    cell.append(save);
    cells.push(cell);
    const tr = row(cells);
    tr.dataset.endpoint = endpoint;
    return tr;
  }

  // Only what the form changed is sent: a field left alone keeps following the default.
  async function savePrivacy(endpoint, shown, controls) {
    const body = {};
    for (const [field, control] of Object.entries(controls)) {
      const kind = PRIVACY_CHOICES[field];
      if (kind === "steps") {
        const steps = control.read();
        if (canonical(steps) !== canonical(shown[field])) body[field] = steps;
        continue;
      }
      const value = kind ? control.value : Number(control.value);
      if (value !== shown[field]) body[field] = value;
    }
    if (!Object.keys(body).length) {
      $("app-note").textContent = "Nothing to save: no setting was changed.";
      return;
    }
    const answer = await api(`privacy/${encodeURIComponent(endpoint)}`, null, { method: "PUT", body });
    await run(loadPrivacy);
    const rewrite = answer.pendingRewrite ? ` ${number(answer.pendingRewrite)} stored records are rewritten to it.` : "";
    $("app-note").textContent = `Saved the settings of ${endpoint === PRIVACY_DEFAULT ? "the default" : `"${endpoint}"`}.${rewrite}`;
  }

  // ---- outputs -------------------------------------------------------------------------------

  function outputState(o) {
    if (o.paused) return "paused";
    if (!o.failures) return "delivering";
    return `failing (${number(o.failures)} ${o.failures === 1 ? "attempt" : "attempts"})`;
  }

  const OUTPUT_KINDS = ["http", "syslog", "file"];
  const NETWORK = ["http", "syslog"];
  // The fields of POST /v2/output (docs/outputs.md); PATCH takes them all but kind and start.
  const OUTPUT_FIELDS = [
    { name: "kind", label: "Kind", type: "select", choices: OUTPUT_KINDS, fixed: true },
    {
      name: "url",
      label: "URL",
      placeholder: "https://vector.lan:8687/",
      hint: "http: http(s)://…; syslog: udp://, tcp:// or tls://host:port; file: file:///absolute/path.",
    },
    { name: "name", label: "Name", placeholder: "the URL" },
    { name: "endpointIds", label: "Endpoints", type: "list", empty: null, placeholder: "every endpoint" },
    { name: "shape", label: "Record shape", type: "select", choices: [["queryData", "QueryData"], ["controlD", "Control D"]] },
    {
      name: "start",
      label: "Start from",
      type: "select",
      choices: [["oldest", "every record still stored"], ["now", "records stored from now on"]],
      create: true,
    },
    { name: "paused", label: "Create it paused", type: "check", create: true },
    {
      name: "headers",
      label: "Headers",
      type: "headers",
      placeholder: "Authorization: Bearer …",
      hint: "\"Name: value\" a line; never shown again.",
      kinds: ["http"],
    },
    { name: "tls", label: "Certificates", type: "tls", hint: "https:// and tls:// only.", kinds: NETWORK },
    { name: "format", label: "Format", type: "select", choices: ["rfc5424", "rfc3164"], kinds: ["syslog"] },
    { name: "facility", label: "Facility", type: "number", placeholder: "16 (local0)", kinds: ["syslog"] },
    { name: "appName", label: "App name", placeholder: "dns-analytics", kinds: ["syslog"] },
    { name: "maxBytes", label: "Rotate past (bytes)", type: "number", placeholder: "104857600", kinds: ["file"] },
    { name: "keep", label: "Rotated files kept", type: "number", placeholder: "5", kinds: ["file"] },
    { name: "batchSize", label: "Records a batch", type: "number", placeholder: "500" },
    { name: "timeoutSeconds", label: "Timeout (seconds)", type: "number", placeholder: "10", kinds: NETWORK },
  ];

  function newOutput() {
    openForm("output-form-place", apiForm("output-form", "New output", OUTPUT_FIELDS, null, async (body) => {
      const made = await api("output", null, { method: "POST", body });
      await run(loadOutputs);
      $("app-note").textContent = `Created output ${made.id} (${made.name}): ${number(made.backlog)} records to send.`;
    }));
  }

  // An output's settings as the form shows them: the kind's options beside the common fields.
  function changeOutputSettings(o) {
    const values = { ...o.options, kind: o.kind, url: o.url, name: o.name, endpointIds: o.endpointIds, shape: o.shape };
    openForm("output-form-place", apiForm("output-form", `Output ${o.name}`, OUTPUT_FIELDS, values, async (body) => {
      await api(`output/${o.id}`, null, { method: "PATCH", body });
      await run(loadOutputs);
      $("app-note").textContent = `Saved output ${o.id}; it goes on from where it was.`;
    }));
  }

  async function loadOutputs() {
    const { outputs } = await api("output");
    const body = document.querySelector("#outputs tbody");
    body.replaceChildren(
      ...labelled(body, outputs.map((o) => {
        const actions = element("td");
        actions.append(
          button("Change", () => changeOutputSettings(o), "output-change"),
          button(o.paused ? "Resume" : "Pause", () => changeOutput(o, "PATCH", { paused: !o.paused }), "output-pause"),
          button("Delete", () => {
            if (window.confirm(`Delete the output ${o.name}? Its delivery stops; the records stay.`)) {
              changeOutput(o, "DELETE");
            }
          }, "output-delete danger"),
        );
        const backlog = o.backlog > o.backlogLimit ? `over ${number(o.backlogLimit)}` : number(o.backlog);
        const tr = row([
          element("td", o.name),
          element("td", o.kind + (o.options.format ? ` ${o.options.format}` : "")),
          element("td", o.endpointIds === null ? "all" : o.endpointIds.join(", ")),
          element("td", outputState(o), "output-state"),
          element("td", number(o.delivered), "num"),
          element("td", backlog, "num"),
          element("td", number(o.skipped), "num"),
          element("td", o.lastDeliveryAt ? ago(o.lastDeliveryAt) : "never"),
          element("td", o.lastError ? `${ago(o.lastErrorAt)}: ${o.lastError}` : ""),
          actions,
        ]);
        tr.dataset.id = o.id;
        return tr;
      })),
    );
    if (!outputs.length) body.append(row([element("td", "No outputs", "empty")]));
  }

  async function changeOutput(o, method, body) {
    try {
      await api(`output/${o.id}`, null, { method, body });
    } catch (error) {
      showError(error);
    }
    run(loadOutputs);
  }

  // ---- views, sign-in ------------------------------------------------------------------------

  const LOADERS = {
    overview: loadOverview,
    clients: loadClients,
    client: loadClient,
    log: loadLog,
    admin: loadAdmin,
    access: loadAccess,
    privacy: loadPrivacy,
    outputs: loadOutputs,
    alerts: loadAlerts,
  };
  const ADMIN_VIEWS = ["admin", "access", "privacy", "outputs", "alerts"];

  // Run a view's loader; the page says when it is done (data-loaded) and for which URL
  // (data-url), which the tests wait for. Only the latest run says so: an older one that ends
  // later is not what the page shows.
  async function run(loader) {
    const app = $("app");
    const ticket = (state.runs = (state.runs || 0) + 1);
    delete app.dataset.loaded;
    $("app-error").textContent = "";
    $("app-note").textContent = "";
    try {
      await loader();
      if (ticket === state.runs) app.dataset.loaded = state.view;
    } catch (error) {
      showError(error);
      if (ticket === state.runs) app.dataset.loaded = "error";
    }
    if (ticket === state.runs) app.dataset.url = location.hash;
  }

  // ---- the page's URL: every view's state, never the key -------------------------------------
  // "#log?window=24h&endpoint=home&clientId=laptop&page=2": the URL is the view's state, so a
  // view can be bookmarked, reloaded and shared, and loading one (after sign-in) restores it.
  // Every change of view, window, endpoint, filter or page is a new URL (Back goes back).

  const WINDOW_NAMES = { 3600: "1h", 86400: "24h", 604800: "7d", 2592000: "30d" };
  const DEFAULT_WINDOW = "86400";
  // Each view's controls, by their name in the URL (the log's are the API's parameters).
  const VIEW_CONTROLS = {
    clients: { search: "client-search" },
    log: {
      clientId: "f-client",
      action: "f-action",
      trigger: "f-trigger",
      rrType: "f-rrType",
      statusCode: "f-statusCode",
      protocol: "f-protocol",
      searchQuestion: "f-search",
      searchQuestionMode: "f-mode",
    },
    admin: { action: "a-action", search: "a-search" },
    access: { kind: "r-kind", keyName: "r-key" },
  };
  const PAGES = { log: "logPage", admin: "adminPage", access: "accessPage", alerts: "alertsPage" };
  const SORTS = ["endpoint", "clientId", "alias", "host", "ip", "mac", "os", "vendor", "last", "queries"];
  // Each control's value as the page came: a control left at it is left out of the URL.
  const DEFAULTS = {};
  for (const ids of Object.values(VIEW_CONTROLS)) for (const id of Object.values(ids)) DEFAULTS[id] = $(id).value;

  // The URL of a view in the current state: its window and endpoint, and (with keepFilters)
  // its own filters, sort and page; `extra` sets (or, with "" or null, drops) parameters.
  function viewHash(view, { keepFilters = true, ...extra } = {}) {
    const params = new URLSearchParams();
    if ($("window").value === "custom") {
      const start = fromLocalInput($("custom-start").value);
      const end = fromLocalInput($("custom-end").value);
      if (!isNaN(start) && !isNaN(end)) {
        params.set("start", start.toISOString());
        params.set("end", end.toISOString());
      }
    } else {
      params.set("window", WINDOW_NAMES[$("window").value]);
    }
    if ($("endpoint").value) params.set("endpoint", $("endpoint").value);
    if (view === "client" && state.client !== null) params.set("clientId", state.client);
    if (keepFilters) {
      for (const [name, id] of Object.entries(VIEW_CONTROLS[view] || {})) {
        if ($(id).value !== DEFAULTS[id]) params.set(name, $(id).value);
      }
      const { column, descending } = state.sort;
      if (view === "clients" && (column !== "last" || !descending)) params.set("sort", (descending ? "-" : "") + column);
      if (state[PAGES[view]]) params.set("page", state[PAGES[view]] + 1);
    }
    for (const [name, value] of Object.entries(extra)) {
      if (value === null || value === "") params.delete(name);
      else params.set(name, value);
    }
    const query = params.toString();
    return `#${view}${query ? "?" + query : ""}`;
  }

  function readHash() {
    const text = location.hash.slice(1);
    const at = text.indexOf("?");
    return { view: at < 0 ? text : text.slice(0, at), params: new URLSearchParams(at < 0 ? "" : text.slice(at + 1)) };
  }

  // Set the controls (and the client, sort and page) to what the URL says; what it leaves out
  // is the default, so the URL alone decides what the view shows.
  function applyHash(view, params) {
    const start = new Date(params.get("start"));
    const end = new Date(params.get("end"));
    const named = Object.keys(WINDOW_NAMES).find((seconds) => WINDOW_NAMES[seconds] === params.get("window"));
    if (params.has("start") && params.has("end") && !isNaN(start) && !isNaN(end)) {
      $("window").value = "custom";
      $("custom-start").value = toLocalInput(start);
      $("custom-end").value = toLocalInput(end);
    } else {
      $("window").value = named || DEFAULT_WINDOW;
    }
    $("custom-window").hidden = $("window").value !== "custom";
    const endpoint = params.get("endpoint") || "";
    // An endpoint the menu does not list (no client entry left): the API still answers for
    // it, or says why this key may not read it.
    if (endpoint && ![...$("endpoint").options].some((o) => o.value === endpoint)) $("endpoint").add(new Option(endpoint));
    $("endpoint").value = endpoint;
    for (const [name, id] of Object.entries(VIEW_CONTROLS[view] || {})) $(id).value = params.get(name) ?? DEFAULTS[id];
    if (view === "clients") {
      const sort = params.get("sort") || "-last";
      const column = sort.replace(/^-/, "");
      state.sort = SORTS.includes(column) ? { column, descending: sort.startsWith("-") } : { column: "last", descending: true };
    }
    if (PAGES[view]) state[PAGES[view]] = Math.max(0, (parseInt(params.get("page"), 10) || 1) - 1);
    state.client = view === "client" ? params.get("clientId") : null;
  }

  // Show the view the controls now describe: a new URL, whose hashchange loads it; the same
  // URL again (Refresh) loads it anew.
  function go(view = state.view, extra = {}) {
    const hash = viewHash(view, extra);
    if (hash === location.hash) route(true);
    else location.hash = hash;
  }

  // A change that loads nothing (a search or sort of the client list) only rewrites the URL.
  function rewriteUrl() {
    history.replaceState(null, "", viewHash(state.view));
    state.scope = scopeOf(readHash().params);
    state.routed = location.hash;
    if ($("app").dataset.loaded) $("app").dataset.url = location.hash;
    updateNav();
  }

  // The nav links carry the window and endpoint, and each view's own filters.
  function updateNav() {
    for (const link of document.querySelectorAll("#nav a")) link.href = viewHash(link.dataset.view);
  }

  const scopeOf = (params) => {
    const copy = new URLSearchParams(params);
    copy.delete("page");
    return `${state.view}?${copy}`;
  };

  function refresh() {
    try {
      chooseWindow();
    } catch (error) {
      $("app-error").textContent = error.message;
      return;
    }
    run(LOADERS[state.view]);
  }

  // Load the view the URL names. Another page of the same view and window keeps the window
  // (paging never shifts); anything else, or `again` (Refresh), takes the window anew.
  function route(again = false) {
    if (!state.who) return;
    let { view, params } = readHash();
    view = view || "overview";
    const refused = (ADMIN_VIEWS.includes(view) && !can("admin")) || (view === "client" && !params.get("clientId"));
    if (!(view in LOADERS) || refused) view = "overview";
    applyHash(view, params);
    if (view !== "log") {
      $("live").checked = false;
      stopLive();
    } else if (state.live && state.live.filters.toString() !== filterParams().toString()) {
      startLive();
    }
    state.view = view;
    for (const section of document.querySelectorAll("main > section")) section.hidden = section.dataset.view !== view;
    for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("current", link.dataset.view === view);
    // The URL in its full form: what the view shows, to copy as it is.
    history.replaceState(null, "", viewHash(view));
    state.routed = location.hash;
    const scope = scopeOf(readHash().params);
    const samePage = !again && state.scope === scope && state.window;
    state.scope = scope;
    updateNav();
    if (samePage) run(LOADERS[view]);
    else refresh();
  }

  async function loadEndpoints() {
    let names = state.who.endpoints;
    if (names === null) names = Object.keys((await api("client")).items);
    const select = $("endpoint");
    select.replaceChildren(new Option("All endpoints", ""), ...names.map((name) => new Option(name)));
  }

  async function signIn(key) {
    state.key = key;
    try {
      state.who = await api("auth/key");
    } catch (error) {
      state.key = null;
      throw error;
    }
    sessionStorage.setItem(KEY_STORE, key);
    if (!can("read")) {
      state.who = null;
      state.key = null;
      sessionStorage.removeItem(KEY_STORE);
      throw new Error("This key may not read (it has no read scope), so there is nothing to show.");
    }
    $("key-name").textContent = `${state.who.name} · ${state.who.scopes.join(", ")}`;
    for (const view of ADMIN_VIEWS) $(`nav-${view}`).hidden = !can("admin");
    document.body.classList.toggle("can-write", can("write"));
    for (const th of document.querySelectorAll("th.write-only")) th.hidden = !can("write");
    await loadEndpoints();
    $("signin").hidden = true;
    $("app").hidden = false;
    $("nav").hidden = false;
    $("who").hidden = false;
    state.scope = null;
    route();
  }

  function signOut(message = "") {
    stopLive();
    sessionStorage.removeItem(KEY_STORE);
    state.key = null;
    state.who = null;
    $("app").hidden = true;
    $("nav").hidden = true;
    $("who").hidden = true;
    $("signin").hidden = false;
    $("signin-error").textContent = message;
    $("signin-key").value = "";
    $("signin-key").focus();
  }

  function wire() {
    $("signin-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      $("signin-error").textContent = "";
      try {
        await signIn($("signin-key").value.trim());
        $("signin-key").value = "";
      } catch (error) {
        const refused = error instanceof ApiError && error.status === 401;
        $("signin-error").textContent = refused ? `That key was refused: ${error.message}` : error.message;
      }
    });
    $("sign-out").addEventListener("click", () => signOut());
    // Setting the hash twice before the first event runs fires two events for one URL: once.
    window.addEventListener("hashchange", () => location.hash !== state.routed && route());
    $("scope").addEventListener("submit", (event) => event.preventDefault());
    $("window").addEventListener("change", () => {
      const custom = $("window").value === "custom";
      $("custom-window").hidden = !custom;
      if (custom && !$("custom-start").value) {
        $("custom-end").value = toLocalInput(new Date());
        $("custom-start").value = toLocalInput(new Date(Date.now() - 86400000));
      }
      restartView();
    });
    for (const id of ["custom-start", "custom-end", "endpoint"]) $(id).addEventListener("change", restartView);
    $("refresh").addEventListener("click", restartView);

    for (const th of document.querySelectorAll("#clients th[data-sort]")) {
      th.addEventListener("click", () => {
        const column = th.dataset.sort;
        state.sort = { column, descending: state.sort.column === column ? !state.sort.descending : column === "last" };
        renderClients();
        rewriteUrl();
      });
    }
    $("client-search").addEventListener("input", () => {
      renderClients();
      rewriteUrl();
    });
    $("delete-until").addEventListener("input", describeDeletion);
    $("confirm-delete").addEventListener("close", () => {
      if ($("confirm-delete").returnValue === "delete") deleteClient().catch(showError);
    });

    $("log-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      restartView();
    });
    $("log-prev").addEventListener("click", () => page("logPage", -1));
    $("log-next").addEventListener("click", () => page("logPage", 1));
    $("csv").addEventListener("click", () => downloadCsv().catch(showError));
    $("live").addEventListener("change", () => ($("live").checked ? startLive() : stopLive()));

    $("admin-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      restartView();
    });
    $("access-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      restartView();
    });
    for (const view of ["admin", "access", "alerts"]) {
      $(`${view}-prev`).addEventListener("click", () => page(`${view}Page`, -1));
      $(`${view}-next`).addEventListener("click", () => page(`${view}Page`, 1));
    }

    $("rule-new").addEventListener("click", newRule);
    $("output-new").addEventListener("click", newOutput);

    $("privacy-add").addEventListener("submit", (event) => {
      event.preventDefault();
      const name = $("privacy-endpoint").value.trim();
      if (name && !state.privacyAdded.includes(name)) state.privacyAdded.push(name);
      $("privacy-endpoint").value = "";
      run(loadPrivacy);
    });
  }

  // New filters or window (or Refresh): the first page, in a window taken anew; a live stream
  // follows the new filters (route).
  const restartView = () => go(state.view, { page: null });

  function page(which, step) {
    const next = Math.max(0, state[which] + step);
    go(state.view, { page: next ? next + 1 : null });
  }

  wire();
  const saved = sessionStorage.getItem(KEY_STORE);
  if (saved) {
    signIn(saved).catch((error) => signOut(error.message));
  } else {
    signOut();
  }
})();
