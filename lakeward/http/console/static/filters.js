// Category filters offer the values the data holds: a search box, select all, clear.
// The values come from the BI API's distinct-values call; the saved ones stay selected.
"use strict";
(function () {
  const config = JSON.parse(document.getElementById("sheet-config").textContent);
  const base = config.series_base.replace(/visuals\/$/, "fields/");

  function option(value, selected) {
    const item = document.createElement("option");
    item.value = String(value);
    item.textContent = String(value);
    item.dataset.kind = typeof value === "number" ? "number" : "text";
    item.selected = selected;
    return item;
  }

  function button(text, name) {
    const element = document.createElement("button");
    element.type = "button";
    element.textContent = text;
    element.className = name;
    return element;
  }

  async function values(field, search) {
    const url = base + encodeURIComponent(field) + "/values?limit=500" +
      (search ? "&search=" + encodeURIComponent(search) : "");
    return lakeward.call("GET", url);
  }

  function setUp(set) {
    const select = set.querySelector("select");
    const field = set.dataset.field;
    const search = document.createElement("input");
    search.type = "search";
    search.placeholder = "Search values";
    search.className = "value-search";
    search.setAttribute("aria-label", "search values of " + field);
    const all = button("Select all", "select-all");
    const none = button("Clear", "select-none");
    const note = document.createElement("span");
    note.className = "hint value-count";
    const tools = document.createElement("div");
    tools.className = "value-tools";
    tools.append(search, all, none, note);
    select.parentElement.after(tools);

    // Merge values into the list, keeping what is selected, sorted as the API sorts.
    function merge(found) {
      const selected = new Set(Array.from(select.selectedOptions).map(function (o) { return o.value; }));
      const known = new Map(Array.from(select.options).map(function (o) { return [o.value, o]; }));
      found.values.forEach(function (v) {
        if (!known.has(String(v))) { known.set(String(v), option(v, false)); }
      });
      const items = Array.from(known.values()).sort(function (a, b) {
        return a.value.localeCompare(b.value, undefined, { numeric: true, sensitivity: "base" });
      });
      items.forEach(function (o) { o.selected = selected.has(o.value); });
      select.replaceChildren.apply(select, items);
      select.size = Math.min(Math.max(items.length, 2), 8);
    }

    function show() {
      const needle = search.value.toLowerCase();
      let visible = 0;
      Array.from(select.options).forEach(function (o) {
        o.hidden = needle !== "" && o.value.toLowerCase().indexOf(needle) < 0;
        if (!o.hidden) { visible += 1; }
      });
      note.textContent = select.selectedOptions.length + " of " + select.options.length + " selected" +
        (needle ? " · " + visible + " shown" : "");
    }

    let pending = null;
    search.addEventListener("input", function () {
      show();
      clearTimeout(pending);
      // The first load may have stopped at 500 values: ask the server for the rest.
      pending = setTimeout(function () {
        values(field, search.value).then(function (found) { merge(found); show(); }).catch(function () {});
      }, 250);
    });
    all.addEventListener("click", function () {
      Array.from(select.options).forEach(function (o) { if (!o.hidden) { o.selected = true; } });
      show();
    });
    none.addEventListener("click", function () {
      Array.from(select.options).forEach(function (o) { o.selected = false; });
      show();
    });
    select.addEventListener("change", show);
    // A click adds or takes away one value, as in a checklist: no key to hold down, and
    // the other choices stay (Shift still selects a run).
    select.addEventListener("mousedown", function (event) {
      const item = event.target;
      if (!(item instanceof HTMLOptionElement) || event.shiftKey) { return; }
      event.preventDefault();
      item.selected = !item.selected;
      select.focus();
      select.dispatchEvent(new Event("change"));
    });
    values(field, "").then(function (found) { merge(found); show(); }).catch(function (error) {
      note.textContent = error.message;
    });
  }

  document.querySelectorAll('#filters fieldset.filter[data-type="category"]').forEach(setUp);
})();
