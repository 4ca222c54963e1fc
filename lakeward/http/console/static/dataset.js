// The new-dataset form: the id made from the name, and catalog -> database -> table pickers.
"use strict";
(function () {
  const name = document.getElementById("dataset-name");
  const id = document.getElementById("dataset-id");
  const source = document.getElementById("data-source");
  const databases = document.getElementById("database-picker");
  const tables = document.getElementById("table-picker");

  // The same rule as the server's (forms.id_from_name): lower case, runs of anything
  // but letters and digits as one "-".
  function idFrom(text) {
    return text.normalize("NFKD").replace(/[\u0300-\u036f]/g, "").toLowerCase()
      .replace(/[^a-z0-9_]+/g, "-").replace(/^[-_]+|-+$/g, "").slice(0, 128);
  }
  let idTyped = id.value !== "" && id.value !== idFrom(name.value);
  id.addEventListener("input", function () { idTyped = id.value !== ""; });
  name.addEventListener("input", function () { if (!idTyped) { id.value = idFrom(name.value); } });

  // Each field operation's argument boxes are named for the operation chosen (rename:
  // field, new name; geo: new field, latitude field, longitude field...); the boxes an
  // operation does not take are hidden and not sent.
  function nameArguments(select) {
    const names = JSON.parse(select.options[select.selectedIndex].dataset.args);
    select.closest("tr").querySelectorAll("td.op-arg").forEach(function (cell, i) {
      const input = cell.querySelector("input");
      const row = select.getAttribute("aria-label");
      cell.toggleAttribute("data-unused", !names[i]);
      cell.querySelector(".arg-name").textContent = names[i];
      input.placeholder = names[i];
      input.setAttribute("aria-label", row + ": " + (names[i] || "unused"));
      input.disabled = !names[i];
    });
  }
  document.querySelectorAll("select[name^=op_kind_]").forEach(function (select) {
    select.addEventListener("change", function () { nameArguments(select); });
    nameArguments(select);
  });

  function option(value, label, selected) {
    const element = document.createElement("option");
    element.value = value;
    element.textContent = label;
    element.selected = selected;
    return element;
  }

  function catalog() {
    const chosen = source.options[source.selectedIndex];
    return chosen ? chosen.dataset.catalog : "";
  }

  let loading = 0;  // the latest load wins: an earlier answer arriving late is dropped

  async function loadTables() {
    const mine = ++loading;
    const base = "/console/api/catalogs/" + encodeURIComponent(catalog());
    const data = await lakeward.call("GET", base + "/databases/" + encodeURIComponent(databases.value) + "/tables");
    if (mine !== loading) { return; }
    const wanted = tables.value || tables.dataset.chosen;  // what the user picked stays picked
    const items = [option("", data.tables.length ? "— pick a table —" : "no table you may use", !wanted)];
    data.tables.forEach(function (t) {
      const value = databases.value + "." + t.name;
      const item = option(value, t.name, value === wanted);
      item.title = t.columns.map(function (c) { return c.name + " " + c.type; }).join(", ");
      items.push(item);
    });
    tables.replaceChildren.apply(tables, items);
  }

  async function loadDatabases() {
    if (!catalog()) { return; }
    const wanted = databases.value || databases.dataset.chosen;
    const mine = ++loading;
    const data = await lakeward.call("GET", "/console/api/catalogs/" + encodeURIComponent(catalog()) + "/databases");
    if (mine !== loading) { return; }
    const names = data.databases.length ? data.databases : [wanted];
    databases.replaceChildren.apply(databases, names.map(function (n) { return option(n, n, n === wanted); }));
    await loadTables();
  }

  function failed(error) { tables.replaceChildren(option("", error.message, true)); }
  source.addEventListener("change", function () {
    tables.dataset.chosen = "";
    tables.value = "";
    loadDatabases().catch(failed);
  });
  databases.addEventListener("change", function () {
    tables.dataset.chosen = "";
    tables.value = "";
    loadTables().catch(failed);
  });
  tables.addEventListener("change", function () {
    const kind = document.querySelector("input[name=source_kind][value=table]");
    if (tables.value && kind) { kind.checked = true; }
  });
  loadDatabases().catch(failed);
})();
