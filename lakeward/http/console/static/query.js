// The query editor: tabs of queries, each run followed to its end and its results paged.
"use strict";
(function () {
  const editor = window.lakeward.editor;
  const form = document.getElementById("query-form");
  const area = document.getElementById("sql");
  const database = document.getElementById("database");
  const runButton = document.getElementById("run");
  const cancelButton = document.getElementById("cancel");
  const status = document.getElementById("status");
  const results = document.getElementById("results");
  const table = document.getElementById("result-table");
  const prev = document.getElementById("prev");
  const next = document.getElementById("next");
  const pageInfo = document.getElementById("page-info");
  const download = document.getElementById("download");
  const chart = document.getElementById("chart-result");
  const pageSize = Number(table.dataset.pageSize);
  const tabList = document.getElementById("tab-list");
  const base = "/console/api/query";
  let current = null;   // the execution whose results are shown
  let tokens = [null];  // tokens[i]: the token of page i (page 0 has none)
  let page = 0;

  function setStatus(text, kind) {
    status.textContent = text;
    status.className = "status " + (kind || "");
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  // The execution's final state, or null once shown() says it is no longer on screen.
  async function follow(id, shown) {
    let delay = 100;
    for (;;) {
      const state = await lakeward.call("GET", base + "/" + encodeURIComponent(id));
      if (!shown()) { return null; }
      if (state.done) { return state; }
      setStatus(state.state + "…", "running");
      await sleep(delay);
      delay = Math.min(delay * 1.5, 1000);
    }
  }

  // Whole numbers and decimals shown with the reader's digit grouping, every digit kept (no
  // rounding through JavaScript's numbers); doubles as the service wrote them. The value as
  // written is the cell's title, and the CSV download has it.
  const DECIMAL_POINT = new Intl.NumberFormat().formatToParts(1.5)
    .find(function (p) { return p.type === "decimal"; }).value;

  function grouped(text, type) {
    const whole = /^(tinyint|smallint|integer|bigint)$/.test(type);
    if (!whole && !/^decimal/.test(type)) { return null; }
    const parts = text.split(".");
    if (!/^-?\d+$/.test(parts[0]) || parts.length > 2) { return null; }
    return BigInt(parts[0]).toLocaleString() + (parts.length > 1 ? DECIMAL_POINT + parts[1] : "");
  }

  function cell(row, text, tag, type) {
    const element = document.createElement(tag);
    if (text === null) { element.className = "null"; element.textContent = "NULL"; }
    else if (tag === "td" && /^(tinyint|smallint|integer|bigint|real|double|decimal)/.test(type || "")) {
      element.className = "number";
      element.textContent = grouped(text, type) || text;
      element.title = text;
    } else { element.textContent = text; }
    row.appendChild(element);
  }

  async function showPage(index) {
    const token = tokens[index];
    const url = base + "/" + encodeURIComponent(current) + "/results" + (token ? "?token=" + encodeURIComponent(token) : "");
    const data = await lakeward.call("GET", url);
    const head = table.tHead;
    const body = table.tBodies[0];
    head.replaceChildren();
    body.replaceChildren();
    const headRow = head.insertRow();
    data.columns.forEach(function (c) { cell(headRow, c.name, "th"); });
    data.rows.forEach(function (values) {
      const row = body.insertRow();
      values.forEach(function (v, i) { cell(row, v, "td", data.columns[i] && data.columns[i].type); });
    });
    page = index;
    tokens[index + 1] = data.next_token;
    const first = index * pageSize + 1;
    pageInfo.textContent = data.rows.length
      ? "rows " + first + "–" + (first + data.rows.length - 1)
      : "no rows";
    prev.disabled = index === 0;
    next.disabled = !data.next_token;
    results.hidden = false;
  }

  // The history list, again from the server: the run just made is at its top.
  async function refreshHistory() {
    const list = document.querySelector("ul.history");
    const executions = await lakeward.call("GET", base + "/history");
    const items = executions.map(function (e) {
      const item = document.createElement("li");
      item.className = "state-" + e.state.toLowerCase();
      const link = document.createElement("a");
      link.href = "/console/query?execution=" + encodeURIComponent(e.id);
      link.title = e.query;
      link.textContent = e.query.length > 60 ? e.query.slice(0, 57) + "..." : e.query;
      const meta = document.createElement("span");
      meta.className = "meta";
      meta.textContent = e.state + " · " + e.submitted.replace("T", " ").slice(0, 19);
      item.append(link, meta);
      return item;
    });
    if (!items.length) {
      const empty = document.createElement("li");
      empty.className = "empty";
      empty.textContent = "No queries yet.";
      items.push(empty);
    }
    list.replaceChildren.apply(list, items);
  }

  // "Chart this result": a SELECT's text becomes a dataset (over the editor's catalog and
  // database), whose first chart the dataset form goes on to.
  function offerChart(done) {
    chart.hidden = done.substatement_type !== "SELECT";
    const params = new URLSearchParams({
      sql: done.query,
      database: database.value || "default",
      catalog: document.getElementById("schema").dataset.catalog,
    });
    chart.href = "/console/datasets/new?" + params.toString();
  }

  function busy(running) {
    runButton.disabled = running;
    cancelButton.disabled = !running;
  }

  // -- tabs: one query each, kept in this browser for the signed-in user -------------------

  const who = document.querySelector(".signout .who");
  const storageKey = "lakeward.query-tabs." + (who ? who.textContent : "");
  let tabs = null;  // {tabs: [{id, sql, database, execution}], active: id}

  function loadTabs() {
    let saved = null;
    try { saved = JSON.parse(window.localStorage.getItem(storageKey)); } catch (error) { saved = null; }
    if (!saved || !Array.isArray(saved.tabs) || !saved.tabs.length) {
      saved = { tabs: [], active: null };
      saved.active = newTab(saved, "", database.value || "default").id;
    }
    return saved;
  }

  function newTab(state, text, databaseName, execution) {
    const id = state.tabs.reduce(function (most, t) { return Math.max(most, t.id); }, 0) + 1;
    const tab = { id: id, sql: text, database: databaseName, execution: execution || null };
    state.tabs.push(tab);
    return tab;
  }

  function store() {
    try { window.localStorage.setItem(storageKey, JSON.stringify(tabs)); } catch (error) { /* private mode: tabs last this page */ }
  }

  function activeTab() {
    return tabs.tabs.find(function (t) { return t.id === tabs.active; });
  }

  function renderTabs() {
    tabList.replaceChildren.apply(tabList, tabs.tabs.map(function (tab) {
      const item = document.createElement("span");
      const selected = tab.id === tabs.active;
      item.className = "query-tab" + (selected ? " active" : "");
      const pick = document.createElement("button");
      pick.type = "button";
      pick.setAttribute("role", "tab");
      pick.setAttribute("aria-selected", String(selected));
      pick.textContent = "Query " + tab.id;
      pick.title = tab.sql.trim().split("\n")[0] || "(empty)";
      pick.addEventListener("click", function () { activate(tab.id); });
      const close = document.createElement("button");
      close.type = "button";
      close.className = "close-tab";
      close.textContent = "×";
      close.title = "Close Query " + tab.id;
      close.setAttribute("aria-label", close.title);
      close.addEventListener("click", function () { closeTab(tab.id); });
      item.append(pick, close);
      return item;
    }));
  }

  function activate(id) {
    tabs.active = id;
    store();
    const tab = activeTab();
    renderTabs();
    editor.setValue(tab.sql);
    if (database.value !== tab.database) {
      database.value = tab.database;
      database.dispatchEvent(new Event("change"));  // schema.js lists that database's tables
    }
    editor.focus();
    display(tab, false);
  }

  function closeTab(id) {
    const index = tabs.tabs.findIndex(function (t) { return t.id === id; });
    tabs.tabs.splice(index, 1);
    if (!tabs.tabs.length) { newTab(tabs, "", database.value || "default"); }
    if (tabs.active === id || !activeTab()) {
      tabs.active = tabs.tabs[Math.min(index, tabs.tabs.length - 1)].id;
    }
    activate(tabs.active);
  }

  // A tab's last run: followed to its end, then its first page of results, while the tab is
  // on screen. ran: just started here (a catalog change refreshes the schema browser).
  async function display(tab, ran) {
    const id = tab.execution;
    const shown = function () { return tabs.active === tab.id && tab.execution === id; };
    results.hidden = true;
    chart.hidden = true;
    setStatus("");
    current = id;
    if (!id) { busy(false); return; }
    busy(true);
    try {
      const done = await follow(id, shown);
      if (!done) { return; }
      if (done.state === "SUCCEEDED") {
        tokens = [null];
        download.href = "/console/query/" + encodeURIComponent(id) + "/download";
        offerChart(done);
        await showPage(0);
        setStatus("Succeeded in " + done.runtime_ms + " ms, " + done.scanned_bytes + " bytes scanned", "ok");
        if (ran && (done.statement_type === "DDL" || done.substatement_type === "CREATE_TABLE_AS_SELECT")) {
          document.dispatchEvent(new CustomEvent("lakeward:catalog-changed"));  // schema.js
        }
      } else {
        setStatus(done.state + (done.reason ? ": " + done.reason : ""), "failed");
      }
    } catch (error) {
      if (!shown()) { return; }
      if (ran) { setStatus(error.message, "failed"); }
      else { tab.execution = null; store(); setStatus(""); }  // a run this server no longer has
    } finally {
      if (shown()) { busy(false); }
    }
  }

  async function run() {
    const tab = activeTab();
    busy(true);
    results.hidden = true;
    setStatus("Starting…", "running");
    try {
      const started = await lakeward.call("POST", base, { sql: editor.value(), database: database.value || "default" });
      tab.execution = started.id;
      store();
    } catch (error) {
      setStatus(error.message, "failed");
      busy(false);
      return;
    }
    await display(tab, true);
    await refreshHistory().catch(function () { /* the list stays as it was */ });
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); run(); });
  editor.onRun(run);
  cancelButton.addEventListener("click", async function () {
    if (current) {
      try { await lakeward.call("POST", base + "/" + encodeURIComponent(current) + "/cancel"); }
      catch (error) { setStatus(error.message, "failed"); }
    }
  });
  prev.addEventListener("click", function () { showPage(page - 1).catch(function (e) { setStatus(e.message, "failed"); }); });
  next.addEventListener("click", function () { showPage(page + 1).catch(function (e) { setStatus(e.message, "failed"); }); });
  document.getElementById("save-form").addEventListener("submit", function () {
    document.getElementById("save-sql").value = editor.value();
  });
  document.getElementById("new-tab").addEventListener("click", function () {
    activate(newTab(tabs, "", database.value || "default").id);
  });
  editor.onChange(function () {
    const tab = activeTab();
    if (tab && tab.sql !== editor.value()) {
      tab.sql = editor.value();
      store();
    }
  });
  database.addEventListener("change", function () {
    const tab = activeTab();
    if (tab) { tab.database = database.value || "default"; store(); }
  });

  // A query the page was opened with (a saved query, a past run, a dataset's SQL) comes into
  // an empty tab, or a new one; the same text already in a tab opens that tab.
  tabs = loadTabs();
  const offered = area.dataset.fromServer ? area.value : "";
  if (offered) {
    const execution = area.dataset.execution || null;
    const same = tabs.tabs.find(function (t) {
      return t.sql === offered && t.database === database.value && (!execution || t.execution === execution);
    });
    const empty = activeTab().sql.trim() ? null : activeTab();
    const tab = same || empty || newTab(tabs, offered, database.value);
    if (tab !== same || execution) { tab.execution = execution; }
    tab.sql = offered;
    tab.database = database.value;
    tabs.active = tab.id;
  }
  runButton.disabled = false;
  activate(tabs.active);
})();
