// Draws a sheet's visuals (dashboard or analysis) with plotly.js, served by lakeward.
// Each visual's data comes from the BI API; the filter bar's values replace the saved
// filters on their fields. When every chart has been drawn, <body data-charts="ready">
// and window.lakewardCharts.readyAt (performance.now()) tell tests and benchmarks.
"use strict";
(function () {
  const config = JSON.parse(document.getElementById("sheet-config").textContent);
  const status = document.getElementById("chart-status");
  const visuals = Array.from(document.querySelectorAll(".visual"));
  const mode = new URLSearchParams(window.location.search).get("mode") || "auto";
  const plotConfig = {
    topojsonURL: config.topojson, responsive: true, displaylogo: false,
    showLink: false, showSendToCloud: false, showEditInChartStudio: false,
  };
  window.lakewardCharts = { readyAt: null, rendered: 0, total: visuals.length, errors: [] };
  // plotly.js (4.8 MB) loads while the series are fetched, not before.
  const plotlyReady = new Promise(function (resolve, reject) {
    if (window.Plotly) { resolve(); return; }
    const script = document.createElement("script");
    script.src = config.plotly;
    script.addEventListener("load", function () {
      window.lakewardCharts.plotlyAt = performance.now();
      resolve();
    });
    script.addEventListener("error", function () { reject(new Error("plotly.js did not load")); });
    document.head.appendChild(script);
  });

  // The world topology is fetched at once too, and handed to plotly, which would
  // otherwise ask for it only once it starts drawing the map.
  const TOPOLOGY = "world_110m";
  const topology = document.querySelector('.visual[data-type="map"]')
    ? fetch(config.topojson + TOPOLOGY + ".json", { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) { throw new Error("the world topology is missing on the server (" + r.status + "); ./dev.sh install adds it"); }
      return r.json();
    })
    : null;

  // Failures surface where the promises are awaited (in a visual's note), not as
  // unhandled rejections when no visual needs them.
  plotlyReady.catch(function () {});
  if (topology) { topology.catch(function () {}); }

  async function geoAssets() {
    window.PlotlyGeoAssets = window.PlotlyGeoAssets || { topojson: {} };
    window.PlotlyGeoAssets.topojson[TOPOLOGY] = window.PlotlyGeoAssets.topojson[TOPOLOGY] || await topology;
  }

  // One colour per category value across every visual of the sheet and across filter
  // changes: a value keeps the colour it was first given for the page's lifetime. New
  // values are given colours in sorted order, starting from a hash of the value and
  // moving on past colours already taken, so the same values get the same colours on
  // every load whatever order the charts arrive in. 22 colours of high mutual contrast.
  const PALETTE = [
    "#0067a5", "#f38400", "#008856", "#be0032", "#875692", "#f3c300", "#882d17",
    "#a1caf1", "#e68fac", "#8db600", "#604e97", "#f99379", "#2b3d26", "#b3446c",
    "#c2b280", "#00a3a3", "#654522", "#e25822", "#848482", "#dcd300", "#f6a600",
    "#222222",
  ];
  const colours = new Map();

  function hashOf(text) {  // FNV-1a, 32 bits
    let hash = 0x811c9dc5;
    for (let i = 0; i < text.length; i += 1) {
      hash ^= text.charCodeAt(i);
      hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash;
  }

  function assignColours(names) {
    const taken = new Set(colours.values());
    Array.from(new Set(names)).filter(function (n) { return !colours.has(n); }).sort().forEach(function (name) {
      const start = hashOf(name) % PALETTE.length;
      let pick = PALETTE[start];
      for (let step = 0; step < PALETTE.length; step += 1) {
        const candidate = PALETTE[(start + step) % PALETTE.length];
        if (!taken.has(candidate)) { pick = candidate; break; }
      }
      colours.set(name, pick);
      taken.add(pick);
    });
  }

  function seriesNames(series) {
    if (series.type === "map") {
      return series.data.points.map(function (p) { return p.color === null || p.color === undefined ? "(none)" : String(p.color); });
    }
    if (series.type === "line" || series.type === "bar") {
      return series.data.series.map(function (s) { return String(s.name); });
    }
    return [];
  }

  function localTime(value) {
    // <input type="datetime-local"> gives "2020-09-10T00:00"; the API takes ISO times.
    return value ? (value.length === 16 ? value + ":00" : value) : null;
  }

  function filtersFor(visualId) {
    const found = [];
    document.querySelectorAll("#filters fieldset.filter").forEach(function (set) {
      const scope = set.dataset.scope;
      if (scope !== "sheet" && scope !== visualId) { return; }
      if (set.dataset.type === "time_range") {
        found.push({
          type: "time_range", field: set.dataset.field,
          start: localTime(set.querySelector('[name="start"]').value),
          end: localTime(set.querySelector('[name="end"]').value),
        });
      } else {
        const values = Array.from(set.querySelector("select").selectedOptions).map(function (o) {
          return o.dataset.kind === "number" ? Number(o.value) : o.value;
        });
        if (values.length) { found.push({ type: "category", field: set.dataset.field, values: values }); }
      }
    });
    return found;
  }

  // Number formats per field (the visual's "formats"): the same rule in tooltips, value
  // labels and tables (Intl) as on the axes (plotly's d3-format tickformat).
  function specOf(element) { return config.visuals[element.dataset.visual] || {}; }
  function formatOf(spec, field) { return (spec.formats || {})[field] || {}; }

  function formatNumber(value, fmt) {
    if (value === null || value === undefined) { return "NULL"; }
    if (typeof value !== "number") { return String(value); }
    const percent = fmt.style === "percent";
    const options = { useGrouping: fmt.thousands !== false, style: percent ? "percent" : "decimal" };
    if (typeof fmt.decimals === "number") {
      options.minimumFractionDigits = fmt.decimals;
      options.maximumFractionDigits = fmt.decimals;
    } else {
      options.maximumFractionDigits = percent ? 1 : 2;
    }
    return new Intl.NumberFormat("en-US", options).format(value);
  }

  function tickFormat(fmt) {
    const group = fmt.thousands === false ? "" : ",";
    if (fmt.style === "percent") { return group + "." + (typeof fmt.decimals === "number" ? fmt.decimals : 1) + "%"; }
    return typeof fmt.decimals === "number" ? group + "." + fmt.decimals + "f" : group + "~r";
  }

  function escapeText(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function tooltip(point, spec) {
    return Object.entries(point.tooltip || {}).map(function (kv) {
      return escapeText(kv[0]) + ": " + escapeText(formatNumber(kv[1], formatOf(spec, kv[0])));
    }).join("<br>");
  }

  // plotly's marker size for a value (scatter's bubble size function, sizemode "area").
  function markerSize(value, sizeref) { return Math.max(Math.sqrt(Math.abs(value) / 2 / sizeref), 3); }

  function niceValue(value) {  // one or two significant digits: 6,420,040 -> 6,000,000
    if (value <= 0) { return 0; }
    const power = Math.pow(10, Math.floor(Math.log10(value)));
    const leading = value / power;
    return (leading < 2 ? Math.round(leading * 2) / 2 : Math.round(leading)) * power;
  }

  // The size legend: three reference circles drawn at plotly's own marker sizes.
  function sizeLegend(element, spec, largest, sizeref) {
    const target = element.querySelector(".legend-extra");
    const legend = document.createElement("div");
    legend.className = "size-legend";
    const title = document.createElement("span");
    title.textContent = "Size: " + spec.size;
    legend.appendChild(title);
    Array.from(new Set([1, 0.25, 0.05].map(function (f) { return niceValue(largest * f); }))).filter(function (v) { return v > 0; }).forEach(function (value) {
      const figure = document.createElement("figure");
      const circle = document.createElement("div");
      const diameter = markerSize(value, sizeref);
      circle.className = "circle";
      circle.style.width = circle.style.height = diameter.toFixed(1) + "px";
      const caption = document.createElement("figcaption");
      caption.textContent = formatNumber(value, formatOf(spec, spec.size));
      figure.append(circle, caption);
      figure.dataset.value = String(value);
      legend.appendChild(figure);
    });
    target.replaceChildren(legend);
  }

  // With more colour values than this, the map draws one trace (a legend of 200 names
  // is unreadable, and 200 traces are slow); hovering a point names it.
  const MAX_LEGEND = 20;

  function mapFigure(data, element) {
    const spec = specOf(element);
    const byColor = new Map();
    data.points.forEach(function (p) {
      const key = p.color === null || p.color === undefined ? "(none)" : String(p.color);
      if (!byColor.has(key)) { byColor.set(key, []); }
      byColor.get(key).push(p);
    });
    const largest = Math.max(1, ...data.points.map(function (p) { return Math.abs(p.size || 0); }));
    // Sizes stay the measure's values; sizeref makes the largest point 40 px across.
    const sizeref = largest / 2 / (40 * 40);
    function trace(name, points, colour) {
      return {
        type: "scattergeo", mode: "markers", name: name,
        lat: points.map(function (p) { return p.lat; }),
        lon: points.map(function (p) { return p.lon; }),
        text: points.map(function (p) {
          const label = p.color === null || p.color === undefined ? "(none)" : String(p.color);
          return "<b>" + escapeText(label) + "</b><br>" + tooltip(p, spec);
        }),
        hovertemplate: "%{text}<extra></extra>",
        marker: {
          color: colour, size: points.map(function (p) { return p.size; }), sizemode: "area",
          sizeref: sizeref, sizemin: 3, opacity: 0.75, line: { width: 0.5, color: "#ffffff" },
        },
      };
    }
    const many = byColor.size > MAX_LEGEND;
    const traces = many
      ? [trace(spec.color || spec.size, data.points, data.points.map(function (p) {
        return colours.get(p.color === null || p.color === undefined ? "(none)" : String(p.color));
      }))]
      : Array.from(byColor.entries()).map(function (entry) { return trace(entry[0], entry[1], colours.get(entry[0])); });
    const layout = {
      margin: { l: 0, r: 0, t: 0, b: 0 }, showlegend: !many, legend: { orientation: "h" },
      geo: {
        projection: { type: "natural earth" }, resolution: 110, showland: true,
        landcolor: "#e8ecef", showcountries: true, countrycolor: "#b9c2cc", showcoastlines: true,
        coastlinecolor: "#9aa5b1", showocean: true, oceancolor: "#f4f8fb", showframe: false,
      },
    };
    const notes = [];
    if (many) { notes.push(byColor.size + " " + (spec.color || "") + " values: hover a point for its name"); }
    if (data.unmapped_rows) { notes.push(data.unmapped_rows + " row(s) without coordinates are not shown"); }
    return { traces: traces, layout: layout, notes: notes, legend: function () { sizeLegend(element, spec, largest, sizeref); } };
  }

  function xyFigure(data, type, element) {
    const spec = specOf(element);
    const yFormat = formatOf(spec, spec.y);
    const xTitle = spec.x_title || spec.x;
    const yTitle = spec.y_title || spec.y;
    const traces = data.series.map(function (s) {
      const colour = colours.get(String(s.name));
      const labels = s.y.map(function (v) { return formatNumber(v, yFormat); });
      const hover = "<b>%{fullData.name}</b><br>" + escapeText(xTitle) + ": %{x}<br>" + escapeText(yTitle) + ": %{text}<extra></extra>";
      return type === "bar"
        ? {
          type: "bar", name: String(s.name), x: s.x, y: s.y, marker: { color: colour },
          text: labels, textposition: spec.value_labels ? "outside" : "none", cliponaxis: false,
          hovertemplate: hover,
        }
        : {
          type: "scatter", mode: spec.value_labels ? "lines+markers+text" : "lines", name: String(s.name),
          x: s.x, y: s.y, line: { color: colour }, text: labels, textposition: "top center",
          hovertemplate: hover,
        };
    });
    const layout = {
      margin: { l: 64, r: 10, t: 24, b: 40 }, legend: { orientation: "h" },
      xaxis: { title: { text: xTitle }, automargin: true },
      yaxis: { tickformat: tickFormat(yFormat), title: { text: yTitle }, automargin: true },
      barmode: "group", showlegend: data.series.length > 1 || Boolean(spec.color),
    };
    if (type === "bar" && data.categories) {
      layout.xaxis.type = "category";
      layout.xaxis.categoryorder = "array";
      layout.xaxis.categoryarray = data.categories;
    }
    return { traces: traces, layout: layout, notes: [] };
  }

  function note(element, text) {
    element.querySelector(".visual-note").textContent = text;
  }

  function drawTable(data, target, spec) {
    const table = document.createElement("table");
    table.className = "grid";
    const head = table.createTHead().insertRow();
    data.columns.forEach(function (c) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); });
    const body = table.createTBody();
    data.rows.forEach(function (values) {
      const row = body.insertRow();
      values.forEach(function (v, i) { row.insertCell().textContent = formatNumber(v, formatOf(spec, data.columns[i])); });
    });
    target.replaceChildren(table);
    target.classList.add("table-visual");
  }

  async function fetchSeries(element) {
    const id = element.dataset.visual;
    const query = "?mode=" + encodeURIComponent(mode) + "&filters=" + encodeURIComponent(JSON.stringify(filtersFor(id)));
    return lakeward.call("GET", config.series_base + encodeURIComponent(id) + "/series" + query);
  }

  async function draw(element, series) {
    const target = element.querySelector(".chart");
    element.dataset.source = series.source;
    note(element, series.row_count.toLocaleString("en-US") + " row(s) · from the " + series.source);
    if (series.type === "table") { drawTable(series.data, target, specOf(element)); return; }
    await plotlyReady;
    if (series.type === "map") { await geoAssets(); }
    const figure = series.type === "map" ? mapFigure(series.data, element) : xyFigure(series.data, series.type, element);
    if (figure.notes.length) { note(element, element.querySelector(".visual-note").textContent + " · " + figure.notes.join(" · ")); }
    await Plotly.react(target, figure.traces, figure.layout, plotConfig);
    if (figure.legend) { figure.legend(); }
  }

  async function drawAll() {
    document.body.dataset.charts = "loading";
    status.textContent = "Loading…";
    const started = performance.now();
    // Every visual's data first, so that colours are given across the whole sheet.
    const fetched = await Promise.allSettled(visuals.map(fetchSeries));
    assignColours(fetched.flatMap(function (r) { return r.status === "fulfilled" ? seriesNames(r.value) : []; }));
    const results = await Promise.allSettled(fetched.map(function (r, i) {
      return r.status === "fulfilled" ? draw(visuals[i], r.value) : Promise.reject(r.reason);
    }));
    const failed = results.filter(function (r) { return r.status === "rejected"; });
    results.forEach(function (r, i) {
      if (r.status === "rejected") {
        const element = visuals[i];
        element.querySelector(".chart").replaceChildren();
        note(element, r.reason.message);
        element.classList.add("failed");
      }
    });
    window.lakewardCharts.rendered = results.length - failed.length;
    window.lakewardCharts.errors = failed.map(function (r) { return r.reason.message; });
    window.lakewardCharts.readyAt = performance.now();
    status.textContent = failed.length
      ? failed.length + " visual(s) could not be drawn"
      : "Drawn in " + Math.round(window.lakewardCharts.readyAt - started) + " ms";
    document.body.dataset.charts = failed.length ? "failed" : "ready";
  }

  // The filters in the page's address (?filters=...), so that a reload, a bookmark or a
  // shared link shows the same figures: written on Apply, read before the first drawing.
  function fieldsets() { return Array.from(document.querySelectorAll("#filters fieldset.filter")); }

  function filterState() {
    return fieldsets().map(function (set) {
      if (set.dataset.type === "time_range") {
        return [set.querySelector('[name="start"]').value, set.querySelector('[name="end"]').value];
      }
      return Array.from(set.querySelector("select").selectedOptions).map(function (o) {
        return o.dataset.kind === "number" ? Number(o.value) : o.value;
      });
    });
  }

  function restoreFilters() {
    const given = new URLSearchParams(window.location.search).get("filters");
    if (!given) { return; }
    let state;
    try { state = JSON.parse(given); } catch (error) { return; }  // a mangled link: the saved filters
    const sets = fieldsets();
    if (!Array.isArray(state) || state.length !== sets.length) { return; }
    sets.forEach(function (set, i) {
      const value = state[i];
      if (!Array.isArray(value)) { return; }
      if (set.dataset.type === "time_range") {
        set.querySelector('[name="start"]').value = String(value[0] || "");
        set.querySelector('[name="end"]').value = String(value[1] || "");
        return;
      }
      const select = set.querySelector("select");
      const wanted = new Set(value.map(String));
      Array.from(select.options).forEach(function (o) { o.selected = wanted.delete(o.value); });
      wanted.forEach(function (v) {  // a value the page did not list yet
        const item = document.createElement("option");
        item.value = v;
        item.textContent = v;
        item.dataset.kind = value.some(function (x) { return typeof x === "number" && String(x) === v; }) ? "number" : "text";
        item.selected = true;
        select.append(item);
      });
    });
  }

  document.getElementById("filters").addEventListener("submit", function (event) {
    event.preventDefault();
    const address = new URL(window.location.href);
    address.searchParams.set("filters", JSON.stringify(filterState()));
    window.history.replaceState(null, "", address);
    drawAll();
  });
  restoreFilters();
  drawAll();
})();
