// The query editor's schema browser and name completion, from the tables the user may query.
"use strict";
(function () {
  const editor = window.lakeward.editor;
  const box = document.getElementById("schema");
  const database = document.getElementById("database");
  const catalog = box.dataset.catalog;
  const KEYWORDS = ["SELECT", "FROM", "WHERE", "GROUP BY", "ORDER BY", "LIMIT", "HAVING", "JOIN",
    "LEFT JOIN", "ON", "AS", "AND", "OR", "NOT", "IN", "IS NULL", "IS NOT NULL", "BETWEEN", "LIKE",
    "DISTINCT", "COUNT", "SUM", "AVG", "MIN", "MAX", "CAST", "DATE", "WITH", "UNION ALL", "DESC", "ASC"];
  let names = KEYWORDS.slice();  // completion candidates: tables, then columns, then keywords
  editor.completeFrom(function () { return names; });

  function insert(text) { editor.insert(text); }

  function tableItem(table) {
    const item = document.createElement("details");
    item.className = "schema-table";
    const summary = document.createElement("summary");
    const link = document.createElement("a");
    link.href = "#";
    link.textContent = table.name;
    link.title = "Insert " + table.name + " into the query";
    link.addEventListener("click", function (event) { event.preventDefault(); insert(table.name); });
    summary.append(link);
    if (table.kind && table.kind !== "table") {  // views and Iceberg tables are marked
      const kind = document.createElement("span");
      kind.className = "tag kind-" + table.kind.toLowerCase();
      kind.textContent = table.kind;
      summary.append(" ", kind);
    }
    const columns = document.createElement("ul");
    table.columns.forEach(function (c) {
      const column = document.createElement("li");
      const name = document.createElement("a");
      name.href = "#";
      name.textContent = c.name;
      name.addEventListener("click", function (event) { event.preventDefault(); insert(c.name); });
      const type = document.createElement("span");
      type.className = "meta";
      type.textContent = c.type;
      column.append(name, " ", type);
      columns.append(column);
    });
    item.append(summary, columns);
    return item;
  }

  async function load() {
    const path = "/console/api/catalogs/" + encodeURIComponent(catalog) + "/databases/" +
      encodeURIComponent(database.value || "default") + "/tables";
    const data = await lakeward.call("GET", path);
    if (!data.tables.length) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "No table you may query in " + (database.value || "default") + ".";
      box.replaceChildren(empty);
    } else {
      box.replaceChildren.apply(box, data.tables.map(tableItem));
    }
    const tables = data.tables.map(function (t) { return t.name; });
    const columns = [];
    data.tables.forEach(function (t) {
      t.columns.forEach(function (c) { if (columns.indexOf(c.name) < 0) { columns.push(c.name); } });
    });
    names = tables.concat(columns, KEYWORDS);
  }

  database.addEventListener("change", function () { load().catch(function () {}); });
  // A statement that made, changed or dropped a table or view: the browser shows it now,
  // without a reload that would clear the editor.
  document.addEventListener("lakeward:catalog-changed", function () { load().catch(function () {}); });
  load().catch(function (error) {
    const failed = document.createElement("p");
    failed.className = "empty";
    failed.textContent = error.message;
    box.replaceChildren(failed);
  });
})();
