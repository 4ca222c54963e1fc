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

  function tooltip(point) {
    return Object.entries(point.tooltip || {}).map(function (kv) {
      const value = typeof kv[1] === "number" ? kv[1].toLocaleString("en-US") : String(kv[1]);
      return kv[0] + ": " + value;
    }).join("<br>");
  }

  function mapFigure(data, element) {
    const byColor = new Map();
    data.points.forEach(function (p) {
      const key = p.color === null || p.color === undefined ? "(none)" : String(p.color);
      if (!byColor.has(key)) { byColor.set(key, []); }
      byColor.get(key).push(p);
    });
    const largest = Math.max(1, ...data.points.map(function (p) { return Math.abs(p.size || 0); }));
    const traces = Array.from(byColor.entries()).map(function (entry) {
      const points = entry[1];
      return {
        type: "scattergeo", mode: "markers", name: entry[0],
        lat: points.map(function (p) { return p.lat; }),
        lon: points.map(function (p) { return p.lon; }),
        text: points.map(tooltip),
        hovertemplate: "<b>" + entry[0].replace(/</g, "&lt;") + "</b><br>%{text}<extra></extra>",
        // Sizes stay the measure's values; sizeref scales the largest to 60 px across.
        marker: {
          color: colours.get(entry[0]),
          size: points.map(function (p) { return p.size; }), sizemode: "area",
          sizeref: 2 * largest / (60 * 60), sizemin: 3, opacity: 0.75,
          line: { width: 0.5, color: "#ffffff" },
        },
      };
    });
    const layout = {
      margin: { l: 0, r: 0, t: 0, b: 0 }, showlegend: true, legend: { orientation: "h" },
      geo: {
        projection: { type: "natural earth" }, resolution: 110, showland: true,
        landcolor: "#e8ecef", showcountries: true, countrycolor: "#b9c2cc", showcoastlines: true,
        coastlinecolor: "#9aa5b1", showocean: true, oceancolor: "#f4f8fb", showframe: false,
      },
    };
    if (data.unmapped_rows) { note(element, data.unmapped_rows + " row(s) without coordinates are not shown"); }
    return { traces: traces, layout: layout };
  }

  function xyFigure(data, type, element) {
    const traces = data.series.map(function (s) {
      const colour = colours.get(String(s.name));
      return type === "bar"
        ? { type: "bar", name: String(s.name), x: s.x, y: s.y, marker: { color: colour } }
        : { type: "scatter", mode: "lines", name: String(s.name), x: s.x, y: s.y, line: { color: colour } };
    });
    const all = data.series.flatMap(function (s) { return s.y; }).filter(function (v) { return typeof v === "number"; });
    const ratio = element.dataset.y.endsWith("rate") && all.every(function (v) { return v >= 0 && v <= 1; });
    const layout = {
      margin: { l: 56, r: 10, t: 10, b: 40 }, legend: { orientation: "h" },
      yaxis: { tickformat: ratio ? ".1%" : undefined, title: { text: element.dataset.y } },
      barmode: "group",
    };
    return { traces: traces, layout: layout };
  }

  function note(element, text) {
    element.querySelector(".visual-note").textContent = text;
  }

  function drawTable(data, target) {
    const table = document.createElement("table");
    table.className = "grid";
    const head = table.createTHead().insertRow();
    data.columns.forEach(function (c) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); });
    const body = table.createTBody();
    data.rows.forEach(function (values) {
      const row = body.insertRow();
      values.forEach(function (v) { row.insertCell().textContent = v === null ? "NULL" : String(v); });
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
    if (series.type === "table") { drawTable(series.data, target); return; }
    await plotlyReady;
    if (series.type === "map") { await geoAssets(); }
    const figure = series.type === "map" ? mapFigure(series.data, element) : xyFigure(series.data, series.type, element);
    await Plotly.react(target, figure.traces, figure.layout, plotConfig);
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

  document.getElementById("filters").addEventListener("submit", function (event) {
    event.preventDefault();
    drawAll();
  });
  drawAll();
})();
