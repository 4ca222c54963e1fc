// The query editor: start a query, follow its state, page through its results.
"use strict";
(function () {
  const form = document.getElementById("query-form");
  const sql = document.getElementById("sql");
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
  const base = "/console/api/query";
  let current = null;   // the execution shown
  let tokens = [null];  // tokens[i]: the token of page i (page 0 has none)
  let page = 0;

  function setStatus(text, kind) {
    status.textContent = text;
    status.className = "status " + (kind || "");
  }

  function sleep(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  async function follow(id) {
    let delay = 100;
    for (;;) {
      const state = await lakeward.call("GET", base + "/" + encodeURIComponent(id));
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

  async function run(event) {
    event.preventDefault();
    runButton.disabled = true;
    cancelButton.disabled = false;
    results.hidden = true;
    setStatus("Starting…", "running");
    try {
      const started = await lakeward.call("POST", base, { sql: sql.value, database: database.value || "default" });
      current = started.id;
      const done = await follow(current);
      if (done.state === "SUCCEEDED") {
        tokens = [null];
        download.href = "/console/query/" + encodeURIComponent(current) + "/download";
        offerChart(done);
        await showPage(0);
        setStatus("Succeeded in " + done.runtime_ms + " ms, " + done.scanned_bytes + " bytes scanned", "ok");
        if (done.statement_type === "DDL" || done.substatement_type === "CREATE_TABLE_AS_SELECT") {
          document.dispatchEvent(new CustomEvent("lakeward:catalog-changed"));  // schema.js
        }
      } else {
        setStatus(done.state + (done.reason ? ": " + done.reason : ""), "failed");
      }
    } catch (error) {
      setStatus(error.message, "failed");
    } finally {
      runButton.disabled = false;
      cancelButton.disabled = true;
    }
    await refreshHistory().catch(function () { /* the list stays as it was */ });
  }

  form.addEventListener("submit", run);
  cancelButton.addEventListener("click", async function () {
    if (current) {
      try { await lakeward.call("POST", base + "/" + encodeURIComponent(current) + "/cancel"); }
      catch (error) { setStatus(error.message, "failed"); }
    }
  });
  prev.addEventListener("click", function () { showPage(page - 1).catch(function (e) { setStatus(e.message, "failed"); }); });
  next.addEventListener("click", function () { showPage(page + 1).catch(function (e) { setStatus(e.message, "failed"); }); });
  document.getElementById("save-form").addEventListener("submit", function () {
    document.getElementById("save-sql").value = sql.value;
  });
  sql.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { run(event); }
  });
})();
