// The dashboard: a client of the public /v2 API, with nothing the API does not answer.
// The key lives in sessionStorage and travels only in the Authorization header.
"use strict";

(() => {
  const KEY_STORE = "analytics-api-key";
  const INTERVALS = [60, 300, 900, 3600, 10800, 21600, 43200, 86400, 604800];
  const MAX_BUCKETS = 200;
  const PAGE_SIZE = 50;
  const LIVE_ROWS = 500;
  const ACTIONS = { "-1": "failed", 0: "blocked", 1: "bypassed", 2: "spoofed", 3: "redirected" };

  const $ = (id) => document.getElementById(id);
  const state = {
    key: null,
    who: null,
    window: null,
    view: null,
    clients: [],
    sort: { column: "last", descending: true },
    logPage: 0,
    adminPage: 0,
    live: null,
    chart: null,
    chartSeries: null,
    deleting: null,
  };

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // One call to the API; the answer's JSON, or the Response itself with raw.
  async function api(path, params, { method = "GET", body, raw = false } = {}) {
    const headers = { Authorization: state.key };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const query = params && [...params].length ? "?" + params.toString() : "";
    const response = await fetch("v2/" + path + query, {
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

  async function loadOverview() {
    const scope = endpointParams(windowParams());
    const previous = endpointParams(windowParams(previousWindow()));
    const blocked = { "action[]": "0" };
    const interval = intervalFor(state.window);
    const series = withParams(scope, { interval, limit: 1000 });
    const top = (group, extra = {}) => api(`statistic/count/${group}`, withParams(scope, { limit: 10, ...extra }));
    const [total, blockedTotal, before, blockedBefore, queries, blockedQueries, ...lists] = await Promise.all([
      api("statistic/count", scope),
      api("statistic/count", withParams(scope, blocked)),
      api("statistic/count", previous),
      api("statistic/count", withParams(previous, blocked)),
      api("statistic/timeseries", series),
      api("statistic/timeseries", withParams(series, blocked)),
      top("question"),
      top("question", blocked),
      top("clientId"),
      top("protocol"),
      top("statusCode"),
      top("rrType"),
      api("statistic/trend/question", withParams(scope, { limit: 10 })),
      api("statistic/trend/clientId", withParams(scope, { limit: 10 })),
    ]);
    const [domains, blockedDomains, clients, protocol, status, rrType, trendDomains, trendClients] = lists;

    const share = (part, whole) => (whole ? part / whole : 0);
    showNumber("total-count", total.count, number(total.count));
    showNumber("blocked-count", blockedTotal.count, number(blockedTotal.count));
    const nowShare = share(blockedTotal.count, total.count);
    showNumber("blocked-share", nowShare, `${(nowShare * 100).toFixed(1)} %`);
    showNumber("previous-count", before.count, number(before.count));
    showChange("total-change", total.count, before.count);
    showChange("blocked-change", blockedTotal.count, blockedBefore.count);
    const shareBefore = share(blockedBefore.count, before.count);
    const points = ((nowShare - shareBefore) * 100).toFixed(1);
    $("share-change").textContent = `${points >= 0 ? "+" : ""}${points} points vs previous`;

    drawChart(queries.queries, blockedQueries.queries);
    barTable("top-domains", domains.counts);
    barTable("top-blocked", blockedDomains.counts, "blocked");
    barTable("top-clients", clients.counts);
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

  function barTable(id, counts, className) {
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
      name.append(fill, element("span", value === "" ? "(unknown)" : value, "text"));
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
        element("td", value === "" ? "(unknown)" : value, "name"),
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

  function drawChart(queries, blocked) {
    state.chartSeries = [queries, blocked];
    const box = $("chart");
    const colour = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    const data = [queries.map((q) => Date.parse(q.time) / 1000), queries.map((q) => q.count), blocked.map((q) => q.count)];
    box.dataset.total = data[1].reduce((a, b) => a + b, 0);
    box.dataset.blocked = data[2].reduce((a, b) => a + b, 0);
    if (state.chart) state.chart.destroy();
    box.replaceChildren();
    const axis = { stroke: colour("--muted"), grid: { stroke: colour("--line") }, ticks: { stroke: colour("--line") } };
    state.chart = new uPlot(
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
      },
      data,
      box,
    );
  }

  // The chart's colours come from the stylesheet: draw it again when light turns dark.
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
    if (state.chartSeries) drawChart(...state.chartSeries);
  });

  window.addEventListener("resize", () => {
    if (state.chart) state.chart.setSize({ width: Math.max($("chart").clientWidth, 200), height: 260 });
  });

  // ---- clients -------------------------------------------------------------------------------

  async function loadClients() {
    const { items } = await api("client", endpointParams());
    state.clients = [];
    for (const [endpoint, entry] of Object.entries(items)) {
      for (const [clientId, c] of Object.entries(entry.clients)) {
        const os = [c.os.type, c.os.version, c.os.arch].filter(Boolean).join(" ");
        state.clients.push({ endpoint, clientId, ...c, ip: c.ip || "", os, last: c.lastActivityTime });
      }
    }
    renderClients();
  }

  function clientOrder(a, b) {
    const { column, descending } = state.sort;
    const value = (c) => (column === "last" ? (c.last === null ? -Infinity : Date.parse(c.last)) : c[column].toLowerCase());
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
    document.querySelector("#clients th.write-only").hidden = !can("write");
    $("client-total").textContent = `${shown.length} of ${state.clients.length} clients`;
    const body = document.querySelector("#clients tbody");
    body.replaceChildren(...labelled(body, shown.map(clientRow)));
  }

  function clientRow(c) {
    const last = element("td", ago(c.last), c.last === null ? "empty" : "");
    if (c.last !== null) last.title = localTime(c.last);
    const alias = element("td", c.alias, "alias");
    const tr = row([
      element("td", c.endpoint),
      element("td", c.clientId, "client-id"),
      alias,
      element("td", c.host),
      element("td", c.ip),
      element("td", c.mac),
      element("td", c.os),
      element("td", c.vendor),
      last,
    ]);
    tr.dataset.endpoint = c.endpoint;
    tr.dataset.client = c.clientId;
    tr.dataset.last = c.last === null ? "" : c.last;
    if (can("write")) {
      const actions = element("td", null, "actions");
      actions.append(
        button("Alias", () => editAlias(c, alias), "small alias-edit"),
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
        await run(loadClients);
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
    form.append(input, ok, button("Clear", () => save(""), "small"), button("Cancel", renderClients, "small"));
    cell.replaceChildren(form);
    input.focus();
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
    $("app-note").textContent = `Deleted the records of "${c.clientId}" up to ${until.toLocaleString()}; ${gone}.`;
    await loadClients();
  }

  // ---- query log -----------------------------------------------------------------------------

  // The log's filters (no window): the realtime stream takes exactly these.
  function filterParams() {
    const params = endpointParams();
    const list = (value) => value.split(",").map((v) => v.trim()).filter(Boolean);
    for (const id of list($("f-client").value)) params.append("clientId[]", id);
    for (const [name, control] of [["action[]", "f-action"], ["trigger[]", "f-trigger"], ["protocol[]", "f-protocol"]]) {
      if ($(control).value) params.append(name, $(control).value);
    }
    for (const name of ["rrType", "statusCode"]) {
      for (const value of list($(`f-${name}`).value)) params.append(`${name}[]`, value.toUpperCase());
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
    const { queries } = await api("activity-log", params);
    const body = document.querySelector("#log tbody");
    body.replaceChildren(...labelled(body, queries.map((q) => logRow(q))));
    if (!queries.length) body.append(row([element("td", "No queries match", "empty")]));
    $("log-page").textContent = `Page ${state.logPage + 1}`;
    $("log-prev").disabled = state.logPage === 0;
    $("log-next").disabled = queries.length < PAGE_SIZE;
  }

  function logRow(q, id) {
    const action = ACTIONS[q.action] ?? "";
    const answers = (q.answers || []).flatMap((a) => a.ips || []).join(", ");
    const tr = row([
      element("td", localTime(q.timestamp)),
      element("td", q.endpointId),
      element("td", q.clientId),
      element("td", q.question, "question"),
      element("td", q.rrType),
      element("td", q.statusCode),
      element("td", q.protocol),
      element("td", action, action === "blocked" ? "blocked" : ""),
      element("td", [q.trigger, q.triggerValue].filter(Boolean).join(": ")),
      element("td", answers),
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

  async function loadAdmin() {
    const params = withParams(windowParams(), { page: state.adminPage, pageSize: PAGE_SIZE });
    if ($("a-action").value) params.set("action", $("a-action").value);
    if ($("a-search").value.trim()) params.set("search", $("a-search").value.trim());
    const { actions } = await api("admin-action", params);
    const body = document.querySelector("#admin tbody");
    body.replaceChildren(
      ...labelled(body, actions.map((a) => {
        const details = element("td");
        details.append(element("pre", JSON.stringify(a.metadata, null, 1), "meta"));
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
    $("admin-page").textContent = `Page ${state.adminPage + 1}`;
    $("admin-prev").disabled = state.adminPage === 0;
    $("admin-next").disabled = actions.length < PAGE_SIZE;
  }

  // ---- outputs -------------------------------------------------------------------------------

  function outputState(o) {
    if (o.paused) return "paused";
    if (!o.failures) return "delivering";
    return `failing (${number(o.failures)} ${o.failures === 1 ? "attempt" : "attempts"})`;
  }

  async function loadOutputs() {
    const { outputs } = await api("output");
    const body = document.querySelector("#outputs tbody");
    body.replaceChildren(
      ...labelled(body, outputs.map((o) => {
        const actions = element("td");
        actions.append(
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
    log: loadLog,
    admin: loadAdmin,
    outputs: loadOutputs,
  };
  const ADMIN_VIEWS = new Set(["admin", "outputs"]);

  // Run a view's loader; the page says when it is done (data-loaded), which the tests wait for.
  async function run(loader) {
    const app = $("app");
    delete app.dataset.loaded;
    $("app-error").textContent = "";
    $("app-note").textContent = "";
    try {
      await loader();
      app.dataset.loaded = state.view;
    } catch (error) {
      showError(error);
      app.dataset.loaded = "error";
    }
  }

  function refresh() {
    try {
      chooseWindow();
    } catch (error) {
      $("app-error").textContent = error.message;
      return;
    }
    run(LOADERS[state.view]);
  }

  function route() {
    if (!state.who) return;
    let view = location.hash.slice(1) || "overview";
    if (!(view in LOADERS) || (ADMIN_VIEWS.has(view) && !can("admin"))) view = "overview";
    if (view !== "log") {
      $("live").checked = false;
      stopLive();
    }
    state.view = view;
    for (const section of document.querySelectorAll("main > section")) section.hidden = section.dataset.view !== view;
    for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("current", link.dataset.view === view);
    refresh();
  }

  async function loadEndpoints() {
    let names = state.who.endpoints;
    if (names === null) names = Object.keys((await api("client")).items);
    const select = $("endpoint");
    select.replaceChildren(new Option("All endpoints", ""), ...names.map((name) => new Option(name, name)));
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
    $("nav-admin").hidden = !can("admin");
    $("nav-outputs").hidden = !can("admin");
    document.body.classList.toggle("can-write", can("write"));
    await loadEndpoints();
    $("signin").hidden = true;
    $("app").hidden = false;
    $("nav").hidden = false;
    $("who").hidden = false;
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
    window.addEventListener("hashchange", route);
    $("scope").addEventListener("submit", (event) => event.preventDefault());
    $("window").addEventListener("change", () => {
      const custom = $("window").value === "custom";
      $("custom-window").hidden = !custom;
      if (custom && !$("custom-start").value) {
        $("custom-end").value = toLocalInput(new Date());
        $("custom-start").value = toLocalInput(new Date(Date.now() - 86400000));
      }
      refresh();
    });
    for (const id of ["custom-start", "custom-end", "endpoint"]) $(id).addEventListener("change", restartView);
    $("refresh").addEventListener("click", restartView);

    for (const th of document.querySelectorAll("#clients th[data-sort]")) {
      th.addEventListener("click", () => {
        const column = th.dataset.sort;
        state.sort = { column, descending: state.sort.column === column ? !state.sort.descending : column === "last" };
        renderClients();
      });
    }
    $("client-search").addEventListener("input", renderClients);
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
    $("admin-prev").addEventListener("click", () => page("adminPage", -1));
    $("admin-next").addEventListener("click", () => page("adminPage", 1));
  }

  // New filters or window: back to the first page, and a live stream follows the new filters.
  function restartView() {
    state.logPage = 0;
    state.adminPage = 0;
    if (state.live) startLive();
    refresh();
  }

  function page(which, step) {
    state[which] = Math.max(0, state[which] + step);
    run(LOADERS[state.view]);
  }

  wire();
  const saved = sessionStorage.getItem(KEY_STORE);
  if (saved) {
    signIn(saved).catch((error) => signOut(error.message));
  } else {
    signOut();
  }
})();
